"""An asyncio client of etcd v3 over its JSON gRPC gateway (``/v3/kv/*``, ``/v3/lease/*``,
``/v3/watch``), with aiohttp.

Why not a library: PyPI has no well-kept asyncio etcd v3 client (``etcd3`` and ``aetcd3`` are
synchronous or unmaintained and pin old grpcio/protobuf), while the gRPC gateway is etcd's
documented HTTP API, served by every etcd 3.4+ (Debian bookworm's ``etcd-server`` 3.4) on its
client URL. The gateway speaks JSON: keys and values are base64, int64 fields are decimal
strings, fields equal to their zero value are left out (``succeeded`` is absent when a txn
failed, ``kvs`` when nothing matched).

Every call has a timeout (``timeout``, default 3 s). Several endpoints (``http://h:p``) are
tried in turn: a connection error, a timeout or an HTTP 5xx/503 moves to the next one and the
last one that answered is tried first next time; when none answers the call raises
:class:`EtcdUnavailable`. An answer of etcd itself (HTTP 4xx with a gRPC status, e.g.
"requested lease not found") raises :class:`EtcdRequestError` at once. Answers larger than
``max_response_bytes`` (16 MiB) are refused.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from rmq.common.log import RateLimitedLog
from rmq.errors import RMQError

__all__ = [
    "EtcdClient",
    "EtcdError",
    "EtcdRequestError",
    "EtcdUnavailable",
    "KeyValue",
    "TxnResult",
    "WatchEvent",
    "parse_endpoints",
]

log = logging.getLogger("rmq.controller.etcd")


class EtcdError(RMQError):
    """A call to etcd failed."""


class EtcdUnavailable(EtcdError):
    """No endpoint answered within the timeout (connection refused, timeout, 5xx)."""


class EtcdRequestError(EtcdError):
    """etcd answered with an error (a gRPC status: ``code``, ``message``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.message = message


def parse_endpoints(text: str) -> list[str]:
    """``http://h:p[,http://h:p...]`` (commas or semicolons) → a list; ``ValueError`` when
    empty or an endpoint is not ``http(s)://host:port``."""
    out = []
    for part in text.replace(";", ",").split(","):
        part = part.strip().rstrip("/")
        if not part:
            continue
        if not part.startswith(("http://", "https://")) or ":" not in part.split("//", 1)[1]:
            raise ValueError(f"etcd endpoint {part!r} is not http://host:port")
        out.append(part)
    if not out:
        raise ValueError("no etcd endpoint given (http://host:port[,http://host:port...])")
    return out


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def _prefix_end(prefix: bytes) -> bytes:
    """etcd's ``range_end`` for every key starting with ``prefix`` (clientv3 ``GetPrefixRangeEnd``)."""
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as etcd holds it: revisions of its creation and last change, its lease."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KeyValue:
        return cls(
            _unb64(d.get("key")),
            _unb64(d.get("value")),
            int(d.get("create_revision", 0)),
            int(d.get("mod_revision", 0)),
            int(d.get("version", 0)),
            int(d.get("lease", 0)),
        )


@dataclass(frozen=True, slots=True)
class TxnResult:
    """A txn's outcome: whether the comparisons held, the store revision after it, and the
    key-values of the branch's range requests (the current value on a failed CAS)."""

    succeeded: bool
    revision: int
    kvs: tuple[KeyValue, ...] = ()


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A change seen by a watch: ``PUT`` or ``DELETE`` of ``kv.key``."""

    type: str
    kv: KeyValue


class EtcdClient:
    """etcd v3 over the JSON gateway (see the module docstring).

    Args:
        endpoints: client URLs, ``http://host:port``; tried in turn.
        timeout: seconds per call and per endpoint (default 3.0).
        max_response_bytes: the largest answer read (default 16 MiB).
    """

    def __init__(self, endpoints: Sequence[str], *, timeout: float = 3.0, max_response_bytes: int = 16 << 20) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self._current = 0
        self._session: aiohttp.ClientSession | None = None
        self._rate_log = RateLimitedLog(log)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64, force_close=False),
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(self, path: str, payload: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """POST ``payload`` to ``/v3/<path>`` on the first endpoint that answers; its JSON."""
        t = self.timeout if timeout is None else timeout
        problems: list[str] = []
        n = len(self.endpoints)
        for i in range(n):
            idx = (self._current + i) % n
            url = f"{self.endpoints[idx]}/v3/{path}"
            try:
                async with asyncio.timeout(t):
                    async with self._http().post(url, json=payload) as resp:
                        raw = await resp.content.read(self.max_response_bytes + 1)
                        status = resp.status
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                problems.append(f"{self.endpoints[idx]}: {type(e).__name__} {e}".strip())
                continue
            if len(raw) > self.max_response_bytes:
                raise EtcdError(f"etcd answer to {path} over {self.max_response_bytes} bytes")
            try:
                d = json.loads(raw) if raw else {}
            except ValueError:
                problems.append(f"{self.endpoints[idx]}: HTTP {status} not JSON")
                continue
            if status >= 500 and not (isinstance(d, dict) and "code" in d and status != 503):
                problems.append(f"{self.endpoints[idx]}: HTTP {status} {str(d)[:200]}")
                continue
            if not isinstance(d, dict):
                raise EtcdError(f"etcd answer to {path} is not a JSON object")
            if status != 200 or "error" in d:
                code = int(d.get("code", 2) or 2)
                # 14 UNAVAILABLE (no leader, shutting down) and 4 DEADLINE_EXCEEDED: another
                # member may do better
                if code in (4, 14):
                    problems.append(f"{self.endpoints[idx]}: {d.get('message') or d.get('error')}")
                    continue
                raise EtcdRequestError(code, str(d.get("message") or d.get("error") or f"HTTP {status}"))
            self._current = idx
            return d
        self._rate_log.warning("etcd-unavailable", "no etcd endpoint answered %s: %s", path, "; ".join(problems))
        raise EtcdUnavailable(f"no etcd endpoint answered {path}: {'; '.join(problems)}")

    # -- kv ------------------------------------------------------------------------------------

    async def get(self, key: bytes | str) -> KeyValue | None:
        d = await self.call("kv/range", {"key": _b64(key)})
        kvs = d.get("kvs") or []
        return KeyValue.from_json(kvs[0]) if kvs else None

    async def get_prefix(self, prefix: bytes | str, *, limit: int = 0) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` (at most ``limit``, 0 = all) and the store revision."""
        p = prefix.encode() if isinstance(prefix, str) else prefix
        # every key: etcd's "from \0 to \0" (an empty key is refused)
        payload: dict[str, Any] = {"key": _b64(p or b"\0"), "range_end": _b64(_prefix_end(p))}
        if limit:
            payload["limit"] = limit
        d = await self.call("kv/range", payload)
        return [KeyValue.from_json(kv) for kv in d.get("kvs") or []], int(d.get("header", {}).get("revision", 0))

    async def put(self, key: bytes | str, value: bytes | str, *, lease: int = 0) -> int:
        """The store revision of the write."""
        payload: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            payload["lease"] = str(lease)
        d = await self.call("kv/put", payload)
        return int(d.get("header", {}).get("revision", 0))

    async def delete(self, key: bytes | str) -> int:
        """How many keys were deleted (0 or 1)."""
        d = await self.call("kv/deleterange", {"key": _b64(key)})
        return int(d.get("deleted", 0))

    async def txn(
        self, compare: list[dict[str, Any]], success: list[dict[str, Any]], failure: list[dict[str, Any]]
    ) -> TxnResult:
        """A raw txn (the gateway's JSON shapes; see :meth:`cmp_mod`, :meth:`op_put`...)."""
        d = await self.call("kv/txn", {"compare": compare, "success": success, "failure": failure})
        kvs: list[KeyValue] = []
        for r in d.get("responses") or []:
            rr = r.get("response_range")
            if rr:
                kvs.extend(KeyValue.from_json(kv) for kv in rr.get("kvs") or [])
        return TxnResult(bool(d.get("succeeded", False)), int(d.get("header", {}).get("revision", 0)), tuple(kvs))

    @staticmethod
    def cmp_create(key: bytes | str, create_revision: int) -> dict[str, Any]:
        """Compare: ``key``'s create revision equals ``create_revision`` (0: the key is absent)."""
        return {"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": str(create_revision)}

    @staticmethod
    def cmp_mod(key: bytes | str, mod_revision: int) -> dict[str, Any]:
        """Compare: ``key``'s last change is ``mod_revision`` (0: the key is absent)."""
        return {"key": _b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)}

    @staticmethod
    def cmp_value(key: bytes | str, value: bytes | str) -> dict[str, Any]:
        return {"key": _b64(key), "target": "VALUE", "result": "EQUAL", "value": _b64(value)}

    @staticmethod
    def op_put(key: bytes | str, value: bytes | str, *, lease: int = 0) -> dict[str, Any]:
        put: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            put["lease"] = str(lease)
        return {"request_put": put}

    @staticmethod
    def op_get(key: bytes | str) -> dict[str, Any]:
        return {"request_range": {"key": _b64(key)}}

    @staticmethod
    def op_delete(key: bytes | str) -> dict[str, Any]:
        return {"request_delete_range": {"key": _b64(key)}}

    async def put_if_absent(self, key: bytes | str, value: bytes | str, *, lease: int = 0) -> TxnResult:
        """Create ``key`` unless it exists; on failure ``kvs`` holds the current one."""
        return await self.txn([self.cmp_create(key, 0)], [self.op_put(key, value, lease=lease)], [self.op_get(key)])

    # -- leases --------------------------------------------------------------------------------

    async def lease_grant(self, ttl: int) -> tuple[int, int]:
        """A new lease: ``(id, ttl)`` (etcd may raise a TTL below its minimum)."""
        d = await self.call("lease/grant", {"TTL": str(ttl)})
        return int(d["ID"]), int(d.get("TTL", ttl))

    async def lease_keepalive(self, lease: int, *, timeout: float | None = None) -> int:
        """Renew ``lease``; its TTL now, 0 when etcd no longer has it (expired or revoked)."""
        d = await self.call("lease/keepalive", {"ID": str(lease)}, timeout=timeout)
        return int((d.get("result") or {}).get("TTL", 0))

    async def lease_revoke(self, lease: int) -> None:
        """Revoke ``lease`` (its keys are deleted); a lease already gone is fine."""
        try:
            await self.call("lease/revoke", {"ID": str(lease)})
        except EtcdRequestError as e:
            if e.code != 5:  # NOT_FOUND: expired already
                raise

    # -- watch ---------------------------------------------------------------------------------

    async def watch(
        self, key: bytes | str, *, start_revision: int = 0, prefix: bool = False
    ) -> AsyncIterator[WatchEvent]:
        """Changes of ``key`` (or every key under it) from ``start_revision`` (0: from now), as
        they happen. Ends (raises :class:`EtcdUnavailable`) when the stream breaks; the caller
        re-reads and watches again. No per-call timeout: it lives until cancelled."""
        k = key.encode() if isinstance(key, str) else key
        req: dict[str, Any] = {"key": _b64(k)}
        if prefix:
            req["range_end"] = _b64(_prefix_end(k))
        if start_revision:
            req["start_revision"] = str(start_revision)
        url = f"{self.endpoints[self._current]}/v3/watch"
        try:
            async with asyncio.timeout(self.timeout):
                resp = await self._http().post(url, json={"create_request": req})
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            self._current = (self._current + 1) % len(self.endpoints)
            raise EtcdUnavailable(f"watch on {url}: {type(e).__name__} {e}") from None
        try:
            if resp.status != 200:
                raise EtcdUnavailable(f"watch on {url}: HTTP {resp.status}")
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, OSError, ValueError) as e:
                    raise EtcdUnavailable(f"watch on {url} broke: {e}") from None
                if not line:
                    raise EtcdUnavailable(f"watch on {url} ended")
                if len(line) > self.max_response_bytes:
                    raise EtcdError("etcd watch event over the size limit")
                try:
                    d = json.loads(line)
                except ValueError:
                    raise EtcdUnavailable(f"watch on {url}: not JSON") from None
                if "error" in d:
                    raise EtcdUnavailable(f"watch on {url}: {d.get('message') or d.get('error')}")
                result = d.get("result") or {}
                if result.get("canceled"):
                    raise EtcdUnavailable(f"watch on {url} cancelled: {result.get('cancel_reason', '')}")
                for ev in result.get("events") or []:
                    yield WatchEvent(ev.get("type", "PUT"), KeyValue.from_json(ev.get("kv") or {}))
        finally:
            resp.close()
