"""PullRequestHoldService: long polling for pulls that found nothing (Java ``PullRequestHoldService``).

A consumer's pull with the suspend bit that finds no new message is not answered; it is kept
here under ``(topic, queue_id)`` until one of three things happens:

* the dispatch (reput) service adds a message to that queue whose tags code matches the
  pull's filter -- and, for a SQL92 pull, whose properties match its expression -- : the
  store's arrival listener calls :meth:`notify_message_arriving` and the pull is re-run (it
  now finds the message) and answered;
* its hold time (``suspendTimeoutMillis``, 15 s from real clients; 1 s short polling when
  long polling is disabled) runs out: re-run and answered, typically PULL_NOT_FOUND;
* its connection closes: dropped silently (nobody is left to answer).

Bounds: at most ``max_per_connection`` held pulls per connection and ``max_total`` in all;
a pull past either is answered SYSTEM_BUSY at once (the Java client then retries after its
pull-exception back-off) with one rate-limited log line.

Structures, chosen so that no number of held pulls can stall the loop:

* per queue key and per connection, an insertion-ordered dict used as a set (O(1) removal);
* expiry: one heap of ``(deadline, seq, request)`` behind a single ``call_at`` timer for the
  earliest deadline (O(log n) per hold); answered requests are skipped when they surface and
  the heap is rebuilt when mostly dead;
* answering: pulls to re-run (woken by a message, expired, or at stop) go through one queue
  that is drained at most ``wake_batch`` pulls per loop turn, so 20 000 pulls woken by one
  message, or expiring together, leave the loop free for other clients in between.

The 5 s sweep (1 s with short polling) is Java's safety net: it compares each queue's max
offset with what the held pulls asked for, in case an arrival was coalesced or raced with the
suspension.

A held SQL92 pull is woken only by a message its expression matches (Java
``PullRequestHoldService.notifyMessageArriving``: ``isMatchedByConsumeQueue`` with the tags
code, then ``isMatchedByCommitLog`` with the properties). Java evaluates each arriving record's
properties map; here the dispatch passes no properties (it makes no Python object per record):
before waking such a pull, the service asks the store to scan the pull's new messages with the
pull's compiled filter (``get_message`` with one message wanted, the C property program run on
the stored properties, nothing transferred). Each held pull keeps how far it has been checked,
so every message is evaluated once per held SQL92 pull, as in Java; queues with only TAG pulls
held cost nothing more. A long run of non-matching messages (more than ``PROBE_ROUNDS`` store
scans, each bounded by the store's filter budget) wakes the pull: the re-run answers
PULL_RETRY_IMMEDIATELY past them, so the consumer moves on. The sweep probes SQL92 pulls too
(Java's sweep wakes them, having no properties to check, and they answer
PULL_RETRY_IMMEDIATELY); a TAG pull is woken by the sweep as in Java.

The service is owned by the BrokerController: ``start()`` creates the sweep task, ``stop()``
cancels it and answers every held pull (PULL_NOT_FOUND with the current offsets), so a
graceful shutdown leaves no consumer waiting for a timeout.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import logging
from typing import Any

from rmq.common.log import RateLimitedLog, clip

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

#: held pulls per connection (a consumer holds at most one per queue it was assigned).
DEFAULT_MAX_HELD_PER_CONNECTION = 10_000
#: held pulls in all.
DEFAULT_MAX_HELD_TOTAL = 100_000
#: pulls re-run and answered per loop turn.
DEFAULT_WAKE_BATCH = 256
#: store scans spent on one held SQL92 pull per arrival before it is woken anyway.
PROBE_ROUNDS = 4
#: ``max_offset`` that wakes every held pull of the queue, whatever its filter (an offset reset:
#: the re-run moves the consumer).
ANY_OFFSET = 1 << 62


class PullRequest:
    """One suspended pull."""

    __slots__ = (
        "checked",
        "cmd",
        "conn",
        "deadline",
        "done",
        "key",
        "message_filter",
        "pull_from_this_offset",
        "queue_id",
        "topic",
    )

    def __init__(
        self,
        conn: Any,
        cmd: Any,
        topic: str,
        queue_id: int,
        pull_from_this_offset: int,
        deadline: float,
        message_filter: Any,
    ) -> None:
        self.conn = conn
        self.cmd = cmd
        self.topic = topic
        self.queue_id = queue_id
        self.pull_from_this_offset = pull_from_this_offset
        self.deadline = deadline
        self.message_filter = message_filter
        self.key = (topic, queue_id)
        self.checked = pull_from_this_offset  # a SQL92 pull: no match below this offset
        self.done = False  # taken out of the tables (answered, queued for an answer, or dropped)


def _filter_matches(message_filter: Any, tags_code: int | None) -> bool:
    """Does a message with ``tags_code`` match? Unknown codes (a coalesced or periodic check)
    count as a match: a spurious re-run costs one scan, a missed one a whole hold time."""
    if tags_code is None or message_filter is None:
        return True
    return bool(message_filter.is_matched_by_tags_code(tags_code))


def _needs_properties(message_filter: Any) -> bool:
    """Is ``message_filter`` a property (SQL92) filter, decided on the stored properties?"""
    return message_filter is not None and getattr(message_filter, "program", None) is not None


class PullRequestHoldService:
    """Holds suspended pulls until a message arrives, they time out, or their connection closes.

    Args:
        processor: the PullMessageProcessor; ``processor.process(conn, cmd, allow_suspend=False)``
            re-runs a held pull, and ``processor.write_response`` sends the answer.
        store: the MessageStore (max offsets for the periodic check).
        long_polling_enable: sweep every 5 s (True) or every 1 s (False, short polling).
        max_per_connection: held pulls per connection (default 10 000).
        max_total: held pulls in all (default 100 000).
        wake_batch: pulls answered per loop turn (default 256).
        limit_names / what: the properties and the request named in the refusal's log line
            (default the PULL ones; the POP service holds its requests in a second instance).
    """

    def __init__(
        self,
        processor: Any,
        store: Any,
        long_polling_enable: bool = True,
        *,
        max_per_connection: int = DEFAULT_MAX_HELD_PER_CONNECTION,
        max_total: int = DEFAULT_MAX_HELD_TOTAL,
        wake_batch: int = DEFAULT_WAKE_BATCH,
        limit_names: str = "maxHeldPullsPerConnection / maxHeldPullsTotal",
        what: str = "pull",
    ) -> None:
        self.limit_names = limit_names
        self.what = what
        self.processor = processor
        self.store = store
        self.check_interval = 5.0 if long_polling_enable else 1.0
        self.max_per_connection = max_per_connection
        self.max_total = max_total
        self.wake_batch = max(1, wake_batch)
        # (topic, queue_id) -> held pulls: the store's dispatcher tests this table's keys
        # (once per queue per run) before it tells :meth:`notify_message_arriving` anything.
        self.pull_request_table: dict[tuple[str, int], dict[PullRequest, None]] = {}
        self._by_conn: dict[Any, dict[PullRequest, None]] = {}
        self._held = 0
        self._heap: list[tuple[float, int, PullRequest]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._to_answer: collections.deque[PullRequest] = collections.deque()
        self._draining: asyncio.Handle | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    @property
    def held_count(self) -> int:
        """Pulls held now."""
        return self._held

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="pull-request-hold-service")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # Answer everything still held: the consumers get PULL_NOT_FOUND now, not after 30 s.
        for key in list(self.pull_request_table):
            for req in list(self.pull_request_table.get(key, ())):
                self._take(req)
                self._to_answer.append(req)
        self._heap.clear()
        if self._draining is not None:
            self._draining.cancel()
            self._draining = None
        while self._to_answer:
            self._answer(self._to_answer.popleft())

    async def _run(self) -> None:
        """Periodic re-check of every held queue (Java ``PullRequestHoldService.run``)."""
        while True:
            await asyncio.sleep(self.check_interval)
            try:
                self.check_hold_request()
            except Exception:
                log.exception("pull hold check failed")

    def check_hold_request(self) -> None:
        for key in list(self.pull_request_table):
            reqs = self.pull_request_table.get(key)
            if not reqs:
                continue
            first = next(iter(reqs))
            max_offset = self.store.get_max_offset_in_queue(first.topic, first.queue_id)
            self.notify_message_arriving(first.topic, first.queue_id, max_offset, None)

    # ------------------------------------------------------------------ holding

    def suspend_pull_request(
        self, conn: Any, cmd: Any, topic: str, queue_id: int, offset: int, hold_millis: int, message_filter: Any
    ) -> bool:
        """Keep a pull that found nothing; it is answered later. False (nothing kept) when
        ``conn`` or the broker holds as many as allowed: the caller answers SYSTEM_BUSY."""
        mine = self._by_conn.get(conn)
        if self._held >= self.max_total or (mine is not None and len(mine) >= self.max_per_connection):
            _rlog.warning(
                "pull-hold-limit-" + self.limit_names,
                "refusing to hold a %s from %s for %s: %d held by it, %d in all "
                "(limits %d per connection, %d in all: %s)",
                self.what,
                getattr(conn, "remote_addr", "?"),
                clip(f"{topic}@{queue_id}"),
                len(mine) if mine else 0,
                self._held,
                self.max_per_connection,
                self.max_total,
                self.limit_names,
            )
            return False
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        deadline = loop.time() + max(0, int(hold_millis)) / 1000.0
        req = PullRequest(conn, cmd, topic, queue_id, offset, deadline, message_filter)
        table = self.pull_request_table.get(req.key)
        if table is None:
            table = self.pull_request_table[req.key] = {}
        table[req] = None
        if mine is None:
            mine = self._by_conn[conn] = {}
        mine[req] = None
        self._held += 1
        heap = self._heap
        heapq.heappush(heap, (deadline, next(self._seq), req))
        if len(heap) > 1024 and len(heap) > 2 * self._held:
            # mostly answered entries: rebuild (amortised O(1) per hold)
            self._heap = heap = [e for e in heap if not e[2].done]
            heapq.heapify(heap)
        if deadline < self._timer_at:
            self._arm(deadline)
        return True

    def _take(self, req: PullRequest) -> bool:
        """Remove ``req`` from the tables (O(1)); False if it was already taken."""
        if req.done:
            return False
        req.done = True
        self._held -= 1
        reqs = self.pull_request_table.get(req.key)
        if reqs is not None:
            reqs.pop(req, None)
            if not reqs:
                del self.pull_request_table[req.key]
        mine = self._by_conn.get(req.conn)
        if mine is not None:
            mine.pop(req, None)
            if not mine:
                del self._by_conn[req.conn]
        return True

    # ------------------------------------------------------------------ expiry

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = self._loop
        assert loop is not None
        self._timer_at = when
        self._timer = loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """Queue every held pull whose hold time ran out; re-arm for the next deadline."""
        self._timer = None
        self._timer_at = float("inf")
        loop = self._loop
        assert loop is not None
        now = loop.time()
        heap = self._heap
        expired = False
        while heap and heap[0][0] <= now:
            _, _, req = heapq.heappop(heap)
            if self._take(req):
                self._to_answer.append(req)
                expired = True
        while heap and heap[0][2].done:  # skip answered entries at the top
            heapq.heappop(heap)
        if heap:
            self._arm(heap[0][0])
        if expired:
            self._drain()

    # ------------------------------------------------------------------ answering

    def _drain(self) -> None:
        """Answer up to ``wake_batch`` queued pulls now; the rest on the next loop turns."""
        self._draining = None
        queue = self._to_answer
        for _ in range(min(len(queue), self.wake_batch)):
            self._answer(queue.popleft())
        if queue and not self._stopping:
            loop = self._loop
            assert loop is not None
            self._draining = loop.call_soon(self._drain)

    def _answer(self, req: PullRequest) -> None:
        """Re-run the pull without suspension and answer it (Java ``executeRequestWhenWakeup``)."""
        if getattr(req.conn, "closed", False):
            return
        try:
            # with the filter it was suspended with (compiled already: nothing compiles here)
            response = self.processor.process(req.conn, req.cmd, allow_suspend=False, known=req.message_filter)
            if response is not None:
                self.processor.write_response(req.conn, response)
        except Exception:  # noqa: BLE001 - answer the others even if one re-run fails
            _rlog.error(
                "pull-hold-answer",
                "answering a held pull for %s@%d failed",
                clip(req.topic),
                req.queue_id,
                exc_info=True,
            )

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        """New messages up to ``max_offset`` (exclusive) are in the queue: answer matching pulls."""
        reqs = self.pull_request_table.get((topic, queue_id))
        if not reqs:
            return
        wake = [
            r
            for r in reqs
            if getattr(r.conn, "closed", False)
            or (
                max_offset > r.pull_from_this_offset
                and _filter_matches(r.message_filter, tags_code)
                and (
                    max_offset >= ANY_OFFSET
                    or r.queue_id < 0
                    or not _needs_properties(r.message_filter)
                    or self._properties_match(r)
                )
            )
        ]
        if not wake:
            return
        for req in wake:
            self._take(req)  # a closed connection's pull is dropped when its turn comes
        self._to_answer.extend(wake)
        if self._draining is None:
            self._drain()

    def _properties_match(self, req: PullRequest) -> bool:
        """Has a message the held SQL92 pull ``req`` has not checked yet arrived that its
        expression matches (Java ``ExpressionMessageFilter.isMatchedByCommitLog``)? Scans the
        store from ``req.checked`` with the pull's filter; anything but a clean "no match"
        (FOUND, the queue truncated, a store error) or more than ``PROBE_ROUNDS`` scans counts
        as a match: the re-run then answers what the store says."""
        offset = req.checked
        for _ in range(PROBE_ROUNDS):
            try:
                result = self.store.get_message("", req.topic, req.queue_id, offset, 1, req.message_filter, count=False)
            except Exception:  # noqa: BLE001 - the re-run reports the store's state
                return True
            status = result.status.name
            nxt = result.next_begin_offset
            end = result.max_offset
            result.release()
            if status == "OFFSET_OVERFLOW_ONE":  # checked up to the queue's end: nothing matched
                req.checked = offset
                return False
            if status != "NO_MATCHED_MESSAGE" or nxt <= offset:
                return True  # FOUND, or a state the re-run answers
            offset = nxt
            if offset >= end:
                req.checked = offset
                return False
        req.checked = offset
        return True

    def on_connection_closed(self, conn: Any) -> int:
        """Drop the held pulls of a closed connection; returns how many."""
        mine = self._by_conn.get(conn)
        if not mine:
            return 0
        reqs = list(mine)
        for req in reqs:
            self._take(req)
        log.info("dropped %d held pull(s) of closed connection %s", len(reqs), getattr(conn, "remote_addr", "?"))
        return len(reqs)
