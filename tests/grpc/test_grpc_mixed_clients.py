"""A 4.x client and a 5.x client on one topic, each consumer in a group of its own, both
consuming everything: the Apache C++ core (PyPI ``rocketmq==0.4.4``, remoting) and the 5.x
Python client (PyPI ``rocketmq-python-client==5.1.2``, gRPC) each produce half the messages;
the C++ push consumer (PULL underneath) and the 5.x SimpleConsumer (POP underneath) run side
by side and each receive all of them with their tags, keys, properties and message ids. Against
``rmq standalone`` and the two-broker cluster (``grpc_target``)."""

from __future__ import annotations

import uuid

import interop_support as support
import pytest
from grpc_support import DRIVERS, Driver

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

N = 8  # messages per producer


def test_4x_and_5x_clients_on_one_topic_each_group_consumes_everything(v5_python, clients_4x, grpc_target, workdir):
    tag = uuid.uuid4().hex[:8]
    topic, marker = f"V5Mix_{tag}", f"m{tag}:"
    grpc_target.create_topic(topic, queues=4)

    plan4 = [
        {
            "topic": topic,
            "body": f"{marker}4x-{i}",
            "tags": "Tag4",
            "keys": f"k4-{i}",
            "props": {"origin": "4x", "idx": str(i)},
        }
        for i in range(N)
    ]
    p4 = support.cpp(
        clients_4x,
        workdir / "p4",
        "produce",
        "--namesrv",
        grpc_target.namesrv,
        "--group",
        f"PID_{topic}",
        "--plan",
        support.write_plan(workdir / "plan4.json", plan4),
    ).result()
    assert p4.returncode == 0 and len(p4.of("sent")) == N, p4.describe()
    id4 = {plan4[s["i"]]["body"]: s["msg_id"] for s in p4.of("sent")}

    plan5 = {
        "endpoints": grpc_target.endpoints,
        "topic": topic,
        "messages": [
            {
                "kind": "normal",
                "body": f"{marker}5x-{i}",
                "tag": "Tag5",
                "keys": [f"k5-{i}"],
                "properties": {"origin": "5x", "idx": str(i)},
            }
            for i in range(N)
        ],
    }
    p5 = Driver(v5_python, plan5, workdir)
    try:
        events = p5.finish(120)
    finally:
        p5.kill()
    id5 = {e["body"]: e["message_id"] for e in events if e["event"] == "sent"}
    assert len(id5) == N, f"{events}\n{p5.stderr_tail()}"
    grpc_target.assert_on_every_broker(topic)
    bodies = sorted(id4) + sorted(id5)

    # the two consumers at the same time, each in its own group
    c4 = support.cpp(
        clients_4x,
        workdir / "c4",
        "push",
        "--namesrv",
        grpc_target.namesrv,
        "--group",
        f"GID_4x_{tag}",
        "--topic",
        topic,
        "--expect",
        str(len(bodies)),
        "--marker",
        marker,
        "--props",
        "origin,idx",
        "--timeout",
        "90",
        timeout=120,
    )
    c5 = Driver(
        v5_python,
        {
            "endpoints": grpc_target.endpoints,
            "topic": topic,
            "group": f"GID_5x_{tag}",
            "expect": bodies,
            "deadline": 90,
        },
        workdir,
        script=DRIVERS / "v5_consumer.py",
    )
    try:
        events5 = c5.finish(120)
    finally:
        c5.kill()
    r4 = c4.result()

    done = [e for e in events5 if e["event"] in ("done", "error")]
    assert done and done[-1]["event"] == "done", f"{events5}\n{c5.stderr_tail()}\n{grpc_target.log_tail()}"
    got5 = {e["body"]: e for e in events5 if e["event"] == "received"}
    assert sorted(got5) == bodies
    assert r4.returncode == 0, f"{r4.describe()}\n{r4.cpp_log()}\n{grpc_target.log_tail()}"
    got4 = {e["body"]: e for e in r4.of("recv") if (e.get("body") or "").startswith(marker)}
    assert sorted(got4) == bodies

    for i in range(N):
        b4, b5 = f"{marker}4x-{i}", f"{marker}5x-{i}"
        # the 4.x producer's message as the 5.x consumer sees it, and the other way round: the
        # message id is the producer's (UNIQ_KEY), tags, keys and properties as sent
        assert got5[b4]["message_id"] == id4[b4]
        assert (got5[b4]["tag"], got5[b4]["keys"]) == ("Tag4", [f"k4-{i}"])
        assert {k: got5[b4]["properties"].get(k) for k in ("origin", "idx")} == {"origin": "4x", "idx": str(i)}
        assert got4[b5]["id"] == id5[b5]
        assert (got4[b5]["tags"], got4[b5]["keys"]) == ("Tag5", f"k5-{i}")
        assert got4[b5]["props"] == {"origin": "5x", "idx": str(i)}
        # and each sees its own kind's messages too
        assert got5[b5]["properties"]["origin"] == "5x" and got4[b4]["props"]["origin"] == "4x"
