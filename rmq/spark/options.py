"""Options of the ``rocketmq`` Spark source and sink, parsed and checked up front.

Nothing here imports pyspark: the parsing and the offset specifications are plain Python and
unit-tested on their own. Option names are Spark-Kafka's where the concept matches
(``subscribe``, ``startingOffsets``, ``failOnDataLoss``, ``maxOffsetsPerTrigger``,
``minPartitions``) and RocketMQ's otherwise (``nameServer``, ``subExpression``, ``group``,
``pullBatchSize``); Spark hands them over case-insensitively. ``accessKey`` / ``secretKey``
(source and sink) sign every request for brokers with ACL on (``aclEnable=true``).

Offsets JSON names each queue as topic → broker name → queue id, the rocketmq-spark layout::

    {"T1": {"broker-a": {"0": 42, "1": -2}}}        -2 = earliest, -1 = latest

or, Spark-Kafka style, topic → queue id, allowed when that queue id exists on one broker only::

    {"T1": {"0": 42}}

TLS: ``.option("tls", "true")`` connects over TLS, verifying the servers' certificates against
the system's trust store; Java's client-side names set the rest
(``tls.client.trustCertPath``, ``tls.client.certPath``, ``tls.client.keyPath``,
``tls.client.keyPassword``, ``tls.client.authServer``, ``tls.config.file``) and imply ``tls``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from rmq.common.constants import TopicValidator
from rmq.config import ConfigError
from rmq.errors import ClientError
from rmq.remoting.acl import SessionCredentials
from rmq.remoting.tls import TlsSettings

__all__ = [
    "OptionError",
    "EARLIEST",
    "LATEST",
    "QueueKey",
    "OffsetSpec",
    "SourceOptions",
    "SinkOptions",
    "parse_source_options",
    "include_headers",
    "TIMESTAMP_STRATEGIES",
    "parse_sink_options",
    "parse_offsets_json",
    "offsets_to_json",
    "offsets_from_json",
    "client_tls_context",
]

log = logging.getLogger("rmq.spark")

EARLIEST = -2  # Kafka's and rocketmq-spark's sentinel in offsets JSON
LATEST = -1

QueueKey = tuple[str, str, int]  # (topic, broker_name, queue_id)
#: offsets in Spark's checkpoint form: {topic: {broker: {"queue id": offset}}}
OffsetsJson = dict[str, dict[str, dict[str, int]]]
#: a queue named in an offsets option: the broker is None in the Kafka form (resolved against the route)
OffsetKey = tuple[str, str | None, int]
#: the assign option: topic -> {broker or None (any broker): [queue ids]}
Assignment = dict[str, dict[str | None, list[int]]]
#: The ``tls.*`` options as sorted ``(name, value)`` pairs: strings, so the options stay
#: picklable for the executors, which build their ``ssl.SSLContext`` from them.
TlsProperties = tuple[tuple[str, str], ...]


class OptionError(ClientError, ValueError):
    """A source or sink option is missing, malformed or contradicts another. Not retriable;
    the message names the option and what was expected."""


# ------------------------------------------------------------------------------ offset specs


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    ``kind`` is one of:

    * ``"earliest"`` / ``"latest"``: every queue's min / max offset;
    * ``"offsets"``: ``per_queue`` maps ``(topic, broker or None, queue_id)`` to an offset
      (or EARLIEST/LATEST); queues not listed take ``default``;
    * ``"timestamp"``: ``timestamp`` (epoch ms) for every queue, via SEARCH_OFFSET_BY_TIMESTAMP;
    * ``"timestamps"``: ``per_queue`` maps queue keys to epoch ms; queues not listed take ``default``.

    A key's broker is None when the JSON used the Kafka form; it is resolved against the route.
    """

    kind: str
    per_queue: Mapping[OffsetKey, int] = field(default_factory=dict)
    timestamp: int | None = None
    default: str = "earliest"
    option: str = "startingOffsets"  # the option it came from, for error messages
    #: a timestamp no message of a queue is at or after: ``"error"`` fails the query,
    #: ``"latest"`` starts that queue at its latest offset (Spark-Kafka's
    #: ``startingOffsetsByTimestampStrategy``; ending timestamps always take the latest)
    no_match: str = "latest"


def _int_value(option: str, where: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise OptionError(f"{option}: {where} must be an integer, got {v!r}")
    try:
        return int(v)
    except ValueError:
        raise OptionError(f"{option}: {where} must be an integer, got {v!r}") from None


def _queue_id(option: str, topic: str, k: Any) -> int:
    try:
        q = int(k)
    except (TypeError, ValueError):
        raise OptionError(f"{option}: queue id {k!r} of topic {topic!r} is not an integer") from None
    if q < 0:
        raise OptionError(f"{option}: queue id {q} of topic {topic!r} is negative")
    return q


def parse_offsets_json(option: str, text: str, *, timestamps: bool = False) -> dict[OffsetKey, int]:
    """Parse a per-queue offsets (or timestamps) JSON object into ``{(topic, broker|None, qid): value}``.

    Raises:
        OptionError: not JSON, wrong nesting, non-integer ids or values, or mixing the
            broker-qualified and the Kafka form inside one topic.
    """
    try:
        d = json.loads(text)
    except ValueError as e:
        raise OptionError(f"{option}: not valid JSON ({e}): {text!r}") from None
    if not isinstance(d, dict) or not d:
        raise OptionError(
            f'{option}: expected a JSON object like {{"topic": {{"broker-a": {{"0": 42}}}}}}, got {text!r}'
        )
    what = "timestamp" if timestamps else "offset"
    out: dict[OffsetKey, int] = {}
    for topic, per in d.items():
        if not isinstance(per, dict) or not per:
            raise OptionError(f"{option}: topic {topic!r} must map to a non-empty object, got {per!r}")
        nested = [isinstance(v, dict) for v in per.values()]
        if all(nested):
            for broker, queues in per.items():
                if not queues:
                    raise OptionError(f"{option}: broker {broker!r} of topic {topic!r} lists no queues")
                for q, v in queues.items():
                    qid = _queue_id(option, topic, q)
                    val = _int_value(option, f"{what} of {topic}/{broker}/{qid}", v)
                    out[(topic, str(broker), qid)] = val
        elif not any(nested):
            for q, v in per.items():
                qid = _queue_id(option, topic, q)
                out[(topic, None, qid)] = _int_value(option, f"{what} of {topic}/{qid}", v)
        else:
            raise OptionError(
                f"{option}: topic {topic!r} mixes broker names and queue ids; use either "
                f'{{"{topic}": {{"broker-a": {{"0": 1}}}}}} or {{"{topic}": {{"0": 1}}}}'
            )
    for key, val in out.items():
        if timestamps:
            if val < 0 and val not in (EARLIEST, LATEST):
                raise OptionError(f"{option}: timestamp {val} of {key[0]}/{key[2]} is negative")
        elif val < 0 and val not in (EARLIEST, LATEST):
            raise OptionError(
                f"{option}: offset {val} of {key[0]}/{key[2]} is negative (use -2 for earliest, -1 for latest)"
            )
    return out


def _offset_spec(opts: Mapping[str, str], prefix: str, default: str, allow_latest: bool = True) -> OffsetSpec:
    """startingOffsets / endingOffsets and their timestamp variants; Kafka's precedence:
    ``<prefix>Timestamp`` over ``<prefix>OffsetsByTimestamp`` over ``<prefix>Offsets``."""
    name_ts = f"{prefix}Timestamp"
    name_by_ts = f"{prefix}OffsetsByTimestamp"
    name_off = f"{prefix}Offsets"
    if opts.get(name_ts.lower()) is not None:
        raw = opts[name_ts.lower()].strip()
        ts = _int_value(name_ts, "the value (epoch milliseconds)", raw)
        if ts < 0:
            raise OptionError(f"{name_ts}: must be epoch milliseconds >= 0, got {raw!r}")
        return OffsetSpec("timestamp", timestamp=ts, default=default, option=name_ts)
    if opts.get(name_by_ts.lower()) is not None:
        per = parse_offsets_json(name_by_ts, opts[name_by_ts.lower()], timestamps=True)
        return OffsetSpec("timestamps", per_queue=per, default=default, option=name_by_ts)
    given = opts.get(name_off.lower())
    if given is None:
        return OffsetSpec(default, default=default, option=name_off)
    word = given.strip().lower()
    if word in ("earliest", "latest"):
        if word == "earliest" and prefix == "ending":
            raise OptionError(f"{name_off}: 'earliest' is not allowed as an ending offset (use 'latest' or JSON)")
        if word == "latest" and not allow_latest:
            raise OptionError(f"{name_off}: 'latest' is not allowed for a batch query's start (use 'earliest' or JSON)")
        return OffsetSpec(word, default=word, option=name_off)
    if not given.strip().startswith("{"):
        raise OptionError(f"{name_off}: expected 'earliest', 'latest' or a JSON object, got {given!r}")
    per = parse_offsets_json(name_off, given)
    if prefix == "ending" and any(v == EARLIEST for v in per.values()):
        raise OptionError(f"{name_off}: -2 (earliest) is not allowed as an ending offset")
    if prefix == "starting" and not allow_latest and any(v == LATEST for v in per.values()):
        raise OptionError(f"{name_off}: -1 (latest) is not allowed as a batch query's starting offset")
    return OffsetSpec("offsets", per_queue=per, default=default, option=name_off)


# ------------------------------------------------------------------------------ source options


@dataclass(frozen=True)
class SourceOptions:
    """Parsed source options. Defaults are given per field."""

    name_servers: tuple[str, ...]
    subscribe: tuple[str, ...] = ()  # subscribe / topic
    subscribe_pattern: str | None = None
    assign: Mapping[str, Mapping[str | None, list[int]]] = field(default_factory=dict)  # see Assignment
    sub_expression: str = "*"
    tags: frozenset[str] | None = None  # the tag set of sub_expression, None for "*"
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest", option="endingOffsets")
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    pull_batch_size: int = 32  # rocketmq-spark's default; the broker caps it anyway
    pull_timeout_ms: int = 10_000
    group: str | None = None  # consumer group to commit streaming progress to
    consumer_group: str = "rmq-spark"  # the group name put in pull requests (not committed)
    streaming: bool = False
    tls: TlsProperties = ()  # the tls.* client properties; () = plain TCP (see _tls_properties)
    access_key: str | None = None  # ACL: sign every request (accessKey / secretKey options)
    secret_key: str | None = field(default=None, repr=False)
    include_headers: bool = False  # includeHeaders: add the headers column to the schema

    @property
    def credentials(self) -> SessionCredentials | None:
        """The ACL credentials of the ``accessKey`` / ``secretKey`` options, or None."""
        return SessionCredentials.of(self.access_key, self.secret_key)


_SOURCE_KNOWN = {
    "nameserver",
    "subscribe",
    "topic",
    "subscribepattern",
    "assign",
    "subexpression",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "failondataloss",
    "minpartitions",
    "maxrecordsperpartition",
    "maxoffsetspertrigger",
    "pullbatchsize",
    "pulltimeoutms",
    "group",
    "path",
    "accesskey",
    "secretkey",
    "includeheaders",
    "startingoffsetsbytimestampstrategy",
}
#: Spark-Kafka's ``startingOffsetsByTimestampStrategy`` values
TIMESTAMP_STRATEGIES = ("error", "latest")
_SINK_KNOWN = {
    "nameserver",
    "topic",
    "producergroup",
    "sendtimeoutms",
    "batchsize",
    "maxinflight",
    "tags",
    "path",
    "accesskey",
    "secretkey",
}


def _credentials(opts: Mapping[str, str | None]) -> tuple[str | None, str | None]:
    ak, sk = opts.get("accesskey"), opts.get("secretkey")
    try:
        SessionCredentials.of(ak or None, sk or None)
    except ValueError:
        raise OptionError("accessKey and secretKey: give both (ACL credentials) or neither") from None
    return ak or None, sk or None


# TLS: ``tls=true`` and Java's client-side property names (``tls.client.trustCertPath`` …,
# ``tls.config.file``); Spark hands options over lower-cased, the TLS settings match any case.
_TLS_KNOWN = {
    "tls",
    "tls.config.file",
    "tls.client.certpath",
    "tls.client.keypath",
    "tls.client.keypassword",
    "tls.client.trustcertpath",
    "tls.client.authserver",
}
_SOURCE_KNOWN |= _TLS_KNOWN
_SINK_KNOWN |= _TLS_KNOWN


def _tls_properties(opts: Mapping[str, str]) -> TlsProperties:
    """The TLS options, checked here on the driver (a missing file names its option): ``tls``
    (true/false, default false) turns TLS on, and any ``tls.client.*`` / ``tls.config.file``
    option implies it. Executors build the same context from the returned pairs."""
    props = tuple(sorted((k, v) for k, v in opts.items() if k in _TLS_KNOWN and k != "tls" and v is not None))
    if not _bool(opts, "tls", bool(props)):
        if props:
            raise OptionError(f"tls: false, but {props[0][0]} is set")
        return ()
    try:
        client_tls_context(props or (("tls.client.authserver", "true"),))
    except ConfigError as e:
        raise OptionError(str(e)) from None
    return props or (("tls.client.authserver", "true"),)


def client_tls_context(props: TlsProperties) -> ssl.SSLContext | None:
    """The client ``ssl.SSLContext`` the parsed TLS options describe (None for plain TCP)."""
    if not props:
        return None
    return TlsSettings.from_properties(dict(props)).client_context()


def _lower(options: Mapping[str, str], known: set[str], what: str) -> dict[str, str]:
    opts = {str(k).lower(): (None if v is None else str(v)) for k, v in dict(options).items()}
    unknown = sorted(k for k in opts if k not in known)
    if unknown:
        # Not an error (Spark adds its own keys now and then), but a typo should be visible.
        log.warning("rocketmq %s: ignoring unknown option(s) %s", what, ", ".join(unknown))
    return opts


def _name_servers(opts: Mapping[str, str]) -> tuple[str, ...]:
    raw = opts.get("nameserver")
    if not raw or not raw.strip():
        raise OptionError(
            "nameServer: required, e.g. .option('nameServer', '127.0.0.1:9876') (several separated by ';')"
        )
    addrs = tuple(a.strip() for a in re.split(r"[;,]", raw) if a.strip())
    for a in addrs:
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError(f"nameServer: {a!r} is not host:port")
    return addrs


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"{name}: expected true or false, got {raw!r}")


@overload
def _positive_int(opts: Mapping[str, str], name: str, default: int, maximum: int | None = None) -> int: ...


@overload
def _positive_int(opts: Mapping[str, str], name: str, default: None, maximum: int | None = None) -> int | None: ...


def _positive_int(opts: Mapping[str, str], name: str, default: int | None, maximum: int | None = None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        v = int(raw.strip())
    except ValueError:
        raise OptionError(f"{name}: expected a positive integer, got {raw!r}") from None
    if v <= 0:
        raise OptionError(f"{name}: expected a positive integer, got {raw!r}")
    if maximum is not None and v > maximum:
        raise OptionError(f"{name}: at most {maximum}, got {raw!r}")
    return v


def tag_set(expression: str) -> frozenset[str] | None:
    """RocketMQ's tag expression: ``*`` (or empty) matches all, else ``"TagA || TagB"``."""
    expr = (expression or "").strip()
    if expr in ("", "*"):
        return None
    tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
    if not tags:
        raise OptionError(f"subExpression: {expression!r} names no tag (use '*' or 'TagA || TagB')")
    return tags


def _parse_assign(raw: str) -> Assignment:
    try:
        d = json.loads(raw)
    except ValueError as e:
        raise OptionError(f"assign: not valid JSON ({e}): {raw!r}") from None
    if not isinstance(d, dict) or not d:
        raise OptionError(f'assign: expected {{"topic": [0, 1]}} or {{"topic": {{"broker-a": [0, 1]}}}}, got {raw!r}')
    out: Assignment = {}
    for topic, v in d.items():
        if isinstance(v, list):
            out[topic] = {None: sorted({_queue_id("assign", topic, q) for q in v})}
        elif isinstance(v, dict) and v and all(isinstance(x, list) for x in v.values()):
            out[topic] = {str(b): sorted({_queue_id("assign", topic, q) for q in qs}) for b, qs in v.items()}
        else:
            raise OptionError(
                f"assign: topic {topic!r} must map to a list of queue ids or to {{broker: [queue ids]}}, got {v!r}"
            )
        if not any(out[topic].values()):
            raise OptionError(f"assign: topic {topic!r} lists no queues")
    return out


def include_headers(options: Mapping[str, str]) -> bool:
    """The ``includeHeaders`` option (Spark-Kafka's): add the ``headers`` column; default false."""
    opts = {k.lower(): v for k, v in options.items() if v is not None}
    return _bool(opts, "includeHeaders", False)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check and parse the reader options.

    Raises:
        OptionError: with a message naming the option.
    """
    opts = _lower(options, _SOURCE_KNOWN, "source")
    servers = _name_servers(opts)
    sub = opts.get("subscribe") or opts.get("topic")
    pattern = opts.get("subscribepattern")
    assign_raw = opts.get("assign")
    given = [n for n, v in (("subscribe", sub), ("subscribePattern", pattern), ("assign", assign_raw)) if v]
    if len(given) != 1:
        raise OptionError(
            "exactly one of subscribe (or topic), subscribePattern, assign is required"
            + (f"; got {', '.join(given)}" if given else "")
        )
    topics: tuple[str, ...] = ()
    assign: Assignment = {}
    if sub:
        topics = tuple(dict.fromkeys(t.strip() for t in sub.split(",") if t.strip()))
        if not topics:
            raise OptionError(f"subscribe: no topic named in {sub!r}")
    elif pattern:
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"subscribePattern: invalid regular expression {pattern!r}: {e}") from None
    else:
        assert assign_raw  # exactly one of the three is given (checked above)
        assign = _parse_assign(assign_raw)

    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", allow_latest=streaming)
    strategy = (opts.get("startingoffsetsbytimestampstrategy") or "error").strip().lower()
    if strategy not in TIMESTAMP_STRATEGIES:
        raise OptionError(
            f"startingOffsetsByTimestampStrategy: expected one of {', '.join(TIMESTAMP_STRATEGIES)}, "
            f"got {opts.get('startingoffsetsbytimestampstrategy')!r}"
        )
    starting = dataclasses.replace(starting, no_match=strategy)
    if streaming:
        for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if opts.get(name) is not None:
                raise OptionError(f"{name}: ending offsets are for batch queries only; a stream has no end")
        ending = OffsetSpec("latest", option="endingOffsets")
    else:
        ending = _offset_spec(opts, "ending", "latest")
        if opts.get("maxoffsetspertrigger") is not None:
            raise OptionError("maxOffsetsPerTrigger: only for streaming queries (readStream)")

    sub_expr = (opts.get("subexpression") or "*").strip() or "*"
    group = opts.get("group")
    if group is not None:
        group = group.strip()
        if not group or len(group) > 255 or TopicValidator.is_topic_or_group_illegal(group):
            raise OptionError(f"group: {opts.get('group')!r} is not a valid consumer group name")
        if not streaming:
            raise OptionError("group: committing offsets to a consumer group is for streaming queries only")
    return SourceOptions(
        name_servers=servers,
        subscribe=topics,
        subscribe_pattern=pattern,
        assign=assign,
        sub_expression=sub_expr,
        tags=tag_set(sub_expr),
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_positive_int(opts, "minPartitions", None),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition", None),
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger", None),
        pull_batch_size=_positive_int(opts, "pullBatchSize", 32, maximum=10_000),
        pull_timeout_ms=_positive_int(opts, "pullTimeoutMs", 10_000),
        group=group,
        consumer_group=group or "rmq-spark",
        streaming=streaming,
        access_key=_credentials(opts)[0],
        secret_key=_credentials(opts)[1],
        include_headers=_bool(opts, "includeHeaders", False),
        tls=_tls_properties(opts),
    )


# ------------------------------------------------------------------------------ sink options


@dataclass(frozen=True)
class SinkOptions:
    """Parsed sink options. Defaults are given per field."""

    name_servers: tuple[str, ...]
    topic: str | None = None  # overrides the topic column, as Kafka's option does
    tags: str | None = None  # default tags when there is no tags column (or it is null)
    producer_group: str = "rmq-spark-producer"
    send_timeout_ms: int = 10_000
    batch_size: int = 256  # messages per SEND_BATCH_MESSAGE
    max_in_flight: int = 8  # pipelined batches per broker
    tls: TlsProperties = ()  # as for the source
    access_key: str | None = None  # ACL: sign every request (accessKey / secretKey options)
    secret_key: str | None = field(default=None, repr=False)

    @property
    def credentials(self) -> SessionCredentials | None:
        """The ACL credentials of the ``accessKey`` / ``secretKey`` options, or None."""
        return SessionCredentials.of(self.access_key, self.secret_key)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check and parse the writer options; raises :class:`OptionError`."""
    opts = _lower(options, _SINK_KNOWN, "sink")
    servers = _name_servers(opts)
    topic = opts.get("topic")
    if topic is not None:
        topic = topic.strip()
        reason = TopicValidator.check_topic(topic)
        if reason is not None:
            raise OptionError(f"topic: {opts.get('topic')!r} is not a valid topic name: {reason}")
    return SinkOptions(
        name_servers=servers,
        topic=topic,
        tags=opts.get("tags"),
        producer_group=(opts.get("producergroup") or "rmq-spark-producer").strip(),
        send_timeout_ms=_positive_int(opts, "sendTimeoutMs", 10_000),
        batch_size=_positive_int(opts, "batchSize", 256, maximum=10_000),
        max_in_flight=_positive_int(opts, "maxInFlight", 8, maximum=1024),
        access_key=_credentials(opts)[0],
        secret_key=_credentials(opts)[1],
        tls=_tls_properties(opts),
    )


# ------------------------------------------------------------------------------ offsets <-> JSON


def offsets_to_json(offsets: Mapping[QueueKey, int]) -> OffsetsJson:
    """``{(topic, broker, qid): next}`` → ``{topic: {broker: {"qid": next}}}`` (the checkpoint form)."""
    out: OffsetsJson = {}
    for (topic, broker, qid), off in sorted(offsets.items()):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = int(off)
    return out


def offsets_from_json(d: Mapping[str, Any]) -> dict[QueueKey, int]:
    """Inverse of :func:`offsets_to_json`; raises :class:`OptionError` on a malformed checkpoint."""
    out: dict[QueueKey, int] = {}
    try:
        for topic, brokers in d.items():
            for broker, queues in brokers.items():
                for qid, off in queues.items():
                    out[(str(topic), str(broker), int(qid))] = int(off)
    except (AttributeError, TypeError, ValueError) as e:
        raise OptionError(f"malformed offsets {d!r}: {e}") from None
    return out
