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

TLS (``tls=TlsServerOptions(...)``, Java ``NettyRemotingServer.HandshakeHandler``): in the
disabled mode the loop's own server accepts, as without TLS, and a ClientHello is refused by
the connection. In the permissive and enforcing modes the server accepts sockets itself and
peeks at the first byte without consuming it (``MSG_PEEK``) before the loop takes the socket
over: 0x16 (a ClientHello) gets ``connect_accepted_socket(ssl=...)``, anything else a plain
transport (permissive) or a close with one rate-limited log line (enforcing). The first byte
must come within the idle timeout (Java's idle handler sits beside its handshake handler) and
the handshake must complete within ``handshake_timeout``; sockets waiting for either count
against ``max_connections``, so handshakes that never finish cannot pile up. Once connected, a
TLS connection is the same :class:`~rmq.remoting.connection.Connection` with the same write
buffer marks and limits (the TLS transport counts its unencrypted backlog in its write buffer
size).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any, Self

from rmq.common.log import RateLimitedLog, clip
from rmq.errors import IllegalStateError
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH
from rmq.remoting.connection import (
    DEFAULT_CLOSE_GRACE,
    DEFAULT_FRAME_READ_TIMEOUT,
    DEFAULT_MAX_BYTES_PER_TURN,
    DEFAULT_MAX_FRAMES_PER_TURN,
    DEFAULT_MAX_PARTIAL_FRAME_BYTES,
    DEFAULT_MAX_REQUESTS_IN_FLIGHT,
    DEFAULT_WRITE_BUFFER_HIGH,
    DEFAULT_WRITE_BUFFER_LIMIT,
    Connection,
    ConnectionEvent,
    ConnectionManager,
    FrameBudget,
)
from rmq.remoting.dispatcher import Dispatcher, ProcessorPool
from rmq.remoting.tls import TLS_RECORD_HANDSHAKE, TlsMode, TlsServerOptions

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
        max_frames_per_turn: frames one connection handles per loop turn before the others
            get theirs (default 64).
        max_bytes_per_turn: bytes of frames one connection handles per loop turn (default
            256 KiB).
        max_requests_in_flight: asynchronous requests of one connection running or queued;
            past it the connection stops reading until half are answered (default 1024).
        name: used in logs (default ``"remoting"``).
        tls: :class:`~rmq.remoting.tls.TlsServerOptions` (mode, context, handshake timeout);
            default None = plain TCP, TLS refused (the disabled mode).
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
        max_frames_per_turn: int = DEFAULT_MAX_FRAMES_PER_TURN,
        max_bytes_per_turn: int = DEFAULT_MAX_BYTES_PER_TURN,
        max_requests_in_flight: int = DEFAULT_MAX_REQUESTS_IN_FLIGHT,
        name: str = "remoting",
        tls: TlsServerOptions | None = None,
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
        self.max_frames_per_turn = max_frames_per_turn
        self.max_bytes_per_turn = max_bytes_per_turn
        self.max_requests_in_flight = max_requests_in_flight
        self.name = name
        self.dispatcher = Dispatcher(name)
        self.connection_manager = ConnectionManager(name)
        self._server: asyncio.AbstractServer | None = None
        self._closing = False
        self.tls = tls if tls is not None and tls.mode is not TlsMode.DISABLED else None
        self._listen_sock: socket.socket | None = None  # the TLS modes accept themselves
        self._accept_task: asyncio.Task[None] | None = None
        self._admitting: set[asyncio.Task[None]] = set()  # sockets before their first byte / handshake

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
            max_frames_per_turn=self.max_frames_per_turn,
            max_bytes_per_turn=self.max_bytes_per_turn,
            max_requests_in_flight=self.max_requests_in_flight,
        )

    async def start(self) -> None:
        """Bind and start accepting.

        Raises:
            OSError: the address is in use or cannot be bound.
        """
        if self._server is not None or self._listen_sock is not None:
            raise IllegalStateError(f"{self.name} server already started")
        self.connection_manager.add_listener(self._enforce_cap)
        loop = asyncio.get_running_loop()
        if self.tls is None:
            self._server = await loop.create_server(
                self._make_protocol, self.host, self._port, reuse_address=True, backlog=1024
            )
            log.info("%s: remoting server listening on %s", self.name, self.address)
            return
        self._listen_sock = _listen(self.host, self._port)
        self._port = int(self._listen_sock.getsockname()[1])
        self._accept_task = loop.create_task(self._accept_loop(self._listen_sock), name=f"{self.name}-accept")
        log.info("%s: remoting server listening on %s (TLS %s)", self.name, self.address, self.tls.mode.value)

    # ------------------------------------------------------------------ TLS accept

    async def _accept_loop(self, lsock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(lsock)
            except OSError as e:  # EMFILE and friends: the next accept may work
                _rlog.warning("accept", "%s: accept failed: %s", self.name, e)
                await asyncio.sleep(0.1)
                continue
            if self._closing:
                sock.close()
                continue
            if len(self._admitting) + len(self.connection_manager.connections) >= self.max_connections:
                _rlog.warning(
                    "connection-cap",
                    "%s: %d connections and %d handshakes is the cap of %d, refusing %s",
                    self.name,
                    len(self.connection_manager.connections),
                    len(self._admitting),
                    self.max_connections,
                    _peer(sock),
                )
                sock.close()
                continue
            sock.setblocking(False)
            task = loop.create_task(self._admit(sock))
            self._admitting.add(task)
            task.add_done_callback(self._admitting.discard)

    async def _admit(self, sock: socket.socket) -> None:
        """Peek at the first byte, then hand the socket to the loop with or without TLS."""
        assert self.tls is not None
        loop = asyncio.get_running_loop()
        peer = _peer(sock)
        handed_over = False
        try:
            first = await _peek_first_byte(loop, sock, self.idle_timeout)
            if first is None:
                return  # closed, or silent for the idle timeout, before saying anything
            if first == TLS_RECORD_HANDSHAKE:
                try:
                    await loop.connect_accepted_socket(
                        self._make_protocol,
                        sock,
                        ssl=self.tls.context,
                        ssl_handshake_timeout=self.tls.handshake_timeout,
                    )
                    handed_over = True
                except (OSError, TimeoutError, ConnectionError) as e:
                    _rlog.warning(
                        "tls-handshake",
                        "%s: TLS handshake with %s failed: %s",
                        self.name,
                        peer,
                        clip(e) or type(e).__name__,
                    )
            elif self.tls.mode is TlsMode.ENFORCING:
                _rlog.warning(
                    "tls-enforcing",
                    "%s: closing plain-TCP connection from %s: this server only "
                    "accepts TLS (tls.server.mode=enforcing)",
                    self.name,
                    peer,
                )
            elif self.tls.require_client_cert:
                _rlog.warning(
                    "tls-enforcing",
                    "%s: closing plain-TCP connection from %s: this server requires "
                    "a client certificate (tls.server.need.client.auth=require)",
                    self.name,
                    peer,
                )
            else:
                await loop.connect_accepted_socket(self._make_protocol, sock)
                handed_over = True
        except OSError as e:
            log.debug("%s: connection from %s lost before it was served: %s", self.name, peer, e)
        finally:
            if not handed_over:
                sock.close()

    def _enforce_cap(self, event: ConnectionEvent, conn: Connection, exc: BaseException | None = None) -> None:
        if event is ConnectionEvent.CONNECT:
            if self._closing:
                conn.abort()
            elif len(self.connection_manager.connections) > self.max_connections:
                _rlog.warning(
                    "connection-cap",
                    "%s: %d connections is over the cap of %d, refusing %s",
                    self.name,
                    len(self.connection_manager.connections),
                    self.max_connections,
                    conn.remote_addr,
                )
                conn.abort()

    @property
    def port(self) -> int:
        """The bound port (after ``start()``)."""
        if self._listen_sock is not None:
            return self._port
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
        if (self._server is None and self._listen_sock is None) or self._closing:
            return
        self._closing = True
        if self._server is not None:
            self._server.close()
        if self._accept_task is not None:
            self._accept_task.cancel()
            await asyncio.gather(self._accept_task, return_exceptions=True)
        for task in list(self._admitting):
            task.cancel()
        if self._admitting:
            await asyncio.gather(*self._admitting, return_exceptions=True)
        if self._listen_sock is not None:
            self._listen_sock.close()
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
        if self._server is not None:
            await self._server.wait_closed()
        log.info("%s: remoting server on %s closed", self.name, self.address)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket as ``loop.create_server`` would make it (reuse_address, backlog 1024)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
        sock.listen(1024)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _peer(sock: socket.socket) -> str:
    try:
        addr = sock.getpeername()
    except OSError:
        return "?"
    return f"{addr[0]}:{addr[1]}"


async def _peek_first_byte(loop: asyncio.AbstractEventLoop, sock: socket.socket, timeout: float | None) -> int | None:
    """The first byte the peer sent, left in the socket; None on EOF, error or timeout."""
    fut: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not fut.done():
            fut.set_result(data)

    fd = sock.fileno()
    loop.add_reader(fd, readable)
    try:
        async with asyncio.timeout(timeout):
            data = await fut
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(fd)
    return data[0] if data else None
