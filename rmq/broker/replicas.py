"""The broker's side of controller mode (Java 5.3.3 ``ReplicasManager``; docs/design.md
"Controller mode").

With ``enableControllerMode=true`` the controllers at ``controllerAddr`` decide this broker's
role. The flow, Java's:

1. find the controller leader (CONTROLLER_GET_METADATA_INFO to each address);
2. get a broker id for this replica: ``<storePathRootDir>/brokerIdentity`` holds it once
   applied (Java ``BrokerMetadata``: ``cluster#name#id``); else CONTROLLER_GET_NEXT_BROKER_ID,
   the id written to ``brokerIdentity-temp`` with a register check code
   (``<address>;<ms>``), CONTROLLER_APPLY_BROKER_ID, then ``brokerIdentity``;
3. CONTROLLER_REGISTER_BROKER: the answer names the master if one is alive; else this broker
   asks for an election (CONTROLLER_ELECT_MASTER with its own id);
4. from then on: BROKER_HEARTBEAT to every controller every ``brokerHeartbeatInterval``,
   CONTROLLER_GET_REPLICA_INFO every ``syncBrokerMetadataPeriod`` (a newer master epoch changes
   the role), NOTIFY_BROKER_ROLE_CHANGED from the controller (the same change, at once), and on
   the master the SyncStateSet check every ``checkSyncStateSetPeriod`` plus every change the HA
   service proposes, sent as CONTROLLER_ALTER_SYNC_STATE_SET.

A role change is the store's (``MessageStore.change_to_master`` / ``change_to_slave``: epoch
file, truncation, HA port or HA client) plus the broker's: ``brokerId`` 0 as master or the
controller's id as slave, the slave's metadata copy started or stopped, and a registration
with the name servers at once, so clients' routes follow (the name server replaces the old
master's id-0 entry). Until the first role is known the broker takes no writes and does not
register with the name servers (Java's "fenced" state). A master that learns of a newer epoch
with another master (a zombie) stops taking writes at once and follows it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from rmq.common.files import atomic_write
from rmq.common.log import RateLimitedLog, clip
from rmq.errors import ControllerBrokerMetadataNotExistError, RemotingCommandError, RMQError
from rmq.protocol.body.controller import EpochEntry, EpochEntryCache, SyncStateSet
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.controller import BrokerHeartbeatRequestHeader, NotifyBrokerRoleChangedRequestHeader
from rmq.protocol.requests.controller import (
    alter_sync_state_set,
    apply_broker_id,
    broker_heartbeat,
    elect_master,
    get_controller_metadata,
    get_next_broker_id,
    get_replica_info,
    parse_alter_sync_state_set,
    parse_apply_broker_id,
    parse_controller_metadata,
    parse_elect_master,
    parse_next_broker_id,
    parse_register_broker_to_controller,
    parse_replica_info,
    register_broker_to_controller,
)
from rmq.remoting.client import RemotingClient

if TYPE_CHECKING:
    from rmq.broker.context import ReplicasContext
    from rmq.common.metrics import MetricsBuilder
    from rmq.remoting.connection import Connection

__all__ = ["IDENTITY_FILE", "ReplicasManager"]

log = logging.getLogger("rmq.broker.replicas")
_rlog = RateLimitedLog(log)

IDENTITY_FILE = "brokerIdentity"  # Java MessageStoreConfig.getStorePathBrokerIdentity()
_RETRY_MAX = 5.0  # seconds between start-up attempts at most (Java RETRY_INTERVAL_SECOND)
_CALL_TIMEOUT = 3.0


class ReplicasManager:
    """One broker's registration with the controllers and its role (see the module docstring).

    Args:
        broker: the broker as rmq.broker.context.ReplicasContext (its configs, store,
            registration and slave sync).
        tls: an ``ssl.SSLContext`` to reach the controllers over TLS (default None: plain TCP).
    """

    def __init__(self, broker: ReplicasContext, tls: Any = None) -> None:
        self.broker = broker
        self.bc = broker.broker_config
        self.client = RemotingClient(name="controller-client", tls=tls)
        self.controller_addrs = self.bc.controller_addr_list
        self.leader: str | None = None
        self.broker_controller_id: int | None = None
        self.master_broker_id: int | None = None
        self.master_address = ""
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        #: the role taken when elected (the configured brokerRole, ASYNC_MASTER or SYNC_MASTER)
        self.master_role = "SYNC_MASTER"
        self.running = False  # a role is known: writes (as master) and name-server registrations
        self.role_changes = 0
        #: heartbeats that could not be sent, per controller address (the broker's /metrics)
        self.heartbeat_failures: dict[str, int] = {addr: 0 for addr in self.controller_addrs}
        self._lock = asyncio.Lock()  # role changes one at a time (Java: synchronized)
        self._proposal: frozenset[int] | None = None
        self._proposing = False
        self._tasks: list[asyncio.Task[Any]] = []
        self._identity_path = os.path.join(broker.store_config.store_path_root_dir, IDENTITY_FILE)

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, spawn: Any) -> None:
        """Spawn the start-up flow and the periodic tasks with ``spawn(coro, name)``."""
        self._spawn = spawn
        spawn(self._start_up(), "controller-start")

    async def close(self) -> None:
        self.running = False
        await self.client.close()

    @property
    def is_master(self) -> bool:
        return self.running and self.master_broker_id is not None and self.master_broker_id == self.broker_controller_id

    # -- start-up (Java startBasicService) -----------------------------------------------------
    async def _start_up(self) -> None:
        backoff = 0.2
        while True:
            try:
                if await self._start_once():
                    break
            except (RMQError, OSError, ValueError) as e:
                _rlog.warning("controller-start", "controller mode: start-up step failed: %s; retrying", e)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _RETRY_MAX)
        bc = self.bc
        self._spawn(self._every(bc.sync_broker_metadata_period, self.sync_replica_info), "controller-sync")
        self._spawn(self._every(bc.check_sync_state_set_period, self.check_sync_state_set), "controller-isr")
        self._spawn(self._every(bc.sync_controller_metadata_period, self.update_leader), "controller-leader")

    async def _start_once(self) -> bool:
        if not await self.update_leader():
            return False
        if self.broker_controller_id is None:
            await self._obtain_id()
            # heartbeats from now on, whatever the rest of the start-up waits for
            self._spawn(self._every(self.bc.broker_heartbeat_interval, self.send_heartbeat), "controller-heartbeat")
        await self._register()
        await self.send_heartbeat()
        return self.master_broker_id is not None or await self._elect()

    async def _every(self, period_ms: int, fn: Any) -> None:
        while True:
            await asyncio.sleep(period_ms / 1000.0)
            try:
                await fn()
            except (RMQError, OSError, ValueError) as e:
                _rlog.warning(f"controller-{fn.__name__}", "controller mode: %s failed: %s", fn.__name__, e)

    async def _invoke(self, cmd: RemotingCommand, addr: str | None = None) -> RemotingCommand:
        target = addr or self.leader
        if not target:
            raise RemotingCommandError("no controller leader known")
        resp = await self.client.invoke(target, cmd, _CALL_TIMEOUT)
        if resp.code == ResponseCode.CONTROLLER_NOT_LEADER and addr is None:
            self.leader = None  # asked again at the next round
        return resp

    async def update_leader(self) -> bool:
        """Java ``updateControllerMetadata``: the leader's address from any controller."""
        for addr in self.controller_addrs:
            try:
                h = parse_controller_metadata(await self._invoke(get_controller_metadata(), addr))
            except (RMQError, OSError) as e:
                _rlog.info(f"controller-meta-{addr}", "controller %s: %s", clip(addr), e)
                continue
            if h.controller_leader_address:
                if h.controller_leader_address != self.leader:
                    log.info("controller leader: %s", clip(h.controller_leader_address))
                self.leader = h.controller_leader_address
                return True
        return False

    # -- the broker id (Java register(): metadata files) ----------------------------------------
    def _read_identity(self, path: str) -> list[str] | None:
        try:
            with open(path, encoding="utf-8") as f:
                parts = f.read().strip().split("#")
        except FileNotFoundError:
            return None
        bc = self.bc
        if len(parts) < 3 or parts[0] != bc.broker_cluster_name or parts[1] != bc.broker_name:
            raise ValueError(
                f"{path} belongs to {'#'.join(parts[:2])}, not {bc.broker_cluster_name}#{bc.broker_name}: "
                f"remove it or fix brokerClusterName / brokerName"
            )
        return parts

    async def _obtain_id(self) -> None:
        bc = self.bc
        loop = asyncio.get_running_loop()
        parts = self._read_identity(self._identity_path)
        if parts is not None:
            self.broker_controller_id = int(parts[2])
        else:
            temp = self._identity_path + "-temp"
            tparts = self._read_identity(temp)
            if tparts is None or len(tparts) < 4:
                next_id = parse_next_broker_id(
                    await self._invoke(get_next_broker_id(bc.broker_cluster_name, bc.broker_name))
                )
                code = f"{self.broker.broker_addr};{int(time.time() * 1000)}"
                tparts = [bc.broker_cluster_name, bc.broker_name, str(next_id), code]
                await loop.run_in_executor(None, atomic_write, temp, "#".join(tparts).encode())
            try:
                parse_apply_broker_id(
                    await self._invoke(
                        apply_broker_id(bc.broker_cluster_name, bc.broker_name, int(tparts[2]), tparts[3])
                    )
                )
            except RMQError:
                # the id was taken meanwhile: start over with the next one (Java clears the temp file)
                await loop.run_in_executor(None, _unlink, temp)
                raise
            ident = "#".join(tparts[:3]).encode()
            await loop.run_in_executor(None, atomic_write, self._identity_path, ident)
            await loop.run_in_executor(None, _unlink, temp)
            self.broker_controller_id = int(tparts[2])
        store = self.broker.message_store
        if store is not None:
            store.broker_id = self.broker_controller_id
        log.info("controller mode: this replica is broker id %d of %s", self.broker_controller_id, clip(bc.broker_name))

    async def _register(self) -> None:
        bc = self.bc
        assert self.broker_controller_id is not None
        h, sss = parse_register_broker_to_controller(
            await self._invoke(
                register_broker_to_controller(
                    bc.broker_cluster_name, bc.broker_name, self.broker_controller_id, self.broker.broker_addr
                )
            )
        )
        if h.master_broker_id is not None and h.master_epoch is not None:
            await self.change_broker_role(
                h.master_broker_id, h.master_address or "", h.master_epoch, h.sync_state_set_epoch or 0, sss
            )

    async def _elect(self) -> bool:
        """Java ``brokerElect``: ask the controller to elect (this broker if it may)."""
        bc = self.bc
        assert self.broker_controller_id is not None
        h, body, _elected = parse_elect_master(
            await self._invoke(
                elect_master(bc.broker_name, self.broker_controller_id, cluster_name=bc.broker_cluster_name)
            )
        )
        if h.master_broker_id is None or not h.master_address or h.master_epoch is None:
            log.warning("controller mode: no master elected for %s yet", clip(bc.broker_name))
            return False
        sss = SyncStateSet(frozenset(body.sync_state_set or ()), h.sync_state_set_epoch or 0)
        await self.change_broker_role(
            h.master_broker_id, h.master_address, h.master_epoch, h.sync_state_set_epoch or 0, sss
        )
        return True

    # -- periodic --------------------------------------------------------------------------------
    async def send_heartbeat(self) -> None:
        """BROKER_HEARTBEAT (oneway) to every controller (Java ``sendHeartbeatToController``)."""
        if self.broker_controller_id is None:
            return
        bc = self.bc
        store = self.broker.message_store
        max_offset = store.max_phy_offset if store is not None else 0
        confirm = store.ha.confirm_offset if store is not None and store.ha is not None else max_offset
        h = BrokerHeartbeatRequestHeader(
            cluster_name=bc.broker_cluster_name,
            broker_addr=self.broker.broker_addr,
            broker_name=bc.broker_name,
            broker_id=self.broker_controller_id,
            epoch=store.epochs.last_epoch if store is not None else -1,
            max_offset=max_offset,
            confirm_offset=confirm,
            heartbeat_timeout_mills=bc.controller_heart_beat_timeout_mills,
            election_priority=bc.broker_election_priority,
        )
        for addr in self.controller_addrs:
            try:
                await self.client.invoke_oneway(addr, broker_heartbeat(h))
            except (RMQError, OSError) as e:
                self.heartbeat_failures[addr] = self.heartbeat_failures.get(addr, 0) + 1
                _rlog.info(f"controller-hb-{addr}", "heartbeat to controller %s failed: %s", clip(addr), e)

    async def sync_replica_info(self) -> None:
        """Java ``schedulingSyncBrokerMetadata``: the controller's view of this broker name."""
        if self.leader is None and not await self.update_leader():
            return
        try:
            h, sss = parse_replica_info(await self._invoke(get_replica_info(self.bc.broker_name)))
        except ControllerBrokerMetadataNotExistError:
            await self._register()  # the controller forgot this broker (Java registers again)
            raise
        epoch = h.master_epoch or 0
        if epoch > self.master_epoch:
            if h.master_address and h.master_broker_id is not None:
                await self.change_broker_role(
                    h.master_broker_id, h.master_address, epoch, sss.sync_state_set_epoch, sss
                )
            else:
                await self._elect()
        elif epoch == self.master_epoch and self.is_master:
            self._apply_sync_state_set(sss)
        if not self.is_master:
            await self._follow_master()

    async def _follow_master(self) -> None:
        """A slave whose HA client has no master yet asks the name servers again (their answer
        carries the master's HA address once the new master registered)."""
        store = self.broker.message_store
        client = store.ha_client if store is not None else None
        if client is not None and not client.connected:
            await self.broker.register_broker_all()

    async def check_sync_state_set(self) -> None:
        """Java ``checkSyncStateSetAndDoReport``: the master's shrink check, then a report."""
        store = self.broker.message_store
        if not self.is_master or store is None or store.ha is None:
            return
        store.ha.maybe_shrink()

    def on_sync_state_set_changed(self, proposed: frozenset[int]) -> None:
        """The HA service's proposal (a slave caught up, or fell behind / disconnected)."""
        self._proposal = proposed
        if not self._proposing:
            self._proposing = True
            self._spawn(self._propose(), "controller-alter-isr")

    async def _propose(self) -> None:
        try:
            while self._proposal is not None and self.is_master:
                proposal, self._proposal = self._proposal, None
                if proposal == self.sync_state_set:
                    continue
                assert self.broker_controller_id is not None
                try:
                    result = parse_alter_sync_state_set(
                        await self._invoke(
                            alter_sync_state_set(
                                self.bc.broker_name,
                                self.broker_controller_id,
                                self.master_epoch,
                                proposal,
                                self.sync_state_set_epoch,
                            )
                        )
                    )
                except (RMQError, OSError) as e:
                    _rlog.warning(
                        "controller-alter", "ALTER_SYNC_STATE_SET %s refused or failed: %s", sorted(proposal), e
                    )
                    await asyncio.sleep(min(1.0, self.bc.check_sync_state_set_period / 1000.0))
                    if self._proposal is None:
                        self._proposal = proposal  # (the next check proposes it again anyway)
                    continue
                self._apply_sync_state_set(result)
        finally:
            self._proposing = False

    def _apply_sync_state_set(self, sss: SyncStateSet) -> None:
        """Java ``changeSyncStateSet``: a newer set from the controller."""
        if sss.sync_state_set_epoch <= self.sync_state_set_epoch and self.sync_state_set:
            return
        self.sync_state_set_epoch = sss.sync_state_set_epoch
        self.sync_state_set = frozenset(sss.sync_state_set)
        store = self.broker.message_store
        if store is not None and store.ha is not None and self.sync_state_set:
            store.ha.set_sync_state_set(self.sync_state_set)

    # -- role changes (Java changeBrokerRole / changeToMaster / changeToSlave) --------------------
    async def change_broker_role(
        self, master_id: int, master_address: str, master_epoch: int, sss_epoch: int, sss: SyncStateSet
    ) -> None:
        async with self._lock:
            if master_epoch <= self.master_epoch:
                return
            if master_id == self.broker_controller_id:
                await self._change_to_master(master_epoch, sss)
            else:
                await self._change_to_slave(master_address, master_epoch, master_id)

    async def _change_to_master(self, epoch: int, sss: SyncStateSet) -> None:
        broker = self.broker
        store = broker.started_store
        t0 = time.monotonic()
        was_master = self.is_master
        if not await store.change_to_master(epoch, self.master_role):
            return
        self.master_epoch = epoch
        self.master_broker_id = self.broker_controller_id
        self.master_address = broker.broker_addr
        if store.ha is not None:
            store.ha.on_sync_state_set_changed = self.on_sync_state_set_changed
        self.sync_state_set_epoch = -1
        self._apply_sync_state_set(sss)
        self.bc.broker_id = 0  # Java ReplicasManager.changeToMaster: MixAll.MASTER_ID
        broker.topic_config_manager.next_state_version(epoch)  # name servers prefer the newer epoch
        broker.on_role_changed()
        self.running = True
        self.role_changes += 1
        log.warning(
            "controller mode: %s is now the master of %s (epoch %d%s) in %.3fs",
            broker.broker_addr,
            clip(self.bc.broker_name),
            epoch,
            ", already master" if was_master else "",
            time.monotonic() - t0,
        )
        self._register_soon()

    async def _change_to_slave(self, master_address: str, epoch: int, master_id: int) -> None:
        broker = self.broker
        store = broker.started_store
        was_master = self.is_master
        assert self.broker_controller_id is not None
        if master_id == self.master_broker_id and not was_master:
            # the master did not change, only its epoch (Java changeToSlaveWhenMasterNotChange)
            self.master_epoch = epoch
            self.running = True
            return
        if not await store.change_to_slave(None, epoch):
            return
        self.master_epoch = epoch
        self.master_broker_id = master_id
        self.master_address = master_address
        self.bc.broker_id = self.broker_controller_id
        broker.topic_config_manager.next_state_version(epoch)
        broker.slave_synchronize.set_master_addr(master_address)
        broker.on_role_changed()
        self.running = True
        self.role_changes += 1
        log.warning(
            "controller mode: %s is now a slave of %s (broker id %d, epoch %d)%s",
            broker.broker_addr,
            clip(master_address),
            self.broker_controller_id,
            epoch,
            ": it stopped taking writes" if was_master else "",
        )
        self._register_soon()

    def _register_soon(self) -> None:
        """Register with the name servers in a task of its own (Java
        ``registerBrokerWhenRoleChange`` submits it to an executor): a slow name server never
        holds up the heartbeats or the next role change."""
        self._spawn(self.broker.register_broker_all(), "controller-register")

    # -- requests from the controller and the admin tool ------------------------------------------
    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED:
            h = cmd.decode_header(NotifyBrokerRoleChangedRequestHeader)
            try:
                sss = SyncStateSet.decode(cmd.body_bytes())
            except (ValueError, KeyError, TypeError) as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad SyncStateSet body: {e}")
            if h.master_broker_id is not None and h.master_epoch is not None:
                await self.change_broker_role(
                    h.master_broker_id, h.master_address or "", h.master_epoch, h.sync_state_set_epoch or 0, sss
                )
            return None if cmd.is_oneway else cmd.response(ResponseCode.SUCCESS)
        # GET_BROKER_EPOCH_CACHE (Java AdminBrokerProcessor.getBrokerEpochCache)
        store = self.broker.started_store
        ends = store.epochs.with_ends(store.max_phy_offset)
        body = EpochEntryCache(
            self.bc.broker_cluster_name,
            self.bc.broker_name,
            self.broker_controller_id if self.broker_controller_id is not None else -1,
            tuple(EpochEntry(e, s, end) for e, s, end in ends),
            store.max_phy_offset,
        )
        return cmd.response(ResponseCode.SUCCESS, body=body.encode())

    def reject_request(self) -> bool:
        return False

    def metrics(self, b: MetricsBuilder) -> None:
        """The controller-mode families of the broker's ``/metrics`` (a source of
        rmq.broker.metrics.BrokerMetrics, run in its thread: plain attributes only)."""
        bc = self.bc
        labels = (bc.broker_cluster_name, self.broker.broker_addr, bc.broker_name)
        master = self.is_master
        b.set("rocketmq_broker_role", (*labels, "master"), 1 if master else 0)
        b.set("rocketmq_broker_role", (*labels, "slave"), 1 if self.running and not master else 0)
        b.set("rocketmq_broker_master_epoch", labels, self.master_epoch)
        store = self.broker.message_store
        ha = store.ha if store is not None else None
        client = store.ha_client if store is not None else None
        if master:
            b.set("rocketmq_broker_sync_state_set_size", labels, len(self.sync_state_set))
            b.set("rocketmq_broker_sync_state_set_epoch", labels, self.sync_state_set_epoch)
        if ha is not None:
            b.set("rocketmq_broker_confirm_offset", labels, ha.confirm_offset)
        elif client is not None:
            b.set("rocketmq_broker_confirm_offset", labels, client.confirm_offset)
        b.set("rocketmq_broker_role_changes_total", labels, self.role_changes)
        for addr, n in list(self.heartbeat_failures.items()):
            b.set("rocketmq_broker_controller_heartbeat_failures_total", (*labels, addr), n)

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's controller-mode keys."""
        return {
            "controllerBrokerId": str(self.broker_controller_id if self.broker_controller_id is not None else -1),
            "controllerLeader": self.leader or "",
            "masterEpoch": str(self.master_epoch),
            "masterBrokerId": str(self.master_broker_id if self.master_broker_id is not None else -1),
            "syncStateSet": ",".join(str(i) for i in sorted(self.sync_state_set)),
            "syncStateSetEpoch": str(self.sync_state_set_epoch),
            "roleChanges": str(self.role_changes),
        }


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
