"""RebalanceLockManager: which client of a group holds which queue (Java's class of the same name).

Orderly consumers lock their queues on the master broker (LOCK_BATCH_MQ) before pulling and
renew the locks every 20 s; a lock belongs to one ``clientId`` and lapses when it has not
been renewed for ``lock_max_live_time`` (60 s, Java ``REBALANCE_LOCK_MAX_LIVE_TIME``), so a
crashed consumer's queues go to another member after a minute, and the dead entry leaves the
table. UNLOCK_BATCH_MQ releases only the caller's own locks. Everything runs on the event loop: no lock object is needed
(Java's ReentrantLock guards the same table against its thread pool).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rmq.common.log import RateLimitedLog, clip

log = logging.getLogger("rmq.broker.lock")
_rl = RateLimitedLog(log)

REBALANCE_LOCK_MAX_LIVE_TIME = 60.0  # seconds
DEFAULT_MAX_ENTRIES = 100_000  # BrokerConfig rebalanceLockMaxEntries
DEFAULT_MAX_BATCH_SIZE = 4096  # BrokerConfig rebalanceLockMaxBatchSize


@dataclass(frozen=True, slots=True)
class MessageQueue:
    """Java ``MessageQueue`` (the JSON body's ``{"topic","brokerName","queueId"}``)."""

    topic: str
    broker_name: str
    queue_id: int

    @classmethod
    def from_json(cls, d: Any) -> MessageQueue:
        """Raises ``ValueError`` naming what is wrong with ``d``."""
        if not isinstance(d, dict):
            raise ValueError(f"a message queue must be a JSON object, not {type(d).__name__}")
        topic, broker, qid = d.get("topic"), d.get("brokerName"), d.get("queueId")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"message queue without a topic: {d!r}")
        if not isinstance(broker, str):
            raise ValueError(f"message queue without a brokerName: {d!r}")
        if isinstance(qid, bool) or not isinstance(qid, (int, str)):
            raise ValueError(f"message queue with a bad queueId: {d!r}")
        try:
            qid = int(qid)
        except ValueError:
            raise ValueError(f"message queue with a bad queueId: {d!r}") from None
        return cls(topic, broker, qid)

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update: float = field(default_factory=time.monotonic)

    def is_expired(self, now: float, max_live: float) -> bool:
        return now - self.last_update > max_live


class RebalanceLockManager:
    """``group → {MessageQueue: LockEntry}``.

    Bounded: an entry not renewed within ``lock_max_live_time`` is dead (Java's live-holder
    rule) and leaves the table at the next :meth:`scan_expired` (the broker's housekeeping,
    every 10 s) or when a request finds it; past ``max_entries`` live entries no new lock is
    granted (renewals still are). One log line per request, rate-limited, never one per queue.

    Args:
        lock_max_live_time: seconds a lock lives without renewal (60, Java
            ``rebalanceLockMaxLiveTime``).
        max_entries: locks held in all groups at most (100 000).
        clock: the monotonic seconds every call without ``now`` reads (``time.monotonic``);
            tests hand in a clock they move, so expiry does not depend on the machine's speed.
    """

    def __init__(
        self,
        lock_max_live_time: float = REBALANCE_LOCK_MAX_LIVE_TIME,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.lock_max_live_time = lock_max_live_time
        self.max_entries = max_entries
        self.mq_lock_table: dict[str, dict[MessageQueue, LockEntry]] = {}
        self.entries = 0
        self.refused_full = 0
        self._next_sweep = 0.0

    def try_lock_batch(self, group: str, mqs: Any, client_id: str, now: float | None = None) -> set[MessageQueue]:
        """Lock (or renew) every queue of ``mqs`` that is free, expired or already ``client_id``'s;
        returns the set actually held by ``client_id`` now."""
        now = self.clock() if now is None else now
        table = self.mq_lock_table.setdefault(group, {})
        locked: set[MessageQueue] = set()
        new = taken_over = refused = full = 0
        scanned = False
        max_live = self.lock_max_live_time
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                if self.entries >= self.max_entries:
                    # A sweep costs O(table): at most one per request and one per second.
                    if not scanned and now >= self._next_sweep:
                        scanned = True
                        self._next_sweep = now + 1.0
                        self.scan_expired(now)
                        table = self.mq_lock_table.setdefault(group, table)
                    if self.entries >= self.max_entries:
                        full += 1
                        continue
                table[mq] = LockEntry(client_id, now)
                self.entries += 1
                new += 1
            elif entry.client_id == client_id:
                entry.last_update = now
            elif entry.is_expired(now, max_live):
                entry.client_id = client_id
                entry.last_update = now
                taken_over += 1
            else:
                refused += 1
                continue
            locked.add(mq)
        if not table:
            self.mq_lock_table.pop(group, None)
        if new or taken_over:
            _rl.info(
                "lock-" + group,
                "group %s: %s locked %d new queues, took over %d expired ones (%d held by others)",
                clip(group),
                clip(client_id),
                new,
                taken_over,
                refused,
            )
        if full:
            self.refused_full += full
            _rl.warning(
                "lock-table-full",
                "queue lock table full (%d locks, rebalanceLockMaxEntries): %d locks for group %s refused",
                self.entries,
                full,
                clip(group),
            )
        return locked

    def unlock_batch(self, group: str, mqs: Any, client_id: str) -> int:
        """Release the locks ``client_id`` holds among ``mqs``; returns how many were released."""
        table = self.mq_lock_table.get(group)
        if not table:
            return 0
        n = others = 0
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
                n += 1
            elif entry is not None:
                others += 1
        self.entries -= n
        if not table:
            del self.mq_lock_table[group]
        if n or others:
            _rl.info(
                "unlock-" + group,
                "group %s: %s unlocked %d queues (%d held by others left alone)",
                clip(group),
                clip(client_id),
                n,
                others,
            )
        return n

    def scan_expired(self, now: float | None = None) -> int:
        """Drop every expired entry (and empty groups); returns how many were dropped."""
        now = self.clock() if now is None else now
        max_live = self.lock_max_live_time
        dropped = 0
        for group in list(self.mq_lock_table):
            table = self.mq_lock_table[group]
            dead = [mq for mq, e in table.items() if now - e.last_update > max_live]
            for mq in dead:
                del table[mq]
            dropped += len(dead)
            if not table:
                del self.mq_lock_table[group]
        self.entries -= dropped
        return dropped

    def holder(self, group: str, mq: MessageQueue, now: float | None = None) -> str | None:
        """The client holding a live lock on ``mq``, or None."""
        now = self.clock() if now is None else now
        entry = self.mq_lock_table.get(group, {}).get(mq)
        if entry is None or entry.is_expired(now, self.lock_max_live_time):
            return None
        return entry.client_id
