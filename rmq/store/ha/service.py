"""The master's side of replication: Java ``HAService`` (accepting slaves), ``HAConnection``
(one per slave: its reports in, CommitLog out) and ``GroupTransferService`` (SYNC_MASTER puts
waiting for a slave's ack).

Everything runs on the store's event loop, like the CommitLog appends, so a transfer reads the
mapped file the writer writes without a lock. A transfer is a view of the mapped file
(``memoryview(mm)[a:b]``) handed to the transport with its header in one ``writelines``: the
bytes are never copied into a Python object. The file is held (``MappedFile.hold``) until the
transport has written the view out; one transfer per slave is in flight at a time
(``set_write_buffer_limits(0)``: the transport asks to pause as soon as anything is left in
its buffer), so a slave that stops reading holds one transfer and its socket buffers, nothing
more, and is closed after ``haHousekeepingInterval`` without a report.

Who may follow (not in Java, whose HA port serves anyone who connects): a new connection is
*pending* until it proves itself, and a pending peer gets no data, does not count toward
``haMaxConnections`` and its reports acknowledge nothing. It proves itself either

* by ``haAuthSecret`` (an rmq slave given the same secret): it opens with ``AUTH_HELLO``, the
  master answers a fresh nonce, the slave its HMAC (rmq.store.ha.codec); or
* by address (a Java 4.9.8 slave, which cannot authenticate, or an rmq slave without a
  secret): its first bytes are an offset report and its IP is in ``haAllowedSlaves``
  (loopback by default).

Anything else is closed at once with one rate-limited line: a peer from another address when
the master has no secret (nothing it could prove), a wrong answer, a hello to a master without
a secret. A pending peer that says nothing is closed after ``haHousekeepingInterval`` when its
address is allowed (a Java slave sends its first report only after its 5 s heartbeat
interval), after at most 5 s otherwise (an rmq slave answers at once); at most
``MAX_PENDING`` (64) are pending at a time, the oldest closed to make room.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import logging
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from rmq.common.log import RateLimitedLog
from rmq.common.net import AddressList, set_tcp_nodelay
from rmq.store.callbacks import Entry, OffsetCallbacks, PutCallback
from rmq.store.ha.codec import (
    AUTH_HELLO,
    AUTH_MAC_SIZE,
    AUTH_NONCE_SIZE,
    EPOCH_HELLO,
    EPOCH_HELLO_SIZE,
    REPORT_SIZE,
    HAProtocolError,
    OffsetReportDecoder,
    auth_mac,
    encode_epoch_answer,
    encode_transfer_header,
)
from rmq.store.message import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmq.store.mapped_file import MappedFile
    from rmq.store.message_store import MessageStore

__all__ = ["GroupTransferService", "HAConnection", "HAService", "SlaveState", "TransferCallback"]

log = logging.getLogger("rmq.store.ha")
_rlog = RateLimitedLog(log)

#: Peers that have not proven themselves yet, at most (the oldest is closed to make room).
MAX_PENDING = 64
#: ms a peer whose address is not allowed has to authenticate (an rmq slave does at once).
AUTH_DEADLINE_MS = 5000

#: ``callback(result, exc)``: a SYNC_MASTER put's replication outcome (``result.status`` is
#: PUT_OK or FLUSH_SLAVE_TIMEOUT; ``exc`` set when the store shut down first).
TransferCallback = PutCallback


@dataclass(frozen=True)
class SlaveState:
    """One connected slave as the master sees it (for admin and metrics)."""

    address: str
    ack_offset: int  # the slave has everything below this (-1 before its first report)
    lag_bytes: int  # master's CommitLog end − ack_offset
    lag_millis: int  # ms the oldest byte sent and not acknowledged has been out (0: none)
    connected_millis: int  # ms since it connected


class GroupTransferService:
    """SYNC_MASTER waiters (Java ``HAService.GroupTransferService``): a put is answered once
    the highest offset a slave acknowledged (``push2SlaveMaxOffset``) reaches its end, or with
    FLUSH_SLAVE_TIMEOUT after ``slaveTimeout`` ms. No polling: each ack completes the waiters
    it covers (they wait in append order, so their ends and deadlines are ordered), and one
    timer, armed for the oldest, expires them.

    ``max_callbacks`` (10,000) bounds the callbacks the SEND path registers directly; past it
    ``add_callback`` says no and the caller waits with ``wait_transfer`` (a task its pool bounds).
    """

    max_callbacks = 10_000

    def __init__(self, service: HAService) -> None:
        self.service = service
        self.callbacks = OffsetCallbacks("replication", self._expired)
        self.futures: list[tuple[int, asyncio.Future[bool]]] = []
        self.timeouts = 0

    def add_callback(self, result: PutMessageResult, callback: TransferCallback, force: bool = False) -> bool:
        if len(self.callbacks) >= self.max_callbacks and not force:
            return False
        a = result.append
        assert a is not None
        end = a.wrote_offset + a.wrote_bytes
        if self.service.waiter_offset() >= end:
            self.callbacks.call(callback, result, None)
            return True
        self.callbacks.add(end, self.service.store.config.slave_timeout / 1000.0, result, callback)
        return True

    async def wait_transfer(self, result: PutMessageResult) -> PutMessageResult:
        a = result.append
        assert a is not None
        end = a.wrote_offset + a.wrote_bytes
        if self.service.waiter_offset() >= end:
            return result
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.futures.append((end, fut))
        try:
            async with asyncio.timeout(self.service.store.config.slave_timeout / 1000.0):
                await fut
        except TimeoutError:
            self._timed_out(result, 1)
        return result

    def _timed_out(self, result: PutMessageResult, n: int) -> None:
        self.timeouts += n
        result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        result.remark = f"no slave acknowledged the message within {self.service.store.config.slave_timeout} ms"

    def _expired(self, expired: list[Entry]) -> None:
        """The timer: FLUSH_SLAVE_TIMEOUT for the callbacks past their deadline."""
        _rlog.warning(
            "slave-timeout",
            "no slave acknowledged %d puts within %d ms (offsets up to %d, slaves acked %d)",
            len(expired),
            self.service.store.config.slave_timeout,
            expired[-1][0],
            self.service.push2slave_max_offset,
        )
        for _end, _deadline, result, _callback in expired:
            self._timed_out(result, 1)

    def notify_transfer_some(self, acked: int) -> None:
        """A slave acknowledged ``acked``: answer every waiter it covers."""
        if self.futures:
            keep = []
            for end, fut in self.futures:
                if fut.done():
                    continue
                if end <= acked:
                    fut.set_result(True)
                else:
                    keep.append((end, fut))
            self.futures = keep
        self.callbacks.complete_upto(acked)

    def stop(self, exc: BaseException) -> None:
        self.callbacks.stop(exc)
        futures, self.futures = self.futures, []
        for _end, fut in futures:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # (retrieved: a waiter that timed out no longer awaits it)


class HAConnection(asyncio.Protocol):
    """One slave (Java ``HAConnection``: its ``ReadSocketService`` and ``WriteSocketService``
    as one protocol object and one writer task)."""

    def __init__(self, service: HAService) -> None:
        self.service = service
        self.transport: asyncio.Transport | None = None
        self.address = "?"
        self.decoder = OffsetReportDecoder()
        self.slave_request_offset = -1  # the first report: where transfers start
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.connected_at = time.monotonic()
        self.last_read = self.connected_at
        # (end offset, monotonic time) of each transfer not acknowledged yet, oldest first:
        # the slave's lag in time is how long the oldest unacknowledged byte has been out.
        # (and the master's CommitLog end when it was sent: an ack reaching that is "caught up")
        self._unacked: collections.deque[tuple[int, float, int]] = collections.deque(maxlen=4096)
        self.bytes_sent = 0
        self._first_report = asyncio.Event()
        self._writable: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        self.host = ""
        #: how the peer proved itself: "secret", "address", or None while pending
        self.proven: str | None = None
        self.by_address = False
        self._handshake = bytearray()
        self._nonce: bytes | None = None
        self._deadline: asyncio.TimerHandle | None = None
        # Controller mode: the slave's brokerId from its EPOCH_HELLO (None: a 4.x slave), the
        # bytes after the proof until we know whether they open with it, and when the slave last
        # caught up with the master (monotonic; Java lastCaughtUpTime).
        self.slave_id: int | None = None
        self._opening: bytearray | None = bytearray()
        self.caught_up_at = 0.0
        # The confirm offset this controller-mode slave was last sent (in a transfer header):
        # when the master's moves, an idle writer sends it in a heartbeat at once.
        self.sent_confirm = -1

    # -- protocol ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is not a subclass)
        peer = transport.get_extra_info("peername")
        self.address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.host = str(peer[0]) if isinstance(peer, tuple) else ""
        set_tcp_nodelay(transport)
        self.transport.set_write_buffer_limits(high=0)
        service = self.service
        self.by_address = service.allowed.allows(self.host)
        if not self.by_address and not service.secret:
            self.refuse("its address is not in haAllowedSlaves and this master has no haAuthSecret to prove")
            return
        service.add_pending(self)
        cfg = service.store.config
        deadline = (
            cfg.ha_housekeeping_interval if self.by_address else min(AUTH_DEADLINE_MS, cfg.ha_housekeeping_interval)
        )
        self._deadline = asyncio.get_running_loop().call_later(deadline / 1000.0, self._expired, deadline)

    def _expired(self, deadline: int) -> None:
        self._deadline = None
        if self.proven is None:
            what = "no offset report" if self.by_address else "no authentication"
            self.refuse(f"{what} within {deadline} ms")

    def refuse(self, why: str) -> None:
        """Close an unproven peer at once (one rate-limited line for all of them)."""
        self.service.refused += 1
        _rlog.warning(
            "ha-refuse",
            "HA: refusing peer %s: %s (haAllowedSlaves=%s, haAuthSecret %s)",
            self.address,
            why,
            self.service.allowed.text or "none",
            "set" if self.service.secret else "not set",
        )
        if self.transport is not None and not self.closed:
            self.transport.abort()

    def _prove(self, data: bytes) -> bytes | None:
        """Pending: take the handshake's bytes; returns what follows it once the peer is
        admitted (None while pending or refused)."""
        hs = self._handshake
        hs += data
        service = self.service
        if self._nonce is None:
            if len(hs) < REPORT_SIZE:
                return None
            if hs[:REPORT_SIZE] == AUTH_HELLO:
                if not service.secret:
                    self.refuse("it offers haAuthSecret but this master has none set")
                    return None
                if len(hs) > REPORT_SIZE:
                    self.refuse("it sent bytes before the master's challenge")
                    return None
                hs.clear()
                self._nonce = os.urandom(AUTH_NONCE_SIZE)
                assert self.transport is not None
                self.transport.write(self._nonce)
                return None
            if not self.by_address:
                self.refuse("its address is not in haAllowedSlaves and it did not prove haAuthSecret")
                return None
            how = "address"
            rest = bytes(hs)
        else:
            if len(hs) < AUTH_MAC_SIZE:
                return None
            if not hmac.compare_digest(bytes(hs[:AUTH_MAC_SIZE]), auth_mac(service.secret, self._nonce)):
                self.refuse("wrong haAuthSecret")
                return None
            how = "secret"
            rest = bytes(hs[AUTH_MAC_SIZE:])
        self._handshake = bytearray()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        service.remove_pending(self)
        if not service.add_connection(self):
            if self.transport is not None:
                self.transport.abort()
            return None
        self.proven = how
        log.info("HA: slave %s connected (proven by %s)", self.address, how)
        self._task = service.tasks_spawn(self._write_loop(), f"ha-write-{self.address}")
        return rest

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        if self.proven is None:
            if self.closed:
                return
            rest = self._prove(data)
            if not rest:
                return
            data = rest
        if self._opening is not None:
            data = self._take_opening(data)
            if not data:
                return
        try:
            report = self.decoder.feed(data)
        except HAProtocolError as e:
            self.close(f"bad report: {e}")
            return
        if report is not None:
            self._on_report(report)

    def _take_opening(self, data: bytes) -> bytes:
        """The stream's first bytes after the proof: an EPOCH_HELLO (a controller-mode slave
        asking for this master's epochs, rmq.store.ha.codec) is answered; returns what follows."""
        op = self._opening
        assert op is not None
        op += data
        if len(op) < REPORT_SIZE:
            return b""
        if op[:REPORT_SIZE] != EPOCH_HELLO:
            self._opening = None
            return bytes(op)
        if len(op) < EPOCH_HELLO_SIZE:
            return b""
        self._opening = None
        service = self.service
        store = service.store
        if not service.controller_mode:
            self.close("it asked for epochs but this master is not in controller mode (enableControllerMode)")
            return b""
        self.slave_id = struct.unpack_from(">q", op, REPORT_SIZE)[0]
        service.adopt_slave_id(self)
        entries = [(e.epoch, e.start) for e in store.epochs.entries]
        assert self.transport is not None
        self.transport.write(encode_epoch_answer(entries, store.commit_log.max_offset))
        log.info("HA: slave %s is broker %d; sent %d epoch entries", self.address, self.slave_id, len(entries))
        return bytes(op[EPOCH_HELLO_SIZE:])

    def _on_report(self, offset: int) -> None:
        store_max = self.service.store.commit_log.max_offset
        if self.slave_request_offset < 0:
            if offset > store_max:
                # Java keeps such a slave connected and sends it nothing; we say so and tell the
                # slave where our log ends (a heartbeat at our end: any slave refuses it).
                _rlog.error(
                    "ha-diverged",
                    "HA: slave %s has CommitLog up to %d but this master's ends at %d: the "
                    "slave's data diverged from the master's; not replicating to it (rebuild the slave's "
                    "store)",
                    self.address,
                    offset,
                    store_max,
                )
                if self.transport is not None:
                    self.transport.write(self._header(store_max, 0))
                self.close("diverged", log_it=False)
                return
            self.slave_request_offset = offset
            _rlog.info("ha-request", "HA: slave %s requests offset %d", self.address, offset)
            self._first_report.set()
        elif offset > store_max:
            self.close(f"reported offset {offset} past this master's CommitLog end {store_max}")
            return
        if offset > self.slave_ack_offset:
            self.slave_ack_offset = offset
        unacked = self._unacked
        while unacked and unacked[0][0] <= offset:
            _end, sent_at, master_end = unacked.popleft()
            if offset >= master_end:
                self.caught_up_at = max(self.caught_up_at, sent_at)
        if offset >= store_max:
            self.caught_up_at = time.monotonic()
        self.service.notify_transfer_some(offset, self)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        fut, self._writable = self._writable, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.service.remove_pending(self)
        self.resume_writing()
        self._first_report.set()
        self.service.remove_connection(self)
        if self._task is not None:
            self._task.cancel()
        if self.slave_request_offset >= 0:
            _rlog.info("ha-disconnect", "HA: slave %s disconnected%s", self.address, f" ({exc})" if exc else "")

    def close(self, why: str, log_it: bool = True) -> None:
        if log_it:
            _rlog.warning("ha-close", "HA: closing slave %s: %s", self.address, why)
        if self.transport is not None and not self.closed:
            self.transport.close()

    # -- the writer ----------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        service = self.service
        store = service.store
        cfg = store.config
        cl = store.commit_log
        housekeeping = cfg.ha_housekeeping_interval / 1000.0
        try:
            async with asyncio.timeout(housekeeping):
                await self._first_report.wait()
        except TimeoutError:
            self.close(f"no offset report within {cfg.ha_housekeeping_interval} ms")
            return
        if self.closed:
            return
        if self.slave_request_offset == 0:
            # Java: a new slave starts at the beginning of the master's last CommitLog file.
            end = cl.max_offset
            self.next_transfer_from = end - end % cl.file_size
        else:
            self.next_transfer_from = self.slave_request_offset
        _rlog.info(
            "ha-transfer",
            "HA: transferring to slave %s from offset %d (it requested %d)",
            self.address,
            self.next_transfer_from,
            self.slave_request_offset,
        )
        last_write = time.monotonic()
        since_yield = 0
        transport = self.transport
        assert transport is not None
        while not self.closed:
            now = time.monotonic()
            if now - self.last_read > housekeeping:
                self.close(f"no report for {int((now - self.last_read) * 1000)} ms")
                return
            if self.next_transfer_from < cl.min_offset:
                _rlog.error(
                    "ha-gone",
                    "HA: slave %s needs offset %d but this master's CommitLog "
                    "starts at %d (older files were deleted): rebuild the slave's store",
                    self.address,
                    self.next_transfer_from,
                    cl.min_offset,
                )
                self.close("data gone", log_it=False)
                return
            mf = self._transfer_some(transport, cl, cfg.ha_transfer_batch_size)
            if mf is not None:
                try:
                    writable = self._writable
                    if writable is not None:
                        # One transfer in flight: wait until the transport has written it.
                        try:
                            async with asyncio.timeout(housekeeping):
                                await writable
                        except TimeoutError:
                            self.close(f"transfer not written out in {cfg.ha_housekeeping_interval} ms")
                            return
                finally:
                    mf.release()
                last_write = time.monotonic()
                since_yield += 1
                if since_yield >= 32:
                    # A fast reader never pauses the transport: let the loop breathe while a
                    # slave catches up (one file is up to 32768 transfers).
                    since_yield = 0
                    await asyncio.sleep(0)
                continue
            interval = cfg.ha_send_heartbeat_interval / 1000.0
            wait = last_write + interval - time.monotonic()
            if wait <= 0 or (
                self.slave_id is not None and service.confirm_offset != self.sent_confirm and self._writable is None
            ):
                # a heartbeat, or the confirm offset moved (an ack) with nothing new to send:
                # the slave's consumers may read further now, not at the next heartbeat (not
                # into a transport that holds unwritten bytes: one header per move would pile up)
                transport.write(self._header(self.next_transfer_from, 0))
                last_write = time.monotonic()
                continue
            await service.wait_for_data(min(wait, housekeeping / 4))

    def _transfer_some(self, transport: asyncio.Transport, cl: Any, batch: int) -> MappedFile | None:
        """Write one transfer from ``next_transfer_from`` when there is data (at most ``batch``
        bytes of one mapped file, Java ``CommitLog.getData``): returns the mapped file, held
        (the caller releases it once the transport has written the view), or None."""
        at = self.next_transfer_from
        mf: MappedFile | None = cl.mfq.find_by_offset(at)
        if mf is None:
            return None
        pos = at - mf.file_from_offset
        if pos >= mf.wrote_position or not mf.hold():
            return None
        size = min(mf.wrote_position - pos, batch)
        view = memoryview(mf.mm)[pos : pos + size]
        transport.writelines([self._header(at, size), view])
        del view  # (the transport keeps its own reference while it holds unwritten bytes)
        self.next_transfer_from = at + size
        self._unacked.append((at + size, time.monotonic(), cl.max_offset))
        self.bytes_sent += size
        self.service.bytes_sent += size
        return mf

    def _header(self, at: int, size: int) -> bytes:
        """A transfer header; a controller-mode slave's carries the confirm offset (Java 5
        ``AutoSwitchHAConnection``: ``getConfirmOffset`` in every header)."""
        if self.slave_id is None:
            return encode_transfer_header(at, size)
        confirm = self.sent_confirm = self.service.confirm_offset
        return encode_transfer_header(at, size, confirm)

    def state(self, store_max: int) -> SlaveState:
        now = time.monotonic()
        ack = self.slave_ack_offset
        lag_ms = int((now - self._unacked[0][1]) * 1000) if self._unacked and ack < store_max else 0
        return SlaveState(
            self.address,
            ack,
            max(0, store_max - ack) if ack >= 0 else store_max,
            lag_ms,
            int((now - self.connected_at) * 1000),
        )


class HAService:
    """The master's HA listener and its slaves (Java ``HAService``).

    ``push2slave_max_offset`` is the highest offset any slave acknowledged (never lowered);
    ``is_slave_ok(end)`` (Java ``isSlaveOK``) says whether a SYNC_MASTER put may wait for a
    slave: at least one connected and ``end − push2slave_max_offset`` below
    ``haSlaveFallbehindMax``.

    Args:
        store: the master's MessageStore.
        host: the address to listen on (the broker's listen host; default all interfaces).
    """

    def __init__(self, store: MessageStore, host: str = "0.0.0.0") -> None:
        self.store = store
        self.host = host
        self.connections: list[HAConnection] = []
        self.pending: list[HAConnection] = []  # connected, not proven yet
        cfg = store.config
        self.secret = cfg.ha_auth_secret
        self.allowed = AddressList(cfg.ha_allowed_slaves)
        self.push2slave_max_offset = 0
        self.group_transfer = GroupTransferService(self)
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.bytes_sent = 0
        self.refused = 0
        self._data: asyncio.Future[None] | None = None
        self._spawn: Callable[..., asyncio.Task[Any]] | None = None
        # Controller mode (Java AutoSwitchHAService): the SyncStateSet (broker ids, this one
        # included), the offset every member has (confirmOffset), and who hears of a change
        # (the broker's ReplicasManager, which proposes it to the controller).
        self.controller_mode = store.controller_mode
        self.local_id = store.broker_id
        self.sync_state_set: set[int] = {self.local_id}
        self.confirm_offset = store.commit_log.max_offset
        self.on_sync_state_set_changed: Callable[[frozenset[int]], object] | None = None
        # Set by shutdown: a service of an earlier master term proposes nothing more. The
        # broker's listener proposes to the controller under the *current* master epoch, so a
        # stopped service still shrinking its old set (no connections: every slave "gone") would
        # take an in-sync slave out of the new term's set (Java AutoSwitchHAService.shutdown
        # stops its threads; its checks run only on the live service).
        self.closed = False
        self._shrink_task: asyncio.Task[Any] | None = None

    async def start(self, spawn: Callable[..., asyncio.Task[Any]]) -> None:
        """Listen on ``haListenPort`` (OSError when it is taken); ``spawn(coro, name)`` runs
        the per-slave writer tasks under the store's task owner."""
        self._spawn = spawn
        cfg = self.store.config
        port = max(cfg.ha_listen_port, 0)
        loop = asyncio.get_running_loop()
        try:
            self.server = await loop.create_server(lambda: HAConnection(self), self.host, port, reuse_address=True)
        except OSError as e:
            # name the HA port, not the broker's, in the start-up error the CLI prints
            raise OSError(e.errno, e.strerror, f"{self.host}:{port} (haListenPort)") from e
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("HA service accepting slaves on %s:%d (%s)", self.host, self.port, cfg.broker_role)
        if self.controller_mode:
            self._shrink_task = spawn(self._shrink_loop(), "ha-sync-state-set")

    def tasks_spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        assert self._spawn is not None
        return self._spawn(coro, name)

    async def shutdown(self) -> None:
        self.closed = True
        if self._shrink_task is not None:
            self._shrink_task.cancel()
            self._shrink_task = None
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections) + list(self.pending):
            if conn.transport is not None:
                conn.transport.abort()
        self.connections.clear()
        self.pending.clear()
        self.group_transfer.stop(_shutdown_error())
        self.notify_append()
        if self.server is not None:
            try:
                async with asyncio.timeout(2.0):
                    await self.server.wait_closed()
            except TimeoutError:
                pass
            self.server = None

    # -- connections -------------------------------------------------------------------------
    def add_pending(self, conn: HAConnection) -> None:
        """A new peer, not proven yet (closing the oldest pending one past MAX_PENDING)."""
        if len(self.pending) >= MAX_PENDING:
            self.pending.pop(0).refuse(f"{MAX_PENDING} peers are proving themselves; the oldest makes room")
        self.pending.append(conn)

    def remove_pending(self, conn: HAConnection) -> None:
        try:
            self.pending.remove(conn)
        except ValueError:
            pass

    def add_connection(self, conn: HAConnection) -> bool:
        """A proven slave (only those count toward ``haMaxConnections``)."""
        limit = self.store.config.ha_max_connections
        if len(self.connections) >= limit:
            self.refused += 1
            _rlog.warning(
                "ha-limit",
                "HA: refusing a connection from %s: %d slaves connected (haMaxConnections)",
                conn.address,
                len(self.connections),
            )
            return False
        self.connections.append(conn)
        return True

    def remove_connection(self, conn: HAConnection) -> None:
        try:
            self.connections.remove(conn)
        except ValueError:
            pass
        # Java AutoSwitchHAService.removeConnection: a disconnected slave leaves the set at once
        sid = conn.slave_id
        if sid is not None and sid in self.sync_state_set and not any(c.slave_id == sid for c in self.connections):
            self._change_sync_state_set(self.sync_state_set - {sid}, f"slave {sid} disconnected")

    def adopt_slave_id(self, conn: HAConnection) -> None:
        """A slave said who it is: an older connection of the same broker is closed."""
        for other in list(self.connections):
            if other is not conn and other.slave_id == conn.slave_id:
                other.close(f"broker {conn.slave_id} connected again from {conn.address}")
                self.connections.remove(other)

    # -- SyncStateSet (controller mode; Java AutoSwitchHAService) -----------------------------
    def set_sync_state_set(self, ids: set[int] | frozenset[int]) -> None:
        """The set the controller holds now (Java ``setSyncStateSet``)."""
        self.sync_state_set = set(ids) | {self.local_id}
        self._set_confirm(self.compute_confirm_offset())
        self.group_transfer.notify_transfer_some(self.waiter_offset())

    def _change_sync_state_set(self, new: set[int], why: str) -> None:
        """A member joins here at once (puts then wait for it too: always safe). A member
        leaves only once the controller agreed (the listener proposes it; ``set_sync_state_set``
        applies the answer): until then a put still waits for it, since the controller could
        elect it (Java keeps the union of the local and the remote set while they differ).
        Without a listener (no controller) the master decides alone. A shut-down service
        changes and proposes nothing (its connections closing would propose every slave out)."""
        if self.closed:
            return
        listener = self.on_sync_state_set_changed
        grows = new >= self.sync_state_set
        # a shrink the controller has not answered yet is proposed again every check (200 ms)
        # while it is pending: one line per transition per interval, with the repeats counted
        _rlog.log(
            logging.INFO,
            f"sss:{sorted(self.sync_state_set)}->{sorted(new)}",
            "HA: SyncStateSet %s -> %s (%s)%s",
            sorted(self.sync_state_set),
            sorted(new),
            why,
            "" if grows or listener is None else ": proposed to the controller",
        )
        if grows or listener is None:
            self.sync_state_set = new
            self._set_confirm(self.compute_confirm_offset())
            self.group_transfer.notify_transfer_some(self.waiter_offset())
        if listener is not None:
            listener(frozenset(new))

    def _set_confirm(self, value: int) -> None:
        """A new confirm offset; dispatch may go further (rmq.store.reput.dispatch_limit)."""
        moved = value != self.confirm_offset
        self.confirm_offset = value
        if moved:
            self.store.reput.wakeup()
            self.notify_append()  # idle writers send it to the slaves (HAConnection._header)

    def compute_confirm_offset(self) -> int:
        """Java ``computeConfirmOffset``: the lowest ack of the set's slaves (the master's end
        when it is alone); unchanged while a member has no connection or has not reported
        on it yet (Java skips such a member, which would acknowledge up to the master's end
        for a slave that has not said what it holds; ours holds the confirm offset)."""
        value = self.store.commit_log.max_offset
        by_id = {c.slave_id: c for c in self.connections if c.slave_id is not None}
        for sid in self.sync_state_set:
            if sid == self.local_id:
                continue
            conn = by_id.get(sid)
            if conn is None or conn.slave_ack_offset < 0:
                return self.confirm_offset
            value = min(value, conn.slave_ack_offset)
        return value

    def _maybe_expand(self, conn: HAConnection) -> None:
        """Java ``maybeExpandInSyncStateSet``: a slave that reached the confirm offset and the
        current epoch's start joins."""
        sid = conn.slave_id
        if sid is None or sid in self.sync_state_set:
            return
        ack = conn.slave_ack_offset
        last = self.store.epochs.last()
        if ack >= self.confirm_offset and (last is None or ack >= last.start):
            self._change_sync_state_set(self.sync_state_set | {sid}, f"slave {sid} caught up at {ack}")

    def maybe_shrink(self) -> None:
        """Java ``maybeShrinkSyncStateSet``: a member not caught up within
        ``haMaxTimeSlaveNotCatchup`` ms, or not connected, leaves."""
        limit = self.store.config.ha_max_time_slave_not_catchup / 1000.0
        now = time.monotonic()
        by_id = {c.slave_id: c for c in self.connections if c.slave_id is not None}
        new = set(self.sync_state_set)
        for sid in self.sync_state_set:
            if sid == self.local_id:
                continue
            conn = by_id.get(sid)
            if conn is None or now - max(conn.caught_up_at, conn.connected_at) > limit:
                new.discard(sid)
        if new != self.sync_state_set:
            self._change_sync_state_set(
                new, f"not caught up within {self.store.config.ha_max_time_slave_not_catchup} ms"
            )

    async def _shrink_loop(self) -> None:
        period = min(1.0, self.store.config.ha_max_time_slave_not_catchup / 4000.0)
        while True:
            await asyncio.sleep(period)
            self.maybe_shrink()

    def need_ack_nums(self) -> int:
        """Replicas (the master included) a SYNC_MASTER put waits for; -1: every member of the
        SyncStateSet (Java ``CommitLog.calcNeedAckNums`` and ``allAckInSyncStateSet``)."""
        cfg = self.store.config
        if cfg.all_ack_in_sync_state_set:
            return -1
        need = cfg.in_sync_replicas
        if cfg.enable_auto_in_sync_replicas:
            need = max(min(need, len(self.sync_state_set)), cfg.min_in_sync_replicas)
        return need

    def must_wait(self) -> bool:
        """Controller mode: whether a SYNC_MASTER put waits at all (Java ``handleHA``: one ack,
        the master's own, needs no wait)."""
        need = self.need_ack_nums()
        return len(self.sync_state_set) > 1 if need < 0 else need > 1

    def waiter_offset(self) -> int:
        """The offset up to which SYNC_MASTER puts are answered: the slaves' highest ack (4.x),
        or in controller mode the SyncStateSet's confirm offset (allAckInSyncStateSet) or the
        offset ``need_ack_nums() - 1`` slaves have (Java ``GroupTransferService.doWaitTransfer``)."""
        if not self.controller_mode:
            return self.push2slave_max_offset
        need = self.need_ack_nums()
        if need < 0:
            return self.confirm_offset if len(self.sync_state_set) > 1 else self.store.commit_log.max_offset
        if need <= 1:
            return self.store.commit_log.max_offset
        acks = sorted((c.slave_ack_offset for c in self.connections if c.proven), reverse=True)
        return acks[need - 2] if len(acks) >= need - 1 else -1

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    # -- data and acks --------------------------------------------------------------------------
    def notify_append(self) -> None:
        """New CommitLog data (called after an append while a writer waits, the appender's
        ``notify_armed``): wake the idle writers."""
        fut = self._data
        if self.store.ha is self:
            self.store.appender.notify_armed = False  # until a writer waits again
        if fut is not None:
            self._data = None
            if not fut.done():
                fut.set_result(None)

    async def wait_for_data(self, timeout: float) -> None:
        fut = self._data
        if fut is None or fut.done():
            fut = self._data = asyncio.get_running_loop().create_future()
            self.store.appender.notify_armed = True  # the next append calls notify_append
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(fut)
        except TimeoutError:
            pass

    def notify_transfer_some(self, acked: int, conn: HAConnection | None = None) -> None:
        """Java ``HAService.notifyTransferSome``: the slaves' highest ack only grows. In
        controller mode the SyncStateSet may grow and its confirm offset move."""
        if self.controller_mode:
            if acked > self.push2slave_max_offset:
                self.push2slave_max_offset = acked
            if conn is not None:
                self._maybe_expand(conn)
            self._set_confirm(self.compute_confirm_offset())
            self.group_transfer.notify_transfer_some(self.waiter_offset())
            return
        if acked > self.push2slave_max_offset:
            self.push2slave_max_offset = acked
            self.group_transfer.notify_transfer_some(acked)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """Java ``isSlaveOK``, counting only connections that have reported an offset (Java
        counts every accepted socket, so any peer on the HA port would make puts wait)."""
        if master_put_where - self.push2slave_max_offset >= self.store.config.ha_slave_fallbehind_max:
            return False
        return any(c.slave_request_offset >= 0 for c in self.connections)

    # -- state -------------------------------------------------------------------------------------
    def slaves(self) -> list[SlaveState]:
        store_max = self.store.commit_log.max_offset
        return [c.state(store_max) for c in list(self.connections)]  # (the metrics thread reads it too)

    def runtime_info(self) -> dict[str, str]:
        """The master's replication keys of ``MessageStore.runtime_info`` (see rmq.store.ha)."""
        store_max = self.store.commit_log.max_offset
        slaves = self.slaves()
        return {
            "haListenPort": str(self.port),
            "haConnectionCount": str(len(slaves)),
            "haPush2SlaveMaxOffset": str(self.push2slave_max_offset),
            # Java DefaultMessageStore.slaveFallBehindMuch (logged by BrokerController every minute)
            "haSlaveFallBehindMuch": str(max(0, store_max - self.push2slave_max_offset)),
            "haSlaves": ";".join(f"{s.address},{s.ack_offset},{s.lag_bytes},{s.lag_millis}" for s in slaves),
            "haTransferredBytes": str(self.bytes_sent),
            "haSlaveTimeoutTimes": str(self.group_transfer.timeouts),
            "haRefusedPeers": str(self.refused),
            "haSyncStateSet": ",".join(str(i) for i in sorted(self.sync_state_set)),
            "haConfirmOffset": str(self.confirm_offset),
        }


def _shutdown_error() -> Exception:
    from rmq.errors import StoreError

    return StoreError("message store shut down before a slave acknowledged the message")
