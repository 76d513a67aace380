"""ScheduleMessageService: delay levels (Java ``ScheduleMessageService``).

A message whose ``DELAY`` property names a level ``1..N`` (``messageDelayLevel``, by default
``1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h``) is not stored in its topic:
the send path calls :meth:`ScheduleMessageService.rewrite_if_delayed`, which parks it in
``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, with ``REAL_TOPIC`` / ``REAL_QID`` remembering
where it belongs. The store gives every unit of that topic the delivery time
(``store_timestamp + delay``) as its ConsumeQueue tags code, so the service can tell what is
due from the 20-byte units alone, without reading records::

    SCHEDULE_TOPIC_XXXX / queue (level - 1)          (one queue per level: all units of a
    +----------------+----------+-----------------+  queue share one delay, so they are in
    | phy offset  i64| size  i32| deliver ts  i64 |  delivery order; the head of each queue
    +----------------+----------+-----------------+  is the next one due for that level)

Delivery copies the record into ``REAL_TOPIC`` / ``REAL_QID`` with its body, flag, sysFlag,
born time and host, reconsume times and every property except ``DELAY`` (``REAL_TOPIC`` and
``REAL_QID`` stay, as in Java), then advances that level's offset.

Unlike Java's timer per level polling every 100 ms, one asyncio task sleeps until the
earliest head is due, or until the store reports a new unit in ``SCHEDULE_TOPIC_XXXX``
(arrival listener): an idle broker spends no CPU here.

Progress (level → next offset of its queue) is kept in ``<root>/config/delayOffset.msgpack``
(Java ``delayOffset.json``), written by the broker's ConfigPersister every ``flush_interval`` s when it
changed and at shutdown. A clean restart resumes exactly (nothing twice, nothing lost); after
a crash the messages delivered since the last write are delivered again (at-least-once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from rmq.broker.managers.config_store import ConfigManager
from rmq.broker.message_copy import copy_to_inner
from rmq.common.constants import TopicValidator
from rmq.common.message import (
    MessageConst,
    MessageSysFlag,
    properties_to_string,
    string_to_properties,
)
from rmq.common.tasks import stop_gracefully, wait_event
from rmq.store import MessageInner

if TYPE_CHECKING:
    from rmq.broker.context import ScheduleContext
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker.schedule")


RMQ_SYS_SCHEDULE_TOPIC = TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
DELAY_FOR_A_PERIOD = 10.0  # Java: a failed delivery is retried after 10 s
_DELAY_MARK = MessageConst.DELAY_TIME_LEVEL + "\x01"


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


class DelayOffsetTable(ConfigManager):
    """``{level: next offset in SCHEDULE_TOPIC_XXXX queue level-1}``, persisted (msgpack)."""

    file_name = "delayOffset.msgpack"

    def __init__(self, config_dir: str):
        super().__init__(config_dir)
        self.offset_table: dict[int, int] = {}

    def encode(self) -> object:
        return {"offsetTable": self.offset_table}

    def decode(self, obj: Any) -> None:
        self.offset_table = {int(k): int(v) for k, v in (obj.get("offsetTable") or {}).items()}


class ScheduleMessageService:
    """Parks delayed messages and delivers them when due.

    Args:
        controller: the broker (``rmq.broker.context.ScheduleContext``: its started store,
            ``store_config`` (``message_delay_level``) and ``config_dir`` are used).
        flush_delay_offset_interval: seconds between writes of the progress table when it
            changed (Java ``flushDelayOffsetInterval``, 10 s).
    """

    def __init__(self, controller: ScheduleContext, flush_delay_offset_interval: float = 10.0):
        self.controller = controller
        try:
            self.delay_millis: list[int] = controller.store_config.delay_level_millis()
        except (KeyError, ValueError, IndexError):
            raise ValueError(
                f"bad messageDelayLevel {controller.store_config.message_delay_level!r} "
                "(expected delays like '1s 5s 10s 1m 2h')"
            ) from None
        if not self.delay_millis:
            raise ValueError("messageDelayLevel defines no level")
        self.max_delay_level = len(self.delay_millis)
        self.table = DelayOffsetTable(controller.config_dir)
        self.flush_interval = flush_delay_offset_interval
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[Any] | None = None
        self._retry_at: dict[int, float] = {}  # level → monotonic time before which it waits
        self._stopping = False
        self.delivered = 0
        self.discarded = 0

    @property
    def store(self) -> MessageStore:
        return self.controller.started_store

    # -- the send path ----------------------------------------------------------------------

    def rewrite_if_delayed(self, msg: MessageInner) -> bool:
        """Move ``msg`` into SCHEDULE_TOPIC_XXXX when it carries a positive ``DELAY`` level.

        Plain and committed messages only (a prepared half message is delayed when it is
        committed, as in Java). A level above the highest is clamped to it. Returns True
        when ``msg`` was rewritten (topic, queue id and properties changed in place).
        """
        tran = MessageSysFlag.get_transaction_value(msg.sys_flag)
        if tran not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
            return False
        if msg.properties_str is not None:
            if _DELAY_MARK not in msg.properties_str:  # the common case costs one substring test
                return False
            props = string_to_properties(msg.properties_str)
        else:
            props = msg.properties
        level = _parse_level(props.get(MessageConst.DELAY_TIME_LEVEL))
        if level <= 0:
            return False
        if level > self.max_delay_level:
            level = self.max_delay_level
        props = dict(props)
        props[MessageConst.DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties = props
        msg.properties_str = properties_to_string(props, trailing_separator=False)
        msg.topic = RMQ_SYS_SCHEDULE_TOPIC
        msg.queue_id = delay_level_to_queue_id(level)
        msg.tags_code = None
        return True

    # -- lifecycle --------------------------------------------------------------------------

    def load(self) -> None:
        self.table.load()

    def start(self) -> None:
        """Correct the loaded offsets against the store and start delivering."""
        store = self.store
        for level in range(1, self.max_delay_level + 1):
            qid = delay_level_to_queue_id(level)
            lo = store.get_min_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, qid)
            hi = store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, qid)
            off = self.table.offset_table.get(level, 0)
            if off < lo or off > hi:
                if off > hi:
                    log.warning("delay level %d: saved offset %d is past the queue end %d; resetting", level, off, hi)
                off = min(max(off, lo), hi)
            self.table.offset_table[level] = off
        self._wakeup = asyncio.Event()
        if getattr(self.controller, "is_slave", False):
            # A slave's store is written by replication only; its master delivers (Java).
            log.info("schedule service idle: this broker is a slave")
            return
        store.add_arrival_listener(
            self._on_arrival,
            watched={
                (RMQ_SYS_SCHEDULE_TOPIC, delay_level_to_queue_id(level)) for level in range(1, self.max_delay_level + 1)
            },
        )
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._deliver_loop(), name="broker-schedule")
        log.info(
            "schedule service started: %d levels (%s), offsets %s",
            self.max_delay_level,
            self.controller.store_config.message_delay_level,
            self.table.offset_table,
        )

    async def stop(self, grace: float = 5.0) -> None:
        """Stop delivering and persist progress.

        The delivery task stops between two messages (a put in progress completes and its
        offset is recorded), so a clean shutdown never delivers a message twice; after
        ``grace`` seconds it is cancelled.
        """
        self._stopping = True
        if self._wakeup is not None:
            self._wakeup.set()
        await stop_gracefully(self._task, grace, log, "schedule service")
        self._task = None
        self.persist()

    def persist(self) -> None:
        """Write the progress now (shutdown); the broker's ConfigPersister writes it on its
        timer otherwise (every ``flush_interval`` seconds when it changed)."""
        try:
            self.table.persist()
        except Exception:  # shutdown goes on; the timed writes retried already
            log.exception("persisting the delay offset table failed")

    def _on_arrival(self, topic: str, queue_id: int, next_offset: int, tags_code: int) -> None:
        if topic == RMQ_SYS_SCHEDULE_TOPIC and self._wakeup is not None:
            self._wakeup.set()

    # -- delivery ---------------------------------------------------------------------------

    async def _deliver_loop(self) -> None:
        wakeup = self._wakeup
        assert wakeup is not None  # created by start() before this loop runs
        while not self._stopping:
            wakeup.clear()
            next_due = None  # epoch ms of the earliest unit not yet due
            for level in range(1, self.max_delay_level + 1):
                if self._stopping:
                    return
                try:
                    due = await self._deliver_level(level)
                except asyncio.CancelledError:
                    raise
                except Exception:  # one bad level must not stop the others
                    log.exception("delay level %d: delivery failed; retrying in %.0f s", level, DELAY_FOR_A_PERIOD)
                    self._retry_at[level] = time.monotonic() + DELAY_FOR_A_PERIOD
                    due = int(time.time() * 1000 + DELAY_FOR_A_PERIOD * 1000)
                if due is not None and (next_due is None or due < next_due):
                    next_due = due
            timeout = None if next_due is None else max(0.0, next_due / 1000.0 - time.time())
            if timeout == 0.0:
                continue
            await wait_event(wakeup, timeout)

    async def _deliver_level(self, level: int) -> int | None:
        """Deliver every due unit of ``level``; the epoch ms when the next one is due, or None."""
        retry_at = self._retry_at.get(level)
        if retry_at is not None:
            if time.monotonic() < retry_at:
                return int((time.time() + retry_at - time.monotonic()) * 1000)
            del self._retry_at[level]
        store = self.store
        qid = delay_level_to_queue_id(level)
        cq = store.find_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, qid, create=False)
        if cq is None:
            return None
        delay = self.delay_millis[level - 1]
        offset = self.table.offset_table.get(level, 0)
        while not self._stopping:
            lo = cq.get_min_offset_in_queue()
            if offset < lo:
                log.warning(
                    "delay level %d: offset %d is below the queue minimum %d (expired files); skipping ahead",
                    level,
                    offset,
                    lo,
                )
                offset = lo
                self._advance(level, offset)
            unit = cq.get_unit(offset)
            if unit is None:
                return None
            phy, size, deliver_ts = unit
            now = int(time.time() * 1000)
            if deliver_ts > now + delay:
                # Java correctDeliverTimestamp: a clock set back must not park a message for
                # longer than its level; deliver it now.
                deliver_ts = now
            if deliver_ts > now:
                return deliver_ts
            ext = store.look_message_by_offset(phy, size)
            if ext is None:
                log.error(
                    "delay level %d: no record at CommitLog offset %d (queue offset %d); skipped", level, phy, offset
                )
                self.discarded += 1
            else:
                inner = self._message_time_up(ext)
                if inner is None:
                    self.discarded += 1
                else:
                    result = await store.put_message(inner)
                    if not result.is_ok:
                        log.warning(
                            "delay level %d: delivering %s to %s-%d failed (%s %s); retrying in %.0f s",
                            level,
                            ext.msg_id,
                            inner.topic,
                            inner.queue_id,
                            result.status.name,
                            result.remark or "",
                            DELAY_FOR_A_PERIOD,
                        )
                        self._retry_at[level] = time.monotonic() + DELAY_FOR_A_PERIOD
                        return int(time.time() * 1000 + DELAY_FOR_A_PERIOD * 1000)
                    self.delivered += 1
            offset += 1
            self._advance(level, offset)
        return None  # stopping

    def _advance(self, level: int, offset: int) -> None:
        self.table.offset_table[level] = offset
        self.table.mark_dirty()

    def _message_time_up(self, ext: Any) -> MessageInner | None:
        """The record to put into its real topic (Java ``messageTimeup``), or None to discard."""
        props = dict(ext.properties)
        real_topic = props.get(MessageConst.REAL_TOPIC)
        try:
            real_qid = int(props.get(MessageConst.REAL_QUEUE_ID, ""))
        except ValueError:
            real_qid = None
        if not real_topic or real_qid is None:
            log.error(
                "delayed message %s has no REAL_TOPIC/REAL_QID (%r/%r); discarded",
                ext.msg_id,
                real_topic,
                props.get(MessageConst.REAL_QUEUE_ID),
            )
            return None
        tran = MessageSysFlag.get_transaction_value(ext.sys_flag)
        if tran == MessageSysFlag.TRANSACTION_PREPARED_TYPE:
            log.error("delayed message %s is a prepared transaction message; discarded", ext.msg_id)
            return None
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        return copy_to_inner(ext, real_topic, real_qid, props)

    def stats(self) -> dict[str, object]:
        """Progress per level and how far each level is behind (for admin and tests)."""
        store = self.store
        behind = {}
        for level, off in self.table.offset_table.items():
            hi = store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            if hi > off:
                behind[level] = hi - off
        return {
            "offsets": dict(self.table.offset_table),
            "behind": behind,
            "delivered": self.delivered,
            "discarded": self.discarded,
        }


def _parse_level(value: Any) -> int:
    if value is None:
        return 0
    try:
        return int(str(value).strip())
    except ValueError:
        log.warning("ignoring unreadable DELAY property %r", value)
        return 0
