"""One owner for background tasks (every background task has an owner and a clean stop).

asyncio keeps only a weak reference to a running task, so an owner keeps a strong one until
the task ends; a task that dies with an exception nobody awaits would otherwise vanish
silently, so the owner logs it. ``close()`` cancels whatever still runs and waits for it.

``wait_event`` is the timed event wait of every "wait for a wake-up or a timeout, then work"
loop: on Python 3.11, ``asyncio.wait_for(event.wait(), t)`` swallows a ``cancel()`` that
arrives in the same loop iteration as the event (the task goes on as if nothing happened, so a
stop that cancels it can wait forever). ``asyncio.timeout`` counts cancellations
(``Task.uncancel``) and does not lose them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any

__all__ = ["BackgroundTasks", "stop_gracefully", "wait_event"]


class BackgroundTasks:
    """A set of background tasks with one owner (like ``asyncio.TaskGroup``, but a task's
    failure is logged, not propagated, and the owner decides when to stop).

    Args:
        owner: words naming the owner in log lines (``"broker"``, ``"group G"``).
        logger: where a task's exception is logged (with traceback).
        death_level: the level of that line; default ERROR (unexpected). Owners whose tasks
            report failures elsewhere (a send callback) pass DEBUG.
    """

    __slots__ = ("owner", "log", "death_level", "_tasks")

    def __init__(self, owner: str, logger: logging.Logger, death_level: int = logging.ERROR) -> None:
        self.owner = owner
        self.log = logger
        self.death_level = death_level
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a task on the running loop (``name`` defaults to asyncio's own) and
        keep it until it ends."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.log(
                self.death_level,
                "%s: background task %s died: %r",
                self.owner,
                task.get_name(),
                task.exception(),
                exc_info=task.exception(),
            )

    async def wait(self) -> None:
        """Wait until the tasks running now have ended (nothing is cancelled; their exceptions
        are swallowed)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self, also: Iterable[asyncio.Future[Any]] = (), timeout: float | None = 10.0) -> None:
        """Cancel every task still running (and the futures in ``also``, which the owner keeps
        elsewhere) and wait until all have ended; their exceptions are swallowed. Tasks spawned
        afterwards are owned as before, so an owner that may restart keeps working.

        A task that does not end within ``timeout`` seconds of its cancellation (it swallows
        ``CancelledError`` or blocks) is named in a warning and left behind, so a shutdown
        always goes on (``None`` waits forever)."""
        pending = list(also) + list(self._tasks)
        for t in pending:
            t.cancel()
        if not pending:
            return
        gathered = asyncio.gather(*pending, return_exceptions=True)
        try:
            await asyncio.wait_for(asyncio.shield(gathered), timeout)
        except TimeoutError:
            stuck = [t.get_name() if isinstance(t, asyncio.Task) else repr(t) for t in pending if not t.done()]
            self.log.warning(
                "%s: %d background task(s) did not stop within %.0f s of cancellation: %s",
                self.owner,
                len(stuck),
                timeout,
                ", ".join(stuck),
            )

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))


async def stop_gracefully(
    task: asyncio.Task[Any] | None,
    grace: float,
    logger: logging.Logger,
    what: str,
    also: Iterable[asyncio.Task[Any] | None] = (),
) -> None:
    """Stop a service's task that ends by itself once told to (its stop flag is already set).

    Waits up to ``grace`` seconds for ``task`` to finish (a warning names ``what`` when it does
    not), then cancels it and the tasks in ``also`` (None entries are skipped) and awaits them
    all; a task that failed is logged as ``"<what> task failed"``.
    """
    if task is not None and not task.done():
        try:
            await asyncio.wait_for(asyncio.shield(task), grace)
        except TimeoutError:
            logger.warning("%s did not stop within %.0f s; cancelling it", what, grace)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise  # the stop itself was cancelled, not the task it waited for
        except Exception:  # noqa: BLE001 - logged below when awaited
            pass
    tasks = [t for t in (task, *also) if t is not None]
    for t in tasks:
        t.cancel()
    for t in tasks:
        try:
            await t
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("%s task failed", what)


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass (None: no limit); True when it
    is set. A cancellation is never lost, even one arriving together with the event."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
