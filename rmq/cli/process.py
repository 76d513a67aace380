"""What every long-running ``rmq`` command shares: exit statuses, logging set-up, and the
SIGINT/SIGTERM stop event. Below ``rmq.cli.daemons`` and ``rmq.cli.console`` (the daemons start
the console, so the console cannot import the daemons' module)."""

from __future__ import annotations

import asyncio
import signal

# stderr, or --log-file with rotation written by a thread; levels from --log-level / RMQ_LOG_LEVEL
from rmq.cli.logs import setup_logging

__all__ = [
    "EXIT_BAD_CONFIG",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_PORT_TAKEN",
    "EXIT_STORE_LOCKED",
    "setup_logging",
    "stop_event",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_CONFIG = 2
EXIT_PORT_TAKEN = 3
EXIT_STORE_LOCKED = 4


def stop_event() -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM (Java's shutdown hook)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
