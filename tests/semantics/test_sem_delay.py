"""Delay levels: SCHEDULE_TOPIC_XXXX parking, delivery when due, progress across restarts."""

import asyncio
import time

from semantics_support import SHORT_LEVELS, Wire, wait_for

from rmq._testing import run_broker, run_standalone
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


async def test_level_2_arrives_after_5s_with_its_properties(tmp_path):
    """Java's default levels: level 2 is 5 s. A long-polling pull on the real topic is answered
    when the schedule service delivers, not before."""
    async with run_standalone(tmp_path / "store") as (ns, broker):
        async with RemotingClient() as client:
            w = Wire(ns, broker, client)
            await w.create_topic("DelayT", queues=2)
            t0 = time.time()
            resp = await w.send("DelayT", b"later", queue_id=1, props={"DELAY": "2", "KEYS": "k1", "color": "red"})
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            await w.dispatched()
            # parked in SCHEDULE_TOPIC_XXXX queue level-1 = 1, nothing in the real topic yet
            parked = w.messages(SCHEDULE, 1)
            assert len(parked) == 1 and parked[0].properties["REAL_TOPIC"] == "DelayT"
            assert parked[0].properties["REAL_QID"] == "1"
            assert w.messages("DelayT", 1) == []
            pull = await w.call(
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "CG",
                    "topic": "DelayT",
                    "queueId": 1,
                    "queueOffset": "0",
                    "maxMsgNums": 32,
                    "sysFlag": 2 | 4,
                    "commitOffset": "0",
                    "suspendTimeoutMillis": "15000",
                    "subscription": "*",
                    "subVersion": "0",
                },
                timeout=20.0,
            )
            waited = time.time() - t0
            assert pull.code == ResponseCode.SUCCESS, (pull.code, pull.remark)
            assert 4.8 <= waited < 8.0, f"level 2 (5 s) delivered after {waited:.2f}s"
            (msg,) = w.messages("DelayT", 1)
            assert msg.body == b"later" and msg.flag == 7
            assert msg.properties["KEYS"] == "k1" and msg.properties["color"] == "red"
            assert msg.properties["REAL_TOPIC"] == "DelayT" and msg.properties["REAL_QID"] == "1"
            assert "DELAY" not in msg.properties
            assert msg.store_timestamp - parked[0].store_timestamp >= 4900
            assert broker.schedule_service.table.offset_table[2] == 1


async def test_levels_clamp_zero_and_garbage(wire):
    """A level above the highest is clamped to it; 0 and unreadable levels are not delayed."""
    w = wire
    await w.create_topic("ClampT", queues=1)
    assert (await w.send("ClampT", b"big", props={"DELAY": "99"})).code == ResponseCode.SUCCESS
    assert (await w.send("ClampT", b"zero", props={"DELAY": "0"})).code == ResponseCode.SUCCESS
    assert (await w.send("ClampT", b"junk", props={"DELAY": "soon"})).code == ResponseCode.SUCCESS
    await w.dispatched()
    (parked,) = w.messages(SCHEDULE, 17)
    assert parked.properties["DELAY"] == "18" and parked.body == b"big"
    assert [m.body for m in w.messages("ClampT")] == [b"zero", b"junk"]
    await wait_for(lambda: len(w.messages("ClampT")) == 3, timeout=6, what="the clamped message (2 s)")


async def test_many_levels_deliver_in_due_order(wire):
    """Messages of several levels interleave by due time, each in its own real queue."""
    w = wire
    await w.create_topic("OrderT", queues=4)
    for i, level in enumerate([4, 1, 4, 1, 0]):
        props = {"DELAY": str(level)} if level else {}
        assert (await w.send("OrderT", f"m{i}".encode(), queue_id=i % 4, props=props)).code == ResponseCode.SUCCESS
    await wait_for(lambda: len(w.all_messages("OrderT")) == 5, timeout=8, what="5 messages")
    by_time = sorted(w.all_messages("OrderT"), key=lambda m: m.store_timestamp)
    assert [m.body for m in by_time][:1] == [b"m4"]
    assert {m.body for m in by_time[1:3]} == {b"m1", b"m3"}
    assert {m.body for m in by_time[3:]} == {b"m0", b"m2"}
    for m in by_time:
        assert m.queue_id == int(m.body[1:]) % 4


async def test_restart_during_the_delay_delivers_once(tmp_path):
    """A clean restart keeps the progress: the message delivered before it is not delivered
    again, the one still waiting is delivered once after it."""
    store = tmp_path / "store"
    cfg = dict(message_delay_level=SHORT_LEVELS)
    async with run_broker(store, **cfg) as broker:
        async with RemotingClient() as client:
            w = Wire(None, broker, client)
            await w.create_topic("RestartT", queues=1)
            await w.send("RestartT", b"early", props={"DELAY": "1"})
            await wait_for(lambda: len(w.messages("RestartT")) == 1, timeout=5, what="the 1 s message")
            await w.send("RestartT", b"late", props={"DELAY": "4"})  # 2 s
            await w.dispatched()
    # the broker is down while "late" becomes due
    await asyncio.sleep(2.5)  # the behaviour under test: real time passes while the broker is down
    async with run_broker(store, **cfg) as broker:
        async with RemotingClient() as client:
            w = Wire(None, broker, client)
            await wait_for(lambda: len(w.messages("RestartT")) >= 2, timeout=5, what="the late message")
            # Once both levels' progress is past their one message, nothing can deliver either
            # again: wait for that state (not for time), then for the dispatch of anything put.
            table = broker.schedule_service.table.offset_table
            await wait_for(lambda: table.get(1) == 1 and table.get(4) == 1, timeout=10, what="both levels' progress")
            await w.dispatched()
            assert [m.body for m in w.messages("RestartT")] == [b"early", b"late"]
            assert table[1] == 1 and table[4] == 1


async def test_crash_without_persisted_progress_delivers_at_least_once(tmp_path):
    """When the progress file is lost (a crash before it was written), delivery starts over
    from the queue start: messages come again rather than being lost."""
    store = tmp_path / "store"
    cfg = dict(message_delay_level=SHORT_LEVELS)
    async with run_broker(store, **cfg) as broker:
        async with RemotingClient() as client:
            w = Wire(None, broker, client)
            await w.create_topic("CrashT", queues=1)
            await w.send("CrashT", b"one", props={"DELAY": "1"})
            await wait_for(lambda: len(w.messages("CrashT")) == 1, timeout=5, what="the message")
            path = broker.schedule_service.table.path
    import os

    os.remove(path)
    async with run_broker(store, **cfg) as broker:
        async with RemotingClient() as client:
            w = Wire(None, broker, client)
            await wait_for(lambda: len(w.messages("CrashT")) == 2, timeout=5, what="the redelivery")
            assert [m.body for m in w.messages("CrashT")] == [b"one", b"one"]


async def test_shutdown_in_the_middle_of_a_delivery_burst_loses_and_repeats_nothing(tmp_path):
    """Shut down while a burst of due messages is being delivered: the service stops between
    two messages, so after the restart every message is in its topic exactly once."""
    store = tmp_path / "store"
    cfg = dict(message_delay_level=SHORT_LEVELS)
    n = 3000
    async with run_broker(store, **cfg) as broker:
        async with RemotingClient() as client:
            w = Wire(None, broker, client)
            await w.create_topic("BurstT", queues=1)
            sem = asyncio.Semaphore(64)

            async def one(i):
                async with sem:
                    r = await w.send("BurstT", b"%d" % i, props={"DELAY": "1"})
                    assert r.code == ResponseCode.SUCCESS

            await asyncio.gather(*(one(i) for i in range(n)))
            await w.dispatched()
            await wait_for(
                lambda: w.store.get_max_offset_in_queue("BurstT", 0) > 0,
                timeout=5,
                interval=0.001,
                what="the burst to start",
            )
            during = w.store.get_max_offset_in_queue("BurstT", 0)
    async with run_broker(store, **cfg) as broker:
        async with RemotingClient() as client:
            w = Wire(None, broker, client)
            await wait_for(lambda: w.store.get_max_offset_in_queue("BurstT", 0) >= n, timeout=10, what="all delivered")
            await asyncio.sleep(0.5)  # the behaviour under test: nothing more arrives afterwards
            bodies = [m.body for m in w.messages("BurstT")]
    print(f"delivered before the shutdown: {during} of {n}")
    assert len(bodies) == n and len(set(bodies)) == n, (len(bodies), len(set(bodies)), during)


def test_bad_message_delay_level_is_a_clear_config_error(tmp_path):
    """A bad messageDelayLevel stops the daemon with exit status 2 and a sentence, not a
    traceback from the schedule service."""
    import subprocess
    import sys

    import pytest

    from rmq.config import BrokerConfig, ConfigError, apply_properties
    from rmq.store import StoreConfig

    for bad in ("1s 5x", "", "1.5s", "s"):
        with pytest.raises(ConfigError, match="messageDelayLevel"):
            apply_properties({"messageDelayLevel": bad}, BrokerConfig(), StoreConfig())
    sc = StoreConfig()
    apply_properties({"messageDelayLevel": "1s 2m 3h 1d"}, BrokerConfig(), sc)
    assert sc.delay_level_millis() == [1000, 120_000, 10_800_000, 86_400_000]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmq",
            "standalone",
            "--namesrv-port=0",
            "--broker-port=0",
            f"--store-dir={tmp_path / 'store'}",
            "--messageDelayLevel=1s 5x",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "messageDelayLevel" in proc.stderr and "Traceback" not in proc.stderr


def test_progress_table_keeps_the_newest_snapshot(tmp_path):
    """A timed write that runs late (its thread started before the shutdown's write) must
    not replace the newer progress."""
    from rmq.broker.schedule import DelayOffsetTable

    t = DelayOffsetTable(str(tmp_path))
    t.offset_table = {1: 5}
    old = t.snapshot()
    t.offset_table = {1: 9, 2: 3}
    t.persist()  # the shutdown's write (snapshot 2)
    assert t.write(*old) is False  # the late timed write (snapshot 1) is dropped
    again = DelayOffsetTable(str(tmp_path))
    assert again.load() and again.offset_table == {1: 9, 2: 3}
