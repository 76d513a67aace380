"""A small HTTP/1.x server for Prometheus' ``GET /metrics``, on the caller's event loop.

The broker and ``rmq exporter`` both serve their metrics with it. It only answers ``GET`` (and
``HEAD``) of ``/metrics`` (the body from an async ``render`` callable, which does the heavy
work off the loop) and ``/`` (a line pointing at ``/metrics``); anything else is 404 or 405.
One request per connection (``Connection: close``), as Prometheus scrapes.

Bounds: at most ``max_connections`` connections at once (one more is closed at once), a
request head of at most 8 KiB read within ``read_timeout`` seconds, a response written within
``write_timeout`` seconds, else the connection is closed. A port that is taken is one warning
and :meth:`MetricsHttpServer.start` returns False: the daemon carries on without metrics, so
that brokers can run side by side.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from rmq.common.log import RateLimitedLog, clip
from rmq.common.metrics import CONTENT_TYPE

__all__ = ["MetricsHttpServer"]

log = logging.getLogger("rmq.metrics")
_rlog = RateLimitedLog(log, interval=60)

_MAX_HEAD = 8192
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class MetricsHttpServer:
    """``GET /metrics`` on ``host:port`` answered with ``await render()``.

    Args:
        host: address to bind.
        port: port to bind (0: an ephemeral one; see :attr:`port`).
        render: returns the exposition text; an exception becomes a 500 and one
            rate-limited log line.
        name: who serves (in log lines), e.g. ``"broker"``.
        max_connections: connections served at once (16).
        read_timeout: seconds to receive the request head (10).
        write_timeout: seconds to write the response (30).
    """

    def __init__(
        self,
        host: str,
        port: int,
        render: Callable[[], Awaitable[bytes]],
        *,
        name: str = "metrics",
        max_connections: int = 16,
        read_timeout: float = 10.0,
        write_timeout: float = 30.0,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.render = render
        self.name = name
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.refused = 0

    @property
    def port(self) -> int:
        """The bound port (0 when not listening)."""
        if self._server is None or not self._server.sockets:
            return 0
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def start(self) -> bool:
        """Listen; False (and one warning) when the address cannot be bound."""
        try:
            self._server = await asyncio.start_server(
                self._on_connection, self.host, self.requested_port, limit=_MAX_HEAD, reuse_address=True
            )
        except OSError as e:
            where = f"{self.host}:{self.requested_port}"
            _rlog.warning(
                f"metrics-bind-{where}",
                "%s: cannot serve metrics on %s (%s); carrying on without a "
                "metrics endpoint (set metricsPort to a free port, or 0 for none)",
                self.name,
                where,
                e.strerror or e,
            )
            return False
        log.info("%s: metrics on http://%s:%d/metrics", self.name, self.host, self.port)
        return True

    async def close(self) -> None:
        """Stop listening and end the connections being served."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._handlers) >= self.max_connections or task is None:
            self.refused += 1
            _rlog.warning(
                f"metrics-busy-{self.name}",
                "%s: %d metrics connections open; one more closed",
                self.name,
                len(self._handlers),
            )
            writer.close()
            return
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(self.read_timeout):
            head = await reader.readuntil(b"\r\n\r\n")
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await self._respond(writer, 400, b"bad request\n", "text/plain; charset=utf-8")
            return
        method, target = parts[0], parts[1]
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            await self._respond(writer, 405, b"only GET\n", "text/plain; charset=utf-8", extra="Allow: GET, HEAD\r\n")
            return
        if path == "/":
            await self._respond(
                writer, 200, b"rmq metrics: /metrics\n", "text/plain; charset=utf-8", head_only=method == "HEAD"
            )
            return
        if path != "/metrics":
            await self._respond(writer, 404, b"not found; see /metrics\n", "text/plain; charset=utf-8")
            return
        try:
            body = await self.render()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a failed collection is a 500, not a dead server
            _rlog.error(
                f"metrics-render-{self.name}", "%s: collecting metrics failed: %s", self.name, clip(e), exc_info=True
            )
            await self._respond(writer, 500, b"collecting metrics failed\n", "text/plain; charset=utf-8")
            return
        await self._respond(writer, 200, body, CONTENT_TYPE, head_only=method == "HEAD")

    async def _respond(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        content_type: str,
        *,
        head_only: bool = False,
        extra: str = "",
    ) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
        ).encode("latin-1")
        writer.write(head if head_only else head + body)
        async with asyncio.timeout(self.write_timeout):
            await writer.drain()
