"""Bodies of the controller mode (Java 5.3.3 ``remoting/.../protocol/body``: ``SyncStateSet``,
``BrokerMemberGroup``, ``ElectMasterResponseBody``, ``BrokerReplicasInfo``, ``EpochEntryCache``
and ``remoting/.../protocol/EpochEntry``), each used by both ends: the controller (or, for the
epoch cache, the broker) encodes, brokers and ``rmq admin`` decode.

Field names and shapes are fastjson's output of the Java classes (getters in alphabetical
order); a ``Set<Long>`` is a JSON array, a ``Map<Long, String>`` an object keyed by the id
(fastjson writes the key unquoted, :func:`rmq.common.fastjson.loads` reads that; we write it
quoted, which fastjson reads too). Decoders raise ``ValueError`` for a body of the wrong shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from rmq.common import fastjson
from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.protocol.body import dumps_json, json_object

__all__ = [
    "INT64_MAX",
    "BrokerMemberGroup",
    "BrokerReplicasInfo",
    "ElectMasterResponseBody",
    "EpochEntry",
    "EpochEntryCache",
    "ReplicaIdentity",
    "ReplicasInfo",
    "SyncStateSet",
    "broker_names_body",
    "decode_broker_names",
]

#: Java ``Long.MAX_VALUE``: an open epoch's ``endOffset``.
INT64_MAX = (1 << 63) - 1


def _int(v: object, what: str, *, lo: int = -(1 << 63), hi: int = INT64_MAX) -> int:
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise ValueError(f"{what} is not an integer")
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"{what} is not an integer") from None
    if not lo <= n <= hi:
        raise ValueError(f"{what} {n} is out of range {lo}..{hi}")
    return n


def _int32(v: object, what: str) -> int:
    return _int(v, what, lo=-(1 << 31), hi=(1 << 31) - 1)


def _opt_int(v: object, what: str) -> int | None:
    return None if v is None else _int(v, what)


def _opt_str(v: object, what: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{what} is not a string")
    return v


def _id_set(v: object, what: str) -> frozenset[int]:
    if v is None:
        return frozenset()
    if not isinstance(v, list):
        raise ValueError(f"{what} is not an array")
    return frozenset(_int(x, f"{what}[]") for x in v)


@lazy_dataclass(frozen=True, slots=True)
class SyncStateSet:
    """Java ``SyncStateSet``: the broker ids in sync with the master (the master included) and
    the epoch of that set (raised by every change)."""

    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    def encode(self) -> bytes:
        return dumps_json(self.to_json())

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> SyncStateSet:
        d = json_object(body, "SyncStateSet")
        return cls(
            _id_set(d.get("syncStateSet"), "syncStateSet"),
            _int32(d.get("syncStateSetEpoch", 0), "syncStateSetEpoch"),
        )


@lazy_dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    """Java ``BrokerMemberGroup``: every replica of a broker name, ``{brokerId: address}``."""

    cluster: str | None = None
    broker_name: str | None = None
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    def encode(self) -> bytes:
        return dumps_json(self.to_json())

    @classmethod
    def from_json(cls, d: object) -> BrokerMemberGroup:
        if not isinstance(d, Mapping):
            raise ValueError("BrokerMemberGroup is not an object")
        addrs = d.get("brokerAddrs") or {}
        if not isinstance(addrs, Mapping):
            raise ValueError("BrokerMemberGroup.brokerAddrs is not an object")
        table = {_int(k, "brokerAddrs key"): str(v) for k, v in addrs.items()}
        return cls(_opt_str(d.get("cluster"), "cluster"), _opt_str(d.get("brokerName"), "brokerName"), table)

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> BrokerMemberGroup:
        return cls.from_json(json_object(body, "BrokerMemberGroup"))


@lazy_dataclass(frozen=True, slots=True)
class ElectMasterResponseBody:
    """Java ``ElectMasterResponseBody``: CONTROLLER_ELECT_MASTER's body, the new SyncStateSet
    (just the master after an election) and, after an election, the member group the
    controller notifies."""

    sync_state_set: frozenset[int] = frozenset()
    broker_member_group: BrokerMemberGroup | None = None

    def encode(self) -> bytes:
        d: dict[str, Any] = {}
        if self.broker_member_group is not None:
            d["brokerMemberGroup"] = self.broker_member_group.to_json()
        d["syncStateSet"] = sorted(self.sync_state_set)
        return dumps_json(d)

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> ElectMasterResponseBody:
        d = json_object(body, "ElectMasterResponseBody")
        group = d.get("brokerMemberGroup")
        return cls(
            _id_set(d.get("syncStateSet"), "syncStateSet"),
            None if group is None else BrokerMemberGroup.from_json(group),
        )


@lazy_dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """Java ``BrokerReplicasInfo.ReplicaIdentity``; ``__str__`` is Java's ``toString`` (what
    ``getSyncStateSet`` prints)."""

    broker_name: str
    broker_id: int
    broker_address: str | None
    alive: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "alive": self.alive,
            "brokerAddress": self.broker_address,
            "brokerId": self.broker_id,
            "brokerName": self.broker_name,
        }

    @classmethod
    def from_json(cls, d: object) -> ReplicaIdentity:
        if not isinstance(d, Mapping):
            raise ValueError("ReplicaIdentity is not an object")
        alive = d.get("alive")
        if alive is not None and not isinstance(alive, bool):
            raise ValueError("ReplicaIdentity.alive is not a boolean")
        return cls(
            str(d.get("brokerName") or ""),
            _int(d.get("brokerId"), "ReplicaIdentity.brokerId"),
            _opt_str(d.get("brokerAddress"), "ReplicaIdentity.brokerAddress"),
            alive,
        )

    def __str__(self) -> str:
        alive = "null" if self.alive is None else str(self.alive).lower()
        return (
            f"ReplicaIdentity{{brokerName='{self.broker_name}', brokerId={self.broker_id}, "
            f"brokerAddress='{self.broker_address}', alive={alive}}}"
        )


@lazy_dataclass(frozen=True, slots=True)
class ReplicasInfo:
    """Java ``BrokerReplicasInfo.ReplicasInfo``: one broker name's master, epochs and replicas."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "inSyncReplicas": [r.to_json() for r in self.in_sync_replicas],
            "masterAddress": self.master_address,
            "masterBrokerId": self.master_broker_id,
            "masterEpoch": self.master_epoch,
            "notInSyncReplicas": [r.to_json() for r in self.not_in_sync_replicas],
            "syncStateSetEpoch": self.sync_state_set_epoch,
        }

    @classmethod
    def from_json(cls, d: object) -> ReplicasInfo:
        if not isinstance(d, Mapping):
            raise ValueError("ReplicasInfo is not an object")

        def replicas(key: str) -> tuple[ReplicaIdentity, ...]:
            v = d.get(key) or []
            if not isinstance(v, list):
                raise ValueError(f"ReplicasInfo.{key} is not an array")
            return tuple(ReplicaIdentity.from_json(x) for x in v)

        return cls(
            _opt_int(d.get("masterBrokerId"), "masterBrokerId"),
            _opt_str(d.get("masterAddress"), "masterAddress"),
            _int32(d.get("masterEpoch", 0), "masterEpoch"),
            _int32(d.get("syncStateSetEpoch", 0), "syncStateSetEpoch"),
            replicas("inSyncReplicas"),
            replicas("notInSyncReplicas"),
        )


@lazy_dataclass(frozen=True, slots=True)
class BrokerReplicasInfo:
    """Java ``BrokerReplicasInfo``: CONTROLLER_GET_SYNC_STATE_DATA's answer, per broker name."""

    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps_json({"replicasInfoTable": {k: v.to_json() for k, v in self.replicas_info_table.items()}})

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> BrokerReplicasInfo:
        d = json_object(body, "BrokerReplicasInfo")
        table = d.get("replicasInfoTable") or {}
        if not isinstance(table, Mapping):
            raise ValueError("BrokerReplicasInfo.replicasInfoTable is not an object")
        return cls({str(k): ReplicasInfo.from_json(v) for k, v in table.items()})


@lazy_dataclass(frozen=True, slots=True)
class EpochEntry:
    """Java ``EpochEntry``: the CommitLog range ``[startOffset, endOffset)`` written under one
    master epoch (``endOffset`` Long.MAX_VALUE while it is open). ``__str__`` is Java's."""

    epoch: int
    start_offset: int
    end_offset: int = INT64_MAX

    def to_json(self) -> dict[str, int]:
        return {"endOffset": self.end_offset, "epoch": self.epoch, "startOffset": self.start_offset}

    @classmethod
    def from_json(cls, d: object) -> EpochEntry:
        if not isinstance(d, Mapping):
            raise ValueError("EpochEntry is not an object")
        return cls(
            _int32(d.get("epoch", 0), "EpochEntry.epoch"),
            _int(d.get("startOffset", 0), "EpochEntry.startOffset"),
            _int(d.get("endOffset", INT64_MAX), "EpochEntry.endOffset"),
        )

    def __str__(self) -> str:
        return f"EpochEntry{{epoch={self.epoch}, startOffset={self.start_offset}, endOffset={self.end_offset}}}"


@lazy_dataclass(frozen=True, slots=True)
class EpochEntryCache:
    """Java ``EpochEntryCache``: GET_BROKER_EPOCH_CACHE (1007)'s answer, from a broker."""

    cluster_name: str | None
    broker_name: str | None
    broker_id: int
    epoch_list: tuple[EpochEntry, ...] = ()
    max_offset: int = 0

    def encode(self) -> bytes:
        return dumps_json(
            {
                "brokerId": self.broker_id,
                "brokerName": self.broker_name,
                "clusterName": self.cluster_name,
                "epochList": [e.to_json() for e in self.epoch_list],
                "maxOffset": self.max_offset,
            }
        )

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> EpochEntryCache:
        d = json_object(body, "EpochEntryCache")
        entries = d.get("epochList") or []
        if not isinstance(entries, list):
            raise ValueError("EpochEntryCache.epochList is not an array")
        return cls(
            _opt_str(d.get("clusterName"), "clusterName"),
            _opt_str(d.get("brokerName"), "brokerName"),
            _int(d.get("brokerId", 0), "brokerId"),
            tuple(EpochEntry.from_json(e) for e in entries),
            _int(d.get("maxOffset", 0), "maxOffset"),
        )


def broker_names_body(names: Iterable[str]) -> bytes:
    """CONTROLLER_GET_SYNC_STATE_DATA's request body: a JSON array of broker names (Java
    ``RemotingSerializable.encode(List<String>)``)."""
    return dumps_json(list(names))


def decode_broker_names(body: bytes | memoryview | None, *, limit: int) -> list[str]:
    """The broker names of a CONTROLLER_GET_SYNC_STATE_DATA request; ``ValueError`` for
    anything but an array of at most ``limit`` strings."""
    names = fastjson.loads(bytes(body or b"[]"))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("the body is not a JSON array of broker names")
    if len(names) > limit:
        raise ValueError(f"{len(names)} broker names, at most {limit} per request")
    return names
