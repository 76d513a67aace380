"""RebalanceLockManager: which client of a group holds which queue (SPEC B7, Java's class).

Orderly consumers lock their queues on the master broker (LOCK_BATCH_MQ) before pulling and
renew the locks every 20 s; a lock belongs to one ``clientId`` and lapses when it has not
been renewed for ``lock_max_live_time`` (60 s, Java ``REBALANCE_LOCK_MAX_LIVE_TIME``), so a
crashed consumer's queues go to another member after a minute. UNLOCK_BATCH_MQ releases
only the caller's own locks. Everything runs on the event loop: no lock object is needed
(Java's ReentrantLock guards the same table against its thread pool).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger("rmq.broker.lock")

REBALANCE_LOCK_MAX_LIVE_TIME = 60.0  # seconds


@dataclass(frozen=True, slots=True)
class MessageQueue:
    """Java ``MessageQueue`` (the JSON body's ``{"topic","brokerName","queueId"}``)."""

    topic: str
    broker_name: str
    queue_id: int

    @classmethod
    def from_json(cls, d) -> "MessageQueue":
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

    def to_json(self) -> dict:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update: float = field(default_factory=time.monotonic)

    def is_expired(self, now: float, max_live: float) -> bool:
        return now - self.last_update > max_live


class RebalanceLockManager:
    """``group → {MessageQueue: LockEntry}``.

    Args:
        lock_max_live_time: seconds a lock lives without renewal (60).
    """

    def __init__(self, lock_max_live_time: float = REBALANCE_LOCK_MAX_LIVE_TIME):
        self.lock_max_live_time = lock_max_live_time
        self.mq_lock_table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def try_lock_batch(self, group: str, mqs, client_id: str, now: float | None = None) -> set[MessageQueue]:
        """Lock (or renew) every queue of ``mqs`` that is free, expired or already ``client_id``'s;
        returns the set actually held by ``client_id`` now."""
        now = time.monotonic() if now is None else now
        table = self.mq_lock_table.setdefault(group, {})
        locked: set[MessageQueue] = set()
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                table[mq] = LockEntry(client_id, now)
                log.info("group %s: %s locked by %s", group, mq, client_id)
            elif entry.client_id == client_id:
                entry.last_update = now
            elif entry.is_expired(now, self.lock_max_live_time):
                log.warning("group %s: %s lock of %s expired; now locked by %s", group, mq, entry.client_id, client_id)
                table[mq] = LockEntry(client_id, now)
            else:
                log.debug("group %s: %s is locked by %s, refused to %s", group, mq, entry.client_id, client_id)
                continue
            locked.add(mq)
        if not table:
            del self.mq_lock_table[group]
        return locked

    def unlock_batch(self, group: str, mqs, client_id: str) -> int:
        """Release the locks ``client_id`` holds among ``mqs``; returns how many were released."""
        table = self.mq_lock_table.get(group)
        if not table:
            return 0
        n = 0
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
                n += 1
                log.info("group %s: %s unlocked by %s", group, mq, client_id)
            elif entry is not None:
                log.warning("group %s: %s is locked by %s, %s may not unlock it", group, mq, entry.client_id, client_id)
        if not table:
            del self.mq_lock_table[group]
        return n

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now: float | None = None) -> bool:
        """True when ``client_id`` holds a live lock on ``mq``."""
        now = time.monotonic() if now is None else now
        entry = self.mq_lock_table.get(group, {}).get(mq)
        return entry is not None and entry.client_id == client_id and not entry.is_expired(now, self.lock_max_live_time)

    def holder(self, group: str, mq: MessageQueue, now: float | None = None) -> str | None:
        """The client holding a live lock on ``mq``, or None."""
        now = time.monotonic() if now is None else now
        entry = self.mq_lock_table.get(group, {}).get(mq)
        if entry is None or entry.is_expired(now, self.lock_max_live_time):
            return None
        return entry.client_id
