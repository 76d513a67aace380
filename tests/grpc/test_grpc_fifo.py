"""FIFO consumption over gRPC: a group with ``consumeMessageOrderly`` is FIFO in the settings the
broker answers and is received by orderly POP, so each message group comes in send order and its
next message only after the previous one is acked (docs/design.md, gRPC endpoint)."""

from __future__ import annotations

import asyncio
import json
import uuid

from grpc_support import DRIVERS, Driver

from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient


async def _orderly_group(broker_addr: str, group: str) -> None:
    rc = RemotingClient()
    try:
        body = json.dumps({"groupName": group, "consumeMessageOrderly": True}).encode()
        cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        resp = await rc.invoke(broker_addr, cmd)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await rc.close()


def _produce(v5_python, grpc_broker, workdir, topic: str, groups: dict[str, list[str]]) -> None:
    messages = [{"kind": "fifo", "body": b, "group": g} for g, bodies in groups.items() for b in bodies]
    driver = Driver(v5_python, {"endpoints": grpc_broker.endpoints, "topic": topic, "messages": messages}, workdir)
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


def test_v5_simple_consumer_on_fifo_group_gets_each_group_in_order(v5_python, grpc_broker, workdir):
    topic = f"V5F_{uuid.uuid4().hex[:8]}"
    group = f"GID_{topic}"
    grpc_broker.create_topic(topic, queues=2, attributes="+message.type=FIFO")
    asyncio.run(_orderly_group(grpc_broker.broker_addr, group))
    groups = {"ga": ["a0", "a1", "a2"], "gb": ["b0", "b1", "b2"]}
    _produce(v5_python, grpc_broker, workdir, topic, groups)
    plan = {
        "endpoints": grpc_broker.endpoints,
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
    assert done and done[-1]["event"] == "done", f"{events}\n{consumer.stderr_tail()}\n{grpc_broker.log_tail()}"
    received = [e for e in events if e["event"] == "received"]
    deliveries = [e["body"] for e in received]
    _in_group_order(deliveries, groups)
    # a0 came twice (attempt 1, then 2 after its invisible time) and a1 only after the second
    a0 = [i for i, b in enumerate(deliveries) if b == "a0"]
    assert len(a0) >= 2 and received[a0[1]]["attempt"] == 2, received
    assert deliveries.index("a1") > a0[1], deliveries


def test_v5_push_consumer_on_fifo_group_consumes_each_group_in_order(v5_python, grpc_broker, workdir):
    """The broker's settings say FIFO (the group's consumeMessageOrderly), so the 5.x
    PushConsumer consumes orderly: a failed message is retried before its group's next one."""
    topic = f"V5FP_{uuid.uuid4().hex[:8]}"
    group = f"GID_{topic}"
    grpc_broker.create_topic(topic, queues=2, attributes="+message.type=FIFO")
    asyncio.run(_orderly_group(grpc_broker.broker_addr, group))
    groups = {"ga": ["a0", "a1", "a2"], "gb": ["b0", "b1", "b2"]}
    _produce(v5_python, grpc_broker, workdir, topic, groups)
    plan = {
        "endpoints": grpc_broker.endpoints,
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
    assert done and done[-1]["event"] == "done", f"{events}\n{driver.stderr_tail()}\n{grpc_broker.log_tail()}"
    consumed = [e for e in events if e["event"] == "consumed"]
    deliveries = [e["body"] for e in consumed]
    _in_group_order(deliveries, groups)
    a0 = [e for e in consumed if e["body"] == "a0"]
    assert [e["result"] for e in a0][:2] == ["failure", "success"], a0
    # orderly: a1 waited for a0's retry to succeed
    assert deliveries.index("a1") > deliveries.index("a0", deliveries.index("a0") + 1), deliveries
