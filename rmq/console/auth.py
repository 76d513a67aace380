"""The console's login: users with hashed passwords, sessions that expire, and a bounded
table of failed logins per client address.

rocketmq-dashboard keeps its accounts in ``users.properties`` (``name=password[,1]``, the
password in clear text; ``UserServiceImpl``). Ours is the same ``name=value`` shape, but the
value is a salted scrypt hash made by ``rmq console --hash-password NAME``::

    # rmq console users (one per line: name=scrypt$N$r$p$salt$hash)
    admin=scrypt$16384$8$1$0vVx...$Xw1b...

A line that is not ``name=hash`` of that form stops the start naming its line number (never
its text: it may hold a password pasted by mistake).

Roles, as the dashboard's ``name=password,1`` marks its admins: ``name=hash,0`` is a read-only
account (it sees every page but changes nothing, and the ACL page is not shown to it);
``name=hash,1`` or no suffix is an admin (rmq's earlier files have no suffix and their accounts
could always change the cluster, so no suffix keeps meaning admin, unlike the dashboard).

Hashing (scrypt, 16 MiB, ~50 ms) is blocking work: the server runs :func:`verify_password`
in a thread, never on the event loop.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "LoginLimiter",
    "Session",
    "SessionTable",
    "hash_password",
    "load_users",
    "load_users_file",
    "parse_users",
    "parse_users_file",
    "verify_password",
    "USER_NAME",
]

# scrypt cost: N=2**14, r=8, p=1 is 16 MiB and tens of milliseconds (the parameters that the
# scrypt paper recommends for interactive logins); stored in each hash so they can grow later.
_N, _R, _P = 1 << 14, 8, 1
_MAXMEM = 64 * 1024 * 1024
_HASH = re.compile(r"scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9_\-]+={0,2})\$([A-Za-z0-9_\-]+={0,2})")
#: Allowed user names (what a properties key can hold without escapes).
USER_NAME = re.compile(r"[A-Za-z0-9_.@\-]{1,64}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$salt$hash`` of ``password`` (16 random bytes of salt unless given)."""
    salt = os.urandom(16) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P, maxmem=_MAXMEM, dklen=32)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches ``encoded`` (a :func:`hash_password` value); constant time
    in the comparison. A malformed ``encoded`` is False."""
    m = _HASH.fullmatch(encoded)
    if m is None:
        return False
    n, r, p = int(m[1]), int(m[2]), int(m[3])
    try:
        salt, want = base64.urlsafe_b64decode(m[4]), base64.urlsafe_b64decode(m[5])
        got = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=len(want))
    except ValueError:  # bad base64, or parameters scrypt refuses
        return False
    return hmac.compare_digest(got, want)


def parse_users(text: str, source: str) -> dict[str, str]:
    """``{name: hash}`` from a users file's text. ValueError names ``source`` and the line."""
    return parse_users_file(text, source)[0]


def parse_users_file(text: str, source: str) -> tuple[dict[str, str], frozenset[str]]:
    """``({name: hash}, read-only names)`` from a users file's text (``name=hash[,0|1]``, see
    the module docstring). ValueError names ``source`` and the line."""
    users: dict[str, str] = {}
    read_only: set[str] = set()
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not USER_NAME.fullmatch(name):
            raise ValueError(
                f"{source}: line {no}: expected name=scrypt$... with a name of letters, digits, "
                "'_', '.', '@' or '-' (at most 64)"
            )
        value, comma, role = value.partition(",")
        value, role = value.strip(), role.strip()
        if _HASH.fullmatch(value) is None:
            raise ValueError(
                f"{source}: line {no}: the password of {name} is not a scrypt hash "
                "(make one with: rmq console --hash-password NAME)"
            )
        if comma and role not in ("0", "1"):
            raise ValueError(f"{source}: line {no}: the role of {name} must be ,0 (read-only) or ,1 (admin)")
        users[name] = value
        if role == "0":
            read_only.add(name)
        else:
            read_only.discard(name)
    return users, frozenset(read_only)


def load_users(path: str) -> dict[str, str]:
    """Read a users file (see the module docstring). ValueError when it cannot be read or used
    or has no user."""
    return load_users_file(path)[0]


def load_users_file(path: str) -> tuple[dict[str, str], frozenset[str]]:
    """:func:`load_users` and the file's read-only names (``name=hash,0``)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read the console's users file {path}: {e}") from None
    users, read_only = parse_users_file(text, path)
    if not users:
        raise ValueError(f"the console's users file {path} has no user")
    return users, read_only


@dataclass
class Session:
    """One logged-in browser: its user, its CSRF token, when it began and was last used."""

    user: str
    csrf: str
    created: float
    last_used: float = field(default=0.0)


class SessionTable:
    """Sessions by cookie token: at most ``max_sessions`` (the least recently used is dropped,
    and ``on_evict`` is called to log it), each ending ``idle`` seconds after its last use or
    ``max_age`` seconds after the login, whichever comes first. ``clock`` is monotonic."""

    def __init__(
        self,
        *,
        max_sessions: int = 1024,
        idle: float = 1800.0,
        max_age: float = 43200.0,
        clock: Callable[[], float] = time.monotonic,
        on_evict: Callable[[], None] | None = None,
    ) -> None:
        if max_sessions < 1 or not 0 < idle <= max_age:
            raise ValueError("max_sessions must be 1 or more and 0 < idle <= max_age")
        self.max_sessions = max_sessions
        self.idle = idle
        self.max_age = max_age
        self._clock = clock
        self._on_evict = on_evict
        self._data: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def create(self, user: str) -> tuple[str, Session]:
        """A new session for ``user``: ``(cookie token, session)``."""
        now = self._clock()
        self._expire(now)
        while len(self._data) >= self.max_sessions:
            self._data.popitem(last=False)
            if self._on_evict is not None:
                self._on_evict()
        token = secrets.token_urlsafe(32)
        s = Session(user, secrets.token_urlsafe(32), now, now)
        self._data[token] = s
        return token, s

    def get(self, token: str | None) -> Session | None:
        """The live session of ``token`` (its use renews the idle time), or None."""
        if not token:
            return None
        s = self._data.get(token)
        if s is None:
            return None
        now = self._clock()
        if now - s.last_used > self.idle or now - s.created > self.max_age:
            del self._data[token]
            return None
        s.last_used = now
        self._data.move_to_end(token)
        return s

    def drop(self, token: str | None) -> None:
        """End the session of ``token`` (logout); nothing when there is none."""
        if token:
            self._data.pop(token, None)

    def _expire(self, now: float) -> None:
        # oldest use first: stop at the first session still idle-live (later ones were used later)
        while self._data:
            token, s = next(iter(self._data.items()))
            if now - s.last_used > self.idle or now - s.created > self.max_age:
                del self._data[token]
            else:
                break


class LoginLimiter:
    """Failed logins per client address: after ``attempts`` failures within ``window`` seconds
    an address is refused until the oldest of them is ``window`` old. At most ``max_entries``
    addresses are tracked (the least recently seen is forgotten first). A success clears the
    address's failures."""

    def __init__(
        self,
        *,
        attempts: int = 5,
        window: float = 60.0,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if attempts < 1 or window <= 0 or max_entries < 1:
            raise ValueError("attempts and max_entries must be 1 or more, window more than 0")
        self.attempts = attempts
        self.window = window
        self.max_entries = max_entries
        self._clock = clock
        self._data: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def retry_after(self, key: str) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        fails = self._data.get(key)
        if fails is None or len(fails) < self.attempts:
            return 0.0
        return max(0.0, fails[0] + self.window - self._clock())

    def failed(self, key: str) -> None:
        fails = self._data.get(key)
        if fails is None:
            fails = self._data[key] = deque(maxlen=self.attempts)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
        fails.append(self._clock())
        self._data.move_to_end(key)

    def succeeded(self, key: str) -> None:
        self._data.pop(key, None)
