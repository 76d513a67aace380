"""``rmq admin queryMsgTraceById`` as a real CLI process against a daemon with
``traceTopicEnable=true``: a message produced and consumed by SDK clients with ``trace=True``
shows mqadmin's Pub and Sub tables."""

import asyncio

import pytest
from cli_support import admin

import rmq
from rmq._testing import wait_until
from rmq.client.admin import Admin

pytestmark = pytest.mark.slow

DAEMON_ARGS = ["--traceTopicEnable=true"]
HEADER = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"


@pytest.fixture(scope="module")
def traced(daemon):
    """One message sent and consumed with trace=True; its SendResult once the traces are indexed."""

    async def run() -> rmq.SendResult:
        async with Admin(daemon.namesrv_addr) as a:
            for addr in await a.master_addrs():
                await a.create_and_update_topic_config(addr, "TraceT", read_queue_nums=1, write_queue_nums=1)
        async with rmq.Producer(daemon.namesrv_addr, "TracePG", trace=True) as p:
            result = await p.send(rmq.Message("TraceT", b"traced", tags="TagT"))
        got: list[rmq.MessageExt] = []
        c = rmq.PushConsumer(
            daemon.namesrv_addr,
            "TraceCG",
            handler=got.append,
            trace=True,
            consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        c.subscribe("TraceT")
        async with c:
            await wait_until(lambda: got, 30, what="the message consumed")

        async def indexed() -> bool:
            async with Admin(daemon.namesrv_addr) as a:
                kinds = {v.msg_type for v in await a.query_msg_trace_by_id(result.msg_id)}
            return {"Pub", "SubAfter"} <= kinds

        await wait_until(indexed, 30, interval=0.2, what="the traces indexed")
        return result

    return asyncio.run(run())


def test_query_msg_trace_by_id(daemon, traced):
    r = admin("queryMsgTraceById", "-n", daemon.namesrv_addr, "-i", traced.msg_id)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == HEADER.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
    pub = lines[1].split()
    assert pub[0] == "Pub" and pub[1] == "TracePG" and pub[-1] == "success" and pub[-2].endswith("ms")
    sub_header = lines.index(
        HEADER.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
    )
    sub = lines[sub_header + 1].split()
    assert sub[0] == "Sub" and sub[1] == "TraceCG" and sub[-1] == "success"


def test_query_msg_trace_by_id_of_an_unknown_message_prints_nothing(daemon, traced):
    r = admin("queryMsgTraceById", "-n", daemon.namesrv_addr, "-i", "0" * 32, "-t", "RMQ_SYS_TRACE_TOPIC")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""
