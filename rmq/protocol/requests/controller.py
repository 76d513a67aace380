"""Request builders and reply parsers of the controller mode (Java 5.3.3 ``BrokerOuterAPI``'s
controller calls and ``MQClientAPIImpl``'s controller admin calls), shared by the broker in
controller mode, ``rmq admin`` and the tests that drive ``rmq controller`` as a broker would.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`). Any controller answers CONTROLLER_GET_METADATA_INFO with the
leader's address; every other request goes to the leader, and a follower answers
CONTROLLER_NOT_LEADER (:class:`rmq.errors.ControllerNotLeaderError`, retriable).
"""

from __future__ import annotations

from collections.abc import Iterable

from rmq.errors import RemotingCommandError
from rmq.protocol.body.controller import (
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    EpochEntryCache,
    SyncStateSet,
    broker_names_body,
)
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    now_ms,
)
from rmq.protocol.requests import _request, check_success, parse_body, raise_for

__all__ = [
    "alter_sync_state_set",
    "apply_broker_id",
    "broker_heartbeat",
    "clean_broker_data",
    "elect_master",
    "get_broker_epoch_cache",
    "get_controller_metadata",
    "get_next_broker_id",
    "get_replica_info",
    "get_sync_state_data",
    "notify_broker_role_changed",
    "parse_alter_sync_state_set",
    "parse_apply_broker_id",
    "parse_broker_epoch_cache",
    "parse_controller_metadata",
    "parse_elect_master",
    "parse_next_broker_id",
    "parse_register_broker_to_controller",
    "parse_replica_info",
    "parse_sync_state_data",
    "register_broker_to_controller",
]


def broker_heartbeat(header: BrokerHeartbeatRequestHeader, *, oneway: bool = True) -> RemotingCommand:
    """BROKER_HEARTBEAT (904) to the controller leader; oneway as Java's broker sends it (the
    controller answers SUCCESS to a two-way one, CONTROLLER_INVALID_REQUEST without brokerId)."""
    return _request(RequestCode.BROKER_HEARTBEAT, header, oneway=oneway)


def get_controller_metadata() -> RemotingCommand:
    """CONTROLLER_GET_METADATA_INFO (1005): any controller says who leads."""
    return _request(RequestCode.CONTROLLER_GET_METADATA_INFO)


def parse_controller_metadata(resp: RemotingCommand) -> GetMetaDataResponseHeader:
    check_success(resp)
    return resp.decode_header(GetMetaDataResponseHeader)


def alter_sync_state_set(
    broker_name: str, master_broker_id: int, master_epoch: int, new_set: Iterable[int], sync_state_set_epoch: int
) -> RemotingCommand:
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001): the master proposes ``new_set`` (itself included),
    derived from the set of epoch ``sync_state_set_epoch``; fenced by both epochs."""
    h = AlterSyncStateSetRequestHeader(
        broker_name=broker_name, master_broker_id=master_broker_id, master_epoch=master_epoch, invoke_time=now_ms()
    )
    body = SyncStateSet(frozenset(new_set), sync_state_set_epoch).encode()
    return _request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, h, body)


def parse_alter_sync_state_set(resp: RemotingCommand) -> SyncStateSet:
    """The SyncStateSet now in force (its new epoch)."""
    return parse_body(resp, "SyncStateSet", SyncStateSet.decode)


def elect_master(
    broker_name: str, broker_id: int = -1, *, cluster_name: str = "", designate: bool = False
) -> RemotingCommand:
    """CONTROLLER_ELECT_MASTER (1002). A broker electing itself: its id, ``designate`` False
    (Java ``ofBrokerTrigger``); the admin tool's ``electMaster``: ``designate`` True (Java
    ``ofAdminTrigger``)."""
    h = ElectMasterRequestHeader(
        cluster_name=cluster_name,
        broker_name=broker_name,
        broker_id=broker_id,
        designate_elect=designate,
        invoke_time=now_ms(),
    )
    return _request(RequestCode.CONTROLLER_ELECT_MASTER, h)


def parse_elect_master(resp: RemotingCommand) -> tuple[ElectMasterResponseHeader, ElectMasterResponseBody, bool]:
    """``(header, body, elected)``: SUCCESS (a new master, ``elected`` True) and
    CONTROLLER_MASTER_STILL_EXIST (``elected`` False) both carry the master, as Java's
    ``BrokerOuterAPI.brokerElect`` reads them; any other code raises."""
    if resp.code not in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
        raise_for(resp)
    header = resp.decode_header(ElectMasterResponseHeader)
    try:
        body = ElectMasterResponseBody.decode(resp.body_bytes())
    except (ValueError, KeyError, TypeError) as e:
        raise RemotingCommandError(f"malformed ElectMasterResponseBody body: {e}") from None
    return header, body, resp.code == ResponseCode.SUCCESS


def get_next_broker_id(cluster_name: str, broker_name: str) -> RemotingCommand:
    """CONTROLLER_GET_NEXT_BROKER_ID (1012)."""
    h = GetNextBrokerIdRequestHeader(cluster_name=cluster_name, broker_name=broker_name)
    return _request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, h)


def parse_next_broker_id(resp: RemotingCommand) -> int:
    check_success(resp)
    n = resp.decode_header(GetNextBrokerIdResponseHeader).next_broker_id
    if n is None:
        raise RemotingCommandError("GetNextBrokerIdResponseHeader without nextBrokerId")
    return n


def apply_broker_id(cluster_name: str, broker_name: str, broker_id: int, register_check_code: str) -> RemotingCommand:
    """CONTROLLER_APPLY_BROKER_ID (1013); ``register_check_code`` is ``<address>;<ms>``."""
    h = ApplyBrokerIdRequestHeader(
        cluster_name=cluster_name,
        broker_name=broker_name,
        applied_broker_id=broker_id,
        register_check_code=register_check_code,
    )
    return _request(RequestCode.CONTROLLER_APPLY_BROKER_ID, h)


def parse_apply_broker_id(resp: RemotingCommand) -> None:
    check_success(resp)


def register_broker_to_controller(
    cluster_name: str, broker_name: str, broker_id: int, broker_address: str
) -> RemotingCommand:
    """CONTROLLER_REGISTER_BROKER (1003)."""
    h = RegisterBrokerToControllerRequestHeader(
        cluster_name=cluster_name,
        broker_name=broker_name,
        broker_id=broker_id,
        broker_address=broker_address,
        invoke_time=now_ms(),
    )
    return _request(RequestCode.CONTROLLER_REGISTER_BROKER, h)


def parse_register_broker_to_controller(
    resp: RemotingCommand,
) -> tuple[RegisterBrokerToControllerResponseHeader, SyncStateSet]:
    """The live master (header fields absent when there is none) and the SyncStateSet."""
    sss = parse_body(resp, "SyncStateSet", SyncStateSet.decode)
    return resp.decode_header(RegisterBrokerToControllerResponseHeader), sss


def get_replica_info(broker_name: str) -> RemotingCommand:
    """CONTROLLER_GET_REPLICA_INFO (1004)."""
    return _request(RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(broker_name=broker_name))


def parse_replica_info(resp: RemotingCommand) -> tuple[GetReplicaInfoResponseHeader, SyncStateSet]:
    sss = parse_body(resp, "SyncStateSet", SyncStateSet.decode)
    return resp.decode_header(GetReplicaInfoResponseHeader), sss


def get_sync_state_data(broker_names: Iterable[str]) -> RemotingCommand:
    """CONTROLLER_GET_SYNC_STATE_DATA (1006): the body is a JSON array of broker names."""
    return _request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, broker_names_body(broker_names))


def parse_sync_state_data(resp: RemotingCommand) -> BrokerReplicasInfo:
    return parse_body(resp, "BrokerReplicasInfo", BrokerReplicasInfo.decode)


def get_broker_epoch_cache() -> RemotingCommand:
    """GET_BROKER_EPOCH_CACHE (1007), to a broker (``rmq admin getBrokerEpoch``)."""
    return _request(RequestCode.GET_BROKER_EPOCH_CACHE)


def parse_broker_epoch_cache(resp: RemotingCommand) -> EpochEntryCache:
    return parse_body(resp, "EpochEntryCache", EpochEntryCache.decode)


def notify_broker_role_changed(
    master_address: str | None, master_broker_id: int | None, master_epoch: int, sync_state_set: SyncStateSet
) -> RemotingCommand:
    """NOTIFY_BROKER_ROLE_CHANGED (1008), controller → broker, oneway (Java
    ``ControllerManager.doNotifyBrokerRoleChanged``); the body is the new SyncStateSet."""
    h = NotifyBrokerRoleChangedRequestHeader(
        master_address=master_address,
        master_epoch=master_epoch,
        sync_state_set_epoch=sync_state_set.sync_state_set_epoch,
        master_broker_id=master_broker_id,
    )
    return _request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, h, sync_state_set.encode(), oneway=True)


def clean_broker_data(
    broker_name: str, *, cluster_name: str | None = None, broker_ids: Iterable[int] = (), clean_living: bool = False
) -> RemotingCommand:
    """CLEAN_BROKER_DATA (1011): forget a broker name, or only ``broker_ids`` of it."""
    ids = ";".join(str(i) for i in broker_ids) or None
    h = CleanControllerBrokerDataRequestHeader(
        cluster_name=cluster_name,
        broker_name=broker_name,
        broker_controller_ids_to_clean=ids,
        is_clean_living_broker=clean_living,
        invoke_time=now_ms(),
    )
    return _request(RequestCode.CLEAN_BROKER_DATA, h)
