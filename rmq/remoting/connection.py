"""Connection: one socket's protocol, shared by the server and the client.

Netty's pipeline, flattened into one ``asyncio.Protocol`` whose stages are called directly
(no per-message handler walk)::

    bytes in ─▶ FrameCodec (FrameDecoder) ─▶ IdleStateHandler.touch ─▶ response? ─▶ ResponseTable
                    │                                                 request?  ─▶ Dispatcher
                    └─ frame_hook (whole frame, before decoding) ─▶ reply bytes ─▶ send_response_frame
    replies ◀─ FrameCodec (encode → writelines, batched per read) ◀─ send_response / write
    connect / close / idle / bad input ─▶ ConnectionManager (listeners)

The frame hook is the dispatcher's ``frame_hooks(conn)`` (set by the broker: its plain SEND
is stored straight from the frame bytes, rmq/broker/processors/_sendpath.pyx); a frame it declines is decoded
and dispatched as any other, and one it takes counts as a frame done like any other.

Flow control works both ways. Outgoing: when the transport's write buffer passes its high
water mark (``pause_writing``) the connection stops reading, so a client that does not read
its replies cannot make us buffer without bound; ``resume_writing`` reads again. Replies that
are not requested by a read (long-polling wake-ups, async completions) can still grow the
buffer of such a client: past ``write_buffer_limit`` the connection is aborted, its buffered
replies dropped, and nobody else waits for it. Replies produced while handling one read are
sent with one ``writelines`` (one vectored write), and so are commands written outside a read
during one loop turn (replies finished by tasks, a client's pipelined requests): the first
such write schedules a flush with ``call_soon``, the others join it. ``when_written`` tells the
layer above when its buffers (zero-copy views of the store) are no longer referenced by the
transport; its callbacks are kept per connection and released together (one check per
connection, not per reply).

Fairness: a connection handles at most ``max_frames_per_turn`` frames and
``max_bytes_per_turn`` bytes of frames per loop turn. When a read holds more (one write of
100 000 pipelined pulls), the connection stops reading, lets the loop serve the other
connections (``call_soon`` puts its next slice behind the reads already due), and reads again
once its decoder is drained; so one client's pipeline costs another client's round trip at
most one slice of work per turn. Requests that become tasks (the dispatcher's pools) are
counted per connection: past ``max_requests_in_flight`` the connection stops reading until
half of them are answered, so one client cannot fill a pool's queue for everyone.

Incoming: a frame once started must be complete within ``frame_read_timeout`` (a client
trickling one byte a second is closed, although each byte resets the idle timer), and the
bytes of all unfinished frames of a server count against one shared :class:`FrameBudget`;
the connection whose read takes it over the budget is closed.

Closing: ``close()`` flushes and closes gracefully, but a peer that does not read would keep a
graceful close waiting forever, so the transport is aborted after ``close_grace`` seconds.

Bad input (a malformed frame) closes only this connection, with one log line saying why.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union, cast

from rmq.common.log import RateLimitedLog, clip
from rmq.common.net import set_tcp_nodelay
from rmq.errors import (
    RemotingCommandError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rmq.protocol.command import FLAG_ONEWAY, RemotingCommand
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode
from rmq.remoting.idle import IdleStateHandler
from rmq.remoting.tls import TLS_RECORD_HANDSHAKE

if TYPE_CHECKING:  # pragma: no cover
    from rmq.remoting.dispatcher import Dispatcher

__all__ = [
    "DEFAULT_CLOSE_GRACE",
    "DEFAULT_FRAME_READ_TIMEOUT",
    "DEFAULT_MAX_BYTES_PER_TURN",
    "DEFAULT_MAX_FRAMES_PER_TURN",
    "DEFAULT_MAX_REQUESTS_IN_FLIGHT",
    "DEFAULT_MAX_PARTIAL_FRAME_BYTES",
    "DEFAULT_WRITE_BUFFER_HIGH",
    "DEFAULT_WRITE_BUFFER_LIMIT",
    "AsyncCall",
    "Connection",
    "ConnectionEvent",
    "ConnectionManager",
    "FrameBudget",
]

log = logging.getLogger("rmq.remoting")
# Peers can repeat these as often as they like: one line per kind per 10 s.
_rlog = RateLimitedLog(log)

# A TLS ClientHello starts with record type 0x16; as a RocketMQ length word that would be a
# frame of ≥ 369 MiB, so the first byte alone tells a TLS client apart. A server with TLS on
# looks at it before the connection exists (RemotingServer); here it is refused.
_TLS_HANDSHAKE = TLS_RECORD_HANDSHAKE

# Write buffer marks: a pull reply is up to ~256 KiB, so the asyncio default (64 KiB) would
# pause reading after every few replies on a busy connection.
DEFAULT_WRITE_BUFFER_HIGH = 4 * 1024 * 1024
#: Above this many buffered bytes the peer is not reading at all: abort. Twice the largest
#: frame, so one maximal reply always fits behind a full high mark.
DEFAULT_WRITE_BUFFER_LIMIT = 2 * DEFAULT_MAX_FRAME_LENGTH
#: Seconds a started frame may take to arrive completely.
DEFAULT_FRAME_READ_TIMEOUT = 30.0
#: Bytes of unfinished frames buffered by all connections of one server together.
DEFAULT_MAX_PARTIAL_FRAME_BYTES = 64 * 1024 * 1024
#: Seconds a graceful close may wait for the peer to take our buffered writes.
DEFAULT_CLOSE_GRACE = 3.0
#: Frames one connection handles in one loop turn before the others get theirs (Netty reads
#: at most ``maxMessagesPerRead`` = 16 messages per channel per event-loop pass).
DEFAULT_MAX_FRAMES_PER_TURN = 64
#: Bytes of frames one connection handles in one loop turn (at least one whole frame).
DEFAULT_MAX_BYTES_PER_TURN = 256 * 1024
#: Asynchronous requests of one connection running or queued at once; past it the connection
#: stops reading until half of them are answered.
DEFAULT_MAX_REQUESTS_IN_FLIGHT = 1024

_FRAME_LEN = struct.Struct(">i")

# TLS transports (uvloop's and asyncio's SSL protocols) encrypt each element of a writelines
# into at least one record of its own; runs of smaller parts are joined up to one record's
# payload (16 KiB), so a small reply is one record rather than one per part.
_TLS_RECORD_PAYLOAD = 16 * 1024

# when_written(): first re-check of a still-buffered reply after 5 ms, backing off to 50 ms.
_WRITTEN_FIRST_DELAY = 0.005
_WRITTEN_MAX_DELAY = 0.05

Waiter = Union["asyncio.Future[RemotingCommand]", "AsyncCall"]


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

    def emit(self, event: ConnectionEvent, conn: Connection, exc: BaseException | None = None) -> None:
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


class FrameBudget:
    """Bytes of unfinished frames that all connections of one server may buffer together.

    Every connection may buffer one frame of up to ``max_frame_length`` (16 MiB) while it
    arrives; without a shared budget, N connections sending the start of a big frame hold N ×
    16 MiB. Each connection charges what its decoder holds after a read and releases it when
    the frame completes or the connection closes.

    When a read takes the total over the limit, the connection that read is closed, unless it
    holds no more than 1/16 of the budget (4 MiB by default, a whole maximal message): then
    the connections holding the largest unfinished frames are closed until it fits, so a
    producer half-way through a normal message does not pay for a client parking 15 MiB.

    Args:
        limit: the budget in bytes (default 64 MiB); ``None`` or ``<= 0`` disables it.
    """

    __slots__ = ("holders", "limit", "used")

    def __init__(self, limit: int | None = DEFAULT_MAX_PARTIAL_FRAME_BYTES) -> None:
        self.limit = limit if limit is not None and limit > 0 else None
        self.used = 0
        self.holders: dict[Connection, int] = {}  # connections with unfinished frames → bytes

    def charge(self, conn: Connection, buffered: int) -> None:
        """Set what ``conn`` holds now; close the largest holders while over the limit."""
        before = self.holders.pop(conn, 0)
        if buffered:
            self.holders[conn] = buffered
        self.used += buffered - before
        limit = self.limit
        if buffered > before and limit is not None and self.used > limit:
            while self.used > limit and self.holders:
                victim = (
                    conn
                    if conn in self.holders and buffered > limit // 16
                    else max(self.holders, key=self.holders.__getitem__)
                )
                _rlog.warning(
                    "frame-budget",
                    "%s: closing %s, holding %d bytes of an unfinished frame: unfinished "
                    "frames of all connections hold %d bytes, over the budget of %d "
                    "(maxPartialFrameBytes)",
                    victim.role,
                    victim.remote_addr,
                    self.holders[victim],
                    self.used,
                    limit,
                )
                victim._drop_unfinished()

    def release(self, conn: Connection) -> None:
        self.used -= self.holders.pop(conn, 0)


class AsyncCall:
    """A pending ``invoke_async``: its callback, deadline and semaphore release.

    Completed exactly once, by the response, the timeout scan, or the connection dropping.
    """

    __slots__ = ("_release", "callback", "deadline", "done", "opaque", "timeout")

    def __init__(
        self,
        opaque: int,
        callback: Callable[[RemotingCommand | None, BaseException | None], Any],
        deadline: float,
        timeout: float,
        release: Callable[[], None] | None,
    ) -> None:
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

    Args:
        dispatcher: serves the requests the peer sends.
        manager: told about connect / close / idle / bad input.
        role: ``"server"``, ``"client"``, … (for logs).
        idle_timeout: close after this many seconds without reads or writes (default 120);
            None disables.
        max_frame_length: refuse larger frames (default 16 MiB).
        write_buffer_high: stop reading requests while more than this is buffered for the
            peer (default 4 MiB).
        write_buffer_limit: abort the connection when more than this is buffered (default
            32 MiB): the peer does not read, and replies it did not pace (long-polling
            wake-ups) keep coming.
        frame_read_timeout: seconds a started frame may take to arrive (default 30); None
            disables.
        frame_budget: the server-wide :class:`FrameBudget` for unfinished frames (default
            none).
        close_grace: seconds ``close()`` waits for buffered writes before aborting (default 3).
        max_frames_per_turn: frames handled per loop turn before other connections get theirs
            (default 64).
        max_bytes_per_turn: bytes of frames handled per loop turn (default 256 KiB; a larger
            frame is handled alone).
        max_requests_in_flight: asynchronous requests running or queued at once; past it
            reading pauses until half are answered (default 1024).

    Attributes:
        remote_addr: peer ``"ip:port"``.
        local_addr: our ``"ip:port"``.
        attributes: free for the layer above (client id, group, …).
        closed: True once the transport is closing or lost.
        role: ``"server"`` or ``"client"`` (for logs).
    """

    #: Processors may answer with an encoded reply frame (``send_response_frame``); an
    #: in-memory channel that wants the command itself (the gRPC endpoint's) says False.
    reply_frames = True

    def __init__(
        self,
        dispatcher: Dispatcher,
        manager: ConnectionManager,
        *,
        role: str = "server",
        idle_timeout: float | None = 120.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        write_buffer_high: int = DEFAULT_WRITE_BUFFER_HIGH,
        write_buffer_limit: int | None = DEFAULT_WRITE_BUFFER_LIMIT,
        frame_read_timeout: float | None = DEFAULT_FRAME_READ_TIMEOUT,
        frame_budget: FrameBudget | None = None,
        close_grace: float = DEFAULT_CLOSE_GRACE,
        max_frames_per_turn: int = DEFAULT_MAX_FRAMES_PER_TURN,
        max_bytes_per_turn: int = DEFAULT_MAX_BYTES_PER_TURN,
        max_requests_in_flight: int = DEFAULT_MAX_REQUESTS_IN_FLIGHT,
    ) -> None:
        self._dispatcher = dispatcher
        self._max_frames_per_turn = max(1, max_frames_per_turn)
        self._max_bytes_per_turn = max(1, max_bytes_per_turn)
        self._max_in_flight = max(1, max_requests_in_flight)
        self._in_flight = 0  # asynchronous requests admitted and not finished
        self._in_flight_paused = False  # reading paused: too many asynchronous requests
        self._turn_pending: asyncio.Handle | None = None  # the next slice of buffered frames
        self._reading_paused = False  # what we last asked of the transport
        self._manager = manager
        self.role = role
        self._idle_timeout = idle_timeout
        self._decoder = FrameDecoder(max_frame_length)
        self._write_buffer_high = write_buffer_high
        self._write_buffer_limit = max(write_buffer_limit, write_buffer_high) if write_buffer_limit else None
        self._frame_read_timeout = frame_read_timeout if frame_read_timeout and frame_read_timeout > 0 else None
        self._frame_budget = frame_budget if frame_budget is not None and frame_budget.limit is not None else None
        self._close_grace = close_grace
        # Created by a protocol factory on the running loop (create_server / create_connection).
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None  # set by connection_made
        self._idle: IdleStateHandler | None = None
        self._batch: list[Any] | None = None  # writes collected during one read or one loop turn
        # FrameHook.take_frames of the frame hook, if it has one (see _process_frames), and
        # whether to ask it: not after a frame it does not take, until the hook takes one
        self._take_frames: Callable[..., tuple[int, int, int, int]] | None = None
        self._take_on = True
        self._in_read = False  # inside _process_frames (guards re-entry from resume_writing)
        self._batch_bytes = 0
        self._write_paused = False
        self._tls = False  # set by connection_made: small parts are joined before writing
        self._pending: dict[int, Waiter] = {}  # the response table
        self._writable = asyncio.Event()
        self._writable.set()
        self._seen_data = False
        self._broken = False  # bad input seen: ignore anything else that arrives
        self._lost: asyncio.Future[None] | None = None
        # when_written callbacks waiting for the write buffer to empty, and the one check
        self._written_waiters: list[Callable[[], None]] = []
        self._written_check: asyncio.Handle | None = None
        self._written_delay = _WRITTEN_FIRST_DELAY
        # unfinished frame: when it started, frames completed by then, the deadline timer
        self._frames_done = 0
        self._frame_started: float | None = None
        self._frame_started_at_count = 0
        self._frame_timer: asyncio.TimerHandle | None = None
        self._budget_charged = 0
        self._close_timer: asyncio.TimerHandle | None = None
        self.remote_addr = "?"
        self.local_addr = "?"
        self.attributes: dict[str, Any] = {}
        self.closed = False
        self.created_at = time.time()

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        transport = self._transport = cast(asyncio.Transport, transport)
        self._lost = self._loop.create_future()
        set_tcp_nodelay(transport)
        self.remote_addr = _fmt_addr(transport.get_extra_info("peername"))
        self.local_addr = _fmt_addr(transport.get_extra_info("sockname"))
        transport.set_write_buffer_limits(high=self._write_buffer_high)
        self._tls = transport.get_extra_info("ssl_object") is not None
        self._idle = IdleStateHandler(self._loop, self._idle_timeout, self._on_idle)
        self._idle.start()
        hooks = self._dispatcher.frame_hooks
        if hooks is not None:
            hook = self._decoder.frame_hook = hooks(self)
            # a hook that can take a run of frames in one call (the broker's SendFrameHook)
            self._take_frames = getattr(hook, "take_frames", None)
        self._manager.emit(ConnectionEvent.CONNECT, self)

    def data_received(self, data: bytes) -> None:
        if self._broken:
            return
        if not self._seen_data:
            self._seen_data = True
            if data and data[0] == _TLS_HANDSHAKE:
                self._bad_input(
                    RemotingCommandError(
                        "TLS handshake received, but this port speaks plain TCP (tls.server.mode=disabled)"
                    )
                )
                return
        idle = self._idle
        if idle is not None:
            idle.touch()
        decoder = self._decoder
        decoder.feed(data)
        self._process_frames()
        if (decoder.buffered or self._budget_charged) and not self._broken:
            self._track_unfinished()

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
        transport = self._transport
        assert transport is not None
        self._in_read = True
        # This turn's share of the loop: frames, and bytes read by the decoder's position
        # (an attribute, not the ``buffered`` property: one comparison per frame on the SEND
        # path; the position only moves forward between two feeds).
        frames_left = self._max_frames_per_turn
        bytes_stop = decoder._pos + self._max_bytes_per_turn
        take = self._take_frames
        hooked = True
        try:
            while not self._write_paused and not self._in_flight_paused:
                if frames_left == 0 or decoder._pos >= bytes_stop:
                    # Share used up: the rest waits for a later turn (and reading pauses).
                    if decoder.buffered:
                        self._next_turn()
                    break
                if take is not None and hooked and self._take_on:
                    # The leading run of frames the hook stores (plain SENDs), in one C call
                    # with their replies into the batch: the same limits as frame by frame
                    # below, which takes whatever the run stops at (a SEND the hook declined
                    # is decoded without asking it again; after another request, e.g. a
                    # consumer's pull, the run is not tried until the hook stores a frame).
                    pos, n, nbytes, why = take(
                        decoder._data,
                        decoder._pos,
                        frames_left,
                        bytes_stop,
                        decoder.max_frame_length,
                        batch,
                        high - self._batch_bytes,
                    )
                    hooked = why != 1
                    if n:
                        decoder._pos = pos
                        frames_left -= n
                        self._frames_done += n
                        self._batch_bytes += nbytes
                        if self._batch_bytes >= high and batch:
                            self._write_out(batch)
                        continue
                    if why == 2:
                        self._take_on = False
                try:
                    cmd = decoder.next_item(hooked)
                except RemotingCommandError as exc:
                    self._bad_input(exc)
                    return
                hooked = True
                if cmd is None:
                    break
                frames_left -= 1
                self._frames_done += 1
                if isinstance(cmd, bytes):
                    # handled by the dispatcher's frame hook (a stored SEND): its reply, if any
                    self._take_on = True
                    if cmd:
                        self.send_response_frame(cmd)
                elif isinstance(cmd, tuple):
                    # the hook's reply in two buffers of one frame (a native pull: the header
                    # frame, then the records), written in order with the batch
                    self.send_response_parts(cmd[0], cmd[1])
                elif cmd.flag & 1:
                    self._on_response(cmd)
                else:
                    self._dispatcher.dispatch(self, cmd)
                if self._batch_bytes >= high and batch:
                    self._write_out(batch)
        except Exception as exc:  # noqa: BLE001 - to the loop's exception handler; the connection closes
            self._loop.call_exception_handler(
                {
                    "message": f"rmq: unexpected error handling data from {self.remote_addr}",
                    "exception": exc,
                    "protocol": self,
                    "transport": transport,
                }
            )
            self._broken = True
            transport.abort()
        finally:
            self._in_read = False
            self._flush_batch()

    def _track_unfinished(self) -> None:
        """After a read: charge the unfinished frame to the budget and watch its deadline."""
        buffered = self._decoder.buffered
        budget = self._frame_budget
        if budget is not None:
            self._budget_charged = buffered
            budget.charge(self, buffered)
            if self._broken:  # closed to fit the budget
                return
        if not buffered:
            self._frame_started = None
            return
        if self._frame_started is None or self._frames_done != self._frame_started_at_count:
            # a new frame started in this read (the previous one, if any, completed)
            self._frame_started = self._loop.time()
            self._frame_started_at_count = self._frames_done
        if self._frame_timer is None and self._frame_read_timeout is not None:
            self._frame_timer = self._loop.call_later(self._frame_read_timeout, self._check_frame_deadline)

    def _check_frame_deadline(self) -> None:
        self._frame_timer = None
        started = self._frame_started
        timeout = self._frame_read_timeout
        if self.closed or self._broken or started is None or timeout is None:
            return
        if not self._decoder.buffered:  # the frame completed since
            self._frame_started = None
            return
        if self._write_paused or self._in_flight_paused or self._turn_pending is not None:
            # the frames waiting are whole ones we have not decoded yet (the peer is not
            # reading, too many of its requests are in flight, or they wait for their turn)
            self._frame_started = started = self._loop.time()
        left = started + timeout - self._loop.time()
        if left > 0:
            self._frame_timer = self._loop.call_later(left, self._check_frame_deadline)
            return
        _rlog.warning(
            "frame-deadline",
            "%s: closing %s: a frame started %.0f s ago is still incomplete (%d bytes so far; frameReadTimeoutSeconds)",
            self.role,
            self.remote_addr,
            timeout,
            self._decoder.buffered,
        )
        self._drop_unfinished()

    def _drop_unfinished(self) -> None:
        self._broken = True
        self._release_budget()
        self._manager.emit(
            ConnectionEvent.EXCEPTION, self, RemotingCommandError(f"unfinished frame from {self.remote_addr} dropped")
        )
        self.abort()

    def _release_budget(self) -> None:
        budget = self._frame_budget
        if budget is not None and self._budget_charged:
            budget.release(self)
            self._budget_charged = 0

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def _update_reading(self) -> None:
        """Ask the transport to read or not: not while the peer does not read our replies,
        while too many of its requests are in flight, or while whole frames wait for a
        later turn."""
        transport = self._transport
        if self.closed or transport is None:
            return
        paused = self._write_paused or self._in_flight_paused or self._turn_pending is not None
        if paused == self._reading_paused:
            return
        self._reading_paused = paused
        try:
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()
        except (RuntimeError, AttributeError):
            pass

    def _next_turn(self) -> None:
        """Handle the rest of the buffered frames in a later loop turn (reading paused)."""
        if self._turn_pending is None:
            self._turn_pending = self._loop.call_soon(self._resume_frames)
            self._update_reading()

    def pause_writing(self) -> None:
        # The peer is not reading what we send: stop reading its requests until it catches up.
        self._write_paused = True
        self._writable.clear()
        self._update_reading()
        log.debug("%s: write buffer full, paused reading from %s", self.role, self.remote_addr)

    def resume_writing(self) -> None:
        self._write_paused = False
        self._writable.set()
        if not self.closed and self._transport is not None:
            self._update_reading()
            if self._decoder.buffered and not self._broken:
                # frames left over when we paused; not from inside the transport's callback
                self._next_turn()

    def request_started(self) -> None:
        """The dispatcher admitted one asynchronous request of this connection (a task)."""
        self._in_flight += 1
        if self._in_flight >= self._max_in_flight and not self._in_flight_paused:
            self._in_flight_paused = True
            _rlog.info(
                "in-flight-limit",
                "%s: %s has %d requests in flight (maxRequestsInFlightPerConnection); "
                "reading from it pauses until half are answered",
                self.role,
                self.remote_addr,
                self._in_flight,
            )
            self._update_reading()

    def request_finished(self, _task: object = None) -> None:
        """One asynchronous request of this connection finished (answered or failed)."""
        self._in_flight -= 1
        if self._in_flight_paused and self._in_flight <= self._max_in_flight // 2:
            self._in_flight_paused = False
            self._update_reading()
            if self._decoder.buffered and not self._broken and not self.closed:
                self._next_turn()

    @property
    def requests_in_flight(self) -> int:
        """Asynchronous requests of this connection admitted and not finished."""
        return self._in_flight

    def _resume_frames(self) -> None:
        self._turn_pending = None
        if not self.closed and not self._broken and not self._write_paused and not self._in_read:
            self._process_frames()
            if not self.closed and (self._decoder.buffered or self._budget_charged):
                self._track_unfinished()
        self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._idle is not None:
            self._idle.stop()
        if self._turn_pending is not None:
            self._turn_pending.cancel()
            self._turn_pending = None
        for timer in (self._frame_timer, self._close_timer):
            if timer is not None:
                timer.cancel()
        self._frame_timer = self._close_timer = None
        if not self._broken and self._decoder.buffered:
            _rlog.warning(
                "closed-inside-frame",
                "%s: %s closed the connection inside a frame (%d bytes of an incomplete frame dropped)",
                self.role,
                self.remote_addr,
                self._decoder.buffered,
            )
        self._release_budget()
        self._writable.set()  # wake writers; they will see `closed`
        self._release_written()
        cause = exc if exc is not None else ConnectionResetError(f"connection to {self.remote_addr} closed")
        self._fail_pending(cause)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        self._manager.emit(ConnectionEvent.CLOSE, self)

    # ------------------------------------------------------------------ stages

    def _bad_input(self, exc: RemotingCommandError) -> None:
        """One log line, EXCEPTION to listeners, close this connection only."""
        self._broken = True
        _rlog.warning("bad-input", "%s: closing connection from %s: %s", self.role, self.remote_addr, clip(exc))
        transport = self._transport
        if self._batch and transport is not None:  # replies to the good frames before the bad one still go out
            self._writelines(self._batch)
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
            log.debug(
                "%s: response opaque=%s from %s matches no waiting request", self.role, cmd.opaque, self.remote_addr
            )
            return
        if isinstance(waiter, AsyncCall):
            waiter.complete(cmd, None)
        elif not waiter.done():
            waiter.set_result(cmd)

    def _fail_pending(self, cause: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            err = RemotingConnectError(
                self.remote_addr, f"connection to {self.remote_addr} closed while waiting for a response"
            )
            err.__cause__ = cause
            if isinstance(waiter, AsyncCall):
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
        self._queue_parts(encode(cmd))

    def _queue_parts(self, parts: list[Any]) -> None:
        """Join the current batch of writes (one ``writelines`` per read or loop turn)."""
        idle = self._idle
        if idle is not None:
            idle.touch()
        batch = self._batch
        if batch is None:
            # First write of this loop turn outside a read: flush at the end of the turn, so
            # that what else is written meanwhile leaves in the same vectored write.
            batch = self._batch = []
            self._batch_bytes = 0
            self._loop.call_soon(self._flush_batch)
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
            self._writelines(batch)  # may call pause_writing
            if self._write_paused:
                self._check_write_limit()

    def _write_out(self, batch: list[Any]) -> None:
        """Inside a read: the replies collected so far to the transport now (the batch passed
        the write buffer's high mark), the batch emptied for the rest of the read."""
        self._writelines(batch)  # may call pause_writing
        batch.clear()
        self._batch_bytes = 0
        if self._write_paused:
            self._check_write_limit()

    def _writelines(self, parts: list[Any]) -> None:
        """One vectored write of the parts (over TLS, with runs of small parts joined)."""
        assert self._transport is not None
        self._transport.writelines(_join_small_parts(parts) if self._tls else parts)

    def _check_write_limit(self) -> None:
        """Abort a peer that lets more than ``write_buffer_limit`` pile up (it does not read)."""
        limit = self._write_buffer_limit
        transport = self._transport
        if limit is None or transport is None or self.closed:
            return
        size = transport.get_write_buffer_size()
        if size > limit:
            _rlog.warning(
                "write-limit",
                "%s: aborting %s: %d bytes of replies it does not read are buffered, "
                "over the limit of %d (writeBufferLimit)",
                self.role,
                self.remote_addr,
                size,
                limit,
            )
            self._broken = True
            self._manager.emit(
                ConnectionEvent.EXCEPTION, self, RemotingCommandError(f"{self.remote_addr} does not read its replies")
            )
            self.abort()

    def when_written(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once everything written so far has left this process.

        That is when neither our batch nor the transport's buffer still references the
        written buffers, so zero-copy views may be released; or when the connection closes
        (the transport drops its buffer). asyncio reports no "drained" event below the high
        mark, so the connection checks on the next loop turn and, while its buffer is not
        empty, again with a backoff from 5 ms to 50 ms: one check per connection however many
        callbacks wait. A peer that never reads is aborted past ``write_buffer_limit`` or
        closed when idle, which releases its callbacks.
        """
        if self.closed:
            callback()
            return
        self._written_waiters.append(callback)
        if self._written_check is None:
            self._written_delay = _WRITTEN_FIRST_DELAY
            self._written_check = self._loop.call_soon(self._check_written)

    def _check_written(self) -> None:
        self._written_check = None
        transport = self._transport
        if self.closed or transport is None or (self._batch is None and transport.get_write_buffer_size() == 0):
            self._release_written()
            return
        delay = self._written_delay
        self._written_delay = min(delay * 2, _WRITTEN_MAX_DELAY)
        self._written_check = self._loop.call_later(delay, self._check_written)

    def _release_written(self) -> None:
        if self._written_check is not None:
            self._written_check.cancel()
            self._written_check = None
        waiters, self._written_waiters = self._written_waiters, []
        for callback in waiters:
            try:
                callback()
            except Exception:
                log.exception("%s: when_written callback %r raised", self.role, callback)

    def send_response(self, cmd: RemotingCommand) -> None:
        """Write a response; ignored (debug log) if the connection has closed meanwhile."""
        transport = self._transport
        if self.closed or transport is None or transport.is_closing():
            log.debug("%s: dropping response opaque=%s to closed %s", self.role, cmd.opaque, self.remote_addr)
            return
        try:
            self.write(cmd)
        except RemotingCommandError as exc:  # unencodable (bad body type, header over 16 MiB)
            _rlog.error(
                f"encode:{cmd.code}",
                "%s: cannot encode response code=%s opaque=%s: %s",
                self.role,
                cmd.code,
                cmd.opaque,
                clip(exc),
            )
            # the requester still gets an answer rather than a timeout
            self.write(
                RemotingCommand(
                    1,
                    opaque=cmd.opaque,
                    flag=cmd.flag,
                    remark=f"cannot encode response: {clip(exc)}",
                    serialize_type=cmd.serialize_type if cmd.serialize_type in (0, 1) else 0,
                )
            )

    def send_response_frame(self, frame: bytes) -> None:
        """Write a response already encoded as a whole frame (length words, header and body,
        e.g. the SEND path's reply from ``rmq.protocol._codec.send_reply_frame``); like
        :meth:`send_response`, ignored if the connection has closed meanwhile."""
        self.send_response_parts(frame, b"")

    def send_response_parts(self, head: bytes, body: bytes) -> None:
        """Write a response encoded as its header frame (length words counting ``body`` too,
        and the header) and its body: one frame in two buffers, so a large body is not copied
        to join them (``body`` may be empty); like :meth:`send_response_frame` otherwise."""
        transport = self._transport
        if self.closed or transport is None or transport.is_closing():
            log.debug("%s: dropping a response frame to closed %s", self.role, self.remote_addr)
            return
        batch = self._batch
        if batch is not None and self._in_read:
            # The common case: a reply to this read (data_received touched the idle timer
            # for it; the batch leaves at the end of the read).
            batch.append(head)
            if body:
                batch.append(body)
            self._batch_bytes += len(head) + len(body)
            return
        self._queue_parts([head, body] if body else [head])

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
            raise RemotingSendRequestError(
                self.remote_addr, f"opaque {opaque} is already waiting on {self.remote_addr}"
            )
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._pending[opaque] = fut
        try:
            async with asyncio.timeout(timeout):
                if not self._writable.is_set():
                    await self._writable.wait()
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
        expired = [c for c in self._pending.values() if isinstance(c, AsyncCall) and c.deadline <= now]
        for call in expired:
            self._pending.pop(call.opaque, None)
            call.complete(None, RemotingTimeoutError(self.remote_addr, call.timeout))
        return len(expired)

    def transport_info(self, name: str, default: Any = None) -> Any:
        """The transport's ``get_extra_info(name)``: ``"peername"``, and on a TLS connection
        ``"ssl_object"``, ``"peercert"`` (the client certificate the server verified), ``"cipher"``."""
        transport = self._transport
        return transport.get_extra_info(name, default) if transport is not None else default

    @property
    def pending_count(self) -> int:
        """Entries in this connection's response table."""
        return len(self._pending)

    @property
    def writable(self) -> bool:
        """False while the peer is not reading (write buffer above the high mark)."""
        return self._writable.is_set()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close after flushing what is buffered; idempotent.

        A peer that does not read would keep the graceful close waiting for ever: if the
        connection is not gone after ``close_grace`` seconds, it is aborted.
        """
        self._flush_batch()
        self.closed = True
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.close()
            if self._close_timer is None and self._lost is not None and not self._lost.done():
                self._close_timer = self._loop.call_later(self._close_grace, self._close_expired)

    def _close_expired(self) -> None:
        self._close_timer = None
        if self._lost is not None and not self._lost.done():
            _rlog.info(
                "close-grace",
                "%s: %s did not take its last %d bytes within %.0f s of closing; aborting",
                self.role,
                self.remote_addr,
                self._transport.get_write_buffer_size() if self._transport is not None else 0,
                self._close_grace,
            )
            self.abort()

    def abort(self) -> None:
        """Close now, dropping buffered writes."""
        self.closed = True
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        """Wait until ``connection_lost`` ran."""
        if self._lost is not None:
            await asyncio.shield(self._lost)

    @property
    def lost(self) -> bool:
        """True once ``connection_lost`` ran (the socket is gone)."""
        return self._lost is not None and self._lost.done()

    def __repr__(self) -> str:
        return f"<Connection {self.role} {self.local_addr}->{self.remote_addr}{' closed' if self.closed else ''}>"


def _fmt_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr) if addr else "?"


def _join_small_parts(parts: list[Any]) -> list[Any]:
    """``parts`` with runs of parts smaller than a TLS record joined (up to one record each):
    a TLS transport encrypts every element of a writelines into records of its own."""
    out: list[Any] = []
    run: list[Any] = []
    run_bytes = 0
    for part in parts:
        size = len(part)
        if size >= _TLS_RECORD_PAYLOAD:
            if run:
                out.append(b"".join(run) if len(run) > 1 else run[0])
                run, run_bytes = [], 0
            out.append(part)
            continue
        run.append(part)
        run_bytes += size
        if run_bytes >= _TLS_RECORD_PAYLOAD:
            out.append(b"".join(run))
            run, run_bytes = [], 0
    if run:
        out.append(b"".join(run) if len(run) > 1 else run[0])
    return out
