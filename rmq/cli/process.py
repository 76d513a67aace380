"""What every long-running ``rmq`` command shares: exit statuses, logging set-up, and the
SIGINT/SIGTERM stop event. Below ``rmq.cli.daemons`` and ``rmq.cli.console`` (the daemons start
the console, so the console cannot import the daemons' module)."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

__all__ = [
    "EXIT_BAD_CONFIG", "EXIT_FAILED", "EXIT_OK", "EXIT_PORT_TAKEN", "EXIT_STORE_LOCKED", "setup_logging",
    "stop_event",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_CONFIG = 2
EXIT_PORT_TAKEN = 3
EXIT_STORE_LOCKED = 4


def setup_logging() -> None:
    """Log to stderr at ``RMQ_LOG_LEVEL`` (default INFO)."""
    level = os.environ.get("RMQ_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def stop_event() -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM (Java's shutdown hook)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
