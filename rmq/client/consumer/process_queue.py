"""ProcessQueue: the messages pulled from one queue and not yet consumed (Java ``ProcessQueue``).

The pull task puts messages in, consumers take them out; the smallest offset still inside is
what may be committed, so a crash re-delivers rather than loses. Its counters drive flow
control (count, bytes, offset span).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rmq.types import MessageExt, MessageQueue

__all__ = ["ProcessQueue", "REBALANCE_LOCK_MAX_LIVE_TIME"]

#: A client-side queue lock is trusted for 30 s; the broker keeps it 60 s, so renewing every
#: 20 s keeps it alive with margin (Java REBALANCE_LOCK_MAX_LIVE_TIME / INTERVAL).
REBALANCE_LOCK_MAX_LIVE_TIME = 30.0


class ProcessQueue:
    """Messages of one :class:`MessageQueue` in flight in this client.

    ``msgs`` maps queue offset → message; it is filled in increasing offset order, so dict order
    is offset order and the first key is the smallest offset.
    """

    def __init__(self, mq: MessageQueue, next_offset: int) -> None:
        self.mq = mq
        self.next_offset = next_offset
        self.msgs: dict[int, MessageExt] = {}
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.locked = False
        self.last_lock_time = 0.0
        self.last_pull_time = time.monotonic()
        self.lock_first_done = False  # orderly: offset re-read after the first lock
        self.consuming = False  # orderly: a consume task runs for this queue
        self.consuming_msgs: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.consume_lock = asyncio.Lock()  # orderly: held while the handler runs
        self.pull_task: asyncio.Task[None] | None = None
        self.wakeup = asyncio.Event()  # set when consumption frees room (flow control)
        #: OFFSET_ILLEGAL: dropped, its corrected offset not yet persisted; rebalance leaves it
        #: in the table until then (Java's keeps a dropped queue that is still assigned)
        self.offset_fix_pending = False
        self.pop_inflight = 0  # POP: popped from this broker, not yet acked or handed back

    @property
    def msg_count(self) -> int:
        return len(self.msgs) + len(self.consuming_msgs)

    @property
    def max_span(self) -> int:
        if not self.msgs:
            return 0
        return self.queue_offset_max - next(iter(self.msgs))

    def lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_time > REBALANCE_LOCK_MAX_LIVE_TIME

    def put_messages(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            if m.queue_offset not in self.msgs:
                self.msgs[m.queue_offset] = m
                self.msg_size += len(m.body)
        if msgs:
            self.queue_offset_max = max(self.queue_offset_max, msgs[-1].queue_offset)

    def remove_messages(self, msgs: list[MessageExt]) -> int:
        """Drop consumed messages; the offset that may now be committed, or -1 if none."""
        if not self.msgs:
            return -1
        for m in msgs:
            if self.msgs.pop(m.queue_offset, None) is not None:
                self.msg_size -= len(m.body)
        self.wakeup.set()
        if self.msgs:
            return next(iter(self.msgs))
        # Everything pulled is consumed. Messages the broker filtered out between the last one
        # and next_offset are consumed too (Java stops at the last delivered message + 1 and
        # leaves the gap until the next pull answers).
        return max(self.queue_offset_max + 1, self.next_offset)

    def replace(self, m: MessageExt) -> None:
        """Swap in an updated copy (e.g. reconsume_times + 1) without changing the order."""
        if m.queue_offset in self.msgs:
            self.msgs[m.queue_offset] = m

    # --------------------------------------------------------------- orderly

    def take_messages(self, n: int) -> list[MessageExt]:
        out: list[MessageExt] = []
        it = iter(list(self.msgs))
        for off in it:
            if len(out) >= n:
                break
            m = self.msgs.pop(off)
            self.consuming_msgs[off] = m
            out.append(m)
        return out

    def commit(self) -> int:
        """Orderly: the taken messages are done; returns the next offset to commit (-1 if none)."""
        if not self.consuming_msgs:
            return -1
        last = max(self.consuming_msgs)
        for m in self.consuming_msgs.values():
            self.msg_size -= len(m.body)
        self.consuming_msgs.clear()
        self.wakeup.set()
        if not self.msgs:
            return max(last + 1, self.next_offset)
        return last + 1

    def make_messages_consume_again(self, msgs: list[MessageExt]) -> None:
        """Orderly: put taken messages back at the front, in offset order."""
        back = {}
        for m in msgs:
            self.consuming_msgs.pop(m.queue_offset, None)
            back[m.queue_offset] = m
        merged = dict(sorted(back.items()))
        merged.update(self.msgs)
        self.msgs = merged

    def has_temp_messages(self) -> bool:
        return bool(self.msgs)

    def clear(self) -> None:
        self.msgs.clear()
        self.consuming_msgs.clear()
        self.msg_size = 0
        self.queue_offset_max = -1
        self.wakeup.set()

    def info(self) -> dict[str, Any]:
        """The ``ProcessQueueInfo`` shape of GET_CONSUMER_RUNNING_INFO."""
        first = next(iter(self.msgs), 0)
        return {
            "commitOffset": self.next_offset,
            "cachedMsgMinOffset": first,
            "cachedMsgMaxOffset": self.queue_offset_max if self.msgs else 0,
            "cachedMsgCount": self.msg_count,
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
            "transactionMsgMinOffset": 0,
            "transactionMsgMaxOffset": 0,
            "transactionMsgCount": 0,
            "locked": self.locked,
            "tryUnlockTimes": 0,
            "lastLockTimestamp": int(self.last_lock_time * 1000),
            "droped": self.dropped,
            "lastPullTimestamp": int(self.last_pull_time * 1000),
            "lastConsumeTimestamp": 0,
        }
