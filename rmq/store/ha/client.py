"""The slave's side of replication (Java ``HAService.HAClient``).

One connection to the master's HA port at a time. The slave reports its CommitLog end at
connect, after each stored read and every ``haSendHeartbeatInterval``; each transfer it
receives must start exactly at its own end (else the connection is closed and made again after
a backoff) and is written at that offset (``CommitLog.append_data``), so the slave's log is
byte-identical to the master's; the normal dispatch (``ReputMessageService``) then builds the
ConsumeQueues and the index from it.

A SYNC_FLUSH slave reports only what it has fsynced (one fdatasync per group of reads, in the
store's flush thread); an ASYNC_FLUSH slave reports what it has written and flushes on its own
schedule. A transfer that starts *below* the slave's end means the master's log is shorter
than the slave's: the data diverged. The slave says so once, clearly, and stops replicating
(its data is kept as it is for an operator to look at).

In controller mode (``store.controller_mode``) the slave first asks the master's epochs
(EPOCH_HELLO, rmq.store.ha.codec), cuts its CommitLog back to the last point both agree on
(``find_consistent_point``, ``MessageStore.truncate_files``; Java ``AutoSwitchHAClient.doTruncate``),
takes the master's epoch entries up to its end (and the later ones as the data reaches them),
and only then reports. Every transfer header then carries the master's confirm offset (the
offset every SyncStateSet member has); ``confirm_offset`` keeps it, never above this slave's
own end, and the dispatch stops there unless ``readUnCommitted`` (Java 5
``AutoSwitchHAClient``: ``setConfirmOffset(min(confirmOffset, maxPhyOffset))``;
``ReputMessageService.getReputEndOffset``): a record a new master might not have is never
served here and truncated later.

With ``haAuthSecret`` set, the slave proves the secret before its first report (AUTH_HELLO,
the master's nonce, the HMAC: rmq.store.ha.codec); without it, it reports at once like a Java
slave and the master admits it only from an address of its ``haAllowedSlaves``. A Java master
knows no authentication: a slave following one leaves ``haAuthSecret`` empty.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, cast

from rmq.common.log import RateLimitedLog, clip
from rmq.common.net import set_tcp_nodelay, split_address
from rmq.errors import StoreError
from rmq.store.ha.codec import (
    AUTH_HELLO,
    AUTH_NONCE_SIZE,
    HAProtocolError,
    TransferDecoder,
    auth_mac,
    decode_epoch_answer,
    encode_epoch_hello,
    encode_offset_report,
)
from rmq.store.ha.epoch import EpochEntry, find_consistent_point

if TYPE_CHECKING:
    from rmq.store.message_store import MessageStore

__all__ = ["HAClient"]

log = logging.getLogger("rmq.store.ha")
_rlog = RateLimitedLog(log)

BACKOFF_MIN = 0.2  # seconds before reconnecting after a failure, doubling ...
BACKOFF_MAX = 5.0  # ... up to Java's 5 s between connection attempts
CONNECT_TIMEOUT = 3.0


class _Protocol(asyncio.Protocol):
    def __init__(self, client: HAClient) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is not a subclass)

    def data_received(self, data: bytes) -> None:
        self.client._on_data(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class HAClient:
    """Follows the master at ``master_address`` (``haMasterAddress``, or the name server's
    ``haServerAddr`` through :meth:`update_master_address`).

    State for admin and metrics: ``connected``, ``reported_offset``, ``bytes_received``,
    ``last_transfer_at`` / ``last_heartbeat_at`` (monotonic), ``diverged`` (a reason, or None).
    """

    def __init__(self, store: MessageStore, master_address: str | None = None) -> None:
        self.store = store
        self.master_address = master_address or None
        self.connected = False
        self.diverged: str | None = None
        self.reported_offset = -1
        self.bytes_received = 0
        self.transfers = 0
        self.connects = 0
        self.last_transfer_at = 0.0
        self.last_heartbeat_at = 0.0
        self.last_error: str | None = None
        self._proto: _Protocol | None = None
        self._last_read = 0.0
        self._address_changed = asyncio.Event()
        self._flush_task: asyncio.Task[None] | None = None
        self._flush_again = False
        self._stopped = False
        self._auth: bytearray | None = None  # the master's nonce so far, while authenticating
        self._proving = False  # from the hello to the master's first transfer
        # Controller mode: the epoch answer being read, its future, the master's entries past
        # this slave's end (appended as the data reaches them), a pending epoch-file save.
        self._epoch_buf: bytearray | None = None
        self._epoch_answer: asyncio.Future[tuple[list[tuple[int, int]], int]] | None = None
        self._aligning = False
        self._pending_epochs: list[EpochEntry] = []
        self._epoch_save: asyncio.Task[None] | None = None
        #: controller mode: the master's confirm offset as of the last transfer, capped at this
        #: slave's CommitLog end; -1 until this session's first transfer (dispatch waits)
        self.confirm_offset = -1

    def update_master_address(self, addr: str | None) -> None:
        """Java ``HAClient.updateMasterAddress``: follow another master from the next connection
        (the current one, to another address, is closed)."""
        addr = addr or None
        if addr == self.master_address:
            return
        log.info("HA: master address %s -> %s", clip(self.master_address), clip(addr))
        self.master_address = addr
        self._address_changed.set()
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()

    # -- the connection loop --------------------------------------------------------------------
    async def run(self) -> None:
        backoff = BACKOFF_MIN
        while not self._stopped:
            if self.diverged is not None:
                return
            addr = self.master_address
            if addr is None:
                self._address_changed.clear()
                try:
                    async with asyncio.timeout(BACKOFF_MAX):
                        await self._address_changed.wait()
                except TimeoutError:
                    pass
                continue
            received_before = self.bytes_received + self.transfers
            try:
                await self._session(addr)
            except (OSError, TimeoutError, ValueError) as e:
                self.last_error = f"{type(e).__name__}: {e}"
                _rlog.warning(
                    f"ha-connect-{addr}", "HA: cannot follow master %s: %s; retrying", clip(addr), self.last_error
                )
            if self.diverged is not None or self._stopped:
                return
            if self.bytes_received + self.transfers > received_before:
                backoff = BACKOFF_MIN
            self._address_changed.clear()
            try:
                async with asyncio.timeout(backoff):
                    await self._address_changed.wait()
            except TimeoutError:
                pass
            backoff = min(backoff * 2, BACKOFF_MAX)

    async def _session(self, addr: str) -> None:
        host, port = split_address(addr)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(CONNECT_TIMEOUT):
            transport, proto = await loop.create_connection(lambda: _Protocol(self), host, port)
        set_tcp_nodelay(transport)
        self._proto = proto
        # a new session (maybe another master after a failover): its own confirm offset
        self.confirm_offset = -1
        self._decoder = TransferDecoder(with_confirm=self.store.controller_mode)
        self.connected = True
        self.connects += 1
        self._last_read = time.monotonic()
        cfg = self.store.config
        secret = cfg.ha_auth_secret
        log.info(
            "HA: connected to master %s, %s offset %d",
            clip(addr),
            "authenticating, then reporting" if secret else "reporting",
            self._report_value(),
        )
        try:
            if self.store.controller_mode:
                self._aligning = True
                self._epoch_answer = loop.create_future()
            if secret:
                self._auth = bytearray()
                self._proving = True
                transport.write(AUTH_HELLO)
            else:
                self._open(proto)
            if self._epoch_answer is not None and not await self._align(proto, addr):
                return
            heartbeat = cfg.ha_send_heartbeat_interval / 1000.0
            while not proto.closed.done():
                try:
                    async with asyncio.timeout(heartbeat):
                        await asyncio.shield(proto.closed)
                except TimeoutError:
                    pass
                if proto.closed.done():
                    break
                if time.monotonic() - self._last_read > cfg.ha_housekeeping_interval / 1000.0:
                    _rlog.warning(
                        f"ha-silent-{addr}",
                        "HA: master %s sent nothing for %d ms; reconnecting",
                        clip(addr),
                        cfg.ha_housekeeping_interval,
                    )
                    break
                self._report(force=True)  # Java: every haSendHeartbeatInterval
        finally:
            self._epoch_buf = None
            self._epoch_answer = None
            self._aligning = False
            if self._proving:
                self.last_error = (
                    "the master closed the connection while this slave authenticated: set the same "
                    "haAuthSecret on the master (a Java master takes none: leave it empty)"
                )
                _rlog.warning(f"ha-auth-{addr}", "HA: master %s: %s", clip(addr), self.last_error)
                self._auth = None
                self._proving = False
            self.connected = False
            self._proto = None
            transport.close()
            log.info("HA: disconnected from master %s", clip(addr))

    def _open(self, proto: _Protocol) -> None:
        """After the proof (if any): ask the epochs (controller mode) or report at once."""
        if self._epoch_answer is not None:
            self._epoch_buf = bytearray()
            assert proto.transport is not None
            proto.transport.write(encode_epoch_hello(self.store.broker_id))
        else:
            self._report(force=True)

    async def _align(self, proto: _Protocol, addr: str) -> bool:
        """Controller mode: wait for the master's epochs, cut this CommitLog back to the last
        common point, adopt the master's entries, then report. False: the session ends."""
        fut = self._epoch_answer
        assert fut is not None
        try:
            async with asyncio.timeout(self.store.config.ha_housekeeping_interval / 1000.0):
                entries, master_max = await asyncio.shield(fut)
        except TimeoutError:
            self.last_error = f"master {addr} sent no epoch answer (is it an rmq master in controller mode?)"
            _rlog.warning(f"ha-epoch-{addr}", "HA: %s", self.last_error)
            return False
        if proto.closed.done():
            return False
        store = self.store
        cl = store.commit_log
        remote = [EpochEntry(e, s) for e, s in entries]
        local = list(store.epochs.entries)
        if local:
            point = find_consistent_point(local, cl.max_offset, remote, master_max)
            if point < 0:
                self._diverge_epochs(f"no epoch in common with master {addr} (local {local}, master {remote})")
                return False
            if point < cl.max_offset:
                log.warning(
                    "HA: this slave's CommitLog [.., %d) and master %s agree up to %d (epochs local %s, master %s): "
                    "truncating",
                    cl.max_offset,
                    clip(addr),
                    point,
                    [(e.epoch, e.start) for e in local],
                    [(e.epoch, e.start) for e in remote],
                )
                if not await store.truncate_files(point):
                    self._diverge_epochs(f"cannot truncate to {point}: not a record boundary")
                    return False
        end = cl.max_offset
        store.epochs.replace(e for e in remote if e.start <= end)
        self._pending_epochs = [e for e in remote if e.start > end]
        await store.run_blocking(store.epochs.save)
        if proto.closed.done():
            return False
        self._aligning = False
        self._report(force=True)
        return True

    def _diverge_epochs(self, why: str) -> None:
        self.diverged = why
        log.error("HA: replication stopped: %s", why)
        proto = self._proto
        if proto is not None and proto.transport is not None:
            proto.transport.close()

    def _adopt_pending_epochs(self, end: int) -> None:
        """The data reached the start of a master's epoch: it is this slave's too."""
        pending = self._pending_epochs
        changed = False
        while pending and pending[0].start <= end:
            e = pending.pop(0)
            changed |= self.store.epochs.append(e.epoch, e.start)
        if changed:
            self._epoch_save = asyncio.get_running_loop().create_task(self._save_epochs(), name="ha-epoch-save")

    async def _save_epochs(self) -> None:
        try:
            await self.store.run_blocking(self.store.epochs.save)
        except OSError as e:
            self.store.rl_log.error("ha-epoch-save", "HA: writing the epoch file failed: %s", e)

    async def stop(self) -> None:
        self._stopped = True
        self._address_changed.set()
        proto = self._proto
        if proto is not None and proto.transport is not None:
            proto.transport.abort()
        task = self._flush_task
        if task is not None and not task.done():
            try:
                await task
            except Exception:  # noqa: BLE001 - logged by the flush itself
                pass

    # -- reports ----------------------------------------------------------------------------------
    def _report_value(self) -> int:
        cl = self.store.commit_log
        return cl.flushed_offset if self.store.config.sync_flush else cl.max_offset

    def _report(self, force: bool = False) -> None:
        proto = self._proto
        if (
            proto is None
            or proto.transport is None
            or proto.transport.is_closing()
            or self._auth is not None
            or self._aligning
        ):
            return
        value = self._report_value()
        if force or value > self.reported_offset:
            self.reported_offset = value
            proto.transport.write(encode_offset_report(value))

    # -- received data --------------------------------------------------------------------------------
    def _on_data(self, proto: _Protocol, data: bytes) -> None:
        if proto is not self._proto or self.diverged is not None:
            return
        self._last_read = time.monotonic()
        auth = self._auth
        if auth is not None:
            # the master's challenge comes first: answer it, then report as any slave
            auth += data
            if len(auth) < AUTH_NONCE_SIZE:
                return
            data = bytes(auth[AUTH_NONCE_SIZE:])
            self._auth = None
            assert proto.transport is not None
            proto.transport.write(auth_mac(self.store.config.ha_auth_secret, bytes(auth[:AUTH_NONCE_SIZE])))
            self._open(proto)
            if not data:
                return
        ebuf = self._epoch_buf
        if ebuf is not None:
            ebuf += data
            try:
                got = decode_epoch_answer(ebuf)
            except HAProtocolError as e:
                self._refuse(proto, f"bad epoch answer: {e}")
                return
            if got is None:
                return
            entries, master_max, used = got
            self._epoch_buf = None
            if len(ebuf) > used:
                self._refuse(proto, "bytes after the epoch answer, before this slave's report")
                return
            fut = self._epoch_answer
            if fut is not None and not fut.done():
                fut.set_result((entries, master_max))
            return
        self._proving = False
        store = self.store
        cl = store.commit_log
        appended = False
        confirm_before = self.confirm_offset
        sync_flush = store.config.sync_flush
        decoder = self._decoder
        try:
            for offset, body in decoder.feed(data):
                end = cl.max_offset
                if offset != end and (cl.mfq.files or offset < end):
                    if offset < end:
                        self._diverge(offset, end)
                    else:
                        self._refuse(proto, f"master sent offset {offset} but this slave's CommitLog ends at {end}")
                    return
                if not body:
                    self.last_heartbeat_at = self._last_read
                    if decoder.confirm >= 0:
                        self.confirm_offset = min(decoder.confirm, end)
                    continue
                cl.append_data(offset, body)
                appended = True
                if decoder.confirm >= 0:
                    self.confirm_offset = min(decoder.confirm, cl.max_offset)
                self.transfers += 1
                self.bytes_received += len(body)
                self.last_transfer_at = self._last_read
                self.last_error = None
        except HAProtocolError as e:
            self._refuse(proto, f"bad transfer from master: {e}")
        except StoreError as e:
            # (DiskSpaceError, a file that cannot be created, a mapped file size mismatch)
            self._refuse(proto, f"cannot store replicated data: {e}")
            store.rl_log.error("ha-append", "HA: %s", e)
        finally:
            if appended:
                if self._pending_epochs:
                    self._adopt_pending_epochs(cl.max_offset)
                store.reput.wakeup()
                if sync_flush:
                    self._flush_soon()
                else:
                    # After the transfers of this read (Java reports after each one; the master
                    # keeps only the newest report, so one per read says the same with fewer writes).
                    self._report()
            elif self.confirm_offset > confirm_before:
                store.reput.wakeup()  # only the confirm offset moved: consumers may read further

    def _refuse(self, proto: _Protocol, why: str) -> None:
        _rlog.warning("ha-refuse", "HA: closing the connection to master %s: %s", clip(self.master_address or "?"), why)
        self.last_error = why
        if proto.transport is not None:
            proto.transport.close()

    def _diverge(self, master_offset: int, slave_end: int) -> None:
        self.diverged = (
            f"the master's CommitLog ends at {master_offset}, before this slave's end {slave_end}: "
            f"the slave holds data the master does not have"
        )
        log.error(
            "HA: replication stopped: %s. The slave's data diverged from master %s; it keeps serving what "
            "it has but replicates nothing more. Rebuild the slave's store from the master to resume.",
            self.diverged,
            clip(self.master_address or "?"),
        )
        proto = self._proto
        if proto is not None and proto.transport is not None:
            proto.transport.close()

    def _flush_soon(self) -> None:
        """SYNC_FLUSH slave: fdatasync what arrived (one flush covers every read meanwhile),
        then report and dispatch it."""
        self._flush_again = True
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_loop(), name="ha-slave-flush")

    async def _flush_loop(self) -> None:
        store = self.store
        while self._flush_again and not self._stopped:
            self._flush_again = False
            try:
                await store.run_blocking(store.commit_log.flush, 0)
            except (OSError, ValueError) as e:
                store.rl_log.error("ha-flush", "HA: flushing replicated data failed: %s", e)
                return
            store.reput.wakeup()
            self._report()

    # -- state ------------------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        """The slave's replication keys of ``MessageStore.runtime_info`` (see rmq.store.ha)."""
        ago = int((time.monotonic() - self.last_transfer_at) * 1000) if self.last_transfer_at else -1
        return {
            "haMasterAddress": self.master_address or "",
            "haMasterConnected": "true" if self.connected else "false",
            "haSlaveReportedOffset": str(self.reported_offset),
            "haReceivedBytes": str(self.bytes_received),
            "haConnectTimes": str(self.connects),
            "haLastTransferMillisAgo": str(ago),
            "haDiverged": self.diverged or "",
            "haLastError": self.last_error or "",
            "haConfirmOffset": str(self.confirm_offset),
        }
