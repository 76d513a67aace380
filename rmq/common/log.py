"""Logging that no client can flood: request data clipped, repeated lines rate-limited.

Every log line that quotes something a peer sent (a topic, a header value, a remark, an
address list) passes it through :func:`clip`; every warning a peer can trigger again and again
goes through a :class:`RateLimitedLog`, which writes the first line of each key per interval and
counts the rest ("... 470 more in the last 10 s" on the next line written for that key).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["CLIP_CHARS", "RateLimitedLog", "clip"]

#: characters of peer-supplied text kept in a log line.
CLIP_CHARS = 200


def clip(value: Any, limit: int = CLIP_CHARS) -> str:
    """``repr``-free text of ``value`` cut to ``limit`` characters, saying how long it was.

    Non-printable characters are escaped so a value cannot forge log lines.
    """
    s = value if isinstance(value, str) else str(value)
    n = len(s)
    if n > limit:
        s = s[:limit]
    if not s.isprintable():
        s = s.encode("unicode_escape", "backslashreplace").decode("ascii")[: limit * 2]
    return f"{s}... ({n} chars)" if n > limit else s


REMARK_CHARS = 1000


def clip_remark(value: Any) -> str:
    """Peer text quoted in a reply's remark (a topic, a group): ``clip`` at ``REMARK_CHARS``
    (1000) characters, so a request cannot make its reply (or a log of it) huge."""
    return clip(value, REMARK_CHARS)


class RateLimitedLog:
    """At most one line per ``key`` per ``interval`` seconds through ``logger``.

    ``key`` names the kind of event (``"bad-frame"``, ``"offset-refused"``), optionally with the
    peer, so that one noisy peer cannot hide the others' first lines; the table of keys is
    bounded (``max_keys``, oldest forgotten first). Thread-safe.

    Args:
        logger: where lines go.
        interval: seconds between two lines of one key (default 10).
        max_keys: keys remembered at once (default 1024).
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0, max_keys: int = 1024) -> None:
        self.logger = logger
        self.interval = interval
        self.max_keys = max_keys
        self._state: dict[str, list[float | int]] = {}  # key -> [last written (monotonic), suppressed]
        self._lock = threading.Lock()

    def log(self, level: int, key: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        """Write ``msg % args`` unless ``key`` was written within the interval; True if written."""
        if not self.logger.isEnabledFor(level):
            return False
        now = time.monotonic()
        with self._lock:
            st = self._state.get(key)
            if st is not None and now - st[0] < self.interval:
                st[1] += 1
                return False
            suppressed = int(st[1]) if st is not None else 0
            if st is None and len(self._state) >= self.max_keys:
                self._state.pop(next(iter(self._state)))
            self._state.pop(key, None)
            self._state[key] = [now, 0]
        if suppressed:
            msg = f"{msg} (... {suppressed} more in the last {self.interval:g} s)"
        self.logger.log(level, msg, *args, **kwargs)
        return True

    def warning(self, key: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        return self.log(logging.WARNING, key, msg, *args, **kwargs)

    def info(self, key: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        return self.log(logging.INFO, key, msg, *args, **kwargs)

    def error(self, key: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        return self.log(logging.ERROR, key, msg, *args, **kwargs)
