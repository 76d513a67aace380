"""Bodies of the connection, consumer-status and offset-reset requests (Java
``org.apache.rocketmq.common.protocol.body``: ``Connection``, ``ConsumerConnection``,
``ProducerConnection``, ``ResetOffsetBody`` / ``ResetOffsetBodyForC``, ``GetConsumerStatusBody``,
``ConsumerRunningInfo``, ``ConsumeMessageDirectlyResult``).

Several of them are ``Map<MessageQueue, …>`` in Java, which fastjson writes with JSON objects
as keys (``{{"brokerName":"b","queueId":0,"topic":"T"}:12}``): :func:`rmq.common.fastjson.loads`
reads that, :func:`rmq.protocol.body._mq.dumps_mq_map` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.protocol.body import dumps_json, json_object
from rmq.protocol.body._mq import dumps_mq_map, mq_table
from rmq.types import MessageQueue

__all__ = [
    "ConnectionInfo",
    "ConsumeMessageDirectlyResult",
    "ConsumerConnection",
    "ConsumerRunningInfo",
    "GetConsumerStatusBody",
    "ProducerConnection",
    "ProducerInfo",
    "ProducerTableInfo",
    "ResetOffsetBody",
    "SubscriptionInfo",
]


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON number such as 1e400
        return default


@lazy_dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """One client connection (Java ``Connection``): its client id, ``ip:port`` as the broker
    sees it, language (``JAVA``, ``CPP``, ``PYTHON``…) and version ordinal (409 = V4_9_8)."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ConnectionInfo:
        return cls(
            str(d.get("clientId", "")), str(d.get("clientAddr", "")), str(d.get("language", "")), _int(d.get("version"))
        )


@lazy_dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """One topic subscription of a group (Java ``SubscriptionData``)."""

    topic: str
    sub_string: str = "*"
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SubscriptionInfo:
        tags = d.get("tagsSet") if isinstance(d.get("tagsSet"), list) else []
        codes = d.get("codeSet") if isinstance(d.get("codeSet"), list) else []
        return cls(
            str(d.get("topic", "")),
            str(d.get("subString") or "*"),
            tuple(str(t) for t in tags or ()),
            tuple(_int(c) for c in codes or ()),
            _int(d.get("subVersion")),
            str(d.get("expressionType") or "TAG"),
            bool(d.get("classFilterMode")),
        )


@lazy_dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST's answer (Java ``ConsumerConnection``): the group's
    connections, merged subscriptions and the consume type / message model / start point its
    members declared (Java's enum names, e.g. ``CONSUME_PASSIVELY``, ``CLUSTERING``)."""

    connection_set: tuple[ConnectionInfo, ...]
    subscription_table: dict[str, SubscriptionInfo] = field(default_factory=dict)
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"

    def to_json(self) -> dict[str, Any]:
        return {
            "connectionSet": [c.to_json() for c in self.connection_set],
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": {t: s.to_json() for t, s in sorted(self.subscription_table.items())},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ConsumerConnection:
        subs = d.get("subscriptionTable") if isinstance(d.get("subscriptionTable"), Mapping) else {}
        return cls(
            tuple(ConnectionInfo.from_json(c) for c in d.get("connectionSet") or () if isinstance(c, Mapping)),
            {str(t): SubscriptionInfo.from_json(s) for t, s in (subs or {}).items() if isinstance(s, Mapping)},
            str(d.get("consumeType") or ""),
            str(d.get("messageModel") or ""),
            str(d.get("consumeFromWhere") or ""),
        )

    @classmethod
    def decode(cls, body: bytes | memoryview | str) -> ConsumerConnection:
        return cls.from_json(json_object(body, "ConsumerConnection"))

    def compute_min_version(self) -> int:
        """The lowest client version among the connections (Java ``computeMinVersion``)."""
        return min((c.version for c in self.connection_set), default=2147483647)


@lazy_dataclass(frozen=True, slots=True)
class ProducerConnection:
    """GET_PRODUCER_CONNECTION_LIST's answer (Java ``ProducerConnection``)."""

    connection_set: tuple[ConnectionInfo, ...]

    def to_json(self) -> dict[str, Any]:
        return {"connectionSet": [c.to_json() for c in self.connection_set]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProducerConnection:
        return cls(tuple(ConnectionInfo.from_json(c) for c in d.get("connectionSet") or () if isinstance(c, Mapping)))

    @classmethod
    def decode(cls, body: bytes | memoryview | str) -> ProducerConnection:
        return cls.from_json(json_object(body, "ProducerConnection"))


@lazy_dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One producer connection in GET_ALL_PRODUCER_INFO's answer (Java ``ProducerInfo``):
    ``remote_ip`` is Netty's ``/ip:port``, ``last_update_timestamp`` the last heartbeat (ms)."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "remoteIP": self.remote_ip,
            "language": self.language,
            "version": self.version,
            "lastUpdateTimestamp": self.last_update_timestamp,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProducerInfo:
        return cls(
            str(d.get("clientId", "")),
            str(d.get("remoteIP", "")),
            str(d.get("language", "")),
            _int(d.get("version")),
            _int(d.get("lastUpdateTimestamp")),
        )

    def __str__(self) -> str:
        # Java ProducerInfo.toString, which mqadmin producer prints
        return (
            f"clientId={self.client_id},remoteIP={self.remote_ip}, language={self.language}, "
            f"version={self.version}, lastUpdateTimestamp={self.last_update_timestamp}"
        )


@lazy_dataclass(frozen=True, slots=True)
class ProducerTableInfo:
    """GET_ALL_PRODUCER_INFO's answer (Java ``ProducerTableInfo``): ``{"data": {group:
    [ProducerInfo, ...]}}``."""

    data: dict[str, list[ProducerInfo]]

    def to_json(self) -> dict[str, Any]:
        return {"data": {g: [p.to_json() for p in ps] for g, ps in self.data.items()}}

    def encode(self) -> bytes:
        """The body (msgspec: a table of thousands of producers is encoded on the event loop)."""
        return dumps_json(self.to_json())

    @classmethod
    def decode(cls, body: bytes | memoryview | str) -> ProducerTableInfo:
        d = json_object(body, "ProducerTableInfo")
        data = d.get("data") or {}
        if not isinstance(data, Mapping):
            raise ValueError("ProducerTableInfo.data is not an object")
        return cls(
            {
                str(g): [ProducerInfo.from_json(p) for p in ps or () if isinstance(p, Mapping)]
                for g, ps in data.items()
                if isinstance(ps, list) or ps is None
            }
        )


@lazy_dataclass(frozen=True, slots=True)
class ResetOffsetBody:
    """RESET_CONSUMER_CLIENT_OFFSET's body and INVOKE_BROKER_TO_RESET_OFFSET's answer (Java
    ``ResetOffsetBody``: ``{"offsetTable": {MessageQueue: offset}}``, object keys); the C++
    client reads Java's ``ResetOffsetBodyForC`` instead (a list of ``{topic, brokerName,
    queueId, offset}``), which :meth:`encode_for_c` writes and :meth:`decode` also reads."""

    offset_table: dict[MessageQueue, int]

    def encode(self) -> bytes:
        return ('{"offsetTable":' + dumps_mq_map(self.offset_table) + "}").encode()

    def encode_for_c(self) -> bytes:
        return json.dumps(
            {
                "offsetTable": [
                    {"brokerName": mq.broker_name, "offset": off, "queueId": mq.queue_id, "topic": mq.topic}
                    for mq, off in sorted(self.offset_table.items())
                ]
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, body: bytes | memoryview | str) -> ResetOffsetBody:
        """Either form; ``ValueError`` when the body is neither."""
        d = json_object(body, "ResetOffsetBody")
        raw = d.get("offsetTable")
        if isinstance(raw, list) and all(isinstance(e, Mapping) and "offset" in e for e in raw):
            return cls({MessageQueue.from_json(e): int(e["offset"]) for e in raw})
        return cls({mq: int(v) for mq, v in mq_table(raw).items()})


@lazy_dataclass(frozen=True, slots=True)
class GetConsumerStatusBody:
    """GET_CONSUMER_STATUS_FROM_CLIENT's answer (``message_queue_table``: one client's offsets)
    and INVOKE_BROKER_TO_GET_CONSUMER_STATUS's (``consumer_table``: client id → its offsets)."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        clients = ",".join(json.dumps(cid) + ":" + dumps_mq_map(t) for cid, t in sorted(self.consumer_table.items()))
        return (
            '{"consumerTable":{' + clients + '},"messageQueueTable":' + dumps_mq_map(self.message_queue_table) + "}"
        ).encode()

    @classmethod
    def decode(cls, body: bytes | memoryview | str) -> GetConsumerStatusBody:
        d = json_object(body, "GetConsumerStatusBody")
        consumers = d.get("consumerTable") if isinstance(d.get("consumerTable"), Mapping) else {}
        return cls(
            {mq: int(v) for mq, v in mq_table(d.get("messageQueueTable")).items()},
            {str(cid): {mq: int(v) for mq, v in mq_table(t).items()} for cid, t in (consumers or {}).items()},
        )


@lazy_dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO's answer (Java ``ConsumerRunningInfo``): the consumer's
    settings as strings (``PROP_*`` and its fields), subscriptions, per-queue process-queue
    state (Java ``ProcessQueueInfo`` fields: ``commitOffset``, ``cachedMsgCount``…), per-topic
    consume statistics (``ConsumeStatus``: ``pullTPS``, ``consumeOKTPS``…) and a thread dump
    (``jstack``, empty unless asked for)."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: tuple[SubscriptionInfo, ...] = ()
    mq_table: dict[MessageQueue, dict[str, Any]] = field(default_factory=dict)
    status_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    jstack: str = ""

    def encode(self) -> bytes:
        parts = ['"jstack":' + json.dumps(self.jstack)] if self.jstack else []
        parts += [
            '"mqTable":' + dumps_mq_map(self.mq_table),
            '"properties":' + json.dumps(self.properties, separators=(",", ":")),
            '"statusTable":' + json.dumps(self.status_table, separators=(",", ":")),
            '"subscriptionSet":' + json.dumps([s.to_json() for s in self.subscription_set], separators=(",", ":")),
        ]
        return ("{" + ",".join(parts) + "}").encode()

    def format_string(self) -> str:
        """The text mqadmin consumerStatus prints for one client (Java ``formatString``)."""
        out = ["#Consumer Properties#"]
        out += [f"{k:<40}: {v}" for k, v in sorted(self.properties.items())]
        out += ["", "", "#Consumer Subscription#"]
        out += [
            f"{i:03d} Topic: {s.topic:<40} ClassFilter: {str(s.class_filter_mode).lower():<8} "
            f"SubExpression: {s.sub_string}"
            for i, s in enumerate(self.subscription_set, 1)
        ]
        out += [
            "",
            "",
            "#Consumer Offset#",
            f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Consumer Offset':<20}",
        ]
        out += [
            f"{mq.topic:<32}  {mq.broker_name:<32}  {mq.queue_id:<4}  {_int(q.get('commitOffset')):<20}"
            for mq, q in sorted(self.mq_table.items())
        ]
        out += [
            "",
            "",
            "#Consumer MQ Detail#",
            f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#ProcessQueueInfo':<20}",
        ]
        out += [
            f"{mq.topic:<64}  {mq.broker_name:<32}  {mq.queue_id:<4}  "
            + json.dumps(q, separators=(",", ":"), sort_keys=True)
            for mq, q in sorted(self.mq_table.items())
        ]
        out += [
            "",
            "",
            "#Consumer RT&TPS#",
            f"{'#Topic':<64}  {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} {'#ConsumeOK TPS':>14} "
            f"{'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}",
        ]
        for topic, st in sorted(self.status_table.items()):

            def f(k: str, st: dict[str, Any] = st) -> float:
                try:
                    return float(st.get(k) or 0.0)
                except (TypeError, ValueError):
                    return 0.0

            out.append(
                f"{topic:<32}  {f('pullRT'):>14.2f} {f('pullTPS'):>14.2f} {f('consumeRT'):>14.2f} "
                f"{f('consumeOKTPS'):>14.2f} {f('consumeFailedTPS'):>18.2f} "
                f"{_int(st.get('consumeFailedMsgs')):>25d}"
            )
        if self.jstack:
            out += ["", "", "#Consumer jstack#", self.jstack]
        return "\n".join(out) + "\n"

    @classmethod
    def decode(cls, body: bytes | memoryview | str) -> ConsumerRunningInfo:
        d = json_object(body, "ConsumerRunningInfo")
        props = d.get("properties") if isinstance(d.get("properties"), Mapping) else {}
        status = d.get("statusTable") if isinstance(d.get("statusTable"), Mapping) else {}
        return cls(
            {str(k): str(v) for k, v in (props or {}).items()},
            tuple(SubscriptionInfo.from_json(s) for s in d.get("subscriptionSet") or () if isinstance(s, Mapping)),
            {mq: dict(v) for mq, v in mq_table(d.get("mqTable")).items() if isinstance(v, Mapping)},
            {str(t): dict(v) for t, v in (status or {}).items() if isinstance(v, Mapping)},
            str(d.get("jstack") or ""),
        )


@lazy_dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult:
    """CONSUME_MESSAGE_DIRECTLY's answer (Java ``ConsumeMessageDirectlyResult``):
    ``consume_result`` is ``CR_SUCCESS``, ``CR_LATER``, ``CR_ROLLBACK``, ``CR_COMMIT``,
    ``CR_THROW_EXCEPTION`` or ``CR_RETURN_NULL``."""

    order: bool = False
    auto_commit: bool = True
    consume_result: str = ""
    remark: str | None = None
    spent_time_mills: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "autoCommit": self.auto_commit,
            "consumeResult": self.consume_result,
            "order": self.order,
            "remark": self.remark,
            "spentTimeMills": self.spent_time_mills,
        }

    @classmethod
    def decode(cls, body: bytes | memoryview | str) -> ConsumeMessageDirectlyResult:
        d = json_object(body, "ConsumeMessageDirectlyResult")
        remark = d.get("remark")
        return cls(
            bool(d.get("order")),
            bool(d.get("autoCommit", True)),
            str(d.get("consumeResult") or ""),
            None if remark is None else str(remark),
            _int(d.get("spentTimeMills")),
        )


def connections_of(items: Iterable[ConnectionInfo]) -> tuple[ConnectionInfo, ...]:
    """Connections in a stable order (client id, then address)."""
    return tuple(sorted(items, key=lambda c: (c.client_id, c.client_addr)))


# Java MQVersion.Version: the first 16 ordinals are 3.0.0's pre-releases, then every version
# comes as X_SNAPSHOT, X (V3_0_1_SNAPSHOT = 16, V4_9_8 = 409).
_VERSION_HEAD = (
    "V3_0_0_SNAPSHOT",
    "V3_0_0_ALPHA1",
    *(f"V3_0_0_BETA{i}" for i in range(1, 6)),
    *(n for i in range(6, 10) for n in (f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}")),
    "V3_0_0_FINAL",
)
_VERSION_RUNS = (
    (3, 0, 1, 15),
    (3, 1, 0, 9),
    (3, 2, 0, 9),
    *((3, m, 1, 9) for m in range(3, 10)),
    *((major, m, 0, 9) for major in (4, 5) for m in range(10)),
)
_VERSIONS = _VERSION_HEAD + tuple(
    n for a, b, lo, hi in _VERSION_RUNS for p in range(lo, hi + 1) for n in (f"V{a}_{b}_{p}_SNAPSHOT", f"V{a}_{b}_{p}")
)

#: Ordinals of the versions the broker checks (Java ``MQVersion.Version``).
V3_0_7_SNAPSHOT = _VERSIONS.index("V3_0_7_SNAPSHOT")
V3_1_8_SNAPSHOT = _VERSIONS.index("V3_1_8_SNAPSHOT")


def version_desc(version: int) -> str:
    """Java ``MQVersion.getVersionDesc``: the name of a version ordinal (409 → ``V4_9_8``);
    past the table, ``HIGHER_VERSION`` as Java; below 0 the first one."""
    if version >= len(_VERSIONS):
        return "HIGHER_VERSION"
    return _VERSIONS[max(0, version)]


__all__ += ["V3_0_7_SNAPSHOT", "V3_1_8_SNAPSHOT", "version_desc"]
