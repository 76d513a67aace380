"""The replica state of one broker name and the decisions on it, without I/O (Java 5.3.3
``ReplicasInfoManager`` with ``BrokerReplicaInfo`` and ``SyncStateInfo`` in one record, and
``DefaultElectPolicy``).

Each function takes the current record (None: the broker name is unknown) and a request, and
returns a :class:`Decision`: the answer (code, remark, header, body) and, when the request
changes something, the new record, which the leader writes to etcd with a compare-and-swap
before it answers (Java appends the event to DLedger before it applies it). The record is
JSON under Java's field names (:meth:`BrokerSet.to_json`), one etcd key per broker name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rmq.protocol.body.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
)
from rmq.protocol.codes import ResponseCode
from rmq.protocol.headers import Header
from rmq.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)

__all__ = [
    "FIRST_BROKER_CONTROLLER_ID",
    "BrokerSet",
    "Decision",
    "LiveInfo",
    "Replica",
    "alter_sync_state_set",
    "apply_broker_id",
    "elect_master",
    "elect_policy",
    "get_next_broker_id",
    "get_replica_info",
    "register_broker",
    "sync_state_data",
]

#: Java ``MixAll.FIRST_BROKER_CONTROLLER_ID``: the id of a broker name's first replica.
FIRST_BROKER_CONTROLLER_ID = 1

#: ``alive(broker_name, broker_id)``: a heartbeat within its timeout (Java ``BrokerValidPredicate``).
Alive = Callable[[str, int], bool]


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """What the last heartbeat of a replica said (Java ``BrokerLiveInfo``): the election's order."""

    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = (1 << 31) - 1


#: ``live_info(broker_name, broker_id)``: the replica's last heartbeat, None when none.
LiveInfoOf = Callable[[str, int], LiveInfo | None]


@dataclass(frozen=True, slots=True)
class Replica:
    address: str
    register_check_code: str = ""


@dataclass(frozen=True, slots=True)
class BrokerSet:
    """One broker name's replicas, master and SyncStateSet (Java ``BrokerReplicaInfo`` +
    ``SyncStateInfo``). ``master_epoch`` and ``sync_state_set_epoch`` start at 0 and rise by
    one with each change; ``master_broker_id`` None = no master."""

    cluster_name: str
    broker_name: str
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    replicas: dict[int, Replica] = field(default_factory=dict)

    def address(self, broker_id: int | None) -> str | None:
        r = self.replicas.get(broker_id) if broker_id is not None else None
        return r.address if r is not None else None

    def member_group(self) -> BrokerMemberGroup:
        return BrokerMemberGroup(
            self.cluster_name, self.broker_name, {i: r.address for i, r in sorted(self.replicas.items())}
        )

    def sync_state(self) -> SyncStateSet:
        return SyncStateSet(self.sync_state_set, self.sync_state_set_epoch)

    def replace(self, **changes: Any) -> BrokerSet:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "clusterName": self.cluster_name,
                "brokerName": self.broker_name,
                "masterBrokerId": self.master_broker_id,
                "masterEpoch": self.master_epoch,
                "syncStateSet": sorted(self.sync_state_set),
                "syncStateSetEpoch": self.sync_state_set_epoch,
                "nextAssignBrokerId": self.next_assign_broker_id,
                "replicas": {
                    str(i): {"brokerAddress": r.address, "registerCheckCode": r.register_check_code}
                    for i, r in sorted(self.replicas.items())
                },
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> BrokerSet:
        d = json.loads(raw)
        if not isinstance(d, dict):
            raise ValueError("a broker set record is a JSON object")
        master = d.get("masterBrokerId")
        return cls(
            str(d["clusterName"]),
            str(d["brokerName"]),
            None if master is None else int(master),
            int(d.get("masterEpoch", 0)),
            frozenset(int(i) for i in d.get("syncStateSet") or ()),
            int(d.get("syncStateSetEpoch", 0)),
            int(d.get("nextAssignBrokerId", FIRST_BROKER_CONTROLLER_ID)),
            {
                int(i): Replica(str(r["brokerAddress"]), str(r.get("registerCheckCode", "")))
                for i, r in (d.get("replicas") or {}).items()
            },
        )


@dataclass(slots=True)
class Decision:
    """A request's answer and, when it changes the record, the record to write first.
    ``delete`` removes the record instead. ``elected`` marks a new master (the controller
    then notifies the replicas)."""

    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    header: Header | None = None
    body: bytes | None = None
    new_state: BrokerSet | None = None
    delete: bool = False
    elected: bool = False


def _fail(code: int, remark: str, header: Header | None = None) -> Decision:
    return Decision(code=code, remark=remark, header=header)


def get_next_broker_id(cluster_name: str, broker_name: str, state: BrokerSet | None) -> Decision:
    """Java ``getNextBrokerId``: 1 for an unknown broker name."""
    nxt = FIRST_BROKER_CONTROLLER_ID if state is None else state.next_assign_broker_id
    return Decision(
        header=GetNextBrokerIdResponseHeader(cluster_name=cluster_name, broker_name=broker_name, next_broker_id=nxt)
    )


def apply_broker_id(req: ApplyBrokerIdRequestHeader, state: BrokerSet | None, *, max_replicas: int) -> Decision:
    """Java ``applyBrokerId``: the first replica of a new broker name must apply for id 1; a
    known name takes a free id, or an id held under the same ``registerCheckCode`` (the same
    broker again). ``max_replicas`` bounds the replicas of a name."""
    resp = ApplyBrokerIdResponseHeader(cluster_name=req.cluster_name, broker_name=req.broker_name)
    bid = req.applied_broker_id
    address = req.register_check_code.split(";")[0]
    if bid < FIRST_BROKER_CONTROLLER_ID:
        return _fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"brokerId {bid} is below 1", resp)
    if state is None:
        if bid != FIRST_BROKER_CONTROLLER_ID:
            return _fail(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {req.broker_name} hasn't been registered in controller, but broker try to apply "
                f"brokerId: {bid}",
                resp,
            )
        new = BrokerSet(
            req.cluster_name,
            req.broker_name,
            next_assign_broker_id=bid + 1,
            replicas={bid: Replica(address, req.register_check_code)},
        )
        return Decision(header=resp, new_state=new)
    held = state.replicas.get(bid)
    if held is not None:
        if held.register_check_code == req.register_check_code:
            return Decision(header=resp)
        return _fail(
            ResponseCode.CONTROLLER_BROKER_ID_INVALID,
            f"Fail to apply brokerId: {bid} in broker-set: {req.broker_name}",
            resp,
        )
    if len(state.replicas) >= max_replicas:
        return _fail(
            ResponseCode.CONTROLLER_BROKER_ID_INVALID,
            f"broker-set {req.broker_name} has {len(state.replicas)} replicas, the most a broker name may have "
            f"(maxReplicasPerBrokerName)",
            resp,
        )
    replicas = {**state.replicas, bid: Replica(address, req.register_check_code)}
    # Java increments nextAssignBrokerId per added replica; never hand out an id taken already
    nxt = max(state.next_assign_broker_id + 1, bid + 1)
    return Decision(header=resp, new_state=state.replace(replicas=replicas, next_assign_broker_id=nxt))


def register_broker(req: RegisterBrokerToControllerRequestHeader, state: BrokerSet | None, alive: Alive) -> Decision:
    """Java ``registerBroker``: a replica with its id says where it listens; the answer names
    the master when one is alive."""
    resp = RegisterBrokerToControllerResponseHeader(cluster_name=req.cluster_name, broker_name=req.broker_name)
    if state is None:
        return _fail(
            ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"Broker-set: {req.broker_name} hasn't been registered in controller",
        )
    replica = state.replicas.get(req.broker_id)
    if replica is None:
        return _fail(
            ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"BrokerId: {req.broker_id} hasn't been registered in broker-set: {req.broker_name}",
        )
    m = state.master_broker_id
    if m is not None and alive(state.broker_name, m):
        resp = dataclasses.replace(
            resp,
            master_broker_id=m,
            master_address=state.address(m),
            master_epoch=state.master_epoch,
            sync_state_set_epoch=state.sync_state_set_epoch,
        )
    new = None
    if replica.address != req.broker_address:
        new = state.replace(
            replicas={**state.replicas, req.broker_id: Replica(req.broker_address, replica.register_check_code)}
        )
    return Decision(header=resp, body=state.sync_state().encode(), new_state=new)


def get_replica_info(broker_name: str, state: BrokerSet | None) -> Decision:
    """Java ``getReplicaInfo``: the master (id, address, epoch) and the SyncStateSet."""
    if state is None:
        return _fail(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    m = state.master_broker_id
    h = GetReplicaInfoResponseHeader(
        master_broker_id=m, master_address=state.address(m), master_epoch=state.master_epoch
    )
    return Decision(header=h, body=state.sync_state().encode())


def alter_sync_state_set(
    req: AlterSyncStateSetRequestHeader, proposed: SyncStateSet, state: BrokerSet | None, alive: Alive
) -> Decision:
    """Java ``alterSyncStateSet``: only the current master, at the current master epoch and
    SyncStateSet epoch, may change the set; every member must be a known, alive replica and
    the master stays in it."""
    if state is None:
        return _fail(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
    new_set = proposed.sync_state_set
    if new_set == state.sync_state_set:
        return _fail(
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        )
    if state.master_broker_id is None or state.master_broker_id != req.master_broker_id:
        return _fail(
            ResponseCode.CONTROLLER_INVALID_MASTER,
            f"Rejecting alter syncStateSet request because the current leader is:{{{state.master_broker_id}}}, "
            f"not {{{req.master_broker_id}}}",
        )
    if req.master_epoch != state.master_epoch:
        return _fail(
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            f"Rejecting alter syncStateSet request because the current master epoch is:{{{state.master_epoch}}}, "
            f"not {{{req.master_epoch}}}",
        )
    if proposed.sync_state_set_epoch != state.sync_state_set_epoch:
        return _fail(
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            "Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
            f"{{{state.sync_state_set_epoch}}}, not {{{proposed.sync_state_set_epoch}}}",
        )
    for replica in sorted(new_set):
        if replica not in state.replicas:
            return _fail(
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't exist",
            )
        if not alive(state.broker_name, replica):
            return _fail(
                ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't alive",
            )
    if state.master_broker_id not in new_set:
        return _fail(
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader "
            f"{{{state.master_broker_id}}}",
        )
    epoch = state.sync_state_set_epoch + 1
    new = state.replace(sync_state_set=frozenset(new_set), sync_state_set_epoch=epoch)
    return Decision(
        header=AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=epoch),
        body=new.sync_state().encode(),
        new_state=new,
    )


def elect_policy(
    state: BrokerSet, alive: Alive, live_info: LiveInfoOf, *, unclean: bool, prefer: int | None
) -> int | None:
    """Java ``DefaultElectPolicy.elect``: among the alive members of the SyncStateSet (then,
    with ``unclean``, of every replica): the old master if it is alive and nobody is preferred;
    else the preferred id if it is alive, else none; else the best by (epoch desc, maxOffset
    desc, electionPriority asc) of their last heartbeats."""
    for pool in (state.sync_state_set, frozenset(state.replicas) if unclean else None):
        if pool is None:
            continue
        candidates = sorted(b for b in pool if b in state.replicas and alive(state.broker_name, b))
        if not candidates:
            continue
        old = state.master_broker_id
        if old in candidates and (prefer is None or prefer == old):
            return old
        if prefer is not None:
            return prefer if prefer in candidates else None

        def rank(b: int) -> tuple[int, int, int, int]:
            li = live_info(state.broker_name, b) or LiveInfo()
            return (-li.epoch, -li.max_offset, li.election_priority, b)

        return min(candidates, key=rank)
    return None


def elect_master(
    req: ElectMasterRequestHeader, state: BrokerSet | None, alive: Alive, live_info: LiveInfoOf, *, unclean: bool
) -> Decision:
    """Java ``electMaster``. The first election of a broker name makes the asking broker
    master; later ones follow :func:`elect_policy` (``designateElect``: the admin's choice).
    A new master raises the master epoch and starts a SyncStateSet of itself alone. When the
    controller's own election finds nobody, the master is cleared (and the epoch raised), so
    no dead master is handed out."""
    if state is None:
        return _fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
    old = state.master_broker_id
    new: int | None = None
    if state.master_epoch == 0 and req.broker_id != -1:
        if req.broker_id not in state.replicas:
            return _fail(
                ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                f"brokerId {req.broker_id} is not a replica of {state.broker_name}",
            )
        new = req.broker_id
    if new is None:
        prefer = req.broker_id if req.designate_elect else None
        new = elect_policy(state, alive, live_info, unclean=unclean, prefer=prefer)
    if new is not None and new == old:
        h = ElectMasterResponseHeader(
            master_broker_id=old,
            master_address=state.address(old),
            master_epoch=state.master_epoch,
            sync_state_set_epoch=state.sync_state_set_epoch,
        )
        return Decision(
            code=ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
            remark=f"The old master {old} is still alive, not need to elect new master for broker {state.broker_name}",
            header=h,
            body=ElectMasterResponseBody(state.sync_state_set).encode(),
        )
    if new is not None:
        ns = state.replace(
            master_broker_id=new,
            master_epoch=state.master_epoch + 1,
            sync_state_set=frozenset({new}),
            sync_state_set_epoch=state.sync_state_set_epoch + 1,
        )
        h = ElectMasterResponseHeader(
            master_broker_id=new,
            master_address=ns.address(new),
            master_epoch=ns.master_epoch,
            sync_state_set_epoch=ns.sync_state_set_epoch,
        )
        body = ElectMasterResponseBody(ns.sync_state_set, ns.member_group()).encode()
        return Decision(header=h, body=body, new_state=ns, elected=True)
    if req.broker_id == -1:
        cleared = state.replace(master_broker_id=None, master_epoch=state.master_epoch + 1) if old is not None else None
        return Decision(
            code=ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
            remark="Old master has down and failed to elect a new broker master",
            new_state=cleared,
        )
    return _fail(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")


def sync_state_data(names: Iterable[str], states: dict[str, BrokerSet], alive: Alive) -> bytes:
    """Java ``getSyncStateData``: each known name's master, epochs and replicas split into in
    sync and not, with liveness."""
    table: dict[str, ReplicasInfo] = {}
    for name in names:
        st = states.get(name)
        if st is None:
            continue
        ins: list[ReplicaIdentity] = []
        outs: list[ReplicaIdentity] = []
        for bid, r in sorted(st.replicas.items()):
            ident = ReplicaIdentity(name, bid, r.address, alive(name, bid))
            (ins if bid in st.sync_state_set else outs).append(ident)
        m = st.master_broker_id
        table[name] = ReplicasInfo(m, st.address(m), st.master_epoch, st.sync_state_set_epoch, tuple(ins), tuple(outs))
    return BrokerReplicasInfo(table).encode()
