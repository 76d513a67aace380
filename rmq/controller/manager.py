"""``ControllerManager``: one ``rmq controller`` process (Java 5.3.3 ``ControllerManager`` +
``DLedgerController`` + ``DefaultBrokerHeartbeatManager``, with etcd in place of DLedger).

* **Leadership** (docs/design.md "Controller mode"): each process holds an etcd lease
  (``etcdLeaseTtlSeconds``) kept alive every third of its TTL, and campaigns with a txn that
  creates ``<prefix>leader`` only if it is absent, bound to that lease. The winner loads every
  broker name's record and acts; the others watch the key and answer CONTROLLER_NOT_LEADER
  (with the leader's address in the remark) to everything but CONTROLLER_GET_METADATA_INFO
  and BROKER_HEARTBEAT. A keepalive that fails or finds the lease gone, or a lease whose last
  renewal is older than its TTL (a process that was stopped), steps the leader down at once.
* **State**: one key per broker name, ``<prefix>brokers/<name>``, JSON
  (:class:`rmq.controller.state.BrokerSet`). Every change is a txn comparing the key's
  ``mod_revision`` with the one the leader read or last wrote *and* the leader key's
  ``create_revision`` with its own campaign's: a deposed leader's write fails (and it steps
  down), whatever it still believes. The replicas' last reported offsets are written under
  ``<prefix>offsets/<name>`` (fenced the same way) every scan when they changed.
* **Liveness** is in memory, from BROKER_HEARTBEAT (accepted by every controller, as Java's
  brokers heartbeat to all of them): a replica is alive while its last heartbeat is younger
  than the timeout it carries (``controllerHeartBeatTimeoutMills`` when none). Every
  ``scanNotActiveBrokerInterval`` the leader looks for masters not alive and elects another
  (``DefaultElectPolicy``), then notifies the replicas (NOTIFY_BROKER_ROLE_CHANGED, oneway).
  A closed heartbeat connection makes its brokers dead at once (Java
  ``onBrokerChannelClose``). A new leader declares nobody dead before one
  ``controllerHeartBeatTimeoutMills`` has passed since it took over.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmq.common.log import RateLimitedLog
from rmq.controller import state as st
from rmq.controller.config import ControllerConfig
from rmq.controller.etcd import EtcdClient, EtcdError, KeyValue, parse_endpoints
from rmq.errors import RemotingCommandError
from rmq.protocol.body.controller import SyncStateSet, decode_broker_names
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rmq.protocol.requests.controller import notify_broker_role_changed
from rmq.remoting.client import RemotingClient
from rmq.remoting.connection import Connection, ConnectionEvent
from rmq.remoting.dispatcher import ProcessorPool
from rmq.remoting.server import RemotingServer
from rmq.remoting.tls import TlsServerOptions

if TYPE_CHECKING:
    from rmq.controller.metrics import ControllerMetrics

__all__ = ["ControllerManager", "HeartbeatTable", "NotLeader"]

log = logging.getLogger("rmq.controller")


class NotLeader(Exception):
    """This controller may not change the state (not the leader, or deposed meanwhile)."""


@dataclass(slots=True)
class _Live:
    address: str
    last: float
    timeout: float
    conn: Connection | None
    info: st.LiveInfo


class HeartbeatTable:
    """Java ``DefaultBrokerHeartbeatManager``'s table: ``(brokerName, brokerId)`` → the last
    heartbeat, at most ``max_entries``."""

    def __init__(self, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self.entries: dict[tuple[str, int], _Live] = {}

    def beat(self, h: BrokerHeartbeatRequestHeader, conn: Connection | None, default_timeout_ms: int) -> bool:
        """Record a heartbeat; False when the table is full and this replica is not in it."""
        assert h.broker_id is not None
        key = (h.broker_name, h.broker_id)
        timeout = (h.heartbeat_timeout_mills or default_timeout_ms) / 1000.0
        prev = self.entries.get(key)
        info = st.LiveInfo(
            -1 if h.epoch is None else h.epoch,
            -1 if h.max_offset is None else h.max_offset,
            -1 if h.confirm_offset is None else h.confirm_offset,
            (1 << 31) - 1 if h.election_priority is None else h.election_priority,
        )
        if prev is None:
            if len(self.entries) >= self.max_entries:
                return False
            self.entries[key] = _Live(h.broker_addr, self.clock(), timeout, conn, info)
            return True
        prev.last = self.clock()
        prev.timeout = timeout
        prev.address = h.broker_addr
        prev.conn = conn
        # Java keeps the newest (epoch, maxOffset) seen; a priority change applies at once
        old = prev.info
        if info.epoch > old.epoch or (info.epoch == old.epoch and info.max_offset > old.max_offset):
            prev.info = info
        else:
            prev.info = st.LiveInfo(old.epoch, old.max_offset, old.confirm_offset, info.election_priority)
        return True

    def alive(self, name: str, broker_id: int) -> bool:
        e = self.entries.get((name, broker_id))
        return e is not None and self.clock() - e.last <= e.timeout

    def info(self, name: str, broker_id: int) -> st.LiveInfo | None:
        e = self.entries.get((name, broker_id))
        return None if e is None else e.info

    def expire(self) -> list[tuple[str, int]]:
        now = self.clock()
        gone = [k for k, e in self.entries.items() if now - e.last > e.timeout]
        for k in gone:
            del self.entries[k]
        return gone

    def drop_connection(self, conn: Connection) -> list[tuple[str, int]]:
        gone = [k for k, e in self.entries.items() if e.conn is conn]
        for k in gone:
            del self.entries[k]
        return gone

    def active_per_name(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, bid in self.entries:
            if self.alive(name, bid):
                out[name] = out.get(name, 0) + 1
        return out


#: Java ControllerMetricsManager's latency buckets (request and replicated-log operation), µs.
LATENCY_BUCKETS_US: tuple[float, ...] = tuple(
    m * u for u in (1.0, 1e3, 1e6) for m in (1, 3, 5, 10, 30, 50, 100, 300, 500) if m * u <= 10e6
)


@dataclass(slots=True)
class Latency:
    """One histogram's counts (one per bucket of :data:`LATENCY_BUCKETS_US`, then +Inf) and sum."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_US) + 1))
    total: float = 0.0

    def observe(self, us: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_US, us)] += 1
        self.total += us


@dataclass(slots=True)
class _Stats:
    elections: dict[tuple[str, str], int] = field(default_factory=dict)  # (broker name, result) → n
    requests: dict[tuple[str, str], int] = field(default_factory=dict)  # (request type, status) → n
    fenced_writes: int = 0
    leader_changes: int = 0
    # Java's request_latency per request type, and its dledger_op_* for our replicated log:
    # the etcd transactions that write the broker names' records, by outcome
    request_latency: dict[str, Latency] = field(default_factory=dict)
    etcd_ops: dict[tuple[str, str], int] = field(default_factory=dict)  # (operation, status) → n
    etcd_latency: dict[str, Latency] = field(default_factory=dict)


_ELECTION_RESULT: dict[int, str] = {
    ResponseCode.SUCCESS: "new_master_elected",
    ResponseCode.CONTROLLER_MASTER_STILL_EXIST: "keep_current_master",
    ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE: "no_master_elected",
    ResponseCode.CONTROLLER_ELECT_MASTER_FAILED: "no_master_elected",
}

#: Codes a follower answers itself; the rest need the leader.
_ANY_CONTROLLER = frozenset({RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.BROKER_HEARTBEAT})


class ControllerManager:
    """One controller (see the module docstring).

    Args:
        config: the settings (``etcd`` required).
        tls: the server side of TLS for the controller port (as the name server's); None =
            plain TCP.
        acl: an ACL checker (``check(cmd, host) -> AclError | None``) guarding the writing
            codes, or None.
    """

    def __init__(self, config: ControllerConfig, tls: TlsServerOptions | None = None, acl: object = None) -> None:
        self.config = config
        self.id = uuid.uuid4().hex[:16]
        self.etcd = EtcdClient(parse_endpoints(config.etcd), timeout=config.etcd_timeout_ms / 1000.0)
        self.prefix = config.prefix()
        self.leader_key = self.prefix + "leader"
        self.server = RemotingServer(
            config.listen_host,
            config.listen_port,
            idle_timeout=config.idle_timeout,
            max_frame_length=config.max_frame_bytes,
            max_requests_in_flight=config.max_requests_per_connection,
            name="controller",
            tls=tls,
        )
        from rmq.controller.processor import ControllerProcessor

        self.processor = ControllerProcessor(self)
        handler: object = self.processor
        self.acl = acl
        if acl is not None:
            from rmq.controller.processor import Guarded

            handler = Guarded(acl, self.processor)
        self.server.register_default_processor(handler, ProcessorPool("controller", max_in_flight=64))
        self.server.add_connection_listener(self._on_connection_event)
        self.heartbeats = HeartbeatTable(config.max_broker_names * config.max_replicas_per_broker_name)
        self.notify_client = RemotingClient(name="controller-notify", connect_timeout=3.0)
        self.states: dict[str, st.BrokerSet] = {}
        self.revisions: dict[str, int] = {}
        self.offsets_written: dict[str, bytes] = {}
        self.stats = _Stats()
        self._locks: dict[str, asyncio.Lock] = {}
        self._leader = False
        self._leader_rev = 0
        self._lease = 0
        self._lease_deadline = 0.0
        self._leader_since = 0.0
        self.leader_info: dict[str, str] = {}  # the current leader's {"id", "address"}, as last seen
        self.peers: dict[str, str] = {}  # controller id → address, from <prefix>members/
        self._tasks: list[asyncio.Task[None]] = []
        self._lost = asyncio.Event()
        self._scan_now = asyncio.Event()
        self._closing = False
        self._notify_tasks: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._rate_log = RateLimitedLog(log)
        self.metrics: ControllerMetrics | None = None
        self._address = ""

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` brokers are told to use: the bound address, or for a wildcard bind
        this host's address (resolved once, at start, off the loop)."""
        if self._address:
            return self._address
        return f"{self.config.listen_host}:{self.server.port}"

    async def _resolve_address(self) -> None:
        host = self.config.listen_host
        if host in ("0.0.0.0", "::", ""):
            import socket

            try:
                host = await asyncio.to_thread(lambda: socket.gethostbyname(socket.gethostname()))
            except OSError:
                host = "127.0.0.1"
        self._address = f"{host}:{self.server.port}"

    async def start(self) -> None:
        """Bind (``OSError`` when the port is taken), then campaign in the background."""
        await self.server.start()
        await self._resolve_address()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._campaign_loop(), name="controller-campaign"))
        self._tasks.append(loop.create_task(self._scan_loop(), name="controller-scan"))
        watch = getattr(self.acl, "watch", None)
        if watch is not None:  # aclEnable: the accounts files are re-read when they change
            self._tasks.append(loop.create_task(watch(), name="controller-acl-watch"))
        if self.config.metrics_port:
            from rmq.controller.metrics import ControllerMetrics

            self.metrics = ControllerMetrics(self)
            await self.metrics.start()
        log.info(
            "controller %s listening on %s (etcd %s, prefix %s)", self.id, self.address, self.config.etcd, self.prefix
        )

    async def shutdown(self) -> None:
        self._closing = True
        was_leader = self._leader
        self._step_down("shutting down")
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        for _, t in self._notify_tasks.values():
            t.cancel()
        if self._lease:
            # resign: revoking the lease deletes the leader key, another controller takes over now
            with contextlib.suppress(EtcdError):
                await self.etcd.lease_revoke(self._lease)
            if was_leader:
                log.info("controller %s resigned", self.id)
        if self.metrics is not None:
            await self.metrics.close()
        await self.notify_client.close()
        await self.server.close()
        await self.etcd.close()

    # -- leadership ----------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """Leader and the lease renewed within its TTL; a leader past that steps down here."""
        if not self._leader:
            return False
        if time.monotonic() >= self._lease_deadline:
            self._step_down("its lease was not renewed within its TTL")
            return False
        return True

    @property
    def role(self) -> str:
        return "leader" if self._leader else "follower"

    def leader_address(self) -> str | None:
        if self._leader:
            return self.address
        return self.leader_info.get("address")

    def _step_down(self, why: str) -> None:
        if self._leader:
            self._leader = False
            self.leader_info = {}  # learnt again from the leader key by the next campaign
            self.stats.leader_changes += 1
            log.warning("controller %s steps down: %s", self.id, why)
        self._lost.set()

    def _record(self) -> bytes:
        return json.dumps({"id": self.id, "address": self.address}, separators=(",", ":")).encode()

    async def _campaign_loop(self) -> None:
        backoff = 0.1
        while not self._closing:
            try:
                await self._campaign_once()
                backoff = 0.1
            except EtcdError as e:
                self._step_down(f"etcd: {e}")
                self._rate_log.warning("campaign", "controller %s: etcd unavailable (%s); retrying", self.id, e)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._step_down("unexpected error")
                log.exception("controller %s: campaign failed", self.id)
            if self._lease:
                lease, self._lease = self._lease, 0
                with contextlib.suppress(EtcdError):
                    await self.etcd.lease_revoke(lease)
            if self._closing:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.etcd_lease_ttl_seconds / 2)

    async def _campaign_once(self) -> None:
        """One lease: register as a member, campaign until leader, lead until the lease is lost."""
        ttl_wanted = self.config.etcd_lease_ttl_seconds
        granted_at = time.monotonic()
        self._lease, ttl = await self.etcd.lease_grant(ttl_wanted)
        self._lease_deadline = granted_at + ttl
        self._lost = asyncio.Event()
        keepalive = asyncio.get_running_loop().create_task(
            self._keepalive(self._lease, ttl), name="controller-keepalive"
        )
        try:
            await self.etcd.put(self.prefix + "members/" + self.id, self._record(), lease=self._lease)
            while not self._lost.is_set():
                r = await self.etcd.put_if_absent(self.leader_key, self._record(), lease=self._lease)
                if r.succeeded:
                    await self._take_over(r.revision)
                    await self._lost.wait()
                    return
                holder = r.kvs[0] if r.kvs else None
                if holder is None:
                    continue
                info = self._parse_record(holder)
                if info.get("id") == self.id:
                    # ours from an earlier lease (etcd restarted under us): drop it and campaign again
                    await self.etcd.txn(
                        [self.etcd.cmp_mod(self.leader_key, holder.mod_revision)],
                        [self.etcd.op_delete(self.leader_key)],
                        [],
                    )
                    continue
                self.leader_info = info
                await self._refresh_peers()
                await self._wait_leader_change(holder)
        finally:
            keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keepalive

    @staticmethod
    def _parse_record(kv: KeyValue) -> dict[str, str]:
        try:
            d = json.loads(kv.value)
            return {"id": str(d.get("id", "")), "address": str(d.get("address", ""))}
        except (ValueError, AttributeError):
            return {}

    async def _wait_leader_change(self, holder: KeyValue) -> None:
        """Until the leader key changes (watch), our lease is lost, or one TTL passes."""

        async def watch() -> None:
            async for _ in self.etcd.watch(self.leader_key, start_revision=holder.mod_revision + 1):
                return

        w = asyncio.ensure_future(watch())
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait(
                {w, lost}, timeout=self.config.etcd_lease_ttl_seconds, return_when=asyncio.FIRST_COMPLETED
            )
            if w.done() and not w.cancelled() and w.exception() is not None:
                # the watch broke at once (etcd going away): no busy loop of campaigns
                await asyncio.wait({lost}, timeout=min(1.0, self.config.etcd_lease_ttl_seconds / 4))
        finally:
            for t in (w, lost):
                t.cancel()
            with contextlib.suppress(asyncio.CancelledError, EtcdError):
                await w
            with contextlib.suppress(asyncio.CancelledError):
                await lost

    async def _keepalive(self, lease: int, ttl: int) -> None:
        interval = max(ttl / 3.0, 0.2)
        try:
            while True:
                await asyncio.sleep(interval)
                sent = time.monotonic()
                try:
                    left = await self.etcd.lease_keepalive(lease, timeout=interval)
                except EtcdError as e:
                    self._step_down(f"lease keepalive failed ({e})")
                    return
                if left <= 0:
                    self._step_down("its etcd lease is gone")
                    return
                self._lease_deadline = sent + left
        finally:
            self._lost.set()

    async def _take_over(self, leader_rev: int) -> None:
        """Leader now: load every record (their revisions are what our writes compare with)."""
        kvs, _ = await self.etcd.get_prefix(self.prefix + "brokers/")
        states: dict[str, st.BrokerSet] = {}
        revs: dict[str, int] = {}
        for kv in kvs:
            name = kv.key.decode(errors="replace")[len(self.prefix + "brokers/") :]
            try:
                states[name] = st.BrokerSet.from_json(kv.value)
            except (ValueError, KeyError, TypeError) as e:
                log.error("controller: the record of broker name %r in etcd is unreadable (%s); left alone", name, e)
                continue
            revs[name] = kv.mod_revision
        self.states, self.revisions = states, revs
        self.offsets_written = {}
        self._leader_rev = leader_rev
        self._leader_since = time.monotonic()
        self.leader_info = {"id": self.id, "address": self.address}
        self._leader = True
        self.stats.leader_changes += 1
        await self._refresh_peers()
        log.info("controller %s is the leader (%d broker names)", self.id, len(states))

    async def _refresh_peers(self) -> None:
        kvs, _ = await self.etcd.get_prefix(self.prefix + "members/", limit=256)
        self.peers = {}
        for kv in kvs:
            info = self._parse_record(kv)
            if info.get("id"):
                self.peers[info["id"]] = info.get("address", "")

    # -- fenced writes -------------------------------------------------------------------------

    def lock(self, name: str) -> asyncio.Lock:
        lk = self._locks.get(name)
        if lk is None:
            lk = self._locks[name] = asyncio.Lock()
        return lk

    async def write(self, name: str, new: st.BrokerSet | None) -> None:
        """Write (or, with None, delete) ``name``'s record: a txn that holds only while the
        record is what this leader last saw and the leader key is still this leader's
        campaign. A failed one means another leader: step down, raise :class:`NotLeader`."""
        if not self.is_leader():
            raise NotLeader()
        key = self.prefix + "brokers/" + name
        compare = [
            self.etcd.cmp_mod(key, self.revisions.get(name, 0)),
            self.etcd.cmp_create(self.leader_key, self._leader_rev),
        ]
        op = self.etcd.op_put(key, new.to_json()) if new is not None else self.etcd.op_delete(key)
        kind = "put" if new is not None else "delete"
        t0 = time.monotonic()
        status = "failed"
        try:
            r = await self.etcd.txn(compare, [op], [])
            status = "success" if r.succeeded else "fenced"
        finally:
            stats = self.stats
            stats.etcd_ops[(kind, status)] = stats.etcd_ops.get((kind, status), 0) + 1
            stats.etcd_latency.setdefault(kind, Latency()).observe((time.monotonic() - t0) * 1e6)
        if not r.succeeded:
            self.stats.fenced_writes += 1
            self._rate_log.warning(
                "fenced", "controller %s: the write of broker name %r was fenced: another leader", self.id, name
            )
            self._step_down("a fenced write (another controller leads)")
            raise NotLeader()
        if new is None:
            self.states.pop(name, None)
            self.revisions.pop(name, None)
        else:
            self.states[name] = new
            self.revisions[name] = r.revision

    async def _write_offsets(self) -> None:
        """The replicas' last reported offsets, per broker name, when they changed."""
        for name in list(self.states):
            table = {
                str(bid): {"epoch": i.epoch, "maxOffset": i.max_offset, "confirmOffset": i.confirm_offset}
                for bid in self.states[name].replicas
                if (i := self.heartbeats.info(name, bid)) is not None
            }
            raw = json.dumps(table, separators=(",", ":"), sort_keys=True).encode()
            if not table or self.offsets_written.get(name) == raw:
                continue
            r = await self.etcd.txn(
                [self.etcd.cmp_create(self.leader_key, self._leader_rev)],
                [self.etcd.op_put(self.prefix + "offsets/" + name, raw)],
                [],
            )
            if not r.succeeded:
                self._step_down("a fenced write (another controller leads)")
                return
            self.offsets_written[name] = raw

    # -- liveness and elections ----------------------------------------------------------------

    def alive(self, name: str, broker_id: int) -> bool:
        return self.heartbeats.alive(name, broker_id)

    def _on_connection_event(self, event: ConnectionEvent, conn: Connection, exc: BaseException | None = None) -> None:
        if event is ConnectionEvent.CLOSE:
            gone = self.heartbeats.drop_connection(conn)
            if gone:
                log.info("controller: heartbeat connection of %s closed", ", ".join(f"{n}/{i}" for n, i in gone))
                self._scan_now.set()

    def master_dead(self, s: st.BrokerSet) -> bool:
        """The master is not alive, and this leader has waited long enough to say so."""
        m = s.master_broker_id
        if m is None or self.alive(s.broker_name, m):
            return False
        if self.heartbeats.info(s.broker_name, m) is not None:
            return True  # it heartbeated to us and stopped
        grace = self.config.controller_heart_beat_timeout_mills / 1000.0
        return time.monotonic() - self._leader_since >= grace

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000.0
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._scan_now.wait()
            self._scan_now.clear()
            try:
                await self.scan_once()
            except asyncio.CancelledError:
                raise
            except (EtcdError, NotLeader) as e:
                self._rate_log.warning("scan", "controller: scan for dead masters failed: %s", e)
            except Exception:
                log.exception("controller: scan for dead masters failed")

    async def scan_once(self) -> None:
        """Java ``scanNotActiveBroker`` + ``scanInactiveMasterAndTriggerReelect``."""
        for name, bid in self.heartbeats.expire():
            log.warning("controller: broker %s/%d missed its heartbeat timeout", name, bid)
        if not self.is_leader():
            return
        for name in list(self.states):
            s = self.states.get(name)
            if s is not None and self.master_dead(s):
                await self.elect_by_controller(name)
        if self.is_leader():
            await self._write_offsets()

    async def elect_by_controller(self, name: str) -> None:
        """Java ``ControllerManager.triggerElectMaster``: up to ``electMasterMaxRetryCount`` tries."""
        for _ in range(self.config.elect_master_max_retry_count):
            try:
                d = await self.elect(ElectMasterRequestHeader(broker_name=name, broker_id=-1))
            except NotLeader:
                return
            if d.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE):
                log.warning("controller: master of %s is dead: %s", name, d.remark or "new master elected")
                return
            if d.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
                return

    async def elect(self, req: ElectMasterRequestHeader) -> st.Decision:
        """An election (any trigger), written and then notified."""
        async with self.lock(req.broker_name):
            if not self.is_leader():
                raise NotLeader()
            s = self.states.get(req.broker_name)
            d = st.elect_master(
                req, s, self.alive, self.heartbeats.info, unclean=self.config.enable_elect_unclean_master
            )
            if d.new_state is not None:
                await self.write(req.broker_name, d.new_state)
        result = _ELECTION_RESULT.get(d.code)
        if result is not None:
            k = (req.broker_name, result)
            self.stats.elections[k] = self.stats.elections.get(k, 0) + 1
        if d.elected and d.new_state is not None:
            log.warning(
                "controller: broker name %s elected master %s (%s) at epoch %d",
                req.broker_name,
                d.new_state.master_broker_id,
                d.new_state.address(d.new_state.master_broker_id),
                d.new_state.master_epoch,
            )
            if self.config.notify_broker_role_changed:
                self.notify_role_changed(d.new_state)
        return d

    def notify_role_changed(self, s: st.BrokerSet) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED to every alive replica (Java ``NotifyService``: a newer
        epoch's notice replaces an older one still being sent to the same address)."""
        for bid, r in s.replicas.items():
            if not self.alive(s.broker_name, bid):
                continue
            old = self._notify_tasks.get(r.address)
            if old is not None and old[0] < s.master_epoch:
                old[1].cancel()
            cmd = notify_broker_role_changed(
                s.address(s.master_broker_id), s.master_broker_id, s.master_epoch, s.sync_state()
            )
            task = asyncio.get_running_loop().create_task(self._send_notice(r.address, cmd))
            self._notify_tasks[r.address] = (s.master_epoch, task)
            task.add_done_callback(functools.partial(self._notify_done, r.address))

    def _notify_done(self, address: str, task: asyncio.Task[None]) -> None:
        cur = self._notify_tasks.get(address)
        if cur is not None and cur[1] is task:
            del self._notify_tasks[address]

    async def _send_notice(self, address: str, cmd: RemotingCommand) -> None:
        try:
            async with asyncio.timeout(3.0):
                await self.notify_client.invoke_oneway(address, cmd)
        except (OSError, TimeoutError, Exception) as e:  # noqa: BLE001 - a broker away is normal
            self._rate_log.warning(f"notify-{address}", "controller: could not notify %s of its role: %s", address, e)

    # -- requests (called by the processor) ----------------------------------------------------

    async def decide(
        self, name: str, fn: Callable[[st.BrokerSet | None], st.Decision], *, write: bool = True
    ) -> st.Decision:
        """Run ``fn`` on ``name``'s record under its lock and write what it decides."""
        async with self.lock(name):
            if not self.is_leader():
                raise NotLeader()
            d = fn(self.states.get(name))
            if write and (d.new_state is not None or d.delete):
                await self.write(name, None if d.delete else d.new_state)
            return d

    def metadata(self) -> GetMetaDataResponseHeader:
        leader = self.leader_address()
        leader_id = self.id if self._leader else self.leader_info.get("id")
        peers = "".join(f"{i}:{a};" for i, a in sorted(self.peers.items()))
        return GetMetaDataResponseHeader(
            group=self.prefix.rstrip("/"),
            controller_leader_id=leader_id,
            controller_leader_address=leader,
            is_leader=self.is_leader(),
            peers=peers,
        )

    def heartbeat(self, h: BrokerHeartbeatRequestHeader, conn: Connection | None) -> bool:
        return self.heartbeats.beat(h, conn, self.config.controller_heart_beat_timeout_mills)

    def check_broker_name(self, name: str) -> None:
        """Refuse a broker name no record may have (empty, too long, control characters)."""
        if not name or len(name) > self.config.max_broker_name_chars or any(ord(c) < 32 for c in name):
            raise RemotingCommandError(
                f"brokerName must be 1..{self.config.max_broker_name_chars} characters without control characters"
            )

    def check_new_name(self, name: str) -> None:
        if name not in self.states and len(self.states) >= self.config.max_broker_names:
            raise _Refused(
                ResponseCode.CONTROLLER_INVALID_REQUEST,
                f"the controller holds {len(self.states)} broker names, the most it may (maxBrokerNames)",
            )

    def sync_state_data(self, body: bytes | None) -> bytes:
        names = decode_broker_names(body, limit=self.config.max_broker_names)
        return st.sync_state_data(names, self.states, self.alive)

    def alter(self, h: AlterSyncStateSetRequestHeader, proposed: SyncStateSet) -> Awaitable[st.Decision]:
        return self.decide(h.broker_name, lambda s: st.alter_sync_state_set(h, proposed, s, self.alive))

    def apply_id(self, h: ApplyBrokerIdRequestHeader) -> Awaitable[st.Decision]:
        return self.decide(
            h.broker_name,
            lambda s: st.apply_broker_id(h, s, max_replicas=self.config.max_replicas_per_broker_name),
        )

    def register(self, h: RegisterBrokerToControllerRequestHeader) -> Awaitable[st.Decision]:
        return self.decide(h.broker_name, lambda s: st.register_broker(h, s, self.alive))

    def next_id(self, h: GetNextBrokerIdRequestHeader) -> Awaitable[st.Decision]:
        return self.decide(
            h.broker_name, lambda s: st.get_next_broker_id(h.cluster_name, h.broker_name, s), write=False
        )

    def replica_info(self, h: GetReplicaInfoRequestHeader) -> Awaitable[st.Decision]:
        return self.decide(h.broker_name, lambda s: st.get_replica_info(h.broker_name, s), write=False)

    def clean(self, h: CleanControllerBrokerDataRequestHeader) -> Awaitable[st.Decision]:
        def fn(s: st.BrokerSet | None) -> st.Decision:
            if s is None:
                return st.Decision(
                    code=ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    remark=f"Broker {h.broker_name} is not existed,clean broker data failure.",
                )
            ids: set[int] | None = None
            if h.broker_controller_ids_to_clean:
                try:
                    ids = {int(x) for x in h.broker_controller_ids_to_clean.split(";") if x.strip()}
                except ValueError as e:
                    return st.Decision(
                        code=ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        remark="Please set the option <brokerControllerIdsToClean> according to the format, "
                        f"exception: {e}",
                    )
            if not h.is_clean_living_broker:
                living = [b for b in (ids if ids is not None else s.replicas) if self.alive(s.broker_name, b)]
                if living:
                    return st.Decision(
                        code=ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        remark=f"Broker [{h.broker_name}, {living[0]}] is still alive, clean up failure",
                    )
            if not ids:
                return st.Decision(delete=True)
            replicas = {b: r for b, r in s.replicas.items() if b not in ids}
            if not replicas:
                return st.Decision(delete=True)
            master = s.master_broker_id if s.master_broker_id not in ids else None
            return st.Decision(
                new_state=s.replace(replicas=replicas, sync_state_set=s.sync_state_set - ids, master_broker_id=master)
            )

        return self.decide(h.broker_name, fn)


class _Refused(Exception):
    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark
