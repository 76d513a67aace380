"""rmq.common.tasks.wait_event: a timed event wait that never loses a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from rmq.common.tasks import wait_event


async def test_a_cancel_arriving_with_the_event_stops_the_waiting_loop():
    # The client's timers and pull loops, the broker's schedule and transaction check services
    # are "wait for an event or a timeout, then work" loops that a stop cancels. On Python 3.11,
    # asyncio.wait_for lost a cancel that arrived in the same loop iteration as the event, and
    # the loop ran on forever.
    ev = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            await wait_event(ev, 10.0)
            ev.clear()
            rounds += 1

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # one loop iteration: the task now waits on the event
    ev.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5.0)
    assert rounds == 0


async def test_wait_event_reports_set_or_timeout():
    ev = asyncio.Event()
    assert await wait_event(ev, 0.01) is False
    ev.set()
    assert await wait_event(ev, 0.0) is True
    assert await wait_event(ev, None) is True
    ev.clear()
    asyncio.get_running_loop().call_later(0.01, ev.set)
    assert await wait_event(ev, None) is True  # None: no time limit
