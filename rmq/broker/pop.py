"""POP consumption, the broker side (Java 5.3.3 ``PopMessageProcessor``, ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``, ``NotificationProcessor``, ``PollingInfoProcessor``,
``PopReviveService``, ``ConsumerOrderInfoManager``). See docs/design.md "POP consumption".

The broker assigns messages: a POP reads up to 32 messages from the group's queues (its own
offsets, shared with PULL consumers of the group: Java's ``ConsumerOffsetManager``), writes one
checkpoint (Java ``PopCheckPoint``, tag ``ck``) per queue read into the revive topic
``rmq_sys_REVIVE_LOG_<cluster>`` and advances the group's offset past them. An ACK writes an
``ack`` record (``bAck`` for BATCH_ACK) into the same revive queue. The revive service reads the
revive queues with its own offsets (stored as the consumer offsets of ``CID_RMQ_SYS_REVIVE_GROUP``,
so they are persisted in one snapshot with the groups' offsets), pairs acks with checkpoints, and
when a checkpoint's invisible time has passed re-puts every message of it not acked into the pop
retry topic ``%RETRY%<group>_<topic>`` (Java ``KeyBuilder.buildPopRetryTopicV1``) with reconsume
times + 1, or into ``%DLQ%<group>`` once the group's ``retryMaxTimes`` is reached. After reviving
a checkpoint it writes a ``bAck`` of the revived offsets, so a replay of the revive log after a
crash does not revive them twice. Everything is a message of the store: it replicates and
survives ``kill -9`` (on start the replay also moves each group's offset past every checkpoint it
reads, since the offsets table on disk may be older than the log).

Orderly POP (``order=true``): no checkpoint; the queue is blocked for the group while a batch is
in flight (Java ``ConsumerOrderInfoManager``), the offset advances on ack, and a batch not acked
within its invisible time is popped again with its count + 1 (``orderCountInfo``).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmq import _store
from rmq.broker.filter import ConsumerFilterManager, is_tag_type, unsupported_remark
from rmq.broker.long_polling import PullRequestHoldService
from rmq.broker.managers.config_store import ConfigManager
from rmq.broker.processors.common import FAQ, bad_request
from rmq.common.constants import MixAll, PermName
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.message import MessageConst, properties_to_string, string_to_properties
from rmq.common.sql92 import SelectorError
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.pop import (
    INIT_MODE_MAX,
    INIT_MODE_MIN,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
)
from rmq.protocol.requests.pop import (
    POP_ORDER_REVIVE_QUEUE,
    BatchAck,
    ExtraInfo,
    build_msg_offset_info,
    build_order_count_info,
    build_start_offset_info,
    decode_batch_ack_body,
    pop_retry_topic,
    real_topic,
    retry_mark,
    revive_topic,
)
from rmq.store import GetMessageResult, MessageFilter, MessageInner, StoredMessage

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker.pop")

#: Java PopAckConstants.REVIVE_GROUP: the group whose offsets are the revive progress.
REVIVE_GROUP = MixAll.CID_RMQ_SYS_PREFIX + "REVIVE_GROUP"
CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"  # Java PopAckConstants
#: Java PopMessageProcessor refuses more than 32 messages per pop (a checkpoint's bitmap is an int).
MAX_POP_MSG_NUMS = 32
#: Revive records scanned ahead for acks while the reader is full (see PopService._read_queue).
REVIVE_LOOKAHEAD = 4096
_RW = PermName.PERM_READ | PermName.PERM_WRITE
_HOST = ("127.0.0.1", 0)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _queue_offsets(result: GetMessageResult, offset: int) -> list[int]:
    """The queue offset of each record of a get_message result read from ``offset``
    (``QUEUEOFFSET`` at byte 20 of a CommitLog record, Java ``MessageDecoder``), without
    decoding the records. When every unit read was returned (no filter dropped one) they are
    the offsets read, no record is walked."""
    buffers = result.buffers
    from_bytes = int.from_bytes
    if not buffers:
        return []
    count = result.message_count
    if count == result.next_begin_offset - offset and from_bytes(buffers[0][20:28], "big") == offset:
        return list(range(offset, offset + count))
    offs: list[int] = []
    for buf in buffers:
        pos, end = 0, len(buf)
        while pos < end:
            offs.append(from_bytes(buf[pos + 20 : pos + 28], "big"))
            pos += from_bytes(buf[pos : pos + 4], "big")
    return offs


# --------------------------------------------------------------------------- revive records


@dataclass(slots=True)
class CheckPoint:
    """Java ``PopCheckPoint``: the messages of one queue handed out by one pop."""

    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    broker_name: str
    diffs: list[int]  # queue offset - start_offset of each message (Java queueOffsetDiff)
    bitmap: int = 0  # acked messages (Java keeps this on the in-memory copy)
    revive_offset: int = -1  # where the record sits in its revive queue
    done: bool = False

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def key(self) -> tuple[str, str, int, int, int]:
        return (self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time)

    def to_json(self) -> dict[str, Any]:
        # fastjson's field names of Java PopCheckPoint (sorted, as fastjson writes them)
        return {
            "bm": 0,
            "bn": self.broker_name,
            "c": self.cid,
            "d": self.diffs,
            "it": self.invisible_time,
            "n": self.num,
            "pt": self.pop_time,
            "q": self.queue_id,
            "so": self.start_offset,
            "t": self.topic,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CheckPoint:
        diffs = [int(x) for x in (d.get("d") or [])]
        num = int(d["n"])
        if not diffs:
            diffs = list(range(num))
        return cls(
            int(d["so"]),
            int(d["pt"]),
            int(d["it"]),
            num,
            int(d["q"]),
            str(d["t"]),
            str(d["c"]),
            str(d.get("bn") or ""),
            diffs,
        )

    def unacked_offsets(self) -> list[int]:
        return [self.start_offset + d for i, d in enumerate(self.diffs) if not self.bitmap >> i & 1]

    def ack(self, offset: int) -> None:
        try:
            i = self.diffs.index(offset - self.start_offset)
        except ValueError:
            return
        self.bitmap |= 1 << i

    @property
    def all_acked(self) -> bool:
        return self.bitmap == (1 << len(self.diffs)) - 1


def _ack_json(
    group: str, topic: str, queue_id: int, start_offset: int, pop_time: int, broker_name: str, offsets: list[int]
) -> tuple[str, bytes]:
    """An ``ack`` (Java ``AckMsg``) or ``bAck`` (``BatchAckMsg``) record: (tag, body)."""
    d: dict[str, Any] = {
        "bn": broker_name,
        "c": group,
        "pt": pop_time,
        "q": queue_id,
        "so": start_offset,
        "t": topic,
    }
    if len(offsets) == 1:
        d["ao"] = offsets[0]
        return ACK_TAG, json.dumps(d, separators=(",", ":")).encode()
    d["aol"] = offsets
    d["ao"] = -1
    return BATCH_ACK_TAG, json.dumps(d, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- orderly POP


@dataclass(slots=True)
class _OrderInfo:
    """Java ``ConsumerOrderInfoManager.OrderInfo``: the batch in flight on one queue."""

    pop_time: int
    invisible_time: int
    offsets: list[int]
    counts: dict[int, int] = field(default_factory=dict)  # queue offset -> times delivered before
    committed: set[int] = field(default_factory=set)

    def blocked(self, now: int) -> bool:
        return len(self.committed) < len(self.offsets) and now < self.pop_time + self.invisible_time


class ConsumerOrderInfoManager(ConfigManager):
    """The in-flight batches of orderly POP per ``topic@group`` and queue, persisted
    (``consumerOrderInfo.msgpack``) as Java persists ``consumerOrderInfo.json``."""

    file_name = "consumerOrderInfo.msgpack"

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self.table: dict[str, dict[int, _OrderInfo]] = {}

    def encode(self) -> object:
        return {
            k: {
                q: [o.pop_time, o.invisible_time, o.offsets, list(o.counts.items()), sorted(o.committed)]
                for q, o in v.items()
            }
            for k, v in self.table.items()
        }

    def decode(self, obj: Any) -> None:
        for k, v in obj.items():
            self.table[k] = {
                int(q): _OrderInfo(int(a[0]), int(a[1]), [int(x) for x in a[2]], dict(a[3]), set(a[4]))
                for q, a in v.items()
            }

    def get(self, topic: str, group: str, queue_id: int) -> _OrderInfo | None:
        return self.table.get(f"{topic}@{group}", {}).get(queue_id)

    def put(self, topic: str, group: str, queue_id: int, info: _OrderInfo) -> None:
        self.table.setdefault(f"{topic}@{group}", {})[queue_id] = info
        self.mark_dirty()


# --------------------------------------------------------------------------- the service


class _HoldAdapter:
    """What :class:`PullRequestHoldService` calls to re-run a held request: the POP (or
    NOTIFICATION) is re-run as a task that answers itself."""

    def __init__(self, service: PopService) -> None:
        self.service = service

    def process(self, conn: Connection, cmd: RemotingCommand, allow_suspend: bool, known: Any = None) -> None:
        self.service.spawn(self.service.rerun(conn, cmd))
        return None

    def write_response(self, conn: Connection, response: RemotingCommand) -> None:
        conn.send_response(response)


class _Watched:
    """The keys the store's arrival listener tests: a held POP of any queue waits under
    ``(topic, -1)`` and is woken by an arrival in any queue of the topic or its pop retry topic."""

    def __init__(self, service: PopService) -> None:
        self.service = service

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple):
            return False
        if key[0] == self.service.revive_topic:
            return True
        table = self.service.hold.pull_request_table
        if not table:
            return False
        return key in table or (key[0], -1) in table or self.service.origin_of(key[0]) is not None


class _StoreView:
    """The hold service's periodic check compares max offsets: a ``-1`` key has none."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return -1 if queue_id < 0 else self.store.get_max_offset_in_queue(topic, queue_id)


#: The POP codes that write the revive log, served by a master only (NOTIFICATION and
#: POLLING_INFO only read, and a slave answers them).
_MASTER_ONLY = frozenset(
    {
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.BATCH_ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
    }
)
SLAVE_POP_REMARK = (
    "this broker is a slave: POP, ACK and CHANGE_INVISIBLE go to the master of the broker set (brokerId 0)"
)


class PopService:
    """POP, ACK, CHANGE_INVISIBLE, NOTIFICATION, POLLING_INFO and the revive service."""

    CODES = (
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.BATCH_ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        RequestCode.NOTIFICATION,
        RequestCode.POLLING_INFO,
    )

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        # this broker's own rate-limited lines (a module-wide limiter would let one broker's line
        # hide another's where several run in one process, as in the tests)
        self._rlog = RateLimitedLog(log)
        bc = ctx.broker_config
        self.bc = bc
        self.revive_topic = revive_topic(bc.broker_cluster_name)
        self.order_info = ConsumerOrderInfoManager(ctx.config_dir)
        #: SQL92 filters are compiled by the PULL path's manager (set when the processors are
        #: registered: one compiled-filter cache and one compile bound for both).
        self.filter_manager: ConsumerFilterManager | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._filters: dict[str, MessageFilter] = {}
        self._queue_locks: set[tuple[str, str, int]] = set()  # (topic, group, queue) being popped
        self._ck_seq = 0
        # revive state per revive queue
        self._read_offset: dict[int, int] = {}
        self._pending: dict[int, dict[tuple[Any, ...], CheckPoint]] = {}
        self._heap: list[tuple[int, int, int, CheckPoint]] = []
        self._pending_count = 0
        self._heap_seq = 0
        self._wake: asyncio.Event | None = None
        self._revive_task: asyncio.Task[None] | None = None
        self._retry_origin: dict[str, str] = {}  # pop retry topic -> topic, for wake-ups
        self.hold: PullRequestHoldService = None  # type: ignore[assignment]  # set in start()
        self.revived = 0  # messages re-put by the revive service (stats, tests)
        # acks waiting for their revive record (see _write_ack): (revive qid, checkpoint key,
        # offset, deliver time, future of the write's outcome)
        self._ack_queue: list[tuple[int, tuple[str, str, int, int, int, str], int, int, asyncio.Future[bool]]] = []
        self._ack_writer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ life cycle

    @property
    def store(self) -> MessageStore:
        return self.ctx.started_store

    def load(self) -> None:
        self.order_info.load()

    def start(self, revive: bool = True) -> None:
        """Create the revive topic, start the hold service and (a master: ``revive``) the revive
        service."""
        c = self.ctx
        _tc, created = c.topic_config_manager.create_topic_in_send_message_back_method(
            self.revive_topic, self.bc.revive_queue_num, _RW, 0
        )
        c.topic_config_manager.system_topics.add(self.revive_topic)
        if created:
            c.register_broker_soon((self.revive_topic,))
        self.hold = PullRequestHoldService(
            _HoldAdapter(self),
            _StoreView(self.store),
            True,
            max_per_connection=self.bc.pop_polling_size,
            max_total=self.bc.max_pop_polling_size,
            limit_names="popPollingSize / maxPopPollingSize",
            what="POP",
        )
        self.hold.start()
        self.store.add_arrival_listener(self._on_arrival, watched=_Watched(self))
        self._wake = asyncio.Event()
        if revive:
            self.start_revive()

    def start_revive(self) -> None:
        """Start the revive service (a master's; also a broker made master at run time in
        controller mode). Replays the revive log first: a POP must not hand out again what a
        checkpoint newer than the offsets on disk holds (after kill -9)."""
        if self._revive_task is not None:
            return
        self._init_revive()
        self._revive_task = asyncio.get_running_loop().create_task(self._revive_loop(), name="pop-revive")

    def stop_revive(self) -> None:
        """Stop the revive service (a master made a slave at run time: the new master revives)."""
        task, self._revive_task = self._revive_task, None
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        if self._revive_task is not None:
            self._revive_task.cancel()
            try:
                await self._revive_task
            except asyncio.CancelledError:
                pass
            self._revive_task = None
        if self.hold is not None:
            await self.hold.stop()
        if self._ack_writer is not None:  # the acks being written are answered (bounded)
            await asyncio.wait([self._ack_writer], timeout=5.0)
        # the held requests just answered are re-run by tasks: let them answer (bounded)
        if self._tasks:
            _done, late = await asyncio.wait(list(self._tasks), timeout=5.0)
            for t in late:
                t.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)

    def spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def on_connection_closed(self, conn: Any) -> None:
        if self.hold is not None:
            self.hold.on_connection_closed(conn)

    def origin_of(self, topic: str) -> str | None:
        return self._retry_origin.get(topic)

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None) -> None:
        hold = self.hold
        origin = self._retry_origin.get(topic)
        hold.notify_message_arriving(topic, queue_id, max_offset, tags_code)
        hold.notify_message_arriving(topic, -1, max_offset, None)
        if origin is not None:
            hold.notify_message_arriving(origin, -1, max_offset, None)
        if topic == self.revive_topic and self._wake is not None:
            self._wake.set()

    # ------------------------------------------------------------------ dispatch

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        code = cmd.code
        if code in _MASTER_ONLY and self.ctx.is_slave:
            # Java 5 clients send these to the master only (PullAPIWrapper.popAsync asks for
            # MixAll.MASTER_ID; the proxy routes to the master), and a slave neither writes
            # the revive log nor runs PopReviveService: refused at once, not answered with an
            # empty POLLING_TIMEOUT after a checkpoint write the slave store must fail
            self._rlog.warning("pop-on-slave", "refusing %s from %s: this broker is a slave", code, conn.remote_addr)
            return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_POP_REMARK, {})
        try:
            if code == RequestCode.POP_MESSAGE:
                return await self._pop(conn, cmd, allow_suspend=True)
            if code == RequestCode.ACK_MESSAGE:
                return await self._ack(conn, cmd)
            if code == RequestCode.BATCH_ACK_MESSAGE:
                return await self._batch_ack(conn, cmd)
            if code == RequestCode.CHANGE_MESSAGE_INVISIBLETIME:
                return await self._change_invisible(conn, cmd)
            if code == RequestCode.NOTIFICATION:
                return self._notification(conn, cmd, allow_suspend=True)
            if code == RequestCode.POLLING_INFO:
                return self._polling_info(conn, cmd)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request type {code} not supported", {})

    async def rerun(self, conn: Connection, cmd: RemotingCommand) -> None:
        """A held POP or NOTIFICATION woken (arrival, expiry, shutdown): run it once more."""
        if getattr(conn, "closed", False):
            return
        try:
            if cmd.code == RequestCode.POP_MESSAGE:
                resp = await self._pop(conn, cmd, allow_suspend=False)
            else:
                resp = self._notification(conn, cmd, allow_suspend=False)
        except Exception as e:  # noqa: BLE001 - the client must get an answer
            self._rlog.error("pop-rerun", "re-running a held POP failed", exc_info=True)
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, clip_remark(e), {})
        if resp is not None and not getattr(conn, "closed", False):
            conn.send_response(resp)

    # ------------------------------------------------------------------ common checks

    def _check_group_topic(
        self, cmd: RemotingCommand, group: str, topic: str, queue_id: int, *, any_queue: bool
    ) -> tuple[Any, RemotingCommand | None]:
        c = self.ctx
        if not PermName.is_readable(self.bc.broker_permission):
            return None, cmd.response(
                ResponseCode.NO_PERMISSION, f"the broker[{self.bc.broker_ip1}] peeking message is forbidden", {}
            )
        tc = c.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return None, cmd.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{clip_remark(topic)}] not exist, apply first please!" + FAQ, {}
            )
        if not PermName.is_readable(tc.perm):
            return None, cmd.response(
                ResponseCode.NO_PERMISSION, f"the topic[{clip_remark(topic)}] peeking message is forbidden", {}
            )
        if not (any_queue and queue_id == -1) and not 0 <= queue_id < tc.read_queue_nums:
            return None, cmd.response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{clip_remark(topic)}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
                {},
            )
        sgc = c.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return None, cmd.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{clip_remark(group)}] does not exist" + FAQ,
                {},
            )
        if not sgc.consume_enable:
            return None, cmd.response(
                ResponseCode.NO_PERMISSION, "subscription group no permission, " + clip_remark(group), {}
            )
        return (tc, sgc), None

    async def _message_filter(
        self, conn: Connection, exp_type: str | None, exp: str | None
    ) -> MessageFilter | RemotingCommandError:
        exp_type = exp_type or "TAG"
        if is_tag_type(exp_type):
            key = exp or "*"
            f = self._filters.get(key)
            if f is None:
                try:
                    f = MessageFilter.from_expression(key)
                except Exception as e:  # noqa: BLE001 - the client's expression
                    return RemotingCommandError(f"parse the consumer's subscription failed: {clip_remark(e)}")
                if len(self._filters) > 4096:
                    self._filters.clear()
                self._filters[key] = f
            return f
        if not self.bc.enable_property_filter:
            return RemotingCommandError(unsupported_remark(exp_type))
        mgr = self.filter_manager
        if mgr is None:
            return RemotingCommandError("the broker is not ready for SQL92 filters yet")
        try:
            found = mgr.lookup(exp_type, exp)
            if found is None:
                found = await ConsumerFilterManager.wait(mgr.start(conn, exp_type, exp))
        except SelectorError as e:
            return RemotingCommandError(f"parse the consumer's subscription failed: {clip_remark(e)}")
        except Exception as e:  # noqa: BLE001 - CompileBusy and the like
            return RemotingCommandError(clip_remark(e))
        return found

    # ------------------------------------------------------------------ POP_MESSAGE

    async def _pop(self, conn: Connection, cmd: RemotingCommand, *, allow_suspend: bool) -> RemotingCommand | None:
        h = PopMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        bc = self.bc
        if not 0 < h.max_msg_nums <= MAX_POP_MSG_NUMS:
            return cmd.response(
                ResponseCode.INVALID_PARAMETER,
                f"the max message num of pop request must be 1..{MAX_POP_MSG_NUMS}, not {h.max_msg_nums}",
                {},
            )
        if not bc.pop_min_invisible_time <= h.invisible_time <= bc.pop_max_invisible_time:
            return cmd.response(
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime must be {bc.pop_min_invisible_time}..{bc.pop_max_invisible_time} ms, "
                f"not {h.invisible_time}",
                {},
            )
        if not 0 <= h.poll_time <= bc.pop_max_poll_time:
            return cmd.response(
                ResponseCode.INVALID_PARAMETER, f"pollTime must be 0..{bc.pop_max_poll_time} ms, not {h.poll_time}", {}
            )
        if h.init_mode not in (INIT_MODE_MIN, INIT_MODE_MAX):
            return cmd.response(ResponseCode.INVALID_PARAMETER, f"initMode must be 0 or 1, not {h.init_mode}", {})
        checked, refusal = self._check_group_topic(cmd, h.consumer_group, h.topic, h.queue_id, any_queue=True)
        if refusal is not None:
            return refusal
        tc, _sgc = checked
        if not h.order and self._pending_count >= bc.pop_ck_max_num:
            self._rlog.warning(
                "pop-ck-full",
                "refusing a POP of %s for %s: %d checkpoints in flight (popCkMaxNum %d)",
                clip(h.topic),
                clip(h.consumer_group),
                self._pending_count,
                bc.pop_ck_max_num,
            )
            return cmd.response(
                ResponseCode.POLLING_FULL, f"too many messages in flight (popCkMaxNum {bc.pop_ck_max_num})", {}
            )
        mf = await self._message_filter(conn, h.exp_type, h.exp)
        if isinstance(mf, RemotingCommandError):
            return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(mf), {})

        pop_time = _now_ms()
        revive_qid = POP_ORDER_REVIVE_QUEUE if h.order else self._next_revive_qid()
        retry = pop_retry_topic(h.topic, h.consumer_group)
        self._retry_origin.setdefault(retry, h.topic)
        if len(self._retry_origin) > 100_000:
            self._retry_origin.clear()
        retry_tc = self.ctx.topic_config_manager.select_topic_config(retry)
        n = h.max_msg_nums
        bodies: list[bytes] = []
        starts: list[tuple[str, int, int]] = []
        msg_offsets: list[tuple[str, int, list[int]]] = []
        counts: list[tuple[str, int, int]] = []
        rest = 0
        # messages popped so far: a queue's records may come as one buffer, so not len(bodies)
        popped = 0
        # Java pops the retry topic first with popRetryProbability percent, else after.
        order: list[tuple[str, Any]] = [(h.topic, tc)]
        if retry_tc is not None and not h.order:
            if random.randrange(100) < bc.pop_retry_probability:
                order.insert(0, (retry, retry_tc))
            else:
                order.append((retry, retry_tc))
        for topic, topic_tc in order:
            if h.queue_id >= 0 and topic == h.topic:
                qids = [h.queue_id]
            else:
                qn = topic_tc.read_queue_nums
                first = random.randrange(qn) if qn else 0
                qids = [(first + i) % qn for i in range(qn)]
            for qid in qids:
                if popped >= n:
                    rest += max(0, self.store.get_max_offset_in_queue(topic, qid) - self._offset(h, topic, qid))
                    continue
                got = await self._pop_queue(h, topic, qid, n - popped, mf, pop_time, revive_qid)
                if got is None:
                    continue
                recs, offs, start, count, left = got
                rest += left
                popped += len(offs)
                if recs:
                    bodies.extend(recs)
                    starts.append((topic, qid, start))
                    msg_offsets.append((topic, qid, offs))
                    if h.order:
                        counts.append((topic, qid, count))
        ext = {
            "popTime": str(pop_time),
            "invisibleTime": str(h.invisible_time),
            "reviveQid": str(revive_qid),
            "restNum": str(rest),
        }
        if bodies:
            ext["startOffsetInfo"] = build_start_offset_info(starts)
            ext["msgOffsetInfo"] = build_msg_offset_info(msg_offsets)
            if counts:
                ext["orderCountInfo"] = build_order_count_info(counts)
            self.ctx.stats.on_pull(h.consumer_group, h.topic, len(bodies), sum(len(b) for b in bodies))
            return cmd.response(ResponseCode.SUCCESS, "FOUND", ext, b"".join(bodies))
        if allow_suspend and h.poll_time > 0:
            if self.hold.suspend_pull_request(conn, cmd, h.topic, h.queue_id, -1, h.poll_time, None):
                return None
            return cmd.response(ResponseCode.POLLING_FULL, "the broker holds too many POP requests", ext)
        return cmd.response(ResponseCode.POLLING_TIMEOUT, "no new message", ext)

    def _next_revive_qid(self) -> int:
        self._ck_seq += 1
        return self._ck_seq % self.bc.revive_queue_num

    def _offset(self, h: PopMessageRequestHeader, topic: str, qid: int) -> int:
        off = self.ctx.consumer_offset_manager.query_offset(h.consumer_group, topic, qid)
        if off >= 0:
            return off
        # Java PopMessageProcessor.getInitOffset: retry topics and MIN from the first message;
        # MAX from the first message too while the queue starts at 0 and that message is still
        # in memory (initPopOffsetByCheckMsgInMem, Java's default), else from the last one. The
        # offset is committed (Java's init=true), so the group's position holds between POPs.
        store = self.store
        if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX) or h.init_mode == INIT_MODE_MIN:
            off = max(0, store.get_min_offset_in_queue(topic, qid))
        elif store.get_min_offset_in_queue(topic, qid) <= 0 and self._first_in_memory(topic, qid):
            off = 0
        else:
            off = max(0, store.get_max_offset_in_queue(topic, qid) - 1)
        self.ctx.consumer_offset_manager.commit_offset("getPopOffset", h.consumer_group, topic, qid, off)
        return off

    def _first_in_memory(self, topic: str, qid: int) -> bool:
        """Java ``checkInMemByConsumeOffset(topic, qid, 0, 1)``: the queue's first message lies
        within the share of the CommitLog tail kept in memory (``accessMessageInMemoryMaxRatio``)."""
        store = self.store
        if store.get_max_offset_in_queue(topic, qid) <= 0:
            return True  # nothing yet: the first message will be the newest
        phy = store.get_commit_log_offset_in_queue(topic, qid, 0)
        if phy < 0:
            return False
        cfg = store.config
        memory = int(cfg.total_physical_memory * (cfg.access_message_in_memory_max_ratio / 100.0))
        return store.max_phy_offset - phy < memory

    async def _pop_queue(
        self,
        h: PopMessageRequestHeader,
        topic: str,
        qid: int,
        n: int,
        mf: MessageFilter,
        pop_time: int,
        revive_qid: int,
    ) -> tuple[list[bytes], list[int], int, int, int] | None:
        """Read up to ``n`` messages of one queue: (records with POP_CK, their offsets, start
        offset, order count, messages left), or None when the queue is blocked (orderly) or
        being popped by another request (Java ``QueueLockManager.tryLock``: skipped, not
        waited for; between reading the offset and committing it the checkpoint is written)."""
        key = (topic, h.consumer_group, qid)
        if key in self._queue_locks:
            return None
        self._queue_locks.add(key)
        try:
            return await self._pop_locked_queue(h, topic, qid, n, mf, pop_time, revive_qid)
        finally:
            self._queue_locks.discard(key)

    async def _pop_locked_queue(
        self,
        h: PopMessageRequestHeader,
        topic: str,
        qid: int,
        n: int,
        mf: MessageFilter,
        pop_time: int,
        revive_qid: int,
    ) -> tuple[list[bytes], list[int], int, int, int] | None:
        c = self.ctx
        group = h.consumer_group
        offset = self._offset(h, topic, qid)
        count = 0
        if h.order:
            info = self.order_info.get(topic, group, qid)
            now = _now_ms()
            if info is not None and info.blocked(now):
                return None
            if info is not None and offset in info.counts and len(info.committed) < len(info.offsets):
                count = 1 + max(info.counts.values())
        result = self.store.get_message(group, topic, qid, offset, n, mf)
        try:
            next_offset = result.next_begin_offset
            max_offset = result.max_offset
            out: list[bytes] = []
            if topic == h.topic:
                # Java PopMessageProcessor passes a topic's records as stored: the client builds
                # each handle from startOffsetInfo/msgOffsetInfo (processPopResponse). One copy
                # of each merged buffer; only the queue offsets are read.
                offs = _queue_offsets(result, offset)
                out = [bytes(b) for b in result.buffers]
            else:
                # a retry topic's records are re-encoded under the topic popped, with the handle
                # in POP_CK (Java recodes retry messages the same way)
                decoded = [_store.decode_record(rec) for rec in result.iter_records()]
                offs = [d["queue_offset"] for d in decoded]
                start = offs[0] if offs else offset
                out = [self._with_handle(d, h, topic, start, pop_time, revive_qid) for d in decoded]
            start = offs[0] if offs else offset
        finally:
            result.release()
        left = max(0, max_offset - next_offset)
        if not offs:
            # nothing matched the filter: move past what was read (Java commits nextBeginOffset)
            if next_offset > offset and not h.order:
                c.consumer_offset_manager.commit_offset("pop", group, topic, qid, next_offset)
            return [], [], start, count, left
        if h.order:
            counts = {o: count for o in offs}
            self.order_info.put(topic, group, qid, _OrderInfo(pop_time, h.invisible_time, offs, counts))
            return out, offs, start, count, left
        ck = CheckPoint(
            start,
            pop_time,
            h.invisible_time,
            len(offs),
            qid,
            topic,
            group,
            self.bc.broker_name,
            [o - start for o in offs],
        )
        ok = await self._put_revive(
            revive_qid, CK_TAG, json.dumps(ck.to_json(), separators=(",", ":")).encode(), ck.revive_time
        )
        if not ok:
            return None
        c.consumer_offset_manager.commit_offset("pop", group, topic, qid, next_offset)
        return out, offs, start, count, left

    def _with_handle(
        self,
        d: dict[str, Any],
        h: PopMessageRequestHeader,
        topic: str,
        start: int,
        pop_time: int,
        revive_qid: int,
    ) -> bytes:
        """The record re-encoded with its ack handle in ``POP_CK`` (and, from a retry topic,
        under the topic popped, as Java's PopMessageProcessor recodes retry messages)."""
        qoff = d["queue_offset"]
        props = string_to_properties(d["properties"])
        handle = ExtraInfo.build(
            start, pop_time, h.invisible_time, revive_qid, topic, self.bc.broker_name, d["queue_id"], qoff
        )
        props[MessageConst.POP_CK] = str(handle)
        props.setdefault(MessageConst.FIRST_POP_TIME, str(pop_time))
        props_b = properties_to_string(props, trailing_separator=False).encode()
        topic_b = h.topic.encode()
        body = d["body"]
        buf = bytearray(_store.record_size(len(body), len(topic_b), len(props_b)))
        _store.encode_record(
            buf,
            0,
            body,
            topic_b,
            props_b,
            d["queue_id"],
            d["flag"],
            qoff,
            d["commit_log_offset"],
            d["sys_flag"],
            d["born_timestamp"],
            d["born_host"],
            d["store_timestamp"],
            d["store_host"],
            d["reconsume_times"],
            d["prepared_transaction_offset"],
        )
        return bytes(buf)

    async def _put_revive(self, qid: int, tag: str, body: bytes, deliver_ms: int) -> bool:
        msg = MessageInner(
            topic=self.revive_topic,
            queue_id=qid,
            body=body,
            properties={MessageConst.TAGS: tag},
            born_timestamp=_now_ms(),
            born_host=_HOST,
        )
        try:
            res = await self.store.put_message(msg)
        except Exception:  # noqa: BLE001 - the request fails, the client retries
            self._rlog.error(
                "pop-revive-put", "writing a %s record into %s failed", tag, self.revive_topic, exc_info=True
            )
            return False
        if not res.is_ok:
            self._rlog.warning("pop-revive-put-status", "writing a %s record failed: %s", tag, res.status.name)
            return False
        return True

    # ------------------------------------------------------------------ ACK

    async def _write_ack(
        self,
        revive_qid: int,
        group: str,
        topic: str,
        queue_id: int,
        ck_offset: int,
        pop_time: int,
        bn: str,
        offset: int,
        deliver_ms: int,
    ) -> bool:
        """The ack record of one message, written with the others in flight (a group commit):
        the acks that arrive while a write is under way go together into the next one, one
        ``ack``/``bAck`` record per checkpoint (Java's PopBufferMergeService merges acks into
        its checkpoints in memory instead; here every ack stays in the log before it is
        answered, so a replay after ``kill -9`` never revives an acked message). True once
        the record is in the store."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._ack_queue.append((revive_qid, (group, topic, queue_id, ck_offset, pop_time, bn), offset, deliver_ms, fut))
        if self._ack_writer is None:
            self._ack_writer = asyncio.get_running_loop().create_task(self._ack_write_loop(), name="pop-ack-writer")
        return await fut

    async def _ack_write_loop(self) -> None:
        batch: list[tuple[int, tuple[str, str, int, int, int, str], int, int, asyncio.Future[bool]]] = []
        try:
            while self._ack_queue:
                batch, self._ack_queue = self._ack_queue, []
                merged: dict[tuple[int, tuple[str, str, int, int, int, str]], tuple[list[int], int]] = {}
                for rq, key, offset, deliver_ms, _fut in batch:
                    offsets = merged.setdefault((rq, key), ([], deliver_ms))[0]
                    if offset not in offsets:
                        offsets.append(offset)
                written: dict[tuple[int, tuple[str, str, int, int, int, str]], bool] = {}
                for (rq, key), (offsets, deliver_ms) in merged.items():
                    group, topic, queue_id, ck_offset, pop_time, bn = key
                    tag, body = _ack_json(group, topic, queue_id, ck_offset, pop_time, bn, offsets)
                    written[(rq, key)] = await self._put_revive(rq, tag, body, deliver_ms)
                for rq, key, _offset, _deliver_ms, fut in batch:
                    if not fut.done():
                        fut.set_result(written[(rq, key)])
                batch = []
        finally:
            self._ack_writer = None
            # cancelled (shutdown): what was not written is refused, the client acks again
            for *_, fut in batch + self._ack_queue:
                if not fut.done():
                    fut.set_result(False)
            self._ack_queue = []

    def _ack_checks(
        self, cmd: RemotingCommand, group: str, topic: str, queue_id: int, offset: int
    ) -> RemotingCommand | None:
        tc = self.ctx.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{clip_remark(topic)}] not exist, apply first please!" + FAQ, {}
            )
        if not 0 <= queue_id < tc.read_queue_nums:
            return cmd.response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{clip_remark(topic)}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
                {},
            )
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        hi = self.store.get_max_offset_in_queue(topic, queue_id)
        if not lo <= offset <= hi:
            return cmd.response(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{clip_remark(topic)}@{queue_id}, commit:{offset}, store:{lo}~{hi}",
                {},
            )
        return None

    def _parse_handle(
        self, cmd: RemotingCommand, extra: str, parsed: ExtraInfo | None = None
    ) -> ExtraInfo | RemotingCommand:
        """The handle's fields, checked (``parsed``: what the caller already parsed of it)."""
        if parsed is not None:
            info = parsed
        else:
            try:
                info = ExtraInfo.parse(extra)
            except ValueError as e:
                self._rlog.warning("pop-bad-handle", "bad extraInfo in request code %d: %s", cmd.code, clip(e))
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, f"bad extraInfo: {clip_remark(e)}", {})
        if not info.is_order and not 0 <= info.revive_qid < self.bc.revive_queue_num:
            return cmd.response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"bad extraInfo: reviveQid {info.revive_qid} is not 0..{self.bc.revive_queue_num - 1}",
                {},
            )
        return info

    async def _ack(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return await self._ack_header(conn, cmd, AckMessageRequestHeader.from_ext_fields(cmd.ext_fields))

    async def ack_with_header(
        self, conn: Connection, cmd: RemotingCommand, h: AckMessageRequestHeader, handle: ExtraInfo | None = None
    ) -> RemotingCommand:
        """ACK_MESSAGE whose header the caller already has (the gRPC endpoint's AckMessage:
        no ext fields made to be read back), and ``handle``: ``h.extra_info`` parsed, if the
        caller did; the checks of :meth:`process_request` apply."""
        if self.ctx.is_slave:
            return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_POP_REMARK, {})
        return await self._ack_header(conn, cmd, h, handle)

    async def _ack_header(
        self, conn: Connection, cmd: RemotingCommand, h: AckMessageRequestHeader, handle: ExtraInfo | None = None
    ) -> RemotingCommand:
        info = self._parse_handle(cmd, h.extra_info, handle)
        if isinstance(info, RemotingCommand):
            return info
        topic = h.topic
        if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            topic = info.real_topic(topic, h.consumer_group)
        refusal = self._ack_checks(cmd, h.consumer_group, topic, h.queue_id, h.offset)
        if refusal is not None:
            return refusal
        if info.is_order:
            self._ack_orderly(h.consumer_group, topic, h.queue_id, h.offset, info.pop_time)
            return cmd.response(ResponseCode.SUCCESS, None, {})
        if not await self._write_ack(
            info.revive_qid,
            h.consumer_group,
            topic,
            h.queue_id,
            info.ck_queue_offset,
            info.pop_time,
            info.broker_name,
            h.offset,
            info.pop_time + info.invisible_time,
        ):
            return cmd.response(ResponseCode.SYSTEM_ERROR, "ack failed: the revive log refused the record", {})
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def _ack_orderly(self, group: str, topic: str, qid: int, offset: int, pop_time: int) -> None:
        """Java ``AckMessageProcessor.ackOrderly``: a batch's ack moves the offset past the
        longest acked prefix; the last one unblocks the queue."""
        info = self.order_info.get(topic, group, qid)
        if info is None or info.pop_time != pop_time or offset not in info.offsets:
            return  # an old batch's handle
        info.committed.add(offset)
        self.order_info.mark_dirty()
        nxt = None
        for o in info.offsets:
            if o not in info.committed:
                break
            nxt = o + 1
        if nxt is not None:
            self.ctx.consumer_offset_manager.commit_offset("pop", group, topic, qid, nxt)

    async def _batch_ack(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            _bn, acks = decode_batch_ack_body(cmd.body_bytes() or b"", self.bc.pop_max_batch_acks)
        except ValueError as e:
            return bad_request(conn, cmd, e, ResponseCode.MESSAGE_ILLEGAL)
        if not acks:
            return cmd.response(ResponseCode.NO_MESSAGE, "no ack in the body", {})
        for a in acks:
            try:
                topic = real_topic(a.topic, a.consumer_group, a.retry)
            except ValueError as e:
                return bad_request(conn, cmd, e, ResponseCode.MESSAGE_ILLEGAL)
            if a.revive_queue_id != POP_ORDER_REVIVE_QUEUE and not 0 <= a.revive_queue_id < self.bc.revive_queue_num:
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, f"bad reviveQueueId {a.revive_queue_id}", {})
            tc = self.ctx.topic_config_manager.select_topic_config(topic)
            if tc is None or not 0 <= a.queue_id < tc.read_queue_nums:
                continue  # Java skips an ack of an unknown queue
            lo = self.store.get_min_offset_in_queue(topic, a.queue_id)
            hi = self.store.get_max_offset_in_queue(topic, a.queue_id)
            offsets = [a.start_offset + i for i in sorted(a.bits) if lo <= a.start_offset + i <= hi]
            if not offsets:
                continue
            if a.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                for o in offsets:
                    self._ack_orderly(a.consumer_group, topic, a.queue_id, o, a.pop_time)
                continue
            tag, body = _ack_json(
                a.consumer_group, topic, a.queue_id, a.start_offset, a.pop_time, self.bc.broker_name, offsets
            )
            if not await self._put_revive(a.revive_queue_id, tag, body, a.pop_time + a.invisible_time):
                return cmd.response(ResponseCode.SYSTEM_ERROR, "ack failed: the revive log refused the record", {})
        return cmd.response(ResponseCode.SUCCESS, None, {})

    # ------------------------------------------------------------------ CHANGE_MESSAGE_INVISIBLETIME

    async def _change_invisible(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Java ``ChangeInvisibleTimeProcessor``: a new checkpoint for the one message (popTime
        now), then an ack of the old handle."""
        h = ChangeInvisibleTimeRequestHeader.from_ext_fields(cmd.ext_fields)
        bc = self.bc
        if not bc.pop_min_invisible_time <= h.invisible_time <= bc.pop_max_invisible_time:
            return cmd.response(
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime must be {bc.pop_min_invisible_time}..{bc.pop_max_invisible_time} ms, "
                f"not {h.invisible_time}",
                {},
            )
        info = self._parse_handle(cmd, h.extra_info)
        if isinstance(info, RemotingCommand):
            return info
        topic = h.topic
        if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            topic = info.real_topic(topic, h.consumer_group)
        refusal = self._ack_checks(cmd, h.consumer_group, topic, h.queue_id, h.offset)
        if refusal is not None:
            return refusal
        now = _now_ms()
        if info.is_order:
            oi = self.order_info.get(topic, h.consumer_group, h.queue_id)
            if oi is not None and oi.pop_time == info.pop_time and h.offset in oi.offsets:
                oi.invisible_time = now - oi.pop_time + h.invisible_time
                self.order_info.mark_dirty()
            return cmd.response(
                ResponseCode.SUCCESS,
                None,
                {
                    "popTime": str(info.pop_time),
                    "invisibleTime": str(now - info.pop_time + h.invisible_time),
                    "reviveQid": str(POP_ORDER_REVIVE_QUEUE),
                },
            )
        rq = self._next_revive_qid()
        ck = CheckPoint(h.offset, now, h.invisible_time, 1, h.queue_id, topic, h.consumer_group, bc.broker_name, [0])
        if not await self._put_revive(
            rq, CK_TAG, json.dumps(ck.to_json(), separators=(",", ":")).encode(), ck.revive_time
        ):
            return cmd.response(ResponseCode.SYSTEM_ERROR, "the revive log refused the checkpoint", {})
        tag, body = _ack_json(
            h.consumer_group, topic, h.queue_id, info.ck_queue_offset, info.pop_time, info.broker_name, [h.offset]
        )
        if not await self._put_revive(info.revive_qid, tag, body, info.pop_time + info.invisible_time):
            return cmd.response(ResponseCode.SYSTEM_ERROR, "the revive log refused the ack", {})
        return cmd.response(
            ResponseCode.SUCCESS,
            None,
            {"popTime": str(now), "invisibleTime": str(h.invisible_time), "reviveQid": str(rq)},
        )

    # ------------------------------------------------------------------ NOTIFICATION, POLLING_INFO

    def _has_msg(self, group: str, topic: str, queue_id: int) -> bool:
        store = self.store
        tc = self.ctx.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return False
        com = self.ctx.consumer_offset_manager
        retry = pop_retry_topic(topic, group)
        retry_tc = self.ctx.topic_config_manager.select_topic_config(retry)
        queues = [(topic, q) for q in ([queue_id] if queue_id >= 0 else range(tc.read_queue_nums))]
        if retry_tc is not None:
            queues += [(retry, q) for q in range(retry_tc.read_queue_nums)]
        for topic_, q in queues:
            off = com.query_offset(group, topic_, q)
            if off < 0:  # a group that never popped: from the first message (initMode MIN)
                off = max(0, store.get_min_offset_in_queue(topic_, q))
            if store.get_max_offset_in_queue(topic_, q) > off:
                return True
        return False

    def _notification(self, conn: Connection, cmd: RemotingCommand, *, allow_suspend: bool) -> RemotingCommand | None:
        h = NotificationRequestHeader.from_ext_fields(cmd.ext_fields)
        if not 0 <= h.poll_time <= self.bc.pop_max_poll_time:
            return cmd.response(
                ResponseCode.INVALID_PARAMETER,
                f"pollTime must be 0..{self.bc.pop_max_poll_time} ms, not {h.poll_time}",
                {},
            )
        _, refusal = self._check_group_topic(cmd, h.consumer_group, h.topic, h.queue_id, any_queue=True)
        if refusal is not None:
            return refusal
        if self._has_msg(h.consumer_group, h.topic, h.queue_id):
            return cmd.response(ResponseCode.SUCCESS, None, {"hasMsg": "true", "pollingFull": "false"})
        if allow_suspend and h.poll_time > 0:
            if self.hold.suspend_pull_request(conn, cmd, h.topic, h.queue_id, -1, h.poll_time, None):
                return None
            return cmd.response(ResponseCode.SUCCESS, None, {"hasMsg": "false", "pollingFull": "true"})
        return cmd.response(ResponseCode.SUCCESS, None, {"hasMsg": "false", "pollingFull": "false"})

    def _polling_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = PollingInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        _, refusal = self._check_group_topic(cmd, h.consumer_group, h.topic, h.queue_id, any_queue=True)
        if refusal is not None:
            return refusal
        held = self.hold.pull_request_table.get((h.topic, h.queue_id), {})
        n = sum(1 for r in held if (r.cmd.ext_fields or {}).get("consumerGroup") == h.consumer_group)
        return cmd.response(ResponseCode.SUCCESS, None, {"pollingNum": str(n)})

    # ------------------------------------------------------------------ revive service

    def stats(self) -> dict[str, int]:
        """Checkpoints in flight, held polls, messages revived."""
        held = self.hold.held_count if self.hold is not None else 0
        return {"checkpoints": self._pending_count, "heldPolls": held, "revived": self.revived}

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's POP lines (not in Java's table)."""
        st = self.stats()
        return {
            "popCheckpointCount": str(st["checkpoints"]),
            "popHoldRequestCount": str(st["heldPolls"]),
            "popRevivedCount": str(st["revived"]),
        }

    async def _revive_loop(self) -> None:
        """Java ``PopReviveService``, one task for all revive queues: read new records, pair
        acks with checkpoints, revive the due ones, commit the progress."""
        assert self._wake is not None
        while True:
            try:
                for q in range(self.bc.revive_queue_num):
                    self._read_queue(q)
                await self._revive_due()
                self._commit_progress()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next round tries again
                self._rlog.error("pop-revive", "the revive round failed", exc_info=True)
            wait = self.bc.revive_interval / 1000.0  # read each round: a live property
            if self._heap:
                wait = min(wait, max(0.0, (self._heap[0][0] - _now_ms()) / 1000.0))
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=max(wait, 0.01))
            except TimeoutError:
                pass

    def _init_revive(self) -> None:
        com = self.ctx.consumer_offset_manager
        for q in range(self.bc.revive_queue_num):
            off = com.query_offset(REVIVE_GROUP, self.revive_topic, q)
            self._read_offset[q] = max(off, 0, self.store.get_min_offset_in_queue(self.revive_topic, q))
            self._pending[q] = {}
            self._read_queue(q)

    def _records(self, q: int, off: int, n: int) -> tuple[list[StoredMessage], int]:
        result = self.store.get_message(REVIVE_GROUP, self.revive_topic, q, off, n, None)
        try:
            return [StoredMessage.from_record(_store.decode_record(r)) for r in result.iter_records()], (
                result.next_begin_offset
            )
        finally:
            result.release()

    def _read_queue(self, q: int) -> None:
        store = self.store
        topic = self.revive_topic
        # POPs are refused at popCkMaxNum; the reader's own stop is twice that (POPs racing the
        # bound, a backlog replayed after a restart).
        bound = 2 * self.bc.pop_ck_max_num
        full = False
        while not full:
            off = self._read_offset[q]
            if off >= store.get_max_offset_in_queue(topic, q):
                return
            recs, nxt = self._records(q, off, 64)
            for m in recs:
                if self._pending_count >= bound and m.properties.get(MessageConst.TAGS) == CK_TAG:
                    nxt, full = m.queue_offset, True  # read this checkpoint once there is room
                    break
                self._apply(q, m, checkpoints=True)
            if nxt <= off and not full:
                return
            self._read_offset[q] = nxt
        self._rlog.warning(
            "pop-revive-full",
            "revive reading paused: %d checkpoints in memory (twice popCkMaxNum)",
            self._pending_count,
        )
        # Paused, the acks past the read offset are still applied to what is held (a look
        # ahead of at most REVIVE_LOOKAHEAD records, read again once reading resumes: an ack
        # applied twice is one ack), so nothing acked is revived because the reader was full.
        off = self._read_offset[q]
        for _ in range(REVIVE_LOOKAHEAD // 64):
            recs, nxt = self._records(q, off, 64)
            for m in recs:
                self._apply(q, m, checkpoints=False)
            if nxt <= off:
                return
            off = nxt

    def _apply(self, q: int, m: StoredMessage, *, checkpoints: bool) -> None:
        """One revive record: a checkpoint joins the pending ones, an ack marks them."""
        pending = self._pending[q]
        tag = m.properties.get(MessageConst.TAGS)
        try:
            d = json.loads(m.body)
            if tag == CK_TAG and checkpoints:
                ck = CheckPoint.from_json(d)
                ck.revive_offset = m.queue_offset
                if ck.key in pending:
                    return
                pending[ck.key] = ck
                self._pending_count += 1
                self._heap_seq += 1
                heapq.heappush(self._heap, (ck.revive_time, self._heap_seq, q, ck))
                # the offsets on disk may predate this checkpoint (kill -9): never pop its
                # messages again
                com = self.ctx.consumer_offset_manager
                end = ck.start_offset + (max(ck.diffs) if ck.diffs else 0) + 1
                if com.query_offset(ck.cid, ck.topic, ck.queue_id) < end:
                    com.commit_offset("revive", ck.cid, ck.topic, ck.queue_id, end)
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                key = (str(d["t"]), str(d["c"]), int(d["q"]), int(d["so"]), int(d["pt"]))
                acked = pending.get(key)
                if acked is None:
                    return
                offsets = d.get("aol") if tag == BATCH_ACK_TAG else [d.get("ao")]
                for o in offsets or ():
                    acked.ack(int(o))
                if acked.all_acked:
                    self._finish(q, acked)
        except (ValueError, KeyError, TypeError) as e:
            self._rlog.warning(
                "pop-revive-bad-record",
                "skipping a bad revive record at %s@%d: %s",
                self.revive_topic,
                q,
                clip(e),
            )

    def _finish(self, q: int, ck: CheckPoint) -> None:
        if not ck.done:
            ck.done = True
            self._pending[q].pop(ck.key, None)
            self._pending_count -= 1

    async def _revive_due(self) -> None:
        now = _now_ms()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, q, ck = heapq.heappop(heap)
            if ck.done:
                continue
            offsets = ck.unacked_offsets()
            ok = True
            for o in offsets:
                ok = await self._revive_one(ck, o) and ok
            if not ok:
                # retry the whole checkpoint later (Java re-puts the checkpoint)
                self._heap_seq += 1
                heapq.heappush(heap, (now + 1000, self._heap_seq, q, ck))
                continue
            if offsets:
                tag, body = _ack_json(
                    ck.cid, ck.topic, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name, offsets
                )
                await self._put_revive(q, BATCH_ACK_TAG if len(offsets) > 1 else tag, body, ck.revive_time)
            self._finish(q, ck)

    async def _revive_one(self, ck: CheckPoint, offset: int) -> bool:
        """Java ``PopReviveService.reviveRetry``: the message again, in the pop retry topic
        (reconsume times + 1), or in ``%DLQ%<group>`` past the group's ``retryMaxTimes``."""
        store = self.store
        result = store.get_message(REVIVE_GROUP, ck.topic, ck.queue_id, offset, 1, None)
        try:
            recs = [StoredMessage.from_record(_store.decode_record(r)) for r in result.iter_records()]
        finally:
            result.release()
        if not recs or recs[0].queue_offset != offset:
            self._rlog.warning(
                "pop-revive-gone", "revive: %s@%d offset %d is gone from the store", clip(ck.topic), ck.queue_id, offset
            )
            return True  # nothing to bring back (cleaned up)
        m = recs[0]
        sgc = self.ctx.subscription_group_manager.find_subscription_group_config(ck.cid)
        max_times = sgc.retry_max_times if sgc is not None else 16
        props = dict(m.properties)
        props.pop(MessageConst.POP_CK, None)
        if m.reconsume_times == 0 or MessageConst.FIRST_POP_TIME not in props:
            props[MessageConst.FIRST_POP_TIME] = str(ck.pop_time)
        if m.reconsume_times + 1 > max_times:
            target = MixAll.DLQ_GROUP_TOPIC_PREFIX + ck.cid
            props.setdefault(MessageConst.RETRY_TOPIC, ck.topic)
        elif ck.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            target = ck.topic
        else:
            target = pop_retry_topic(ck.topic, ck.cid)
            props.setdefault(MessageConst.RETRY_TOPIC, ck.topic)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, m.msg_id)
        tc, created = self.ctx.topic_config_manager.create_topic_in_send_message_back_method(target, 1, _RW, 0)
        if tc is None:
            return False
        if created:
            self.ctx.register_broker_soon((target,))
        inner = MessageInner(
            topic=target,
            queue_id=0,
            body=m.body,
            flag=m.flag,
            properties=props,
            born_timestamp=m.born_timestamp,
            born_host=m.born_host,
            sys_flag=m.sys_flag,
            reconsume_times=m.reconsume_times + 1,
        )
        try:
            res = await store.put_message(inner)
        except Exception:  # noqa: BLE001 - retried with the checkpoint
            self._rlog.error("pop-revive-put", "revive of %s into %s failed", m.msg_id, clip(target), exc_info=True)
            return False
        if not res.is_ok:
            return False
        self.revived += 1
        return True

    def _commit_progress(self) -> None:
        """The revive offset of each queue: its oldest checkpoint still pending, else what was
        read. Stored as consumer offsets: persisted in one snapshot with the groups' offsets."""
        com = self.ctx.consumer_offset_manager
        for q, pending in self._pending.items():
            off = min((ck.revive_offset for ck in pending.values()), default=self._read_offset[q])
            stored = com.query_offset(REVIVE_GROUP, self.revive_topic, q)
            # nothing read yet: take no entry of the bounded offsets table
            if stored != off and not (stored < 0 and off == 0):
                com.commit_offset("revive", REVIVE_GROUP, self.revive_topic, q, off)


def batch_acks_of(group: str, topic: str, handles: Iterable[str]) -> list[BatchAck]:
    """Re-exported for tools: :meth:`BatchAck.of`."""
    return BatchAck.of(group, topic, handles)


__all__ = ["REVIVE_GROUP", "SLAVE_POP_REMARK", "CheckPoint", "ConsumerOrderInfoManager", "PopService", "retry_mark"]
