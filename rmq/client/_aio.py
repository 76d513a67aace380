"""Waiting with a timeout without losing a cancellation.

On Python 3.11, ``asyncio.wait_for(event.wait(), t)`` swallows a ``cancel()`` that arrives in
the same loop iteration as the event (the task goes on as if nothing happened, so a consumer's
close() waited forever for a pull loop or the rebalance timer). ``asyncio.timeout`` counts
cancellations (``Task.uncancel``) and does not lose them; everything here uses it.
"""
from __future__ import annotations

import asyncio

__all__ = ["wait_event"]


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass; True when it is set."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
