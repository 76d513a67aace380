"""Transactional messages: half messages, END_TRANSACTION, op records and check-back
(Java ``TransactionalMessageServiceImpl``).

Java's ``TransactionalMessageServiceImpl`` + ``TransactionalMessageBridge`` +
``TransactionalMessageCheckService`` in one asyncio-owned service.

Half message. A SEND whose ``TRAN_MSG`` property is ``true`` is stored, not in its topic, but
in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with ``REAL_TOPIC`` / ``REAL_QID`` and its sysFlag
transaction bits cleared (so the store indexes it in the half topic's ConsumeQueue, which is
what the checker walks). Consumers of the real topic cannot see it.

END_TRANSACTION (37). COMMIT copies the half message into its real topic (sysFlag COMMIT,
``preparedTransactionOffset`` = the half message's CommitLog offset, ``TRAN_MSG`` and the
REAL_* properties removed, delay levels honoured) and then writes an op record; ROLLBACK
only writes the op record. The op record marks the half message as resolved::

    RMQ_SYS_TRANS_OP_HALF_TOPIC, queue = the half message's queue (0)
    TAGS = "d" (TransactionalMessageUtil.REMOVETAG)
    body = the half message's queue offset, decimal ASCII ("17")

Check-back. Every ``transactionCheckInterval`` ms the checker walks the half queue from its
progress offset (kept as the consumer offset of group ``CID_RMQ_SYS_TRANS``, Java's) and
reads the op queue from its own progress offset into a map ``half offset → op offset``. For
each half message in order:

* an op record exists → resolved, skip;
* it was checked ``transactionCheckMax`` (15) times already (``TRANSACTION_CHECK_TIMES``) →
  given up: rolled back (op record) and a copy kept in ``TRANS_CHECK_MAX_TIME_TOPIC`` (Java);
* it is younger than ``transactionTimeOut`` (6 s, or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``)
  → stop: everything after it is younger too;
* otherwise it is written again at the end of the half queue with ``TRANSACTION_CHECK_TIMES``
  + 1 (the check count survives restarts in the record itself, as in Java) and that copy is
  sent to one producer connection of its group as CHECK_TRANSACTION_STATE (39, oneway, body =
  the record with its real topic and queue). The producer answers with END_TRANSACTION
  (``fromTransactionCheck``) naming the copy.

Both progress offsets then advance past what was settled; the op offset only past op records
whose half message is behind the half progress (Java ``calculateOpOffset``). Since everything
is in the CommitLog and progress is committed like any consumer offset, a restart resumes
with the same state (at-least-once: a crash may repeat a check).

A copy made by a check carries ``TRAN_PREPARED_QUEUE_OFFSET`` = the first half message's
queue offset. The service remembers (bounded, and re-read from the tail of the op queue at
start) which first offsets were resolved, so an END_TRANSACTION for the original that arrives
after a check-back copy was made does not produce a second check or a second commit.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import TYPE_CHECKING, Any

from rmq import _store
from rmq.broker.message_copy import copy_to_inner
from rmq.broker.timer import rewrite_if_timer
from rmq.common.constants import MixAll, PermName, TopicValidator
from rmq.common.message import (
    MessageConst,
    MessageSysFlag,
    host_bytes,
    properties_to_string,
)
from rmq.common.tasks import stop_gracefully, wait_event
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rmq.store import MessageInner

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker.transaction")


REMOVETAG = "d"
CID_RMQ_SYS_TRANS = MixAll.CID_SYS_RMQ_TRANS
RMQ_SYS_TRANS_HALF_TOPIC = TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC
RMQ_SYS_TRANS_OP_HALF_TOPIC = TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC
TRANS_CHECK_MAX_TIME_TOPIC = TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
HALF_QUEUE_ID = 0
MAX_PROCESS_TIME_LIMIT = 60.0  # seconds one check run may take (Java)
RESOLVED_MEMORY = 100_000  # first-offsets remembered as resolved
OP_TAIL_PRIMING = 10_000  # op records re-read at start


class TransactionalMessageService:
    """Half messages, their resolution and the check-back task.

    Args:
        controller: the broker (``rmq.broker.context.BrokerContext``). Its ``broker_config`` supplies
            ``transaction_time_out`` (ms, 6000), ``transaction_check_interval`` (ms, 60 000)
            and ``transaction_check_max`` (15).
    """

    def __init__(self, controller: BrokerContext):
        self.controller = controller
        self._task: asyncio.Task[Any] | None = None
        self._kick: asyncio.Event | None = None
        self._resolved: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._ending: dict[int, asyncio.Future[Any]] = {}  # first offset → END_TRANSACTION in progress
        self._stopping = False
        self.checks_sent = 0
        self.discarded = 0

    @property
    def store(self) -> MessageStore:
        return self.controller.started_store

    @property
    def config(self) -> Any:
        return self.controller.broker_config

    # -- the send path ----------------------------------------------------------------------

    @staticmethod
    def prepare(msg: MessageInner, props: dict[str, str]) -> None:
        """Turn ``msg`` into a half message in place (Java ``parseHalfMessageInner``).

        ``props`` are its decoded properties (the caller has them already).
        """
        props = dict(props)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties = props
        msg.properties_str = None
        msg.sys_flag = MessageSysFlag.reset_transaction_value(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
        msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
        msg.queue_id = HALF_QUEUE_ID
        msg.tags_code = None

    # -- END_TRANSACTION --------------------------------------------------------------------

    async def end_transaction(
        self, conn: Connection, cmd: RemotingCommand, header: EndTransactionRequestHeader
    ) -> RemotingCommand:
        """Commit or roll back the half message the header names (Java ``EndTransactionProcessor``)."""
        kind = header.commit_or_rollback
        who = getattr(conn, "remote_addr", "?")
        if kind == MessageSysFlag.TRANSACTION_NOT_TYPE:
            log.info(
                "transaction %s of %s (%s) still unknown%s",
                header.transaction_id or header.msg_id,
                header.producer_group,
                who,
                " after a check" if header.from_transaction_check else "",
            )
            return cmd.response(ResponseCode.SUCCESS, None, {})
        if kind not in (MessageSysFlag.TRANSACTION_COMMIT_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE):
            log.warning("END_TRANSACTION from %s with commitOrRollback=%d", who, kind)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"illegal commitOrRollback value {kind}", {})
        ext = self.store.look_message_by_offset(header.commit_log_offset)
        if ext is None:
            log.warning(
                "END_TRANSACTION from %s: no half message at CommitLog offset %d", who, header.commit_log_offset
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed", {})
        problem = self._check_prepare_message(ext, header)
        if problem is not None:
            log.warning("END_TRANSACTION from %s refused: %s", who, problem)
            return cmd.response(ResponseCode.SYSTEM_ERROR, problem, {})
        origin = _origin_offset(ext)
        while origin in self._ending:
            # Another END_TRANSACTION of the same transaction is storing its outcome (the
            # producer's answer and a check answer racing): wait for it, then decide.
            await asyncio.shield(self._ending[origin])
        if origin in self._resolved:
            # The same transaction was ended already (a late answer to a check, or the
            # producer's own answer racing a check-back copy): settle this copy too.
            log.info("transaction %s already ended; settling copy at half offset %d", header.msg_id, ext.queue_offset)
            await self._put_op(ext)
            return cmd.response(ResponseCode.SUCCESS, None, {})
        done = self._ending[origin] = asyncio.get_running_loop().create_future()
        try:
            return await self._end(cmd, header, ext, origin, kind)
        finally:
            del self._ending[origin]
            done.set_result(None)

    async def _end(self, cmd: RemotingCommand, header: Any, ext: Any, origin: int, kind: int) -> RemotingCommand:
        if kind == MessageSysFlag.TRANSACTION_COMMIT_TYPE:
            final = self._end_message_transaction(ext, header)
            schedule = getattr(self.controller, "schedule_service", None)
            refusal = rewrite_if_timer(self.controller, final)  # Java handleScheduleMessage on commit
            if refusal is not None:
                return cmd.response(refusal[0], refusal[1], {})
            if schedule is not None:
                schedule.rewrite_if_delayed(final)
            result = await self.store.put_message(final)
            if not result.is_ok:
                status = getattr(result.status, "name", str(result.status))
                log.warning("committing transaction %s into %s failed: %s", header.msg_id, final.topic, status)
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"{status} {result.remark or ''}".strip(), {})
            log.debug("transaction %s committed into %s", header.msg_id, final.topic)
        else:
            log.debug("transaction %s rolled back", header.msg_id)
        self._remember(origin)
        await self._put_op(ext)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    @staticmethod
    def _check_prepare_message(ext: Any, header: EndTransactionRequestHeader) -> str | None:
        """Java ``checkPrepareMessage`` (plus: the record must be a half message)."""
        if ext.topic != RMQ_SYS_TRANS_HALF_TOPIC:
            return f"the message at CommitLog offset {header.commit_log_offset} is not a half message"
        if ext.properties.get(MessageConst.PRODUCER_GROUP) != header.producer_group:
            return "The producer group wrong"
        if ext.queue_offset != header.tran_state_table_offset:
            return "The transaction state table offset wrong"
        if ext.commit_log_offset != header.commit_log_offset:
            return "The commit log offset wrong"
        return None

    @staticmethod
    def _end_message_transaction(ext: Any, header: EndTransactionRequestHeader) -> MessageInner:
        props = dict(ext.properties)
        topic = props.pop(MessageConst.REAL_TOPIC, None) or ext.topic
        try:
            queue_id = int(props.pop(MessageConst.REAL_QUEUE_ID, "0"))
        except ValueError:
            queue_id = 0
        props.pop(MessageConst.TRANSACTION_PREPARED, None)
        props.pop(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET, None)
        return copy_to_inner(
            ext,
            topic,
            queue_id,
            props,
            sys_flag=MessageSysFlag.reset_transaction_value(ext.sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE),
            prepared_transaction_offset=header.commit_log_offset,
        )

    async def _put_op(self, half_ext: Any) -> bool:
        """Write the op record "d" for ``half_ext`` (Java ``addRemoveTagInTransactionOp``)."""
        props = {
            MessageConst.TAGS: REMOVETAG,
            MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET: str(_origin_offset(half_ext)),
        }
        op = MessageInner(
            topic=RMQ_SYS_TRANS_OP_HALF_TOPIC,
            queue_id=half_ext.queue_id,
            body=str(half_ext.queue_offset).encode(),
            properties=props,
            born_timestamp=int(time.time() * 1000),
            born_host=(self.config.broker_ip1, self.controller.port),
        )
        result = await self.store.put_message(op)
        if not result.is_ok:
            log.error(
                "writing the op record for half offset %d failed: %s %s",
                half_ext.queue_offset,
                result.status.name,
                result.remark or "",
            )
            return False
        return True

    def _remember(self, origin: int) -> None:
        self._resolved[origin] = None
        self._resolved.move_to_end(origin)
        while len(self._resolved) > RESOLVED_MEMORY:
            self._resolved.popitem(last=False)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._kick = asyncio.Event()
        if getattr(self.controller, "is_slave", False):
            log.info("transaction check service idle: this broker is a slave")
            return
        self._prime_resolved()
        self._task = asyncio.get_running_loop().create_task(self._check_loop(), name="broker-transaction-check")
        log.info(
            "transaction check service started: timeout %d ms, interval %d ms, max %d checks",
            self.config.transaction_time_out,
            self.config.transaction_check_interval,
            self.config.transaction_check_max,
        )

    async def stop(self, grace: float = 5.0) -> None:
        """Stop checking; a check run in progress ends after its current message and
        records its progress (cancelled after ``grace`` seconds)."""
        self._stopping = True
        if self._kick is not None:
            self._kick.set()
        if self._task is not None:
            await stop_gracefully(self._task, grace, log, "transaction check")
            self._task = None

    def wakeup(self) -> None:
        """Run a check now (tests, admin)."""
        if self._kick is not None:
            self._kick.set()

    def _prime_resolved(self) -> None:
        """Re-read the newest op records so resolved transactions stay known after a restart."""
        store = self.store
        cq = store.find_consume_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, create=False)
        if cq is None:
            return
        hi = cq.get_max_offset_in_queue()
        lo = max(cq.get_min_offset_in_queue(), hi - OP_TAIL_PRIMING)
        for off in range(lo, hi):
            unit = cq.get_unit(off)
            if unit is None:
                continue
            op = store.look_message_by_offset(unit[0], unit[1])
            if op is None:
                continue
            origin = op.properties.get(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET)
            try:
                self._remember(int(origin if origin is not None else op.body))
            except ValueError:
                continue

    async def _check_loop(self) -> None:
        kick = self._kick
        assert kick is not None  # created by start() before this loop runs
        while not self._stopping:
            interval = max(self.config.transaction_check_interval, 10) / 1000.0
            await wait_event(kick, interval)
            kick.clear()
            if self._stopping:
                return
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:  # next round retries
                log.exception("transaction check failed")

    # -- the check --------------------------------------------------------------------------

    async def check(self) -> int:
        """One check run over the half queue; returns how many checks were sent."""
        store = self.store
        half_cq = store.find_consume_queue(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID, create=False)
        if half_cq is None:
            return 0
        com = self.controller.consumer_offset_manager
        cfg = self.config
        timeout = cfg.transaction_time_out
        check_max = cfg.transaction_check_max
        start = time.monotonic()
        half_lo, half_hi = half_cq.get_min_offset_in_queue(), half_cq.get_max_offset_in_queue()
        half_offset = com.query_offset(CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        half_offset = min(max(half_offset, half_lo), half_hi)

        op_cq = store.find_consume_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, create=False)
        op_offset = op_hi = 0
        remove_map: dict[int, int] = {}  # half offset → op offset
        done_op: set[int] = set()
        if op_cq is not None:
            op_lo, op_hi = op_cq.get_min_offset_in_queue(), op_cq.get_max_offset_in_queue()
            op_offset = com.query_offset(CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
            op_offset = min(max(op_offset, op_lo), op_hi)
            for off in range(op_offset, op_hi):
                unit = op_cq.get_unit(off)
                op = None if unit is None else store.look_message_by_offset(unit[0], unit[1])
                if op is None or op.tags != REMOVETAG:
                    done_op.add(off)
                    continue
                try:
                    target = int(op.body)
                except ValueError:
                    log.error("op record at offset %d has an unreadable body %r", off, op.body[:40])
                    done_op.add(off)
                    continue
                if target < half_offset:
                    done_op.add(off)
                else:
                    earlier = remove_map.get(target)
                    if earlier is not None:
                        done_op.add(earlier)  # settled twice: the first op record is done too
                    remove_map[target] = off

        sent = 0
        now_ms = int(time.time() * 1000)
        i = half_offset
        while i < half_hi and not self._stopping:
            if time.monotonic() - start > MAX_PROCESS_TIME_LIMIT:
                log.warning("transaction check stopped after %.0f s at half offset %d", MAX_PROCESS_TIME_LIMIT, i)
                break
            if i in remove_map:
                done_op.add(remove_map.pop(i))
                i += 1
                continue
            unit = half_cq.get_unit(i)
            ext = None if unit is None else store.look_message_by_offset(unit[0], unit[1])
            if ext is None:
                log.error("half message at queue offset %d cannot be read; skipped", i)
                i += 1
                continue
            if _origin_offset(ext) in self._resolved:
                i += 1
                continue
            checks = _int(ext.properties.get(MessageConst.TRANSACTION_CHECK_TIMES), 0)
            if checks >= check_max:
                await self._discard(ext, checks)
                i += 1
                continue
            age = now_ms - ext.born_timestamp
            immunity = timeout
            immunity_s = ext.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_s is not None:
                immunity = max(_int(immunity_s, 0) * 1000, timeout)
            if 0 <= age < immunity:
                break  # younger than its timeout; all that follow are younger still
            copy = await self._put_back(ext, checks + 1)
            if copy is None:
                break  # the store refused: try again next round from here
            if self._send_check(copy):
                sent += 1
            i += 1
        if i != half_offset:
            com.commit_offset("broker", CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID, i)
        new_op = op_offset
        while new_op < op_hi and new_op in done_op:
            new_op += 1
        if op_cq is not None and new_op != op_offset:
            com.commit_offset("broker", CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, new_op)
        if sent:
            log.info("transaction check: %d check(s) sent, half progress %d → %d", sent, half_offset, i)
        self.checks_sent += sent
        return sent

    async def _put_back(self, ext: Any, check_times: int) -> Any:
        """Write ``ext`` again at the end of the half queue with its check count; the copy
        (a ``StoredMessage``-like view with its new offsets) or None when the store refused."""
        props = dict(ext.properties)
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(check_times)
        props.setdefault(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET, str(ext.queue_offset))
        inner = copy_to_inner(ext, RMQ_SYS_TRANS_HALF_TOPIC, ext.queue_id, props)
        result = await self.store.put_message(inner)
        if not result.is_ok:
            log.error("putting back half message %s failed: %s %s", ext.msg_id, result.status.name, result.remark or "")
            return None
        a = result.append
        assert a is not None  # an ok put has its append result
        return _Copy(ext, props, a.wrote_offset, a.logics_offset, a.msg_id, a.store_timestamp)

    def _send_check(self, copy: _Copy) -> bool:
        """CHECK_TRANSACTION_STATE (39, oneway) to a producer of the message's group."""
        group = copy.properties.get(MessageConst.PRODUCER_GROUP)
        conn = self.controller.producer_manager.get_available_channel(group) if group else None
        if conn is None:
            log.warning(
                "cannot check transaction %s: no producer of group %s is connected",
                copy.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                group,
            )
            return False
        uniq = copy.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commit_log_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=copy.msg_id,
        )
        try:
            conn.invoke_oneway(
                RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header, self._check_body(copy))
            )
        except Exception as e:  # noqa: BLE001 - the next round checks again
            log.warning("sending CHECK_TRANSACTION_STATE to %s failed: %s", getattr(conn, "remote_addr", "?"), e)
            return False
        return True

    def _check_body(self, copy: _Copy) -> bytes:
        """The half message as one record with its real topic and queue (Java sends
        ``MessageDecoder.encode(msgExt)`` after ``setTopic(REAL_TOPIC)``)."""
        ext = copy.ext
        props = copy.properties
        topic_b = (props.get(MessageConst.REAL_TOPIC) or ext.topic).encode()
        queue_id = _int(props.get(MessageConst.REAL_QUEUE_ID), ext.queue_id)
        props_b = properties_to_string(props, trailing_separator=False).encode()
        buf = bytearray(_store.record_size(len(ext.body), len(topic_b), len(props_b)))
        _store.encode_record(
            buf,
            0,
            ext.body,
            topic_b,
            props_b,
            queue_id,
            ext.flag,
            copy.queue_offset,
            copy.commit_log_offset,
            ext.sys_flag,
            ext.born_timestamp,
            host_bytes(ext.born_host),
            copy.store_timestamp,
            host_bytes(ext.store_host),
            ext.reconsume_times,
            ext.prepared_transaction_offset,
        )
        return bytes(buf)

    async def _discard(self, ext: Any, checks: int) -> None:
        """Give up after ``transactionCheckMax`` checks: roll back (op record) and keep a copy
        in TRANS_CHECK_MAX_TIME_TOPIC for inspection (Java ``resolveDiscardMsg``)."""
        log.warning(
            "transaction %s of group %s checked %d times without an answer; rolled back (kept in %s)",
            ext.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            ext.properties.get(MessageConst.PRODUCER_GROUP),
            checks,
            TRANS_CHECK_MAX_TIME_TOPIC,
        )
        tcm = self.controller.topic_config_manager
        _, created = tcm.create_topic_in_send_message_back_method(
            TRANS_CHECK_MAX_TIME_TOPIC, 1, PermName.PERM_READ | PermName.PERM_WRITE, 0
        )
        if created:
            self.controller.register_broker_soon((TRANS_CHECK_MAX_TIME_TOPIC,))
        keep = copy_to_inner(ext, TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(ext.properties))
        result = await self.store.put_message(keep)
        if not result.is_ok:
            log.error("keeping discarded half message %s failed: %s", ext.msg_id, result.status.name)
        self._remember(_origin_offset(ext))
        await self._put_op(ext)
        self.discarded += 1


class _Copy:
    """A half message just written again by the checker: the original record's fields with
    the copy's properties and offsets."""

    __slots__ = ("ext", "properties", "commit_log_offset", "queue_offset", "msg_id", "store_timestamp")

    def __init__(
        self, ext: Any, properties: Any, commit_log_offset: Any, queue_offset: Any, msg_id: Any, store_timestamp: Any
    ) -> None:
        self.ext = ext
        self.properties = properties
        self.commit_log_offset = commit_log_offset
        self.queue_offset = queue_offset
        self.msg_id = msg_id
        self.store_timestamp = store_timestamp


def _origin_offset(ext: Any) -> int:
    return _int(ext.properties.get(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET), ext.queue_offset)


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
