"""Typed headers of the controller mode (RocketMQ 5, RIP-44): what a broker, the admin tool and
the controller send each other (Java 5.3.3 ``remoting/.../protocol/header/controller/**``,
``header/namesrv/BrokerHeartbeatRequestHeader`` and ``header/NotifyBrokerRoleChangedRequestHeader``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's. A Java ``Long`` is
``int64=True``, an ``Integer`` or ``int`` is int32. Java's ``invokeTime`` fields are sent and
ignored, as Java's controller ignores them.
"""

import time

from rmq.protocol.headers import Header, header, w

__all__ = [
    "AlterSyncStateSetRequestHeader",
    "AlterSyncStateSetResponseHeader",
    "ApplyBrokerIdRequestHeader",
    "ApplyBrokerIdResponseHeader",
    "BrokerHeartbeatRequestHeader",
    "CleanControllerBrokerDataRequestHeader",
    "ElectMasterRequestHeader",
    "ElectMasterResponseHeader",
    "GetMetaDataResponseHeader",
    "GetNextBrokerIdRequestHeader",
    "GetNextBrokerIdResponseHeader",
    "GetReplicaInfoRequestHeader",
    "GetReplicaInfoResponseHeader",
    "NotifyBrokerRoleChangedRequestHeader",
    "RegisterBrokerToControllerRequestHeader",
    "RegisterBrokerToControllerResponseHeader",
    "now_ms",
]


def now_ms() -> int:
    """``System.currentTimeMillis()``: the ``invokeTime`` Java's builders stamp."""
    return int(time.time() * 1000)


@header
class BrokerHeartbeatRequestHeader(Header):
    """BROKER_HEARTBEAT (904), broker → controller (oneway in Java): liveness plus what the
    election compares (``epoch``, ``maxOffset``, ``electionPriority``; lower wins).
    ``heartbeatTimeoutMills`` is the broker's ``controllerHeartBeatTimeoutMills``: how long
    the controller waits for the next one before calling the broker dead."""

    cluster_name: str = w("clusterName")
    broker_addr: str = w("brokerAddr")
    broker_name: str = w("brokerName")
    broker_id: int | None = w("brokerId", default=None, int64=True)
    epoch: int | None = w("epoch", default=None)
    max_offset: int | None = w("maxOffset", default=None, int64=True)
    confirm_offset: int | None = w("confirmOffset", default=None, int64=True)
    heartbeat_timeout_mills: int | None = w("heartbeatTimeoutMills", default=None, int64=True)
    election_priority: int | None = w("electionPriority", default=None)


@header
class AlterSyncStateSetRequestHeader(Header):
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001), master → controller; the body is the new
    :class:`~rmq.protocol.body.controller.SyncStateSet` with the epoch it was derived from."""

    broker_name: str = w("brokerName")
    master_broker_id: int = w("masterBrokerId", int64=True)
    master_epoch: int = w("masterEpoch")
    invoke_time: int = w("invokeTime", default=0, int64=True)


@header
class AlterSyncStateSetResponseHeader(Header):
    new_sync_state_set_epoch: int = w("newSyncStateSetEpoch", default=0)


@header
class ElectMasterRequestHeader(Header):
    """CONTROLLER_ELECT_MASTER (1002). Sent by a broker for itself (``brokerId`` its own,
    ``designateElect`` false), by the admin tool (``electMaster``: ``designateElect`` true, the
    broker to make master) or by the controller itself (``brokerId`` -1)."""

    cluster_name: str = w("clusterName", default="")
    broker_name: str = w("brokerName", default="")
    broker_id: int = w("brokerId", default=-1, int64=True)
    designate_elect: bool = w("designateElect", default=False)
    invoke_time: int = w("invokeTime", default=0, int64=True)


@header
class ElectMasterResponseHeader(Header):
    """The elected (or still valid) master; the body is an ``ElectMasterResponseBody``."""

    master_broker_id: int | None = w("masterBrokerId", default=None, int64=True)
    master_address: str | None = w("masterAddress", default=None)
    master_epoch: int | None = w("masterEpoch", default=None)
    sync_state_set_epoch: int | None = w("syncStateSetEpoch", default=None)


@header
class GetReplicaInfoRequestHeader(Header):
    """CONTROLLER_GET_REPLICA_INFO (1004): what a broker polls to learn its master."""

    broker_name: str = w("brokerName")


@header
class GetReplicaInfoResponseHeader(Header):
    """The broker name's master; the body is its ``SyncStateSet``."""

    master_broker_id: int | None = w("masterBrokerId", default=None, int64=True)
    master_address: str | None = w("masterAddress", default=None)
    master_epoch: int | None = w("masterEpoch", default=None)


@header
class GetMetaDataResponseHeader(Header):
    """CONTROLLER_GET_METADATA_INFO (1005)'s answer, from any controller (leader or not): how
    a broker or the admin tool given every controller address finds the leader. ``group`` and
    ``peers`` (``id:address;``...) are DLedger's in Java; here the etcd key prefix and the
    controllers that have campaigned."""

    group: str | None = w("group", default=None)
    controller_leader_id: str | None = w("controllerLeaderId", default=None)
    controller_leader_address: str | None = w("controllerLeaderAddress", default=None)
    is_leader: bool = w("isLeader", default=False)
    peers: str | None = w("peers", default=None)


@header
class NotifyBrokerRoleChangedRequestHeader(Header):
    """NOTIFY_BROKER_ROLE_CHANGED (1008), controller → every live replica of the broker name
    after an election (oneway in Java); the body is the new ``SyncStateSet``."""

    master_address: str | None = w("masterAddress", default=None)
    master_epoch: int | None = w("masterEpoch", default=None)
    sync_state_set_epoch: int | None = w("syncStateSetEpoch", default=None)
    master_broker_id: int | None = w("masterBrokerId", default=None, int64=True)


@header
class CleanControllerBrokerDataRequestHeader(Header):
    """CLEAN_BROKER_DATA (1011): drop a broker name (or some of its ids, ``;``-separated)."""

    cluster_name: str | None = w("clusterName", default=None)
    broker_name: str = w("brokerName")
    broker_controller_ids_to_clean: str | None = w("brokerControllerIdsToClean", default=None)
    is_clean_living_broker: bool = w("isCleanLivingBroker", default=False)
    invoke_time: int = w("invokeTime", default=0, int64=True)


@header
class GetNextBrokerIdRequestHeader(Header):
    """CONTROLLER_GET_NEXT_BROKER_ID (1012): the id a new replica of the broker name should
    apply for (1 for the first, Java ``MixAll.FIRST_BROKER_CONTROLLER_ID``)."""

    cluster_name: str = w("clusterName")
    broker_name: str = w("brokerName")


@header
class GetNextBrokerIdResponseHeader(Header):
    cluster_name: str | None = w("clusterName", default=None)
    broker_name: str | None = w("brokerName", default=None)
    next_broker_id: int | None = w("nextBrokerId", default=None, int64=True)


@header
class ApplyBrokerIdRequestHeader(Header):
    """CONTROLLER_APPLY_BROKER_ID (1013): claim ``appliedBrokerId``; ``registerCheckCode`` is
    ``<broker address>;<ms>``, and the same code may claim the same id again (a restart)."""

    cluster_name: str = w("clusterName")
    broker_name: str = w("brokerName")
    applied_broker_id: int = w("appliedBrokerId", int64=True)
    register_check_code: str = w("registerCheckCode")


@header
class ApplyBrokerIdResponseHeader(Header):
    cluster_name: str | None = w("clusterName", default=None)
    broker_name: str | None = w("brokerName", default=None)


@header
class RegisterBrokerToControllerRequestHeader(Header):
    """CONTROLLER_REGISTER_BROKER (1003): a replica with an applied id says where it listens."""

    cluster_name: str = w("clusterName")
    broker_name: str = w("brokerName")
    broker_id: int = w("brokerId", int64=True)
    broker_address: str = w("brokerAddress")
    invoke_time: int = w("invokeTime", default=0, int64=True)


@header
class RegisterBrokerToControllerResponseHeader(Header):
    """The master, when one is alive (else the master fields are absent and the broker asks
    for an election); the body is the ``SyncStateSet``."""

    cluster_name: str | None = w("clusterName", default=None)
    broker_name: str | None = w("brokerName", default=None)
    master_broker_id: int | None = w("masterBrokerId", default=None, int64=True)
    master_address: str | None = w("masterAddress", default=None)
    master_epoch: int | None = w("masterEpoch", default=None)
    sync_state_set_epoch: int | None = w("syncStateSetEpoch", default=None)
