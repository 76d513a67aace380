"""Broker statistics and configuration through ``rmq.Admin`` against an in-process broker with
real SDK producers and consumers: GET_BROKER_RUNTIME_INFO (28), VIEW_BROKER_STATS_DATA (315),
GET_BROKER_CONSUME_STATS (317), GET_CONSUME_STATS' consumeTps (208), GET_BROKER_CONFIG (26) and
UPDATE_BROKER_CONFIG (25); the Java broker's answers decoded by the same parsers.

The sampling windows are driven by a fake clock given to the broker's statistics
(``broker.stats.clock``), advanced by the test and sampled with ``broker.stats.tick()``: no test
waits for real seconds to pass.
"""

from __future__ import annotations

import datetime
import json
import os
import time
import uuid
from pathlib import Path

import pytest
from remoting_golden import mqadmin_frames

import rmq
from rmq._testing import invoke_once, run_standalone, wait_until
from rmq.broker.stats import java_double
from rmq.client.admin import Admin, AdminError
from rmq.protocol.body.stats import BrokerStatsData, ConsumeStats, ConsumeStatsList
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import check_success
from rmq.protocol.requests.broker import (
    parse_broker_config,
    parse_broker_stats_data,
    parse_consume_stats_list,
    parse_kv_table,
)
from rmq.remoting.client import RemotingClient

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


class FakeClock:
    """Milliseconds since the epoch, moved only by the test."""

    def __init__(self) -> None:
        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now


@pytest.fixture
async def env(tmp_path):
    async with run_standalone(tmp_path / "store") as (ns, broker):
        clock = FakeClock()
        broker.stats.clock = clock
        async with Admin(f"127.0.0.1:{ns.port}") as admin:
            yield ns, broker, admin, clock


def advance(broker, clock, seconds: float, steps: int = 1) -> None:
    """Move the fake clock ``seconds`` in ``steps`` equal steps, sampling after each."""
    for _ in range(steps):
        clock.now += int(seconds * 1000 / steps)
        broker.stats.tick()


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


async def produce(ns, topic: str, bodies: list[bytes]) -> None:
    async with rmq.Producer(f"127.0.0.1:{ns.port}", unique("PG")) as p:
        for body in bodies:
            await p.send(rmq.Message(topic, body))


async def consume(ns, topic: str, group: str, n: int) -> None:
    got: list[bytes] = []

    async def handler(msg):
        got.append(msg.body)

    c = rmq.PushConsumer(f"127.0.0.1:{ns.port}", group, handler=handler, consume_from_where=FIRST)
    c.subscribe(topic, "*")
    async with c:
        await wait_until(lambda: len(got) >= n, what=f"{n} messages consumed")


async def test_counts_and_windows_match_what_was_sent_and_consumed(env):
    ns, broker, admin, clock = env
    addr = broker.broker_addr
    topic, group = unique("ST"), unique("CG")
    await admin.create_and_update_topic_config(addr, topic, read_queue_nums=2, write_queue_nums=2)
    advance(broker, clock, 11, steps=11)  # 11 one-second store samples before anything is sent
    before = await admin.fetch_broker_runtime_stats(addr)
    bodies = [b"x" * (10 + i) for i in range(20)]
    await produce(ns, topic, bodies)
    await consume(ns, topic, group, len(bodies))
    after = await admin.fetch_broker_runtime_stats(addr)

    assert int(after["msgPutTotalTodayNow"]) - int(before["msgPutTotalTodayNow"]) == 20
    assert int(after["putMessageSizeTotal"]) - int(before["putMessageSizeTotal"]) == sum(map(len, bodies))
    await wait_until(
        lambda: broker.stats.store.get_transferred - int(before["msgGetTotalTodayNow"]) == 20,
        what="20 messages counted as pulled",
    )
    assert int(after["msgGetTotalTodayMorning"]) == 0  # nothing before the broker's first midnight

    # the "10 s" TPS windows: 10 one-second samples after the sends
    advance(broker, clock, 10, steps=10)
    info = await admin.fetch_broker_runtime_stats(addr)
    ten, minute, ten_min = info["putTps"].split(" ")
    assert ten == java_double(2.0) and minute == "" and ten_min == ""  # 20 messages in 10 s
    assert float(info["getTransferedTps"].split(" ")[0]) == 2.0
    assert float(info["getFoundTps"].split(" ")[0]) > 0
    assert len(info["getTotalTps"].split(" ")) == 3
    advance(broker, clock, 50, steps=50)  # the 1-min window fills
    ten, minute, _ = (await admin.fetch_broker_runtime_stats(addr))["putTps"].split(" ")
    assert float(ten) == 0.0 and float(minute) == pytest.approx(20 / 60)

    # VIEW_BROKER_STATS_DATA: the 10 s samples (7 kept, a zero one first) make the minute
    put = await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
    assert put.stats_minute.sum == 20 and put.stats_minute.avgpt == 1.0  # one message per SEND
    size = await admin.view_broker_stats_data(addr, "TOPIC_PUT_SIZE", topic)
    assert size.stats_minute.sum == sum(map(len, bodies))
    get = await admin.view_broker_stats_data(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
    assert get.stats_minute.sum == 20 and get.sum_24h() == 20
    brk = await admin.view_broker_stats_data(addr, "BROKER_PUT_NUMS", "DefaultCluster")
    assert brk.stats_minute.sum >= 20
    with pytest.raises(AdminError, match=r"The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist"):
        await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", "NoSuchTopic")

    # the 10-minute sampling makes the hour window
    advance(broker, clock, 600, steps=60)
    put = await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
    assert put.stats_hour.sum == 20 and put.stats_minute.sum == 0 and put.sum_24h() == 20


async def test_consume_tps_and_broker_consume_stats(env):
    ns, broker, admin, clock = env
    addr = broker.broker_addr
    topic, group = unique("CT"), unique("CG")
    await admin.create_and_update_topic_config(addr, topic, read_queue_nums=1, write_queue_nums=1)
    await produce(ns, topic, [b"a"] * 30)
    await consume(ns, topic, group, 30)
    await produce(ns, topic, [b"b"] * 4)  # a backlog of 4 the stopped consumer leaves
    advance(broker, clock, 10)
    # GET_CONSUME_STATS' consumeTps: GROUP_GET_NUMS over the minute window (30 in 10 s)
    resp = await invoke_once(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
    cs = ConsumeStats.decode(resp.body_bytes())
    assert cs.consume_tps == pytest.approx(3.0)
    await wait_until(
        lambda: broker.consumer_offset_manager.query_offsets(group, topic).get(0) == 30,
        what="the consumer's offset committed",
    )
    lst = await admin.fetch_consume_stats_in_broker(addr)
    assert lst.broker_addr == addr
    (stats,) = [cs for cs in lst.groups()[group] if any(mq.topic == topic for mq in cs.offset_table)]
    (mq,) = stats.offset_table
    o = stats.offset_table[mq]
    assert (mq.topic, mq.queue_id, o.broker_offset, o.consumer_offset) == (topic, 0, 34, 30)
    assert o.last_timestamp > 0 and stats.consume_tps == pytest.approx(3.0)
    assert lst.total_diff >= 4
    # isOrder: only orderly topics (this one is not)
    assert (await admin.fetch_consume_stats_in_broker(addr, is_order=True)).groups()[group] == []


async def test_day_totals_are_recorded_at_midnight(env):
    ns, broker, admin, clock = env
    addr = broker.broker_addr
    topic = unique("DT")
    await admin.create_and_update_topic_config(addr, topic, read_queue_nums=1, write_queue_nums=1)
    await produce(ns, topic, [b"1"] * 5)
    now = datetime.datetime.fromtimestamp(clock.now / 1000)
    midnight = datetime.datetime.combine(now.date() + datetime.timedelta(days=1), datetime.time(0, 0, 1))
    clock.now = int(midnight.timestamp() * 1000)
    broker.stats.tick()
    info = await admin.fetch_broker_runtime_stats(addr)
    total = int(info["msgPutTotalTodayNow"])
    assert int(info["msgPutTotalTodayMorning"]) == total >= 5
    assert int(info["msgPutTotalYesterdayMorning"]) == 0
    await produce(ns, topic, [b"2"] * 3)
    clock.now += 86_400_000
    broker.stats.tick()
    info = await admin.fetch_broker_runtime_stats(addr)
    assert int(info["msgPutTotalYesterdayMorning"]) == total
    assert int(info["msgPutTotalTodayMorning"]) - total == 3


async def test_stats_items_are_bounded_and_idle_ones_dropped(env):
    ns, broker, admin, clock = env
    addr = broker.broker_addr
    topics = [unique("BT") for _ in range(4)]
    for t in topics:
        await admin.create_and_update_topic_config(addr, t, read_queue_nums=1, write_queue_nums=1)
    broker.stats.fold()  # the fast path's C counters (PutCounters) into the sets
    await admin.update_broker_config(addr, {"maxStatsItems": len(broker.stats.sets["TOPIC_PUT_NUMS"].items) + 2})
    for t in topics:
        await produce(ns, t, [b"m"])
    advance(broker, clock, 10)
    assert (await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topics[1])).stats_minute.sum == 1
    with pytest.raises(AdminError, match="not exist"):  # the set was full: not counted
        await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topics[2])
    # 26 hours later, with topics[0] still written to: topics[1] has been idle for 25 h
    for _ in range(26):
        await produce(ns, topics[0], [b"m"])
        advance(broker, clock, 3600, steps=6)
    with pytest.raises(AdminError, match="not exist"):
        await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topics[1])
    assert (await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topics[0])).stats_day.sum > 0


async def test_update_broker_config_applies_live_checks_and_persists(env):
    ns, broker, admin, _clock = env
    addr = broker.broker_addr
    topic = unique("UT")
    await admin.create_and_update_topic_config(addr, topic, read_queue_nums=1, write_queue_nums=1)
    config = await admin.get_broker_config(addr)
    assert config["maxMessageSize"] == str(4 * 1024 * 1024)
    assert config["autoCreateTopicEnable"] == "true" and config["slaveReadEnable"] == "false"  # Java's booleans
    assert "storePathRootDir" in config and "brokerName" in config  # the store's properties too

    await admin.update_broker_config(addr, {"maxMessageSize": 1000})
    assert (await admin.get_broker_config(addr))["maxMessageSize"] == "1000"
    async with rmq.Producer(f"127.0.0.1:{ns.port}", unique("PG")) as p:
        await p.send(rmq.Message(topic, b"s" * 500))  # the whole record (headers too) counts
        with pytest.raises(rmq.errors.RMQError, match="1000"):
            await p.send(rmq.Message(topic, b"b" * 2000))
    persisted = Path(broker.store_config.store_path_root_dir) / "config" / "broker.properties"
    assert "maxMessageSize=1000" in persisted.read_text().splitlines()

    # refusals name the property and why; nothing of a refused update is applied
    with pytest.raises(AdminError, match=r"maxMessageSize: '-5' \(expected 1\.\.1073741824"):
        await admin.update_broker_config(addr, {"maxMessageSize": -5})
    with pytest.raises(AdminError, match="listenPort cannot be changed at runtime: the server socket"):
        await admin.update_broker_config(addr, {"listenPort": 1234})
    with pytest.raises(AdminError, match="did you mean maxMessageSize"):
        await admin.update_broker_config(addr, {"maxMesageSize": 10})
    with pytest.raises(AdminError, match="cannot be changed at runtime"):
        await admin.update_broker_config(addr, {"fileReservedTime": 10, "storePathRootDir": "/tmp/x"})
    assert (await admin.get_broker_config(addr))["fileReservedTime"] == "72"
    with pytest.raises(AdminError) as e:
        await admin.update_broker_config(addr, {"brokerConfigPath": "/tmp/x"})
    assert e.value.code == ResponseCode.NO_PERMISSION and e.value.remark == "Can not update config in black list."
    # the version moves on each update (GET_BROKER_CONFIG's header)
    resp = await invoke_once(addr, RequestCode.GET_BROKER_CONFIG)
    assert json.loads(resp.ext_fields["version"])["counter"] == 1


# -- golden: the Java broker's answers, and ours in the same shape ------------------------


def _golden_answers(code: int) -> list[RemotingCommand]:
    from rmq.remoting.codec import decode_frame

    return [
        decode_frame(row["frame"]) for row in mqadmin_frames() if row["flag"] & 1 and row.get("request_code") == code
    ]


def _shape(v):
    if isinstance(v, dict):
        return {k: _shape(x) for k, x in v.items()}
    return type(v).__name__


async def test_golden_runtime_info_same_keys_and_shapes(env):
    ns, broker, admin, clock = env
    addr = broker.broker_addr
    topic = unique("GT")
    await admin.create_and_update_topic_config(addr, topic, read_queue_nums=1, write_queue_nums=1)
    await produce(ns, topic, [b"g"] * 3)
    advance(broker, clock, 61, steps=61)
    broker.stats.store.roll_minute()
    ours = await admin.fetch_broker_runtime_stats(addr)
    answers = [a for a in _golden_answers(RequestCode.GET_BROKER_RUNTIME_INFO) if a.code == ResponseCode.SUCCESS]
    assert answers
    for answer in answers:
        java = parse_kv_table(answer)
        java_keys = {k for k in java if not k.startswith("commitLogDiskRatio_")}
        assert java_keys <= set(ours), sorted(java_keys - set(ours))
        assert any(k.startswith("commitLogDiskRatio_") for k in ours)
    java = parse_kv_table(answers[-1])
    for key in (
        "msgPutTotalTodayNow",
        "bootTimestamp",
        "brokerVersion",
        "commitLogMaxOffset",
        "earliestMessageTimeStamp",
        "putMessageEntireTimeMax",
    ):
        assert java[key].lstrip("-").isdigit() and ours[key].lstrip("-").isdigit(), key
    for key in ("putLatency99", "putLatency999", "commitLogDiskRatio", "putMessageAverageSize"):
        float(java[key]), float(ours[key])
    for key in ("putTps", "getTransferedTps", "getFoundTps", "getMissTps", "getTotalTps"):
        assert len(java[key].split(" ")) == len(ours[key].split(" ")) == 3, key
        assert all(p == "" or float(p) >= 0 for p in ours[key].split(" "))
    assert ours["brokerVersion"] == java["brokerVersion"] == "409"
    assert (
        ours["putMessageDistributeTime"].startswith("[<=0ms]:")
        and ours["putMessageDistributeTime"].count(":") == java["putMessageDistributeTime"].count(":") == 13
    )
    assert ours["runtime"].startswith("[ 0 days, ") and java["runtime"].startswith("[ 0 days, ")
    assert ours["commitLogDirCapacity"].startswith("Total : ") and "Free : " in ours["commitLogDirCapacity"]
    assert int(ours["earliestMessageTimeStamp"]) > 0


async def test_golden_view_stats_and_consume_stats_decode_and_match(env):
    ns, broker, admin, clock = env
    addr = broker.broker_addr
    found = [a for a in _golden_answers(RequestCode.VIEW_BROKER_STATS_DATA) if a.code == ResponseCode.SUCCESS]
    missing = [a for a in _golden_answers(RequestCode.VIEW_BROKER_STATS_DATA) if a.code != ResponseCode.SUCCESS]
    java = parse_broker_stats_data(found[0])
    assert java.stats_minute.sum > 0 and java.stats_minute.tps > 0
    assert missing[0].remark == "The stats <TOPIC_PUT_NUMS> <SCHEDULE_TOPIC_XXXX> not exist"
    topic, group = unique("VT"), unique("CG")
    await admin.create_and_update_topic_config(addr, topic, read_queue_nums=1, write_queue_nums=1)
    await produce(ns, topic, [b"v"] * 6)
    await consume(ns, topic, group, 6)
    advance(broker, clock, 10)
    ours_resp = await invoke_once(
        addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": topic}
    )
    assert _shape(json.loads(ours_resp.body_bytes())) == _shape(json.loads(found[0].body_bytes()))
    ours = parse_broker_stats_data(ours_resp)
    assert isinstance(ours, BrokerStatsData) and ours.stats_minute.sum == 6
    with pytest.raises(rmq.errors.BrokerResponseError, match="The stats <TOPIC_PUT_NUMS> <X> not exist"):
        parse_broker_stats_data(
            await invoke_once(
                addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "X"}
            )
        )

    # 317: Java's list decodes; ours has the same fields and per-group shape
    (answer,) = _golden_answers(RequestCode.GET_BROKER_CONSUME_STATS)
    java_list = parse_consume_stats_list(answer)
    assert isinstance(java_list, ConsumeStatsList) and java_list.broker_addr == "127.0.0.1:20911"
    java_group = java_list.groups()["cg_parity"]
    assert sum(cs.compute_total_diff() for cs in java_group) == java_list.total_diff == 3
    assert max(cs.consume_tps for cs in java_group) > 0
    await wait_until(
        lambda: broker.consumer_offset_manager.query_offsets(group, topic).get(0) == 6, what="the offset committed"
    )
    ours_list = await admin.fetch_consume_stats_in_broker(addr)
    (cs,) = [c for c in ours_list.groups()[group] if any(mq.topic == topic for mq in c.offset_table)]
    assert cs.consume_tps > 0 and cs.compute_total_diff() == 0
    raw_ours = await invoke_once(addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    from rmq.common import fastjson

    java_d, ours_d = fastjson.loads(answer.body_bytes()), fastjson.loads(raw_ours.body_bytes())
    assert set(java_d) == set(ours_d) == {"brokerAddr", "consumeStatsList", "totalDiff"}
    java_cs = next(iter(java_d["consumeStatsList"][1].values()))[1]
    ours_cs = next(v for e in ours_d["consumeStatsList"] for g, v in e.items() if g == group)[-1]
    assert set(java_cs) == set(ours_cs) == {"consumeTps", "offsetTable"}
    assert _shape(next(iter(java_cs["offsetTable"].values()))) == _shape(next(iter(ours_cs["offsetTable"].values())))

    # 208: Java's consumeTps is a number, as ours
    (j208,) = [a for a in _golden_answers(RequestCode.GET_CONSUME_STATS) if a.body_bytes()][:1]
    assert ConsumeStats.decode(j208.body_bytes()).consume_tps > 0


async def test_golden_broker_config_and_update(env):
    _ns, broker, admin, _clock = env
    addr = broker.broker_addr
    (answer,) = _golden_answers(RequestCode.GET_BROKER_CONFIG)
    java = parse_broker_config(answer)
    ours = await admin.get_broker_config(addr)
    assert java["autoCreateTopicEnable"] == "true" == ours["autoCreateTopicEnable"]
    common = set(java) & set(ours)
    assert len(common) > 30, sorted(common)
    for key in common:  # booleans print the same way
        assert (java[key] in ("true", "false")) == (ours[key] in ("true", "false")), key
    assert set(json.loads(answer.ext_fields["version"])) == {"counter", "timestamp"}
    resp = await invoke_once(addr, RequestCode.GET_BROKER_CONFIG)
    assert list(json.loads(resp.ext_fields["version"])) == ["counter", "timestamp"]
    # 25: Java's request (fileReservedTime=48) applies live here too, and Java's SUCCESS decodes
    (req,) = [r for r in mqadmin_frames() if not r["flag"] & 1 and r["code"] == RequestCode.UPDATE_BROKER_CONFIG]
    from rmq.remoting.codec import decode_frame

    body = decode_frame(req["frame"]).body_bytes()
    client = RemotingClient()
    try:
        resp = await client.invoke(
            addr, RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, None, body), timeout=10
        )
    finally:
        await client.close()
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert broker.store_config.file_reserved_time == 48
    (java_answer,) = _golden_answers(RequestCode.UPDATE_BROKER_CONFIG)
    check_success(java_answer)
    assert os.path.exists(os.path.join(broker.config_dir, "broker.properties"))
