"""Connection: one socket's protocol, shared by the server and the client.

Netty's pipeline, flattened into one ``asyncio.Protocol`` whose stages are called directly
(no per-message handler walk)::

    bytes in ─▶ FrameCodec (FrameDecoder) ─▶ IdleStateHandler.touch ─▶ response? ─▶ ResponseTable
                                                                      request?  ─▶ Dispatcher
    replies ◀─ FrameCodec (encode → writelines, batched per read) ◀─ send_response / write
    connect / close / idle / bad input ─▶ ConnectionManager (listeners)

Flow control works both ways. Outgoing: when the transport's write buffer passes its high
water mark (``pause_writing``) the connection stops reading, so a client that does not read
its replies cannot make us buffer without bound; ``resume_writing`` reads again. Replies
produced while handling one read are sent with one ``writelines`` (one vectored write), and
so are commands written outside a read during one loop turn (replies finished by tasks, a
client's pipelined requests): the first such write schedules a flush with ``call_soon``, the
others join it. ``when_written`` tells the layer above when its buffers (zero-copy views of
the store) are no longer referenced by the transport.

Bad input (a malformed frame) closes only this connection, with one log line saying why.
"""
from __future__ import annotations

import asyncio
import enum
import logging
import socket
import struct
import time
from typing import TYPE_CHECKING, Any, Callable

from rmq.errors import (
    RemotingCommandError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode
from rmq.remoting.command import FLAG_ONEWAY, RemotingCommand
from rmq.remoting.idle import IdleStateHandler

if TYPE_CHECKING:  # pragma: no cover
    from rmq.remoting.dispatcher import Dispatcher

__all__ = ["Connection", "ConnectionEvent", "ConnectionManager", "AsyncCall"]

log = logging.getLogger("rmq.remoting")

# A TLS ClientHello starts with record type 0x16; as a RocketMQ length word that would be a
# frame of ≥ 369 MiB, so the first byte alone tells a TLS client apart.
_TLS_HANDSHAKE = 0x16

# Write buffer marks: a pull reply is up to ~256 KiB, so the asyncio default (64 KiB) would
# pause reading after every few replies on a busy connection.
DEFAULT_WRITE_BUFFER_HIGH = 4 * 1024 * 1024
_FRAME_LEN = struct.Struct(">i")

# when_written() gives up after ~95 s (100 × 5 ms + 1900 × 50 ms) of a peer not reading.
_WRITTEN_MAX_CHECKS = 2000
_WRITTEN_GIVE_UP_AFTER = 100 * 0.005 + 1900 * 0.05


class ConnectionEvent(enum.Enum):
    """What ``ConnectionManager`` tells listeners (RocketMQ ``NettyEventType``)."""

    CONNECT = "CONNECT"
    CLOSE = "CLOSE"
    IDLE = "IDLE"
    EXCEPTION = "EXCEPTION"


class ConnectionManager:
    """Tracks live connections and tells listeners about their lifecycle.

    A listener is ``listener(event, conn)``, or ``listener(event, conn, exc)`` for
    EXCEPTION. Listener errors are logged, never raised into the protocol.
    """

    def __init__(self, name: str = "remoting") -> None:
        self.name = name
        self.connections: set[Connection] = set()
        self._listeners: list[Callable[..., Any]] = []

    def add_listener(self, listener: Callable[..., Any]) -> None:
        self._listeners.append(listener)

    def emit(self, event: ConnectionEvent, conn: "Connection", exc: BaseException | None = None) -> None:
        if event is ConnectionEvent.CONNECT:
            self.connections.add(conn)
        elif event is ConnectionEvent.CLOSE:
            self.connections.discard(conn)
        for listener in self._listeners:
            try:
                if exc is None:
                    listener(event, conn)
                else:
                    listener(event, conn, exc)
            except Exception:
                log.exception("%s: connection listener %r failed on %s", self.name, listener, event.name)


class AsyncCall:
    """A pending ``invoke_async``: its callback, deadline and semaphore release.

    Completed exactly once, by the response, the timeout scan, or the connection dropping.
    """

    __slots__ = ("opaque", "callback", "deadline", "timeout", "_release", "done")

    def __init__(self, opaque: int, callback: Callable, deadline: float, timeout: float, release: Callable[[], None] | None) -> None:
        self.opaque = opaque
        self.callback = callback
        self.deadline = deadline
        self.timeout = timeout
        self._release = release
        self.done = False

    def complete(self, response: RemotingCommand | None, exc: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        if self._release is not None:
            self._release()
            self._release = None
        try:
            self.callback(response, exc)
        except Exception:
            log.exception("invoke_async callback %r raised", self.callback)


class Connection(asyncio.Protocol):
    """One TCP connection carrying RemotingCommands both ways.

    Attributes:
        remote_addr: peer ``"ip:port"``.
        local_addr: our ``"ip:port"``.
        attributes: free for the layer above (client id, group, …).
        closed: True once the transport is closing or lost.
        role: ``"server"`` or ``"client"`` (for logs).
    """

    def __init__(
        self,
        dispatcher: "Dispatcher",
        manager: ConnectionManager,
        *,
        role: str = "server",
        idle_timeout: float | None = 120.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        write_buffer_high: int = DEFAULT_WRITE_BUFFER_HIGH,
    ) -> None:
        self._dispatcher = dispatcher
        self._manager = manager
        self.role = role
        self._idle_timeout = idle_timeout
        self._decoder = FrameDecoder(max_frame_length)
        self._write_buffer_high = write_buffer_high
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: IdleStateHandler | None = None
        self._batch: list | None = None  # writes collected during one read or one loop turn
        self._in_read = False  # inside _process_frames (guards re-entry from resume_writing)
        self._batch_bytes = 0
        self._write_paused = False
        self._pending: dict[int, asyncio.Future | AsyncCall] = {}  # the response table
        self._writable: asyncio.Event | None = None
        self._seen_data = False
        self._broken = False  # bad input seen: ignore anything else that arrives
        self._lost: asyncio.Future | None = None
        self.remote_addr = "?"
        self.local_addr = "?"
        self.attributes: dict[str, Any] = {}
        self.closed = False
        self.created_at = time.time()

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._loop = loop = asyncio.get_running_loop()
        self._lost = loop.create_future()
        self._writable = asyncio.Event()
        self._writable.set()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                # Requests and replies are small and latency-bound: never wait for Nagle.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # not TCP (unix socket in tests)
                pass
        self.remote_addr = _fmt_addr(transport.get_extra_info("peername"))
        self.local_addr = _fmt_addr(transport.get_extra_info("sockname"))
        transport.set_write_buffer_limits(high=self._write_buffer_high)
        self._idle = IdleStateHandler(loop, self._idle_timeout, self._on_idle)
        self._idle.start()
        self._manager.emit(ConnectionEvent.CONNECT, self)

    def data_received(self, data: bytes) -> None:
        if self._broken:
            return
        if not self._seen_data:
            self._seen_data = True
            if data and data[0] == _TLS_HANDSHAKE:
                self._bad_input(RemotingCommandError("TLS handshake received, but this port speaks plain TCP"))
                return
        self._idle.touch()  # type: ignore[union-attr]
        self._decoder.feed(data)
        self._process_frames()

    def _process_frames(self) -> None:
        """Decode and handle the buffered frames; replies are batched into one writelines.

        Stops early while the peer is not reading (write buffer over the high mark): the
        frames stay in the decoder and are handled after ``resume_writing``. One read can
        hold thousands of pull requests, so the batch is flushed whenever it passes the
        high mark, which is what lets the transport tell us to pause.
        """
        decoder = self._decoder
        batch = self._batch
        if batch is None:  # (a batch deferred from earlier in this loop turn is joined)
            batch = self._batch = []
            self._batch_bytes = 0
        high = self._write_buffer_high
        self._in_read = True
        try:
            while not self._write_paused:
                try:
                    cmd = decoder.next_frame()
                except RemotingCommandError as exc:
                    self._bad_input(exc)
                    return
                if cmd is None:
                    break
                if cmd.flag & 1:
                    self._on_response(cmd)
                else:
                    self._dispatcher.dispatch(self, cmd)
                if self._batch_bytes >= high and batch:
                    self._transport.writelines(batch)  # type: ignore[union-attr]  # may call pause_writing
                    batch.clear()
                    self._batch_bytes = 0
        except Exception as exc:  # a bug in a stage: report it like uvloop does, drop the connection
            self._loop.call_exception_handler(  # type: ignore[union-attr]
                {"message": f"rmq: unexpected error handling data from {self.remote_addr}",
                 "exception": exc, "protocol": self, "transport": self._transport}
            )
            self._broken = True
            self._transport.abort()  # type: ignore[union-attr]
        finally:
            self._in_read = False
            self._flush_batch()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def pause_writing(self) -> None:
        # The peer is not reading what we send: stop reading its requests until it catches up.
        self._write_paused = True
        self._writable.clear()  # type: ignore[union-attr]
        if not self.closed:
            try:
                self._transport.pause_reading()  # type: ignore[union-attr]
            except (RuntimeError, AttributeError):
                pass
        log.debug("%s: write buffer full, paused reading from %s", self.role, self.remote_addr)

    def resume_writing(self) -> None:
        self._write_paused = False
        self._writable.set()  # type: ignore[union-attr]
        if not self.closed:
            try:
                self._transport.resume_reading()  # type: ignore[union-attr]
            except (RuntimeError, AttributeError):
                pass
            if self._decoder.buffered and not self._broken:
                # frames left over when we paused; not from inside the transport's callback
                self._loop.call_soon(self._resume_frames)  # type: ignore[union-attr]

    def _resume_frames(self) -> None:
        if not self.closed and not self._broken and not self._write_paused and not self._in_read:
            self._process_frames()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._idle is not None:
            self._idle.stop()
        if not self._broken and self._decoder.buffered:
            log.warning("%s: %s closed the connection inside a frame (%d bytes of an incomplete frame dropped)",
                        self.role, self.remote_addr, self._decoder.buffered)
        if self._writable is not None:
            self._writable.set()  # wake writers; they will see `closed`
        cause = exc if exc is not None else ConnectionResetError(f"connection to {self.remote_addr} closed")
        self._fail_pending(cause)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        self._manager.emit(ConnectionEvent.CLOSE, self)

    # ------------------------------------------------------------------ stages

    def _bad_input(self, exc: RemotingCommandError) -> None:
        """One log line, EXCEPTION to listeners, close this connection only."""
        self._broken = True
        log.warning("%s: closing connection from %s: %s", self.role, self.remote_addr, exc)
        if self._batch:  # replies to the good frames before the bad one still go out
            self._transport.writelines(self._batch)  # type: ignore[union-attr]
            self._batch.clear()
        self._manager.emit(ConnectionEvent.EXCEPTION, self, exc)
        self.close()

    def _on_idle(self) -> None:
        log.info("%s: connection %s idle for %.0fs, closing", self.role, self.remote_addr, self._idle_timeout or 0)
        self._manager.emit(ConnectionEvent.IDLE, self)
        self.close()

    def _on_response(self, cmd: RemotingCommand) -> None:
        waiter = self._pending.pop(cmd.opaque, None)
        if waiter is None:
            # Timed out already, or a peer answering something we never asked: harmless.
            log.debug("%s: response opaque=%s from %s matches no waiting request", self.role, cmd.opaque, self.remote_addr)
            return
        if type(waiter) is AsyncCall:
            waiter.complete(cmd, None)
        elif not waiter.done():
            waiter.set_result(cmd)

    def _fail_pending(self, cause: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            err = RemotingConnectError(self.remote_addr, f"connection to {self.remote_addr} closed while waiting for a response")
            err.__cause__ = cause
            if type(waiter) is AsyncCall:
                waiter.complete(None, err)
            elif not waiter.done():
                waiter.set_exception(err)

    # ------------------------------------------------------------------ writing

    def write(self, cmd: RemotingCommand) -> None:
        """Encode and write any command.

        Raises:
            RemotingSendRequestError: the connection is closed or closing.
        """
        transport = self._transport
        if transport is None or self.closed or transport.is_closing():
            raise RemotingSendRequestError(self.remote_addr, f"connection to {self.remote_addr} is closed")
        parts = encode(cmd)
        self._idle.touch()  # type: ignore[union-attr]
        batch = self._batch
        if batch is None:
            # First write of this loop turn outside a read: flush at the end of the turn, so
            # that what else is written meanwhile leaves in the same vectored write.
            batch = self._batch = []
            self._batch_bytes = 0
            self._loop.call_soon(self._flush_batch)  # type: ignore[union-attr]
        batch.extend(parts)
        self._batch_bytes += _FRAME_LEN.unpack_from(parts[0])[0]
        if self._batch_bytes >= self._write_buffer_high and not self._in_read:
            self._flush_batch()  # a large burst: let the transport see it (and pause us)

    def _flush_batch(self) -> None:
        """Hand the collected writes to the transport in one ``writelines``."""
        batch = self._batch
        if batch is None:
            return
        self._batch = None
        self._batch_bytes = 0
        transport = self._transport
        if batch and transport is not None and not transport.is_closing():
            transport.writelines(batch)  # may call pause_writing

    def when_written(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once everything written so far has left this process.

        That is when neither our batch nor the transport's buffer still references the
        written buffers, so zero-copy views may be released. Also called when the
        connection closes (the transport drops its buffer). asyncio reports no "drained"
        event below the high-water mark, so this checks on the next loop turn and then polls.
        """
        self._loop.call_soon(self._check_written, callback, 0)  # type: ignore[union-attr]

    def _check_written(self, callback: Callable[[], None], attempt: int) -> None:
        transport = self._transport
        done = self.closed or transport is None or (self._batch is None and transport.get_write_buffer_size() == 0)
        if done or attempt >= _WRITTEN_MAX_CHECKS:
            if not done:
                log.warning("%s: %s has not read a reply for ~%.0fs; releasing its buffers anyway",
                            self.role, self.remote_addr, _WRITTEN_GIVE_UP_AFTER)
            callback()
            return
        # 5 ms steps for the first half second (a peer reading slowly), then 50 ms.
        self._loop.call_later(0.005 if attempt < 100 else 0.05,  # type: ignore[union-attr]
                              self._check_written, callback, attempt + 1)

    def send_response(self, cmd: RemotingCommand) -> None:
        """Write a response; ignored (debug log) if the connection has closed meanwhile."""
        if self.closed or self._transport is None or self._transport.is_closing():
            log.debug("%s: dropping response opaque=%s to closed %s", self.role, cmd.opaque, self.remote_addr)
            return
        try:
            self.write(cmd)
        except RemotingCommandError as exc:  # unencodable (bad body type, header over 16 MiB)
            log.error("%s: cannot encode response code=%s opaque=%s: %s", self.role, cmd.code, cmd.opaque, exc)
            # the requester still gets an answer rather than a timeout
            self.write(RemotingCommand(1, opaque=cmd.opaque, flag=cmd.flag, remark=f"cannot encode response: {exc}",
                                       serialize_type=cmd.serialize_type if cmd.serialize_type in (0, 1) else 0))

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Write ``cmd`` as a oneway request (no reply expected)."""
        cmd.flag |= FLAG_ONEWAY
        self.write(cmd)

    async def invoke(self, cmd: RemotingCommand, timeout: float | None = 3.0) -> RemotingCommand:
        """Send a request on this connection and wait for its response.

        Args:
            cmd: the request (its ``opaque`` keys the response table).
            timeout: seconds (default 3.0); None waits forever.

        Raises:
            RemotingTimeoutError: no response in time (the table entry is removed).
            RemotingConnectError: the connection dropped while waiting (``__cause__`` set).
            RemotingSendRequestError: the connection was already closed.
        """
        opaque = cmd.opaque
        if opaque in self._pending:
            raise RemotingSendRequestError(self.remote_addr, f"opaque {opaque} is already waiting on {self.remote_addr}")
        fut = self._loop.create_future()  # type: ignore[union-attr]
        self._pending[opaque] = fut
        try:
            async with asyncio.timeout(timeout):
                if not self._writable.is_set():  # type: ignore[union-attr]
                    await self._writable.wait()  # type: ignore[union-attr]
                self.write(cmd)
                return await fut
        except TimeoutError:
            raise RemotingTimeoutError(self.remote_addr, timeout) from None
        finally:
            if self._pending.get(opaque) is fut:
                del self._pending[opaque]

    def register_async(self, call: AsyncCall) -> None:
        """Put an ``invoke_async`` entry in the response table (the client writes the request)."""
        self._pending[call.opaque] = call

    def unregister(self, opaque: int) -> None:
        self._pending.pop(opaque, None)

    def expire(self, now: float) -> int:
        """Fail ``AsyncCall`` entries past their deadline (the 1 s scan). Returns how many."""
        expired = [c for c in self._pending.values() if type(c) is AsyncCall and c.deadline <= now]
        for call in expired:
            self._pending.pop(call.opaque, None)
            call.complete(None, RemotingTimeoutError(self.remote_addr, call.timeout))
        return len(expired)

    @property
    def pending_count(self) -> int:
        """Entries in this connection's response table."""
        return len(self._pending)

    @property
    def writable(self) -> bool:
        """False while the peer is not reading (write buffer above the high mark)."""
        return self._writable is None or self._writable.is_set()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close after flushing what is buffered; idempotent."""
        self._flush_batch()
        self.closed = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        """Close now, dropping buffered writes."""
        self.closed = True
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        """Wait until ``connection_lost`` ran."""
        if self._lost is not None:
            await asyncio.shield(self._lost)

    def __repr__(self) -> str:
        return f"<Connection {self.role} {self.local_addr}->{self.remote_addr}{' closed' if self.closed else ''}>"


def _fmt_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr) if addr else "?"
