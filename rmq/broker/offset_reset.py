"""Offset resets a member has not applied yet (for clients without a RESET_CONSUMER_CLIENT_OFFSET
handler).

Java's Broker2Client.resetOffset only tells each member (code 220) and trusts it. ali-ons has
no handler for 220, and any client may be in the middle of a pull at its old offset when the
reset lands. So after INVOKE_BROKER_TO_RESET_OFFSET the broker remembers, per (group, topic,
queue), the offset it reset to; the next pull of that queue at another offset is answered
PULL_OFFSET_MOVED with ``nextBeginOffset`` = the reset offset, which every client (Java's
OFFSET_ILLEGAL handling, the C++ core, ali-ons, our SDK) takes as its new pull and commit
offset. A pull at the reset offset shows the member has applied it: the entry goes. Entries
also go after ``ttl`` seconds (120, a heartbeat expiry: a member that has not pulled by then is
gone) and, past ``max_entries``, the oldest first.
"""

from __future__ import annotations

import logging
import time

from rmq.common.log import RateLimitedLog

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)


class PendingResets:
    """``(group, topic, queue_id) → reset offset`` for the pull processor to redirect by.

    Args:
        ttl: seconds an entry waits for a pull (120).
        max_entries: entries held at most (100 000); past it the oldest is dropped.
    """

    def __init__(self, ttl: float = 120.0, max_entries: int = 100_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._table: dict[tuple[str, str, int], tuple[int, float]] = {}

    def __len__(self) -> int:
        return len(self._table)

    def add(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        deadline = time.monotonic() + self.ttl
        for qid, offset in offsets.items():
            key = (group, topic, qid)
            self._table.pop(key, None)  # re-inserted last: the newest
            self._table[key] = (offset, deadline)
        while len(self._table) > self.max_entries:
            dropped = next(iter(self._table))
            del self._table[dropped]
            _rlog.warning(
                "pending-resets-full",
                "pending offset resets past %d (maxEntries): dropped the oldest, %s",
                self.max_entries,
                dropped[:2],
            )

    def redirect(self, group: str, topic: str, queue_id: int, pull_offset: int) -> int | None:
        """The offset a pull at ``pull_offset`` should move to, once; None to serve it as is."""
        entry = self._table.get((group, topic, queue_id))
        if entry is None:
            return None
        del self._table[(group, topic, queue_id)]
        offset, deadline = entry
        if pull_offset == offset or time.monotonic() > deadline:
            return None
        return offset

    def expire(self, now: float | None = None) -> int:
        """Drop entries past their deadline; returns how many."""
        now = time.monotonic() if now is None else now
        stale = [k for k, (_, deadline) in self._table.items() if deadline < now]
        for k in stale:
            del self._table[k]
        return len(stale)
