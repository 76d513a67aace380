"""Transactions (B8): half messages, END_TRANSACTION, op records, check-back, restarts.

The ``wire`` broker checks every 300 ms for half messages older than 600 ms, at most 3 times.
Producers are our SDK's (``rmq.Producer`` with a ``transaction_checker``), which speaks the
protocol as Java does (SEND with TRAN_MSG + PGROUP, END_TRANSACTION oneway, answers
CHECK_TRANSACTION_STATE with END_TRANSACTION fromTransactionCheck=true).
"""

import asyncio
import time

from semantics_support import SHORT_LEVELS, Wire, phy_offset, wait_for

import rmq
from rmq._testing import run_standalone
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient

HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"
S = rmq.LocalTransactionState


def _bodies(w, topic):
    return sorted(m.body for m in w.all_messages(topic))


async def _consumed(w, topic, group, count):
    """What a real consumer of ``topic`` receives once it has ``count`` messages (the test
    checks beforehand that the topic holds exactly that many)."""
    got = []

    async def handler(msg):
        got.append(msg)

    c = rmq.PushConsumer(
        w.ns.address, group, handler=handler, consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    c.subscribe(topic)
    async with c:
        await wait_for(lambda: len(got) >= count, timeout=30, what=f"{count} message(s) consumed from {topic}")
    return got


async def _older_than_timeout(born_ms: int, timeout_ms: int = 600) -> None:
    """Wait until a half message born at ``born_ms`` is older than transactionTimeOut: the age
    is the broker's own rule (TransactionalMessageServiceImpl.check compares wall-clock ages)."""
    await wait_for(lambda: time.time() * 1000 - born_ms > timeout_ms, timeout=10, what="the half message's age")


async def test_commit_rollback_and_op_records(wire):
    w = wire
    await w.create_topic("TxT", queues=2)
    async with rmq.Producer(w.ns.address, "PID_tx", transaction_checker=lambda m: S.UNKNOW) as p:
        r_commit = await p.send_in_transaction(rmq.Message("TxT", b"commit", keys="k1"), lambda m, r: S.COMMIT_MESSAGE)
        r_roll = await p.send_in_transaction(rmq.Message("TxT", b"rollback"), lambda m, r: S.ROLLBACK_MESSAGE)
        await wait_for(lambda: len(w.messages(OP)) == 2, timeout=5, what="2 op records")
    await w.dispatched()
    halves = w.messages(HALF)
    assert [h.body for h in halves] == [b"commit", b"rollback"]
    for h in halves:
        assert h.properties["REAL_TOPIC"] == "TxT" and h.properties["TRAN_MSG"] == "true"
        assert h.properties["PGROUP"] == "PID_tx" and h.sys_flag & 0xC == 0
    # op records: tag "d", body = the half message's queue offset
    ops = w.messages(OP)
    assert [(o.tags, o.body) for o in ops] == [("d", b"0"), ("d", b"1")]
    (final,) = w.all_messages("TxT")
    assert final.body == b"commit" and final.sys_flag & 0xC == 0x8
    assert final.prepared_transaction_offset == halves[0].commit_log_offset
    assert final.properties["KEYS"] == "k1" and "TRAN_MSG" not in final.properties
    assert "REAL_TOPIC" not in final.properties and final.properties["PGROUP"] == "PID_tx"
    assert final.queue_id == r_commit.send_result.message_queue.queue_id
    assert r_roll.local_transaction_state is S.ROLLBACK_MESSAGE
    # settled: check rounds run once both halves are older than the timeout send nothing
    await _older_than_timeout(max(h.born_timestamp for h in halves))
    for _ in range(2):
        assert await w.broker.transaction_service.check() == 0
    assert w.broker.transaction_service.checks_sent == 0


async def test_check_back_commit_rollback_unknown(wire):
    """Local transactions answer UNKNOW; the check-back decides: COMMIT → delivered,
    ROLLBACK → never, always UNKNOW → rolled back after transactionCheckMax (3) checks and
    kept in TRANS_CHECK_MAX_TIME_TOPIC. Half messages never reach consumers."""
    w = wire
    await w.create_topic("TxCheckT", queues=1)
    checks: dict[bytes, int] = {}
    answers = {b"c": S.COMMIT_MESSAGE, b"r": S.ROLLBACK_MESSAGE, b"u": S.UNKNOW}

    async def checker(msg):
        checks[msg.body] = checks.get(msg.body, 0) + 1
        assert msg.topic == "TxCheckT"
        return answers[msg.body]

    async with rmq.Producer(w.ns.address, "PID_check", transaction_checker=checker) as p:
        for body in (b"c", b"r", b"u"):
            res = await p.send_in_transaction(rmq.Message("TxCheckT", body), lambda m, r: S.UNKNOW)
            assert res.local_transaction_state is S.UNKNOW
        assert w.messages("TxCheckT") == [], "half messages must not reach consumers"
        await wait_for(lambda: _bodies(w, "TxCheckT") == [b"c"], timeout=10, what="the checked commit")
        await wait_for(lambda: w.broker.transaction_service.discarded == 1, timeout=15, what="the give-up")
    # COMMIT / ROLLBACK end after one check (a slow answer may draw a second check of the
    # copy, which the broker settles without a second commit); UNKNOW exactly max times
    assert checks[b"c"] >= 1 and checks[b"r"] >= 1 and checks[b"u"] == 3
    (kept,) = w.messages("TRANS_CHECK_MAX_TIME_TOPIC")
    assert kept.body == b"u" and kept.properties["TRANSACTION_CHECK_TIMES"] == "3"
    got = await _consumed(w, "TxCheckT", "GID_late", 1)
    assert [m.body for m in got] == [b"c"]
    # progress reached the half queue's end and nothing is pending
    com = w.broker.consumer_offset_manager
    assert com.query_offset("CID_RMQ_SYS_TRANS", HALF, 0) == w.store.get_max_offset_in_queue(HALF, 0)


async def test_end_transaction_checks_its_target(wire):
    w = wire
    await w.create_topic("TxBadT", queues=1)
    resp = await w.send("TxBadT", b"half", props={"TRAN_MSG": "true", "PGROUP": "PG1"}, sys_flag=0x4)
    assert resp.code == ResponseCode.SUCCESS
    phy, qoff = phy_offset(resp.ext_fields["msgId"]), int(resp.ext_fields["queueOffset"])

    def end(group="PG1", tsto=qoff, clo=phy, kind=8):
        return w.call(
            RequestCode.END_TRANSACTION,
            {
                "producerGroup": group,
                "tranStateTableOffset": str(tsto),
                "commitLogOffset": str(clo),
                "commitOrRollback": str(kind),
                "fromTransactionCheck": "false",
                "msgId": "X",
            },
        )

    assert (r := await end(group="other")).code == ResponseCode.SYSTEM_ERROR and "producer group" in r.remark
    assert (r := await end(tsto=qoff + 5)).code == ResponseCode.SYSTEM_ERROR and "state table offset" in r.remark
    assert (r := await end(clo=10**12)).code == ResponseCode.SYSTEM_ERROR and "Find prepared" in r.remark
    assert (r := await end(kind=3)).code == ResponseCode.SYSTEM_ERROR and "commitOrRollback" in r.remark
    assert (await w.call(RequestCode.END_TRANSACTION, {"producerGroup": "PG1"})).code == ResponseCode.SYSTEM_ERROR
    # an ordinary message is not a half message
    plain = await w.send("TxBadT", b"plain")
    r = await end(clo=phy_offset(plain.ext_fields["msgId"]), tsto=0)
    assert r.code == ResponseCode.SYSTEM_ERROR and "not a half message" in r.remark
    await w.dispatched()
    assert _bodies(w, "TxBadT") == [b"plain"]
    # the real commit works once; a repeated commit does not store the message twice
    assert (await end()).code == ResponseCode.SUCCESS
    assert (await end()).code == ResponseCode.SUCCESS
    await w.dispatched()
    assert _bodies(w, "TxBadT") == [b"half", b"plain"]
    # both op records (one per END_TRANSACTION) are consumed by the next check run
    com = w.broker.consumer_offset_manager
    assert len(w.messages(OP)) == 2
    await wait_for(
        lambda: (
            com.query_offset("CID_RMQ_SYS_TRANS", OP, 0) == 2 and com.query_offset("CID_RMQ_SYS_TRANS", HALF, 0) == 1
        ),
        timeout=5,
        what="check progress",
    )


async def test_reject_transaction_message(wire):
    w = wire
    w.broker.broker_config.reject_transaction_message = True
    resp = await w.send("TxRejT", b"x", props={"TRAN_MSG": "true", "PGROUP": "PG1"}, sys_flag=0x4)
    assert resp.code == ResponseCode.NO_PERMISSION and "transaction message is forbidden" in resp.remark


async def test_committed_message_with_delay_is_delayed(wire):
    """The SDK (like Java's) refuses delayed transactional sends, but on the wire a half
    message may carry DELAY: it stays a half message (not parked) and its commit is delayed."""
    w = wire
    await w.create_topic("TxDelayT", queues=1)
    resp = await w.send("TxDelayT", b"slow", props={"TRAN_MSG": "true", "PGROUP": "PG1", "DELAY": "4"}, sys_flag=0x4)
    assert resp.code == ResponseCode.SUCCESS
    await w.dispatched()
    assert [h.body for h in w.messages(HALF)] == [b"slow"]
    t0 = time.time()
    r = await w.call(
        RequestCode.END_TRANSACTION,
        {
            "producerGroup": "PG1",
            "tranStateTableOffset": resp.ext_fields["queueOffset"],
            "commitLogOffset": str(phy_offset(resp.ext_fields["msgId"])),
            "commitOrRollback": "8",
            "fromTransactionCheck": "false",
            "msgId": "X",
        },
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    await w.dispatched()
    assert w.messages("TxDelayT") == [] and len(w.messages("SCHEDULE_TOPIC_XXXX", 3)) == 1
    await wait_for(lambda: _bodies(w, "TxDelayT") == [b"slow"], timeout=6, what="the delayed commit")
    assert time.time() - t0 >= 1.8  # level 4 = 2 s here


async def test_unresolved_half_message_survives_a_restart(tmp_path):
    """The broker restarts with a half message unresolved; after the restart the check-back
    reaches the (reconnected) producer and its COMMIT delivers the message once."""
    store = tmp_path / "store"
    # no timed checks: the test runs one once the producer is connected (a check with no
    # producer of the group connected counts against transactionCheckMax, as in Java)
    cfg = dict(message_delay_level=SHORT_LEVELS, transaction_time_out=600, transaction_check_interval=3_600_000)
    async with run_standalone(
        store, transaction_check_interval=3_600_000, transaction_time_out=600, message_delay_level=SHORT_LEVELS
    ) as (ns, broker):
        async with RemotingClient() as client:
            w = Wire(ns, broker, client)
            await w.create_topic("TxRestartT", queues=1)
            resp = await w.send(
                "TxRestartT",
                b"pending",
                props={"TRAN_MSG": "true", "PGROUP": "PID_rs", "UNIQ_KEY": "AC110001TXRESTART"},
                sys_flag=0x4,
            )
            assert resp.code == ResponseCode.SUCCESS
            await w.dispatched()
    async with run_standalone(store, **cfg) as (ns, broker):
        async with RemotingClient() as client:
            w = Wire(ns, broker, client)
            assert w.messages("TxRestartT") == []
            checked = []

            def checker(msg):
                checked.append(msg.msg_id)
                return S.COMMIT_MESSAGE

            async with rmq.Producer(ns.address, "PID_rs", transaction_checker=checker) as p:
                # a producer heartbeats the brokers of its routes: learn the topic's route
                await p.fetch_publish_message_queues("TxRestartT")
                await wait_for(
                    lambda: broker.producer_manager.get_available_channel("PID_rs"),
                    timeout=40,
                    what="the producer's heartbeat",
                )
                (half,) = w.messages(HALF)
                await _older_than_timeout(half.born_timestamp)
                assert await broker.transaction_service.check() == 1
                await wait_for(lambda: w.messages("TxRestartT"), timeout=10, what="the commit after the restart")
                # the commit's op record settles it: a later round sends no second check-back
                await wait_for(lambda: w.messages(OP), timeout=10, what="the commit's op record")
                assert await broker.transaction_service.check() == 0
            assert checked == ["AC110001TXRESTART"]
            assert [m.body for m in w.messages("TxRestartT")] == [b"pending"]


async def test_concurrent_commits_of_one_transaction_store_it_once(tmp_path):
    """The producer's own commit and a check answer can arrive together (also for the first
    half message and its check-back copy): the message is committed once. SYNC_FLUSH, so a
    commit really waits for the disk while the others arrive."""
    async with run_standalone(tmp_path / "store", flush_disk_type="SYNC_FLUSH") as (ns, broker):
        async with RemotingClient() as client:
            w = Wire(ns, broker, client)
            await w.create_topic("TxRaceT", queues=1)
            resp = await w.send("TxRaceT", b"race", props={"TRAN_MSG": "true", "PGROUP": "PG1"}, sys_flag=0x4)
            ext = {
                "producerGroup": "PG1",
                "tranStateTableOffset": resp.ext_fields["queueOffset"],
                "commitLogOffset": str(phy_offset(resp.ext_fields["msgId"])),
                "commitOrRollback": "8",
                "fromTransactionCheck": "false",
                "msgId": "X",
            }
            replies = await asyncio.gather(
                *(
                    w.call(RequestCode.END_TRANSACTION, dict(ext, fromTransactionCheck=str(i % 2 == 1).lower()))
                    for i in range(6)
                )
            )
            assert all(r.code == ResponseCode.SUCCESS for r in replies), [r.remark for r in replies]
            await w.dispatched()
            assert _bodies(w, "TxRaceT") == [b"race"]
            assert len(w.messages(OP)) == 6
