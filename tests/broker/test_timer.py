"""Timer messages over TCP (rmq.broker.timer on the SEND path, rmq.store.timer's wheel): any
delivery time through TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS / __STARTDELIVERTIME,
Java 5's refusals, restart and kill -9 with a backlog, delay levels unchanged, replication.

Lateness is checked against the message's own broker-side times (TIMER_OUT_MS, the tick it
belongs to, TIMER_DEQUEUE_MS and the store timestamp), never against the test machine's clock.
"""

import struct
import time
import uuid
from pathlib import Path

import pytest
from broker_support import decode_records, encode_batch

from rmq._testing import broker_env, run_broker, run_namesrv, wait_until
from rmq._testing.env import BrokerEnv
from rmq._testing.processes import BrokerProcess
from rmq.common.message import MessageConst
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient
from rmq.store.timer import TIMER_TOPIC, timer_delete_key, timer_slot_time
from rmq.store.timer import service as timer_service

PREC = 100  # ms: a short tick keeps the tests short
SMALL = {"timer_precision_ms": PREC, "mapped_file_size_timer_log": 64 * 1024}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _uniq(env_msgs):
    return [m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for m in env_msgs]


async def _send_timer(env, topic, props, body=b"t", queue_id=1, tags="TagT"):
    key = uuid.uuid4().hex.upper()
    resp = await env.send(
        topic, body, queue_id, tags=tags, props={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: key, **props}
    )
    return resp, key


def _check_on_time(m, deliver):
    """Delivered no earlier than its time and by the tick that holds it."""
    tick = timer_slot_time(deliver, PREC)
    assert int(m.properties[MessageConst.TIMER_OUT_MS]) == deliver
    dequeue = int(m.properties[MessageConst.TIMER_DEQUEUE_MS])
    assert m.store_timestamp >= deliver, (m.store_timestamp, deliver)
    assert dequeue >= tick >= deliver
    # the wheel reached the tick at most one tick after it was due; the rest of the lateness is
    # the broker's own time between taking the tick and storing the copy (both broker clocks)
    assert m.store_timestamp - dequeue < 5_000
    assert MessageConst.REAL_TOPIC not in m.properties and MessageConst.REAL_QUEUE_ID not in m.properties
    assert int(m.properties[MessageConst.TIMER_ENQUEUE_MS]) <= dequeue


async def test_timer_message_is_delivered_at_its_time_with_its_identity(tmp_path):
    async with broker_env(tmp_path / "s", **SMALL) as env:
        await env.create_topic("TimerT")
        deliver = _now_ms() + 1500
        resp, key = await _send_timer(env, "TimerT", {MessageConst.TIMER_DELIVER_MS: str(deliver)}, b"hello")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        parked = env.messages(TIMER_TOPIC, 0)
        assert len(parked) == 1 and parked[0].properties[MessageConst.REAL_TOPIC] == "TimerT"
        assert parked[0].properties[MessageConst.REAL_QUEUE_ID] == "1"
        assert env.messages("TimerT", 1) == []
        msgs = await wait_until(lambda: env.messages("TimerT", 1), what="the timer's delivery")
        (m,) = msgs
        assert m.body == b"hello" and m.topic == "TimerT" and m.queue_id == 1
        assert m.properties["TAGS"] == "TagT" and m.flag == 7
        assert m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == key
        assert m.born_timestamp == parked[0].born_timestamp
        _check_on_time(m, deliver)
        # consumers see it like any message (tags code from TAGS: a tag subscription matches)
        pulled = await env.pull("TimerT", 1, subscription="TagT")
        assert pulled.code == ResponseCode.SUCCESS
        assert [r.body for r in decode_records(pulled.body)] == [b"hello"]
        timer = env.broker.timer_message_store
        await wait_until(lambda: timer.pending == 0, what="the wheel to empty")
        assert timer.dequeued == 1 and timer.enqueued == 1
        text = (await env.broker.metrics.collect()).decode()
        line = next(x for x in text.splitlines() if x.startswith("rocketmq_timer_dequeued_total{"))
        assert float(line.rsplit(" ", 1)[1]) == 1.0
        assert any(x.startswith("rocketmq_timer_pending{") and x.endswith(" 0.0") for x in text.splitlines())


async def test_many_timers_in_one_slot_and_the_delay_properties(tmp_path, monkeypatch):
    monkeypatch.setattr(timer_service, "DEQUEUE_CHUNK", 64)  # a tick of 300 in 5 chunks
    async with broker_env(tmp_path / "s", **SMALL) as env:
        await env.create_topic("TimerMany")
        timer = env.broker.timer_message_store
        # timerStopDequeue (live) holds deliveries until every timer is in the wheel, whatever
        # the machine's speed
        env.broker.store_config.timer_stop_dequeue = True
        deliver = timer_slot_time(_now_ms() + 2000, PREC)  # one tick for all of them
        keys = []
        for i in range(300):
            resp, key = await _send_timer(env, "TimerMany", {MessageConst.TIMER_DELIVER_MS: str(deliver)}, b"%d" % i)
            assert resp.code == ResponseCode.SUCCESS
            keys.append(key)
        sec_resp, sec_key = await _send_timer(env, "TimerMany", {MessageConst.TIMER_DELAY_SEC: "1"})
        ms_resp, ms_key = await _send_timer(env, "TimerMany", {MessageConst.TIMER_DELAY_MS: "700"})
        ons_at = _now_ms() + 2000
        ons_resp, ons_key = await _send_timer(env, "TimerMany", {MessageConst.START_DELIVER_TIME: str(ons_at)})
        assert {sec_resp.code, ms_resp.code, ons_resp.code} == {ResponseCode.SUCCESS}
        want = set(keys) | {sec_key, ms_key, ons_key}
        # a time that had passed when its send arrived (a slow machine) was stored at once
        parked = set(_uniq(env.messages(TIMER_TOPIC, 0)))
        assert {sec_key, ms_key} <= parked and parked <= want and keys[0] in parked
        assert set(_uniq(env.messages("TimerMany", 1))) == want - parked
        await wait_until(lambda: timer.enqueued == len(parked), what="every parked timer in the wheel")
        assert timer.pending == len(parked)
        env.broker.store_config.timer_stop_dequeue = False
        await wait_until(lambda: len(env.messages("TimerMany", 1)) >= len(want), what="every timer delivered")
        msgs = env.messages("TimerMany", 1)
        got = _uniq(msgs)
        assert len(got) == len(want) and set(got) == want  # each once
        by_key = {m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]: m for m in msgs}
        in_slot = [i for i, k in enumerate(keys) if k in parked]  # send order
        for i in in_slot:
            _check_on_time(by_key[keys[i]], deliver)
        slot_bodies = [m.body for m in msgs if m.properties["UNIQ_KEY"] in parked and m.properties["UNIQ_KEY"] in keys]
        # the newest chunk first, each chunk in arrival order
        n = len(in_slot)
        chunks = [in_slot[max(0, hi - 64) : hi] for hi in range(n, 0, -64)]
        assert slot_bodies == [b"%d" % i for chunk in chunks for i in chunk]
        if ons_key in parked:
            _check_on_time(by_key[ons_key], ons_at)
        for k, prop in ((sec_key, MessageConst.TIMER_DELAY_SEC), (ms_key, MessageConst.TIMER_DELAY_MS)):
            m = by_key[k]
            parked_at = int(m.properties[MessageConst.TIMER_ENQUEUE_MS])
            _check_on_time(m, int(m.properties[MessageConst.TIMER_OUT_MS]))
            assert int(m.properties[MessageConst.TIMER_OUT_MS]) <= parked_at + 1000, prop
        info = await env.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        assert info.code == ResponseCode.SUCCESS
        for k in ("timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps"):
            assert k.encode() in info.body


async def test_past_times_refusals_and_delay_levels(tmp_path):
    async with broker_env(tmp_path / "s", timer_max_delay_sec=60, **SMALL) as env:
        await env.create_topic("TimerPast")
        # a time in the past: stored at once in its topic, never parked
        resp, key = await _send_timer(env, "TimerPast", {MessageConst.TIMER_DELIVER_MS: str(_now_ms() - 5000)})
        assert resp.code == ResponseCode.SUCCESS
        assert _uniq(env.messages("TimerPast", 1)) == [key]
        assert env.messages(TIMER_TOPIC, 0) == []
        # past timerMaxDelaySec, or not a number: Java's MESSAGE_ILLEGAL and remark
        for props in (
            {MessageConst.TIMER_DELAY_SEC: "61"},
            {MessageConst.TIMER_DELIVER_MS: str(_now_ms() + 61_000)},
            {MessageConst.TIMER_DELAY_MS: "soon"},
        ):
            resp, _ = await _send_timer(env, "TimerPast", props)
            assert resp.code == ResponseCode.MESSAGE_ILLEGAL, props
            assert "max delay 60000ms" in resp.remark
        # a delete marker for a time already passed
        resp, _ = await _send_timer(
            env, "TimerPast", {MessageConst.TIMER_DELIVER_MS: "1", MessageConst.TIMER_DEL_UNIQKEY: "X"}
        )
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        # a batch with timer properties is refused, as Java refuses delayed batches
        body = encode_batch([(b"a", {}), (b"b", {})])
        resp = await env.send(
            "TimerPast", body, 1, props={MessageConst.TIMER_DELAY_SEC: "5"}, code=RequestCode.SEND_BATCH_MESSAGE,
            batch=True,
        )  # fmt: skip
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        # a delay level wins over timer properties, which are dropped (Java checkIfTimerMessage)
        resp, key = await _send_timer(
            env, "TimerPast", {MessageConst.DELAY_TIME_LEVEL: "1", MessageConst.TIMER_DELAY_SEC: "30"}
        )
        assert resp.code == ResponseCode.SUCCESS
        (sched,) = env.messages("SCHEDULE_TOPIC_XXXX", 0)
        assert sched.properties[MessageConst.REAL_TOPIC] == "TimerPast"
        assert MessageConst.TIMER_DELAY_SEC not in sched.properties
        delivered = await wait_until(
            lambda: [m for m in env.messages("TimerPast", 1) if m.properties.get("UNIQ_KEY") == key],
            what="the delay-level message",
        )
        assert delivered[0].store_timestamp - sched.store_timestamp >= 1000  # level 1 = 1 s, unchanged
        assert env.messages(TIMER_TOPIC, 0) == []
        # timerWheelEnable=false (live): Java's SYSTEM_ERROR
        env.broker.store_config.timer_wheel_enable = False
        resp, _ = await _send_timer(env, "TimerPast", {MessageConst.TIMER_DELAY_SEC: "5"})
        assert resp.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in resp.remark


async def test_timers_survive_a_clean_restart_each_delivered_once(tmp_path):
    store = tmp_path / "s"
    async with broker_env(store, **SMALL) as env:
        await env.create_topic("TimerRestart")
        now = _now_ms()
        keys = {}
        for i in range(40):
            deliver = now + 300 + i * 50  # some due before the stop, the rest after the restart
            resp, key = await _send_timer(env, "TimerRestart", {MessageConst.TIMER_DELIVER_MS: str(deliver)})
            assert resp.code == ResponseCode.SUCCESS
            keys[key] = deliver
        await wait_until(lambda: env.messages("TimerRestart", 1), what="a first delivery before the stop")
    async with broker_env(store, **SMALL) as env:
        await wait_until(lambda: len(env.messages("TimerRestart", 1)) >= len(keys), what="all delivered")
        msgs = env.messages("TimerRestart", 1)
        got = _uniq(msgs)
        assert sorted(got) == sorted(keys)  # none lost, none twice
        for m in msgs:
            assert m.store_timestamp >= keys[m.properties["UNIQ_KEY"]]


async def _read_queue(env: BrokerEnv, topic: str, queue_id: int) -> list:
    out = []
    offset = 0
    while True:
        resp = await env.pull(topic, queue_id, offset=offset, max_nums=32)
        if resp.code != ResponseCode.SUCCESS:
            return out
        recs = decode_records(resp.body)
        out.extend(recs)
        offset = recs[-1].queue_offset + 1


def _timercheck(store: Path) -> tuple[int, int, int, int]:
    """The checkpoint the killed broker left (none yet: everything may come again)."""
    path = store / "config" / "timercheck"
    if not path.exists():
        return (0, 0, 0, 0)
    return struct.unpack(">qqqq", path.read_bytes()[:32])


@pytest.mark.timeout(120)
async def test_kill_9_with_a_timer_backlog_loses_none_and_repeats_only_past_the_checkpoint(tmp_path):
    """A subprocess broker is killed with SIGKILL while delivering a backlog; after the restart
    every timer is delivered, and a timer delivered twice belongs to a tick at or after the
    checkpoint's lastReadTimeMs read from the files the killed broker left."""
    async with run_namesrv() as ns:
        broker = BrokerProcess(
            tmp_path / "b",
            f"127.0.0.1:{ns.port}",
            timerPrecisionMs=PREC,
            timerFlushIntervalMs=200,
            mappedFileSizeTimerLog=64 * 1024,
        )
        await broker.astart()
        client = RemotingClient()
        try:
            env = BrokerEnv(None, None, client, broker_addr=broker.addr, namesrv_addr=f"127.0.0.1:{ns.port}")
            await env.create_topic("TimerKill")
            now = _now_ms()
            keys = {}
            for i in range(600):
                deliver = now + 1000 + (i % 60) * 100  # 6 s of ticks, 10 timers per tick
                resp, key = await _send_timer(env, "TimerKill", {MessageConst.TIMER_DELIVER_MS: str(deliver)})
                assert resp.code == ResponseCode.SUCCESS
                keys[key] = deliver
            # kill it in the middle of the backlog
            await wait_until(
                lambda: _count(env), what="some timers delivered before the kill", interval=0.05
            )  # fmt: skip
            before = {m.properties["UNIQ_KEY"] for m in await _read_queue(env, "TimerKill", 1)}
            broker.kill()
            assert 0 < len(before) < len(keys)  # killed with a backlog
            read_time = _timercheck(broker.dir / "store")[0]
            await broker.astart()
            await wait_until(
                lambda: _delivered_all(env, keys), timeout=60, what="every timer after the restart", interval=0.1
            )
            msgs = await _read_queue(env, "TimerKill", 1)
            got = [m.properties["UNIQ_KEY"] for m in msgs]
            assert set(got) == set(keys)  # none lost
            seen = set()
            for m in msgs:
                k = m.properties["UNIQ_KEY"]
                assert m.store_timestamp >= keys[k]
                if k in seen:
                    # at-least-once only past the checkpoint: its tick was not checkpointed as delivered
                    assert timer_slot_time(keys[k], PREC) >= read_time, (k, keys[k], read_time)
                seen.add(k)
        finally:
            await client.close()
            broker.kill()


async def _count(env):
    return len(await _read_queue(env, "TimerKill", 1)) > 0


async def _delivered_all(env, keys):
    msgs = await _read_queue(env, "TimerKill", 1)
    return {m.properties["UNIQ_KEY"] for m in msgs} >= set(keys)


async def test_a_slave_replicates_the_timer_topic(tmp_path):
    async with run_namesrv() as ns, run_broker(tmp_path / "m", ns, **SMALL) as master:
        client = RemotingClient()
        try:
            env = BrokerEnv(ns, master, client)
            await env.create_topic("TimerHA")
            async with run_broker(
                tmp_path / "sl", ns, broker_id=1, broker_role="SLAVE", slave_sync_interval_ms=200, **SMALL
            ) as slave:
                resp, key = await _send_timer(env, "TimerHA", {MessageConst.TIMER_DELAY_SEC: "60"})
                assert resp.code == ResponseCode.SUCCESS
                sstore = slave.message_store

                def parked_on_slave():
                    cq = sstore.find_consume_queue(TIMER_TOPIC, 0, create=False)
                    if cq is None or cq.get_max_offset_in_queue() < 1:
                        return None
                    phy, size, _ = cq.get_unit(0)
                    return sstore.look_message_by_offset(phy, size)

                m = await wait_until(parked_on_slave, what="the timer topic on the slave")
                assert m.properties["UNIQ_KEY"] == key and m.properties[MessageConst.REAL_TOPIC] == "TimerHA"
                # the slave's wheel is idle: the master delivers
                assert not slave.timer_message_store.active
                await wait_until(lambda: master.timer_message_store.active, what="the master's wheel")
        finally:
            await client.close()


async def test_a_timer_beyond_the_roll_window_rolls_and_arrives_on_time(tmp_path):
    """Java doEnqueue's roll: a time at least timerRollWindowSlot ticks ahead is parked one
    window on, put back into the timer topic with TIMER_ROLL_TIMES + 1, then delivered."""
    async with broker_env(tmp_path / "s", timer_roll_window_slot=6, **SMALL) as env:  # a 600 ms window
        await env.create_topic("TimerRoll")
        deliver = _now_ms() + 2500
        resp, key = await _send_timer(env, "TimerRoll", {MessageConst.TIMER_DELIVER_MS: str(deliver)})
        assert resp.code == ResponseCode.SUCCESS
        (m,) = await wait_until(lambda: env.messages("TimerRoll", 1), what="the rolled timer")
        assert m.properties["UNIQ_KEY"] == key
        assert int(m.properties[MessageConst.TIMER_ROLL_TIMES]) >= 1
        _check_on_time(m, deliver)
        parked = env.messages(TIMER_TOPIC, 0)
        assert len(parked) == 1 + int(m.properties[MessageConst.TIMER_ROLL_TIMES])  # the original + its rolls
        assert env.broker.timer_message_store.rolled >= 1


async def test_a_cancel_marker_removes_its_timer_and_survives_a_restart(tmp_path):
    """Java 5's TIMER_DEL_UNIQKEY: a marker sent for the same delivery time cancels the timer
    message of that topic and UNIQ_KEY (TimerMessageStore's MAGIC_DELETE records), across a
    restart; the tick's other messages are delivered and the marker itself never is."""
    store = tmp_path / "s"
    async with broker_env(store, **SMALL) as env:
        await env.create_topic("TimerCancel")
        deliver = _now_ms() + 3000
        _resp, doomed = await _send_timer(env, "TimerCancel", {MessageConst.TIMER_DELIVER_MS: str(deliver)}, b"doomed")
        _resp, kept = await _send_timer(env, "TimerCancel", {MessageConst.TIMER_DELIVER_MS: str(deliver)}, b"kept")
        # a marker naming another topic's key cancels nothing
        _resp, _k = await _send_timer(
            env,
            "TimerCancel",
            {
                MessageConst.TIMER_DELIVER_MS: str(deliver),
                MessageConst.TIMER_DEL_UNIQKEY: timer_delete_key("OtherTopic", kept),
            },
        )
        resp, _k = await _send_timer(
            env,
            "TimerCancel",
            {
                MessageConst.TIMER_DELIVER_MS: str(deliver),
                MessageConst.TIMER_DEL_UNIQKEY: timer_delete_key("TimerCancel", doomed),
            },
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        # a marker for a time already past is refused, as Java's transformTimerMessage
        resp, _k = await _send_timer(
            env,
            "TimerCancel",
            {
                MessageConst.TIMER_DELIVER_MS: str(_now_ms() - 1000),
                MessageConst.TIMER_DEL_UNIQKEY: timer_delete_key("TimerCancel", kept),
            },
        )
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert len(env.messages(TIMER_TOPIC, 0)) == 4
        ts = env.broker.timer_message_store
        await wait_until(lambda: ts.queue_offset == 4, what="the four enqueued")
        assert ts.timing_count["TimerCancel"][0] == 2  # GET_TIMER_METRICS' count: markers not counted
    # the restart comes before the tick: the markers are read back from the timer log
    async with broker_env(store, **SMALL) as env:
        msgs = await wait_until(lambda: env.messages("TimerCancel", 1), what="the tick's delivery")
        ts = env.broker.timer_message_store
        await wait_until(lambda: ts.read_time > timer_slot_time(deliver, PREC), what="the tick passed")
        msgs = env.messages("TimerCancel", 1)
        assert [m.body for m in msgs] == [b"kept"]
        assert _uniq(msgs) == [kept]
        assert ts.cancelled == 1
        assert "TimerCancel" not in ts.timing_count  # read back at start, then one delivered, one cancelled
