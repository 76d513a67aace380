"""RemotingServer: accept connections and serve RemotingCommands (Java ``NettyRemotingServer``).

Each accepted socket gets a :class:`~rmq.remoting.connection.Connection` protocol wired to the
server's :class:`~rmq.remoting.dispatcher.Dispatcher` (processor table) and
:class:`~rmq.remoting.connection.ConnectionManager` (lifecycle listeners).

Lifecycle::

    server = RemotingServer(port=0, name="broker")
    server.register_processor(RequestCode.PULL_MESSAGE, pull_processor, pull_pool)
    await server.start()          # listening; server.port / server.address
    ...
    await server.close()          # stop accepting, finish in-flight work, close connections
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Self

from rmq.common.log import RateLimitedLog
from rmq.errors import IllegalStateError
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH
from rmq.remoting.connection import (
    DEFAULT_CLOSE_GRACE,
    DEFAULT_FRAME_READ_TIMEOUT,
    DEFAULT_MAX_PARTIAL_FRAME_BYTES,
    DEFAULT_WRITE_BUFFER_HIGH,
    DEFAULT_WRITE_BUFFER_LIMIT,
    Connection,
    ConnectionEvent,
    ConnectionManager,
    FrameBudget,
)
from rmq.remoting.dispatcher import Dispatcher, ProcessorPool

__all__ = ["RemotingServer"]

log = logging.getLogger("rmq.remoting")
_rlog = RateLimitedLog(log)


class RemotingServer:
    """A TCP server speaking the RocketMQ remoting protocol.

    Args:
        host: address to bind (default ``"127.0.0.1"``).
        port: port to bind; 0 (default) picks a free one, see :attr:`port`.
        idle_timeout: close connections with no reads or writes for this many seconds
            (default 120, Java ``serverChannelMaxIdleTimeSeconds``); None disables.
        max_frame_length: refuse larger frames (default 16 MiB).
        max_connections: refuse connections beyond this many (default 65 536).
        write_buffer_high: per-connection write buffer high mark in bytes (default 4 MiB);
            above it the connection stops reading requests until the peer catches up.
        write_buffer_limit: per-connection bytes buffered for a peer before it is aborted
            as one that does not read (default 32 MiB); None disables.
        frame_read_timeout: seconds a started frame may take to arrive completely (default
            30); None disables.
        max_partial_frame_bytes: bytes of unfinished frames all connections may buffer
            together (default 64 MiB); the connection whose read goes past it is closed.
            None disables.
        close_grace: seconds a closing connection may wait for its peer to take the last
            replies before it is aborted (default 3).
        name: used in logs (default ``"remoting"``).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        idle_timeout: float | None = 120.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_connections: int = 65536,
        write_buffer_high: int = DEFAULT_WRITE_BUFFER_HIGH,
        write_buffer_limit: int | None = DEFAULT_WRITE_BUFFER_LIMIT,
        frame_read_timeout: float | None = DEFAULT_FRAME_READ_TIMEOUT,
        max_partial_frame_bytes: int | None = DEFAULT_MAX_PARTIAL_FRAME_BYTES,
        close_grace: float = DEFAULT_CLOSE_GRACE,
        name: str = "remoting",
    ) -> None:
        self.host = host
        self._port = port
        self.idle_timeout = idle_timeout
        self.max_frame_length = max_frame_length
        self.max_connections = max_connections
        self.write_buffer_high = write_buffer_high
        self.write_buffer_limit = write_buffer_limit
        self.frame_read_timeout = frame_read_timeout
        self.frame_budget = FrameBudget(max_partial_frame_bytes)
        self.close_grace = close_grace
        self.name = name
        self.dispatcher = Dispatcher(name)
        self.connection_manager = ConnectionManager(name)
        self._server: asyncio.AbstractServer | None = None
        self._closing = False

    # ------------------------------------------------------------------ configuration

    def register_processor(self, code: int, processor: Any, pool: ProcessorPool | None = None) -> None:
        """Serve request ``code`` with ``processor`` (async work bounded by ``pool``)."""
        self.dispatcher.register_processor(code, processor, pool)

    def register_default_processor(self, processor: Any, pool: ProcessorPool | None = None) -> None:
        """Serve every code without its own processor (the name server does this)."""
        self.dispatcher.register_default_processor(processor, pool)

    def add_connection_listener(self, listener: Callable[..., Any]) -> None:
        """``listener(event, conn)`` / ``listener(ConnectionEvent.EXCEPTION, conn, exc)``."""
        self.connection_manager.add_listener(listener)

    @property
    def connections(self) -> set[Connection]:
        """The live connections."""
        return self.connection_manager.connections

    # ------------------------------------------------------------------ lifecycle

    def _make_protocol(self) -> Connection:
        return Connection(
            self.dispatcher,
            self.connection_manager,
            role=self.name,
            idle_timeout=self.idle_timeout,
            max_frame_length=self.max_frame_length,
            write_buffer_high=self.write_buffer_high,
            write_buffer_limit=self.write_buffer_limit,
            frame_read_timeout=self.frame_read_timeout,
            frame_budget=self.frame_budget,
            close_grace=self.close_grace,
        )

    async def start(self) -> None:
        """Bind and start accepting.

        Raises:
            OSError: the address is in use or cannot be bound.
        """
        if self._server is not None:
            raise IllegalStateError(f"{self.name} server already started")
        self.connection_manager.add_listener(self._enforce_cap)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_protocol, self.host, self._port, reuse_address=True, backlog=1024
        )
        log.info("%s: remoting server listening on %s", self.name, self.address)

    def _enforce_cap(self, event: ConnectionEvent, conn: Connection, exc: BaseException | None = None) -> None:
        if event is ConnectionEvent.CONNECT:
            if self._closing:
                conn.abort()
            elif len(self.connection_manager.connections) > self.max_connections:
                _rlog.warning("connection-cap", "%s: %d connections is over the cap of %d, refusing %s",
                            self.name, len(self.connection_manager.connections), self.max_connections, conn.remote_addr)
                conn.abort()

    @property
    def port(self) -> int:
        """The bound port (after ``start()``)."""
        sockets = getattr(self._server, "sockets", None)  # asyncio.Server / uvloop Server
        if not sockets:
            return self._port
        return int(sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        """``"host:port"`` as bound."""
        return f"{self.host}:{self.port}"

    async def close(self, grace: float = 3.0) -> None:
        """Stop accepting, let in-flight async requests finish (up to ``grace`` s), close all.

        Idempotent.
        """
        if self._server is None or self._closing:
            return
        self._closing = True
        self._server.close()
        await self.dispatcher.close(grace)
        conns = list(self.connection_manager.connections)
        for conn in conns:
            conn.close()
        if conns:
            _, pending = await asyncio.wait([asyncio.ensure_future(c.wait_closed()) for c in conns], timeout=grace)
            for t in pending:
                t.cancel()
            for conn in conns:
                if not conn.lost:
                    conn.abort()
        await self._server.wait_closed()
        log.info("%s: remoting server on %s closed", self.name, self.address)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
