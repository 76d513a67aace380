"""The PySpark data source ``format("rocketmq")``: batch and streaming read and write.

Needs the ``spark`` extra (``pyspark>=4.0``, ``pyarrow``). Spark runs these classes in its own
Python worker processes (PySpark's Python data source API, ``pyspark.sql.datasource``):
``DataSource``, ``reader()`` and batch ``partitions()`` in short-lived workers on the driver,
the stream reader's offset methods in one long-lived runner process per query, ``read()`` /
``write()`` in executor workers that receive the reader or writer pickled. So nothing here holds
a socket across pickling: clients come from :func:`rmq.spark._client.shared_client` inside the
method that needs them.

Schema (fixed; declare a subset with ``.schema(...)`` to skip building unused columns)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int,
    brokerName string, tags string, bornTimestamp timestamp, msgId string,
    properties map<string,string>

and with ``.option("includeHeaders", "true")`` (as Spark-Kafka's source) also
``headers array<struct<key string, value binary>>``: the message properties as Kafka-style
headers (value = the property's UTF-8 bytes). A declared schema may name ``headers`` too.

``timestamp`` is the broker's store time, so ``timestampType`` is always 1 (log-append time,
in Spark-Kafka's numbering). ``msgId`` is the offsetMsgId; ``key`` is the KEYS property.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import Row
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rmq.errors import RMQError
from rmq.spark._client import RocketMQClient, shared_client
from rmq.spark._plan import (
    DataLossError,
    QueueRange,
    plan_ranges,
    rate_limit,
    read_range,
    resolve_offsets,
    resolve_queues,
)
from rmq.spark._records import ArrowSchema, RecordBatch, chunk_to_arrow
from rmq.spark._sink import MessageSender
from rmq.spark.options import (
    OffsetsJson,
    OffsetSpec,
    OptionError,
    QueueKey,
    SinkOptions,
    SourceOptions,
    include_headers,
    offsets_from_json,
    offsets_to_json,
    parse_sink_options,
    parse_source_options,
)

try:  # Spark >= 4.2: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    HAS_ADMISSION_CONTROL = True
except ImportError:  # Spark 4.0 / 4.1
    HAS_ADMISSION_CONTROL = False
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Placeholder so the class statement below works before Spark 4.2."""


try:  # Spark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

__all__ = ["RocketMQDataSource", "SOURCE_SCHEMA", "RangePartition", "SendCommitMessage"]

log = logging.getLogger("rmq.spark")

SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("brokerName", StringType()),
        StructField("tags", StringType()),
        StructField("bornTimestamp", TimestampType()),
        StructField("msgId", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)
#: Spark-Kafka's headers column type
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
#: the schema with ``includeHeaders=true``
SOURCE_SCHEMA_WITH_HEADERS = StructType([*SOURCE_SCHEMA.fields, StructField("headers", HEADERS_TYPE)])

# Our column -> the Spark types a user may declare for it, and how it is then built.
# column → the Spark types it may be declared as → how decode_records fills it
_ACCEPTED: dict[str, dict[DataType, str]] = {
    "key": {BinaryType(): "native", StringType(): "string"},
    "value": {BinaryType(): "native", StringType(): "string"},
    "topic": {StringType(): "native"},
    "partition": {IntegerType(): "native", LongType(): "native"},
    "offset": {LongType(): "native"},
    "timestamp": {TimestampType(): "native", LongType(): "long"},
    "timestampType": {IntegerType(): "native"},
    "brokerName": {StringType(): "native"},
    "tags": {StringType(): "native"},
    "bornTimestamp": {TimestampType(): "native", LongType(): "long"},
    "msgId": {StringType(): "native"},
    "properties": {MapType(StringType(), StringType()): "native", MapType(StringType(), StringType(), False): "native"},
    "headers": {HEADERS_TYPE: "native"},
}
_CANONICAL = {n.lower(): n for n in _ACCEPTED}


def _column_plan(schema: StructType) -> tuple[list[str], list[str]]:
    """Map a (possibly user-declared) read schema onto our columns; raises OptionError."""
    names, kinds = [], []
    for f in schema.fields:
        ours = _CANONICAL.get(f.name.lower())
        if ours is None:
            raise OptionError(f"schema: the rocketmq source has no column {f.name!r} (columns: {', '.join(_ACCEPTED)})")
        kind = _ACCEPTED[ours].get(f.dataType)
        if kind is None:
            allowed = " or ".join(t.simpleString() for t in _ACCEPTED[ours])
            raise OptionError(f"schema: column {f.name!r} must be {allowed}, not {f.dataType.simpleString()}")
        names.append(ours)
        kinds.append(kind)
    return names, kinds


def _arrow_schema(schema: StructType) -> ArrowSchema:
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # Spark 4.0: no timezone argument (timestamps are UTC there)
        return to_arrow_schema(schema)


# ------------------------------------------------------------------------------ reading


class RangePartition(InputPartition):
    """One Spark partition: a :class:`~rmq.spark._plan.QueueRange`."""

    def __init__(self, rng: QueueRange) -> None:
        super().__init__(rng)

    def __repr__(self) -> str:
        r = self.value
        return f"RangePartition({r.topic}/{r.broker_name}/{r.queue_id} [{r.start}, {r.end}))"


class _RangeReading:
    """The shared ``read()`` of the batch and the stream reader."""

    opts: SourceOptions
    schema: StructType

    def _setup_columns(self, schema: StructType) -> None:
        self.schema = schema
        self._names, self._kinds = _column_plan(schema)

    def read(self, partition: InputPartition) -> Iterator[RecordBatch]:
        rng = partition.value
        if rng is None:  # Spark's placeholder when there is nothing to read
            return
        client = shared_client(
            self.opts.name_servers,
            self.opts.pull_timeout_ms / 1000.0,
            credentials=self.opts.credentials,
            tls=self.opts.tls,
        )
        arrow_schema = _arrow_schema(self.schema)
        for chunk in read_range(client, rng, self.opts):
            batch = chunk_to_arrow(
                chunk, self._names, arrow_schema, self._kinds, tags=self.opts.tags, broker_name=rng.broker_name
            )
            if batch.num_rows:
                yield batch


class RocketMQBatchReader(_RangeReading, DataSourceReader):
    """``spark.read.format("rocketmq")``: one partition per queue range, planned once."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self._setup_columns(schema)

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        client = shared_client(
            opts.name_servers, opts.pull_timeout_ms / 1000.0, credentials=opts.credentials, tls=opts.tls
        )
        queues = resolve_queues(client, opts)
        if not queues:
            log.warning("rocketmq: no readable queue matches the query; the result is empty")
            return []
        start = resolve_offsets(client, opts.starting, queues)
        end = resolve_offsets(client, opts.ending, queues)
        for k in sorted(queues):
            if start[k] > end[k]:
                raise OptionError(
                    f"queue {k[0]}/{k[1]}/{k[2]}: starting offset {start[k]} is after the ending "
                    f"offset {end[k]} (from {opts.starting.option} and {opts.ending.option})"
                )
        ranges = plan_ranges(
            queues, start, end, min_partitions=opts.min_partitions, max_records=opts.max_records_per_partition
        )
        log.info(
            "rocketmq batch read: %d queues, %d partitions, %d offsets",
            len(queues),
            len(ranges),
            sum(len(r) for r in ranges),
        )
        return [RangePartition(r) for r in ranges]


class RocketMQStreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketmq")``.

    Offsets are ``{topic: {broker: {"queue id": next offset}}}``. Queues that appear later
    (a topic grows, a pattern matches a new topic) are read from offset 0; queues that
    disappear keep their last offset.
    """

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self._setup_columns(schema)
        self._initial: OffsetsJson | None = None
        self._queues: dict[QueueKey, str] = {}
        self._latest: OffsetsJson | None = None
        self._target: dict[QueueKey, int] | None = None  # Trigger.AvailableNow's stopping point
        self._committed: OffsetsJson | None = None  # last offsets stored in the consumer group

    def __getstate__(self) -> dict[str, Any]:
        # The runner's caches must not travel to the executors: Spark pickles the reader for them.
        d = dict(self.__dict__)
        d["_queues"] = {}
        d["_latest"] = None
        return d

    def _client(self) -> RocketMQClient:
        return shared_client(
            self.opts.name_servers,
            self.opts.pull_timeout_ms / 1000.0,
            credentials=self.opts.credentials,
            tls=self.opts.tls,
        )

    def _refresh_queues(self) -> dict[QueueKey, str]:
        self._queues = resolve_queues(self._client(), self.opts)
        return self._queues

    def initialOffset(self) -> OffsetsJson:
        # Memoized: Spark 4.3 calls this twice for a new query;
        # resolving "latest" twice would skip whatever arrived in between.
        if self._initial is None:
            queues = self._refresh_queues()
            self._initial = offsets_to_json(resolve_offsets(self._client(), self.opts.starting, queues))
            log.info("rocketmq stream: initial offsets %s", self._initial)
        return self._initial

    def _latest_now(self) -> dict[QueueKey, int]:
        queues = self._refresh_queues()
        return resolve_offsets(self._client(), OffsetSpec("latest", option="latest"), queues)

    def latestOffset(self, start: OffsetsJson | None = None, limit: ReadLimit | None = None) -> OffsetsJson:
        # Spark >= 4.2 passes (start, limit) because the signature has parameters; 4.0/4.1
        # call it without arguments (PySpark's DataSourceStreamReader.latestOffset).
        if start:
            # Spark asks for the next batch only once the previous one is in its commit log,
            # so `start` is processed: commit it now (Spark calls commit() for the last batch
            # of a query late or not at all).
            self._commit_group(start)
        latest = self._latest_now()
        self._latest = offsets_to_json(latest)
        begin = offsets_from_json(start) if start else {}
        end: dict[QueueKey, int] = dict(begin)  # vanished queues keep their offsets
        for k, off in latest.items():
            if self._target is not None:
                if k not in self._target:
                    continue
                off = min(off, self._target[k])
            end[k] = off  # below its start only if the topic was recreated: partitions() reports it
        max_rows = None
        if HAS_ADMISSION_CONTROL and isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        if max_rows is not None:
            end = rate_limit(begin, end, max_rows)
        return offsets_to_json(end)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> OffsetsJson | None:
        return self._latest

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest_now()
        log.info("rocketmq stream: Trigger.AvailableNow stops at %s", offsets_to_json(self._target))

    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> list[InputPartition]:
        begin = offsets_from_json(start) if start else {}
        stop = offsets_from_json(end)
        lo = {}
        for k, e in stop.items():
            b = begin.get(k, 0)  # a queue new since the last batch starts at its beginning
            if e < b:
                msg = (
                    f"queue {k[0]}/{k[1]}/{k[2]}: its offsets went back from {b} to {e}; "
                    f"the topic was probably deleted and recreated"
                )
                if self.opts.fail_on_data_loss:
                    raise DataLossError(msg + ". Set failOnDataLoss=false to read it again from its beginning.")
                log.warning("%s; reading it again from its beginning (failOnDataLoss=false)", msg)
                b = 0
            lo[k] = b
        live: dict[QueueKey, str] = {}
        refreshed = False
        for k in sorted(k for k in stop if stop[k] > lo[k]):
            addr = self._queues.get(k)
            if addr is None and not refreshed:  # e.g. replaying a batch right after a restart
                refreshed = True
                addr = self._refresh_queues().get(k)
            addr = addr or self._addr_of(k)
            if addr is None:
                raise RMQError(
                    f"queue {k[0]}/{k[1]}/{k[2]} has offsets {lo[k]}..{stop[k] - 1} to read but "
                    f"broker {k[1]!r} has no master in the route now"
                )
            live[k] = addr
        ranges = plan_ranges(
            live,
            lo,
            {k: stop[k] for k in live},
            min_partitions=self.opts.min_partitions,
            max_records=self.opts.max_records_per_partition,
        )
        return [RangePartition(r) for r in ranges]

    def _addr_of(self, k: QueueKey) -> str | None:
        try:
            return self._client().topic_route(k[0]).master_addr(k[1])
        except RMQError as e:
            log.warning("no route for %s: %s", k[0], e)
            return None

    def commit(self, end: OffsetsJson) -> None:
        self._commit_group(end)

    def _commit_group(self, offsets: OffsetsJson) -> None:
        """Store processed offsets in the optional consumer group (one pipelined round trip
        per broker). Spark's checkpoint stays the source of truth; the group's offsets feed
        rmq's consumer-lag tools, so a failed commit is logged, not fatal."""
        group = self.opts.group
        if not group or not offsets or offsets == self._committed:
            return
        client = self._client()
        by_addr: dict[str, list[tuple[str, int, int]]] = {}
        for (topic, broker, qid), off in offsets_from_json(offsets).items():
            addr = self._queues.get((topic, broker, qid)) or self._addr_of((topic, broker, qid))
            if addr is not None:
                by_addr.setdefault(addr, []).append((topic, qid, off))
        for addr, items in by_addr.items():
            try:
                client.update_consumer_offsets(addr, group, items)
            except RMQError as e:
                log.warning("could not commit offsets of group %r to %s: %s", group, addr, e)
                return
        self._committed = offsets

    def stop(self) -> None:
        self._queues = {}


# ------------------------------------------------------------------------------ writing


@dataclass
class SendCommitMessage(WriterCommitMessage):
    """What one write task reports: how many messages it sent."""

    sent: int


_SINK_TYPES = {
    "value": (BinaryType(), StringType()),
    "key": (BinaryType(), StringType()),
    "topic": (StringType(),),
    "tags": (StringType(),),
    "partition": (IntegerType(), LongType()),
    "properties": (MapType(StringType(), StringType()), MapType(StringType(), StringType(), False)),
}


def _check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    fields = {f.name: f for f in schema.fields}
    if "value" not in fields:
        raise OptionError(
            f"the rocketmq sink needs a 'value' column (binary or string); got columns {', '.join(fields) or 'none'}"
        )
    if "topic" not in fields and not opts.topic:
        raise OptionError("the rocketmq sink needs a 'topic' column or the 'topic' option")
    for name, types in _SINK_TYPES.items():
        f = fields.get(name)
        if f is not None and f.dataType not in types:
            raise OptionError(
                f"sink column {name!r} must be {' or '.join(t.simpleString() for t in types)}, "
                f"not {f.dataType.simpleString()}"
            )


def _sent(messages: list[WriterCommitMessage | None]) -> int:
    """Messages sent by the tasks that reported (a failed task reports None)."""
    return sum(m.sent for m in messages if isinstance(m, SendCommitMessage))


class _Sending:
    opts: SinkOptions

    def _sender(self) -> MessageSender:
        client = shared_client(
            self.opts.name_servers,
            self.opts.send_timeout_ms / 1000.0,
            credentials=self.opts.credentials,
            tls=self.opts.tls,
        )
        return MessageSender(client, self.opts)

    def write(self, iterator: Iterator[Row | RecordBatch]) -> SendCommitMessage:
        sender = self._sender()
        for batch in iterator:
            if hasattr(batch, "num_rows"):
                sender.add_arrow_batch(batch)
            else:  # a Row (Spark 4.0's stream writer has no Arrow variant)
                d = batch.asDict()
                sender.add_columns(
                    1,
                    [d["value"]],
                    *([d.get(c)] if c in d else None for c in ("key", "topic", "tags", "properties", "partition")),
                )
        return SendCommitMessage(sender.flush())


class RocketMQBatchWriter(_Sending, DataSourceArrowWriter):
    """``df.write.format("rocketmq")``: at-least-once; a failed task's rows may be sent twice."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("rocketmq sink: %d messages sent", _sent(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = _sent(messages)
        log.warning("rocketmq sink: write aborted; %d messages were already sent and stay in the topics", sent)


if TYPE_CHECKING:  # the Arrow writer (Spark >= 4.1) subclasses the row writer
    _StreamWriterBase = DataSourceStreamWriter
else:
    _StreamWriterBase = DataSourceStreamArrowWriter or DataSourceStreamWriter


class RocketMQStreamWriter(_Sending, _StreamWriterBase):
    """``df.writeStream.format("rocketmq")``: at-least-once, like Spark-Kafka's sink."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("rocketmq sink: batch %d: %d messages sent", batchId, _sent(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("rocketmq sink: batch %d aborted after %d messages were sent", batchId, _sent(messages))


# ------------------------------------------------------------------------------ the source


class RocketMQDataSource(DataSource):
    """``format("rocketmq")``: see the module docstring and ``rmq.spark.options`` for options."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA_WITH_HEADERS if include_headers(self.options) else SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketMQBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_source_options(self.options, streaming=True)
        if opts.max_offsets_per_trigger and not HAS_ADMISSION_CONTROL:
            import pyspark

            raise OptionError(
                f"maxOffsetsPerTrigger needs Spark >= 4.2 (this is {pyspark.__version__}, whose "
                f"Python sources cannot limit a micro-batch); remove the option or upgrade"
            )
        return RocketMQStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQBatchWriter:
        opts = parse_sink_options(self.options)
        _check_sink_schema(schema, opts)
        return RocketMQBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        opts = parse_sink_options(self.options)
        _check_sink_schema(schema, opts)
        return RocketMQStreamWriter(opts)
