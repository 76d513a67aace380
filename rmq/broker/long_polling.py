"""PullRequestHoldService: long polling for pulls that found nothing (seed 000, B2).

A consumer's pull with the suspend bit that finds no new message is not answered; it is kept
here under ``"topic@queueId"`` until one of three things happens:

* the dispatch (reput) service adds a message to that queue whose tags code matches the
  pull's filter: the store's arrival listener calls :meth:`notify_message_arriving` and the
  pull is re-run (it now finds the message) and answered at once;
* its hold time (``suspendTimeoutMillis``, 15 s from real clients; 1 s short polling when
  long polling is disabled) runs out: re-run and answered, typically PULL_NOT_FOUND;
* its connection closes: dropped silently (nobody is left to answer).

Timeouts use one ``call_at`` timer per held pull, so a 15 s hold is answered at 15 s, not at
the next sweep. The 5 s sweep (1 s with short polling) is Java's safety net: it compares each
queue's max offset with what the held pulls asked for, in case an arrival was coalesced or
raced with the suspension.

The service is owned by the BrokerController: ``start()`` creates the sweep task, ``stop()``
cancels it and answers every held pull (PULL_NOT_FOUND with the current offsets), so a
graceful shutdown leaves no consumer waiting for a timeout.
"""
from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger("rmq.broker")


class PullRequest:
    """One suspended pull."""

    __slots__ = ("conn", "cmd", "topic", "queue_id", "pull_from_this_offset", "deadline", "message_filter", "timer",
                 "key")

    def __init__(self, conn, cmd, topic, queue_id, pull_from_this_offset, deadline, message_filter):
        self.conn = conn
        self.cmd = cmd
        self.topic = topic
        self.queue_id = queue_id
        self.pull_from_this_offset = pull_from_this_offset
        self.deadline = deadline
        self.message_filter = message_filter
        self.timer: asyncio.TimerHandle | None = None
        self.key = f"{topic}@{queue_id}"


def _filter_matches(message_filter, tags_code) -> bool:
    """Does a message with ``tags_code`` match? Unknown codes (a coalesced or periodic check)
    count as a match: a spurious re-run costs one scan, a missed one a whole hold time."""
    if tags_code is None or message_filter is None:
        return True
    return message_filter.is_matched_by_tags_code(tags_code)


class PullRequestHoldService:
    """Holds suspended pulls until a message arrives, they time out, or their connection closes.

    Args:
        processor: the PullMessageProcessor; ``processor.process(conn, cmd, allow_suspend=False)``
            re-runs a held pull, and ``processor.write_response`` sends the answer.
        store: the MessageStore (max offsets for the periodic check).
        long_polling_enable: sweep every 5 s (True) or every 1 s (False, short polling).
    """

    def __init__(self, processor, store, long_polling_enable: bool = True):
        self.processor = processor
        self.store = store
        self.check_interval = 5.0 if long_polling_enable else 1.0
        self.pull_request_table: dict[str, list[PullRequest]] = {}
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self.pull_request_table.values())

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="pull-request-hold-service")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        # Answer everything still held: the consumers get PULL_NOT_FOUND now, not after 30 s.
        for key in list(self.pull_request_table):
            for req in self.pull_request_table.pop(key, []):
                self._wake(req)

    async def _run(self) -> None:
        """Periodic re-check of every held queue (Java ``PullRequestHoldService.run``)."""
        while True:
            await asyncio.sleep(self.check_interval)
            try:
                self.check_hold_request()
            except Exception:  # one bad queue must not stop long polling
                log.exception("pull hold check failed")

    def check_hold_request(self) -> None:
        for key in list(self.pull_request_table):
            reqs = self.pull_request_table.get(key)
            if not reqs:
                continue
            topic, queue_id = reqs[0].topic, reqs[0].queue_id
            max_offset = self.store.get_max_offset_in_queue(topic, queue_id)
            self.notify_message_arriving(topic, queue_id, max_offset, None)

    def suspend_pull_request(self, conn, cmd, topic: str, queue_id: int, offset: int, hold_millis: int,
                             message_filter) -> None:
        """Keep a pull that found nothing; it is answered later by ``_wake``."""
        loop = self._loop or asyncio.get_running_loop()
        hold = max(0, int(hold_millis)) / 1000.0
        req = PullRequest(conn, cmd, topic, queue_id, offset, time.monotonic() + hold, message_filter)
        self.pull_request_table.setdefault(req.key, []).append(req)
        req.timer = loop.call_later(hold, self._on_timeout, req)

    def _remove(self, req: PullRequest) -> bool:
        reqs = self.pull_request_table.get(req.key)
        if not reqs:
            return False
        try:
            reqs.remove(req)
        except ValueError:
            return False
        if not reqs:
            del self.pull_request_table[req.key]
        return True

    def _on_timeout(self, req: PullRequest) -> None:
        req.timer = None
        if self._remove(req):
            self._wake(req)

    def _wake(self, req: PullRequest) -> None:
        """Re-run the pull without suspension and answer it (Java ``executeRequestWhenWakeup``)."""
        if req.timer is not None:
            req.timer.cancel()
            req.timer = None
        if getattr(req.conn, "closed", False):
            return
        try:
            response = self.processor.process(req.conn, req.cmd, allow_suspend=False)
            if response is not None:
                self.processor.write_response(req.conn, response)
        except Exception:  # answer the others even if one re-run fails
            log.exception("answering a held pull for %s failed", req.key)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code=None) -> None:
        """New messages up to ``max_offset`` (exclusive) are in the queue: answer matching pulls."""
        key = f"{topic}@{queue_id}"
        reqs = self.pull_request_table.get(key)
        if not reqs:
            return
        keep, wake = [], []
        for req in reqs:
            if getattr(req.conn, "closed", False):
                if req.timer is not None:
                    req.timer.cancel()
                continue
            if max_offset > req.pull_from_this_offset and _filter_matches(req.message_filter, tags_code):
                wake.append(req)
            else:
                keep.append(req)
        if keep:
            self.pull_request_table[key] = keep
        else:
            del self.pull_request_table[key]
        for req in wake:
            self._wake(req)

    def on_connection_closed(self, conn) -> int:
        """Drop the held pulls of a closed connection; returns how many."""
        dropped = 0
        for key in list(self.pull_request_table):
            reqs = self.pull_request_table[key]
            mine = [r for r in reqs if r.conn is conn]
            if not mine:
                continue
            for r in mine:
                if r.timer is not None:
                    r.timer.cancel()
                    r.timer = None
            dropped += len(mine)
            rest = [r for r in reqs if r.conn is not conn]
            if rest:
                self.pull_request_table[key] = rest
            else:
                del self.pull_request_table[key]
        if dropped:
            log.info("dropped %d held pull(s) of closed connection %s", dropped, getattr(conn, "remote_addr", "?"))
        return dropped
