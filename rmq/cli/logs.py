"""Logging of the daemons (``rmq namesrv|broker|standalone|console|exporter``).

By default records go to stderr (what systemd's journal or a terminal collects). With
``--log-file PATH`` they go to ``PATH`` instead, rotated by size (``--log-max-bytes``, default
100 MiB, ``--log-backups`` files kept, default 10: ``PATH.1`` … ``PATH.K``, as Java's logback
``SizeBasedTriggeringPolicy`` with a fixed window). Writing a file from the event loop would
block it on a slow disk, so the loop only formats the record and puts it on a bounded queue
(:class:`logging.handlers.QueueHandler`); a :class:`logging.handlers.QueueListener` thread
writes and rotates. Past the queue's bound (:data:`QUEUE_BOUND` records) records are dropped and
counted, with one stderr line per minute saying how many.

The level is ``--log-level`` if given, else ``$RMQ_LOG_LEVEL``, else ``INFO``; an unknown level
(either source) stops start-up naming the allowed values.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import logging.handlers
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass

from rmq.common.properties import ConfigError

__all__ = [
    "DEFAULT_LOG_BACKUPS",
    "DEFAULT_LOG_MAX_BYTES",
    "LEVELS",
    "QUEUE_BOUND",
    "LogOptions",
    "add_log_arguments",
    "options_from_args",
    "setup_logging",
]

#: the level names ``--log-level`` and ``RMQ_LOG_LEVEL`` accept (case-insensitive)
LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
DEFAULT_LOG_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_LOG_BACKUPS = 10
#: records waiting for the file writer thread at most; past it they are dropped (counted)
QUEUE_BOUND = 100_000
FORMAT = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"
_DROP_REPORT_SECONDS = 60.0


@dataclass(frozen=True)
class LogOptions:
    """Where and how much the daemon logs.

    Attributes:
        file: the log file (default None: stderr).
        max_bytes: rotate when the file would pass this size (default 100 MiB; 0 = never).
        backups: rotated files kept (default 10).
        level: a name of :data:`LEVELS` (default None: ``$RMQ_LOG_LEVEL``, else INFO).
    """

    file: str | None = None
    max_bytes: int = DEFAULT_LOG_MAX_BYTES
    backups: int = DEFAULT_LOG_BACKUPS
    level: str | None = None


def add_log_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--log-*`` options of a daemon's subcommand."""
    p.add_argument("--log-file", default=None, metavar="PATH", help="log to PATH, rotated by size, instead of stderr")
    p.add_argument(
        "--log-max-bytes",
        type=int,
        default=DEFAULT_LOG_MAX_BYTES,
        metavar="N",
        help=f"rotate the log file at N bytes (default {DEFAULT_LOG_MAX_BYTES}; 0 = never)",
    )
    p.add_argument(
        "--log-backups",
        type=int,
        default=DEFAULT_LOG_BACKUPS,
        metavar="K",
        help=f"rotated log files kept (default {DEFAULT_LOG_BACKUPS})",
    )
    p.add_argument(
        "--log-level",
        default=None,
        metavar="LEVEL",
        help=f"one of {', '.join(LEVELS)} (default $RMQ_LOG_LEVEL, else INFO)",
    )


def options_from_args(args: argparse.Namespace) -> LogOptions:
    """The :class:`LogOptions` of parsed ``--log-*`` options."""
    return LogOptions(args.log_file, args.log_max_bytes, args.log_backups, args.log_level)


def _level(options: LogOptions) -> int:
    name, source = options.level, "--log-level"
    if name is None:
        name, source = os.environ.get("RMQ_LOG_LEVEL", "INFO"), "RMQ_LOG_LEVEL"
    if name.strip().upper() not in LEVELS:
        raise ConfigError(f"bad value for {source}: {name!r} (expected one of {', '.join(LEVELS)})")
    return int(getattr(logging, name.strip().upper()))


class _BoundedQueueHandler(logging.handlers.QueueHandler):
    """A QueueHandler that drops a record when the writer is :data:`QUEUE_BOUND` behind,
    reporting the drops on stderr at most once a minute (never blocking the caller)."""

    def __init__(self, q: queue.Queue[logging.LogRecord], path: str):
        super().__init__(q)
        self._path = path
        self._dropped = 0
        self._reported_at = 0.0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self._dropped += 1
            now = time.monotonic()
            if now - self._reported_at >= _DROP_REPORT_SECONDS:
                self._reported_at = now
                print(
                    f"rmq: log queue full, {self._dropped} records dropped so far (is the disk of {self._path} slow?)",
                    file=sys.stderr,
                    flush=True,
                )


_lock = threading.Lock()
_listener: logging.handlers.QueueListener | None = None


def setup_logging(options: LogOptions | None = None) -> None:
    """Configure the root logger for a daemon (see the module's docstring).

    Without a log file this does nothing when the root logger already has handlers (a test
    harness, or an earlier call: the command line configures logging before the daemon runs),
    as :func:`logging.basicConfig`. A log file replaces the handlers an earlier call installed.
    :class:`ConfigError` for a bad level, size or backup count, or a file that cannot be opened.
    """
    global _listener
    options = options or LogOptions()
    level = _level(options)
    root = logging.getLogger()
    if options.file is None:
        if not root.handlers:
            logging.basicConfig(level=level, format=FORMAT, stream=sys.stderr)
        return
    if options.max_bytes < 0:
        raise ConfigError(f"bad value for --log-max-bytes: {options.max_bytes} (expected 0 or more; 0 = never rotate)")
    if options.backups < 0:
        raise ConfigError(f"bad value for --log-backups: {options.backups} (expected 0 or more)")
    path = os.path.abspath(os.path.expanduser(options.file))
    try:
        # Opened here, before the loop runs: a bad path stops start-up
        file_handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=options.max_bytes, backupCount=options.backups, encoding="utf-8"
        )
    except OSError as e:
        raise ConfigError(f"bad value for --log-file: cannot open {path}: {e.strerror or e}") from None
    file_handler.setFormatter(logging.Formatter(FORMAT))
    q: queue.Queue[logging.LogRecord] = queue.Queue(QUEUE_BOUND)
    with _lock:
        if _listener is not None:
            _stop_listener()
        for h in list(root.handlers):
            root.removeHandler(h)
            h.close()
        listener = logging.handlers.QueueListener(q, file_handler, respect_handler_level=False)
        listener.start()
        _listener = listener
        root.addHandler(_BoundedQueueHandler(q, path))
        root.setLevel(level)


def _stop_listener() -> None:
    """Write what the queue holds and close the file (at exit, or when replaced)."""
    global _listener
    listener, _listener = _listener, None
    if listener is not None:
        listener.stop()
        for h in listener.handlers:
            h.close()


atexit.register(_stop_listener)
