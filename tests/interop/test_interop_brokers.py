"""The real RocketMQ 4.x C++ client (PyPI ``rocketmq==0.4.4``) against ``rmq standalone
--brokers 2``: it sends to the queues of both brokers and a push consumer of a new group
receives every message from both, through the one embedded name server."""

import asyncio
import uuid

import interop_support as support
import pytest

import rmq
from rmq._testing import StandaloneProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    proc = StandaloneProcess(tmp_path_factory.mktemp("brokers2") / "store", brokers=2)
    try:
        proc.start()
    except RuntimeError as exc:
        pytest.fail(f"rmq standalone --brokers 2 did not start: {exc}", pytrace=False)
    yield proc
    proc.stop()


async def _create_on_every_master(namesrv: str, topic: str, queues: int) -> None:
    """``mqadmin updateTopic -c DefaultCluster``: the topic on every master of the cluster."""
    async with rmq.Admin(namesrv) as admin:
        addrs = await admin.master_addrs()
        assert len(addrs) == 2
        for addr in addrs:
            await admin.create_and_update_topic_config(addr, topic, read_queue_nums=queues, write_queue_nums=queues)


async def _stored_per_broker(namesrv: str, topic: str) -> dict[str, int]:
    async with rmq.Admin(namesrv) as admin:
        stats = await admin.examine_topic_stats(topic)
    out: dict[str, int] = {}
    for mq, off in stats.offset_table.items():
        out[mq.broker_name] = out.get(mq.broker_name, 0) + off.max_offset - off.min_offset
    return out


def test_cpp_client_produces_to_and_consumes_from_both_brokers(real_clients, two_brokers, tmp_path):
    tag = uuid.uuid4().hex[:8]
    topic, marker = f"Brokers_{tag}", f"m{tag}:"
    asyncio.run(_create_on_every_master(two_brokers.namesrv_addr, topic, 4))
    # 16 sync sends rotate over the route's 8 queues: 4 on broker-a, 4 on broker-b
    plan = [{"topic": topic, "body": f"{marker}{i}", "tags": "T", "send": "sync"} for i in range(16)]
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        two_brokers.namesrv_addr,
        "--group",
        f"PID_{tag}",
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    sent = producer.of("sent")
    assert producer.returncode == 0 and len(sent) == 16, producer.describe() + "\n" + producer.cpp_log()
    assert all(s["status"] == "OK" for s in sent), sent
    stored = asyncio.run(_stored_per_broker(two_brokers.namesrv_addr, topic))
    assert stored.get("broker-a", 0) > 0 and stored.get("broker-b", 0) > 0, stored
    assert sum(stored.values()) == 16

    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        two_brokers.namesrv_addr,
        "--group",
        f"GID_{tag}",
        "--topic",
        topic,
        "--expect",
        "16",
        "--marker",
        marker,
        "--timeout",
        "60",
    ).result()
    assert consumer.returncode == 0, consumer.describe() + "\n" + consumer.cpp_log()
    bodies = sorted({e["body"] for e in consumer.of("recv") if (e.get("body") or "").startswith(marker)})
    assert bodies == sorted(m["body"] for m in plan), consumer.describe()
    assert two_brokers.proc is not None and two_brokers.proc.poll() is None
