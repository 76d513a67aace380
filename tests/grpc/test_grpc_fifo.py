"""FIFO consumption over gRPC: a group with ``consumeMessageOrderly`` is FIFO in the settings the
broker answers and is received by orderly POP, so each message group comes in send order and its
next message only after the previous one is acked (docs/design.md, gRPC endpoint). Run against
``rmq standalone`` and a two-broker cluster (the ``grpc_target`` fixture): there the two message
groups hash to queues of different brokers and are consumed through the first one's endpoint.

The 5.x client picks a group's queue as sha256(group) modulo the route's writable queues (broker-a's
two, then broker-b's): "ga" is queue 0 (broker-a), "gb" queue 3 (broker-b)."""

from __future__ import annotations

import uuid

from grpc_support import DRIVERS, Driver


def _produce(v5_python, grpc_target, workdir, topic: str, groups: dict[str, list[str]]) -> None:
    messages = [{"kind": "fifo", "body": b, "group": g} for g, bodies in groups.items() for b in bodies]
    driver = Driver(v5_python, {"endpoints": grpc_target.endpoints, "topic": topic, "messages": messages}, workdir)
    try:
        events = driver.finish(120)
    finally:
        driver.kill()
    assert len([e for e in events if e["event"] == "sent"]) == len(messages), f"{events}\n{driver.stderr_tail()}"


def _in_group_order(deliveries: list[str], groups: dict[str, list[str]]) -> None:
    """Each group's distinct bodies first appear in send order, and a body appears only once
    every earlier body of its group has appeared (no overtaking)."""
    for bodies in groups.values():
        firsts = [b for i, b in enumerate(deliveries) if b in bodies and b not in deliveries[:i]]
        assert firsts == bodies, (firsts, bodies, deliveries)


def test_v5_simple_consumer_on_fifo_group_gets_each_group_in_order(v5_python, grpc_target, workdir):
    topic = f"V5F_{uuid.uuid4().hex[:8]}"
    group = f"GID_{topic}"
    grpc_target.create_topic(topic, queues=2, attributes="+message.type=FIFO")
    grpc_target.orderly_group(group)
    groups = {"ga": ["a0", "a1", "a2"], "gb": ["b0", "b1", "b2"]}
    _produce(v5_python, grpc_target, workdir, topic, groups)
    grpc_target.assert_on_every_broker(topic)
    plan = {
        "endpoints": grpc_target.endpoints,
        "topic": topic,
        "group": group,
        "expect": [b for bodies in groups.values() for b in bodies],
        "leave": ["a0"],  # not acked the first time: a1 must wait until a0 comes back
        "batch": 1,
        "invisible": 10,
        "deadline": 120,
    }
    consumer = Driver(v5_python, plan, workdir, script=DRIVERS / "v5_consumer.py")
    try:
        events = consumer.finish(150)
    finally:
        consumer.kill()
    done = [e for e in events if e["event"] in ("done", "error")]
    assert done and done[-1]["event"] == "done", f"{events}\n{consumer.stderr_tail()}\n{grpc_target.log_tail()}"
    received = [e for e in events if e["event"] == "received"]
    deliveries = [e["body"] for e in received]
    _in_group_order(deliveries, groups)
    # a0 came twice (attempt 1, then 2 after its invisible time) and a1 only after the second
    a0 = [i for i, b in enumerate(deliveries) if b == "a0"]
    assert len(a0) >= 2 and received[a0[1]]["attempt"] == 2, received
    assert deliveries.index("a1") > a0[1], deliveries


def test_v5_push_consumer_on_fifo_group_consumes_each_group_in_order(v5_python, grpc_target, workdir):
    """The broker's settings say FIFO (the group's consumeMessageOrderly), so the 5.x
    PushConsumer consumes orderly: a failed message is retried before its group's next one."""
    topic = f"V5FP_{uuid.uuid4().hex[:8]}"
    group = f"GID_{topic}"
    grpc_target.create_topic(topic, queues=2, attributes="+message.type=FIFO")
    grpc_target.orderly_group(group)
    groups = {"ga": ["a0", "a1", "a2"], "gb": ["b0", "b1", "b2"]}
    _produce(v5_python, grpc_target, workdir, topic, groups)
    grpc_target.assert_on_every_broker(topic)
    plan = {
        "endpoints": grpc_target.endpoints,
        "topic": topic,
        "group": group,
        "expect": [b for bodies in groups.values() for b in bodies],
        "fail_once": ["a0"],
        "deadline": 90,
    }
    driver = Driver(v5_python, plan, workdir, script=DRIVERS / "v5_push.py")
    try:
        events = driver.finish(120)
    finally:
        driver.kill()
    done = [e for e in events if e["event"] in ("done", "error")]
    assert done and done[-1]["event"] == "done", f"{events}\n{driver.stderr_tail()}\n{grpc_target.log_tail()}"
    consumed = [e for e in events if e["event"] == "consumed"]
    deliveries = [e["body"] for e in consumed]
    _in_group_order(deliveries, groups)
    a0 = [e for e in consumed if e["body"] == "a0"]
    assert [e["result"] for e in a0][:2] == ["failure", "success"], a0
    # orderly: a1 waited for a0's retry to succeed
    assert deliveries.index("a1") > deliveries.index("a0", deliveries.index("a0") + 1), deliveries
