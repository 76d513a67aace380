"""Transactional send: half message, local transaction, END_TRANSACTION, and the check-back.

The outcome tests observe exactly what the client sends by putting a recording processor in
front of the *real* broker's END_TRANSACTION processor (which still commits / rolls back), and
drive the check-back by sending CHECK_TRANSACTION_STATE over the producer's real connection, as
the broker's check service does; the end-to-end test leaves everything to the broker.
"""

import pytest
from sdk_support import create_topic, wait_until

import rmq
from rmq.client._codec import MessageSysFlag, decode_offset_msg_id
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand


class _Recorder:
    """Records END_TRANSACTION headers, then hands the request to the broker's own processor
    (when given one), so the broker still commits / rolls back for real."""

    def __init__(self, delegate=None):
        self.calls = []
        self.delegate = delegate

    def process_request(self, conn, cmd):
        self.calls.append((dict(cmd.ext_fields or {}), cmd.remark))
        if self.delegate is not None:
            return self.delegate.process_request(conn, cmd)
        return None  # oneway: no answer

    def reject_request(self):
        return False


def _install_recorder(broker) -> _Recorder:
    found = broker.server.dispatcher.processor_for(RequestCode.END_TRANSACTION)
    real = found[0] if found is not None and hasattr(found[0], "process_request") else None
    rec = _Recorder(real)
    broker.server.register_processor(RequestCode.END_TRANSACTION, rec, found[1] if real is not None else None)
    return rec


async def test_local_transaction_outcomes_and_check_back(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, pg = unique("TX"), unique("TXPG")
    await create_topic(broker.broker_addr, topic, queues=2)
    rec = _install_recorder(broker)

    checked = []

    def checker(msg):
        checked.append(msg)
        return rmq.LocalTransactionState.COMMIT_MESSAGE

    async def local_ok(msg, result):
        assert result.status is rmq.SendStatus.SEND_OK
        return rmq.LocalTransactionState.COMMIT_MESSAGE

    def local_raises(msg, result):
        raise RuntimeError("db down")

    async with rmq.Producer(namesrv_addr, pg, transaction_checker=checker) as p:
        r1 = await p.send_in_transaction(rmq.Message(topic, b"commit-me"), local_ok)
        r2 = await p.send_in_transaction(
            rmq.Message(topic, b"roll-me"), lambda m, r: rmq.LocalTransactionState.ROLLBACK_MESSAGE
        )
        r3 = await p.send_in_transaction(rmq.Message(topic, b"unknown"), local_raises)
        assert [r.local_transaction_state for r in (r1, r2, r3)] == [
            rmq.LocalTransactionState.COMMIT_MESSAGE,
            rmq.LocalTransactionState.ROLLBACK_MESSAGE,
            rmq.LocalTransactionState.UNKNOW,
        ]
        await wait_until(lambda: len(rec.calls) == 3, what="3 END_TRANSACTION")
        kinds = [int(h["commitOrRollback"]) for h, _ in rec.calls]
        assert kinds == [
            MessageSysFlag.TRANSACTION_COMMIT_TYPE,
            MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
            MessageSysFlag.TRANSACTION_NOT_TYPE,
        ]
        h1 = rec.calls[0][0]
        assert h1["producerGroup"] == pg and h1["msgId"] == r1.msg_id
        assert int(h1["commitLogOffset"]) == decode_offset_msg_id(r1.send_result.offset_msg_id)[2]
        assert int(h1["tranStateTableOffset"]) == r1.send_result.queue_offset
        assert h1["fromTransactionCheck"] == "false"

        # the half message was stored with the prepared flag and the producer group (half messages
        # are kept out of the consume queue, so read the raw record at its CommitLog offset)
        phy = decode_offset_msg_id(r3.send_result.offset_msg_id)[2]
        cl = broker.message_store.commit_log
        mf, pos = cl.select(phy, 4)
        size = int.from_bytes(mf.mm[pos : pos + 4], "big")
        mf, pos = cl.select(phy, size)
        record = bytes(mf.mm[pos : pos + size])
        from rmq.client._codec import decode_messages

        (half,) = decode_messages(record)
        # prepared flag as sent, or (a broker that parks half messages, as Java does) reset with
        # the real topic kept in REAL_TOPIC
        assert half.sys_flag & MessageSysFlag.TRANSACTION_PREPARED_TYPE or half.properties.get("REAL_TOPIC") == topic
        assert half.properties["TRAN_MSG"] == "true" and half.properties["PGROUP"] == pg

        # check-back for the UNKNOW one, over the producer's own connection (as the broker does)
        conn = await wait_until(
            lambda: broker.producer_manager.get_available_channel(pg), what="the producer's heartbeat"
        )
        conn.invoke_oneway(
            RemotingCommand.request(
                RequestCode.CHECK_TRANSACTION_STATE,
                {
                    "tranStateTableOffset": str(r3.send_result.queue_offset),
                    "commitLogOffset": str(half.commit_log_offset),
                    "msgId": half.msg_id,
                    "transactionId": half.msg_id,
                    "offsetMsgId": half.offset_msg_id,
                },
                record,
            )
        )
        await wait_until(lambda: len(rec.calls) == 4, what="END_TRANSACTION after the check")
        h4 = rec.calls[3][0]
        assert checked and checked[0].msg_id == r3.msg_id
        assert h4["fromTransactionCheck"] == "true"
        assert int(h4["commitOrRollback"]) == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        assert h4["transactionId"] == half.msg_id and int(h4["commitLogOffset"]) == half.commit_log_offset

    with pytest.raises(rmq.ClientError, match="transaction_checker"):
        async with rmq.Producer(namesrv_addr, unique("PG")) as p2:
            await p2.send_in_transaction(rmq.Message(topic, b"x"), local_ok)


def _raw_record(broker, offset_msg_id: str) -> bytes:
    phy = decode_offset_msg_id(offset_msg_id)[2]
    cl = broker.message_store.commit_log
    mf, pos = cl.select(phy, 4)
    size = int.from_bytes(mf.mm[pos : pos + 4], "big")
    mf, pos = cl.select(phy, size)
    return bytes(mf.mm[pos : pos + size])


async def test_transactions_end_to_end(cluster, namesrv_addr, unique):
    """Committed and checked-back-committed messages become visible, rolled-back ones never do."""
    _ns, broker = cluster
    topic, pg = unique("TXE"), unique("TXPG")
    await create_topic(broker.broker_addr, topic, queues=2)
    from sdk_support import drain

    from rmq.client._codec import decode_messages

    async with rmq.Producer(
        namesrv_addr, pg, transaction_checker=lambda m: rmq.LocalTransactionState.COMMIT_MESSAGE
    ) as p:
        await p.send_in_transaction(
            rmq.Message(topic, b"commit-me"), lambda m, r: rmq.LocalTransactionState.COMMIT_MESSAGE
        )
        await p.send_in_transaction(
            rmq.Message(topic, b"roll-me"), lambda m, r: rmq.LocalTransactionState.ROLLBACK_MESSAGE
        )
        r3 = await p.send_in_transaction(rmq.Message(topic, b"checked"), lambda m, r: rmq.LocalTransactionState.UNKNOW)
        record = _raw_record(broker, r3.send_result.offset_msg_id)
        (half,) = decode_messages(record)
        conn = await wait_until(lambda: broker.producer_manager.get_available_channel(pg), what="producer heartbeat")
        conn.invoke_oneway(
            RemotingCommand.request(
                RequestCode.CHECK_TRANSACTION_STATE,
                {
                    "tranStateTableOffset": str(r3.send_result.queue_offset),
                    "commitLogOffset": str(half.commit_log_offset),
                    "msgId": half.msg_id,
                    "transactionId": half.msg_id,
                    "offsetMsgId": half.offset_msg_id,
                },
                record,
            )
        )
        msgs = await drain(namesrv_addr, topic, 2, group=unique("TXC"), timeout=15)
    assert sorted(m.body for m in msgs) == [b"checked", b"commit-me"]
