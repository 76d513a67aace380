"""Sending rows to RocketMQ: the Spark-independent core of the sink.

:class:`MessageSender` takes column lists (``value`` required; ``key``, ``topic``, ``tags``,
``properties``, ``partition`` optional), picks a queue per message, groups messages per queue
into SEND_BATCH_MESSAGE bodies and keeps several batches per broker in flight. Delivery is
at-least-once: a broker error fails the call (and so the Spark task) with the broker's remark;
a retried task sends its rows again.

Queue choice, per topic: the ``partition`` column names the queue id (on the first broker, by
name, that has it writable); otherwise a message with a key goes to ``crc32(key) % queues`` so
one key stays in one queue (ordered, like Kafka's default partitioner), and a message without
one goes round robin.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import time
import zlib
from collections.abc import Sequence
from typing import Any

from rmq.common.constants import TopicValidator
from rmq.common.message import MessageConst, encode_batch_item, properties_to_string
from rmq.common.route import TopicRouteData
from rmq.errors import ClientError, RequestCodeNotSupportedError, TopicNotExistError
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.protocol.requests.message import send_message
from rmq.spark._client import RocketMQClient
from rmq.spark._records import ArrowArray, RecordBatch, encode_properties
from rmq.spark.options import SinkOptions
from rmq.types import MessageQueue

__all__ = ["MessageSender", "SinkError", "AUTO_CREATE_TOPIC"]

log = logging.getLogger("rmq.spark")

#: a send waiting for its pipeline: (header, batch body, queue, description, message count)
_Ready = tuple[SendMessageRequestHeader, bytes, MessageQueue, str, int]

AUTO_CREATE_TOPIC = TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
_DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
_BATCH_PROPERTIES = properties_to_string({MessageConst.WAIT_STORE_MSG_OK: "true"}, trailing_separator=True)
_MAX_BATCH_BYTES = 1024 * 1024  # well under the broker's 4 MiB maxMessageSize for a whole batch
_RESERVED = frozenset(
    {MessageConst.KEYS, MessageConst.TAGS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageConst.WAIT_STORE_MSG_OK}
)


class SinkError(ClientError):
    """A row cannot be sent as it is (no value, no topic, unknown queue); not retriable."""


class _UniqId:
    """Client-side message ids (the ``UNIQ_KEY`` property): 16 bytes as 32 hex digits, unique per
    process, in the spirit of Java's ``MessageClientIDSetter`` (host, pid, random, time, counter)."""

    def __init__(self) -> None:
        self._prefix = f"7F000001{os.getpid() & 0xFFFF:04X}{random.getrandbits(32):08X}"
        self._seq = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{int(time.time() * 1000) & 0xFFFFFFFF:08X}{next(self._seq) & 0xFFFF:04X}"

    def array(self, n: int) -> ArrowArray:
        """``n`` ``UNIQ_KEY\\x01<id>\\x02`` property strings as one Arrow string array."""
        import numpy as np
        import pyarrow as pa

        first = next(self._seq)
        self._seq = itertools.count(first + n)
        head = f"UNIQ_KEY\x01{self._prefix}{int(time.time() * 1000) & 0xFFFFFFFF:08X}".encode()
        width = len(head) + 5
        out = np.empty((n, width), dtype=np.uint8)
        out[:, : len(head)] = np.frombuffer(head, dtype=np.uint8)
        seq = (first + np.arange(n)) & 0xFFFF
        hexd = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
        for i, shift in enumerate((12, 8, 4, 0)):
            out[:, len(head) + i] = hexd[(seq >> shift) & 15]
        out[:, -1] = 2
        offs = np.arange(0, width * n + 1, width, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offs), pa.py_buffer(out)])


class _FallBack(Exception):
    """The vectorized encoder cannot take this batch; use the per-row path."""


def _check_separators(arr: ArrowArray, what: str) -> None:
    import pyarrow.compute as pc

    if pc.any(pc.match_substring_regex(arr, "[\x01\x02]")).as_py():
        raise SinkError(f"a {what} value contains a reserved separator character (\\x01 or \\x02)")


def _user_properties(col: ArrowArray) -> ArrowArray:
    """``k\\x01v\\x02`` strings per row from a ``map<string,string>`` column (null maps and
    null values are skipped; reserved names and separator characters are refused)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    keys, items = col.keys, col.items
    if pc.any(pc.is_in(keys, value_set=pa.array(sorted(_RESERVED)))).as_py():
        bad = sorted(set(keys.to_pylist()) & _RESERVED)
        raise SinkError(f"property {bad[0]!r} is set by the sink (use the key/tags columns)")
    _check_separators(keys, "property name")
    _check_separators(items, "property value")
    offsets = (
        np.asarray(pc.fill_null(col.offsets, 0), dtype=np.int64)
        if col.offsets.null_count
        else np.asarray(col.offsets, dtype=np.int64)
    )
    ok = np.asarray(pc.is_valid(items))
    pairs = pc.binary_join_element_wise(keys, "\x01", items, "\x02", "").filter(pa.array(ok))
    counts = np.concatenate([[0], np.cumsum(ok, dtype=np.int64)])
    new_offsets = counts[offsets - offsets[0]]
    lists = pa.ListArray.from_arrays(pa.array(new_offsets.astype(np.int32)), pairs)
    return pc.fill_null(pc.binary_join(lists, ""), "")


class _TopicTarget:
    __slots__ = ("topic", "queues", "addrs", "default_topic", "rr", "by_qid")

    def __init__(self, topic: str, route: TopicRouteData, default_topic: str | None) -> None:
        self.topic = topic
        self.queues = route.writable_queues()
        if default_topic:
            # Java's producer caps the template's queues at defaultTopicQueueNums.
            self.queues = [q for q in self.queues if q[1] < _DEFAULT_TOPIC_QUEUE_NUMS]
        # writable_queues() lists only brokers with a master: the filter drops nothing
        self.addrs = {b: a for b, _ in self.queues if (a := route.master_addr(b)) is not None}
        self.default_topic = default_topic
        self.rr = random.randrange(len(self.queues)) if self.queues else 0
        self.by_qid: dict[int, tuple[str, int]] = {}
        for b, q in self.queues:
            self.by_qid.setdefault(q, (b, q))


class MessageSender:
    """Batches messages per queue and sends them; see the module docstring.

    Args:
        client: a :class:`RocketMQClient`.
        opts: the parsed sink options.
    """

    def __init__(self, client: RocketMQClient, opts: SinkOptions) -> None:
        self.client = client
        self.opts = opts
        self._targets: dict[str, _TopicTarget] = {}
        # (topic, broker, qid) -> [items: list[bytes], their byte count: int]
        self._buffers: dict[tuple[str, str, int], list[Any]] = {}
        self._ready: dict[str, list[_Ready]] = {}  # addr -> sends waiting for the pipeline
        self._ids = _UniqId()
        self.sent = 0
        self._batch_code = RequestCode.SEND_BATCH_MESSAGE

    # ------------------------------------------------------------------ routing

    def _target(self, topic: str) -> _TopicTarget:
        t = self._targets.get(topic)
        if t is None:
            try:
                t = _TopicTarget(topic, self.client.topic_route(topic), None)
            except TopicNotExistError:
                try:
                    route = self.client.topic_route(AUTO_CREATE_TOPIC)
                except TopicNotExistError:
                    raise SinkError(
                        f"topic {topic!r} does not exist and the brokers do not auto-create topics "
                        f"(no route for {AUTO_CREATE_TOPIC}); create it first"
                    ) from None
                log.info("topic %r has no route; sending through %s so the broker creates it", topic, AUTO_CREATE_TOPIC)
                t = _TopicTarget(topic, route, AUTO_CREATE_TOPIC)
            if not t.queues:
                raise SinkError(f"topic {topic!r} has no writable queue on any broker with a master")
            self._targets[topic] = t
        return t

    def _pick(self, t: _TopicTarget, partition: int | None, key: bytes | None) -> tuple[str, int]:
        if partition is not None:
            q = t.by_qid.get(int(partition))
            if q is None:
                raise SinkError(
                    f"partition {partition} is not a writable queue of topic {t.topic!r} "
                    f"(writable queue ids: {sorted(t.by_qid)})"
                )
            return q
        if key is not None:
            return t.queues[zlib.crc32(key) % len(t.queues)]
        t.rr += 1
        return t.queues[t.rr % len(t.queues)]

    # ------------------------------------------------------------------ adding rows

    def add_columns(
        self,
        n: int,
        value: Sequence[bytes | str | None],
        key: Sequence[bytes | str | None] | None = None,
        topic: Sequence[str | None] | None = None,
        tags: Sequence[str | None] | None = None,
        properties: Sequence[Any] | None = None,
        partition: Sequence[int | None] | None = None,
    ) -> None:
        """Queue ``n`` messages given as column lists (None = column absent).

        ``value``/``key`` hold bytes or str; ``properties`` holds dicts or lists of (k, v) pairs.

        Raises:
            SinkError: a null value, no topic, a bad partition, a reserved property name.
        """
        opt_topic = self.opts.topic
        opt_tags = self.opts.tags
        for i in range(n):
            v = value[i]
            if v is None:
                raise SinkError("a row has a null 'value'; a RocketMQ message needs a body")
            if isinstance(v, str):
                v = v.encode("utf-8")
            tp = opt_topic or (topic[i] if topic is not None else None)
            if not tp:
                raise SinkError("a row has no topic: set the 'topic' option or give a non-null 'topic' column")
            t = self._targets.get(tp) or self._target(tp)
            k = key[i] if key is not None else None
            if isinstance(k, str):
                k = k.encode("utf-8")
            props: dict[str, str] = {}
            if properties is not None and properties[i]:
                pv = properties[i]
                for pk, pval in pv.items() if isinstance(pv, dict) else pv:
                    if pk in _RESERVED:
                        raise SinkError(f"property {pk!r} is set by the sink (use the key/tags columns)")
                    if pval is not None:
                        props[pk] = pval
            if k:
                props[MessageConst.KEYS] = k.decode("utf-8", "replace")
            tg = tags[i] if tags is not None else None
            if tg is None:
                tg = opt_tags
            if tg:
                props[MessageConst.TAGS] = tg
            props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._ids.next()
            try:
                item = encode_batch_item(v, encode_properties(props))
            except ValueError as e:
                raise SinkError(str(e)) from None
            dest = self._pick(t, partition[i] if partition is not None else None, k or None)
            bkey = (tp, dest[0], dest[1])
            buf = self._buffers.get(bkey)
            if buf is None:
                buf = self._buffers[bkey] = [[], 0]
            buf[0].append(item)
            buf[1] += len(item)
            if len(buf[0]) >= self.opts.batch_size or buf[1] >= _MAX_BATCH_BYTES:
                self._seal(bkey)

    def add_arrow_batch(self, batch: RecordBatch) -> None:
        """Queue every row of a ``pyarrow.RecordBatch`` (columns looked up by name).

        Builds the SEND batch items for all rows at once with Arrow compute and numpy (no
        per-row Python except hashing keys); falls back to :meth:`add_columns` when a key is
        not valid UTF-8.
        """
        import pyarrow as pa

        if batch.num_rows == 0:
            return
        try:
            self._add_arrow_fast(batch)
        except _FallBack:
            names = batch.schema.names

            def col(name: str) -> list[Any] | None:
                return batch.column(names.index(name)).to_pylist() if name in names else None

            value = col("value")
            assert value is not None  # the fast path read it before falling back
            self.add_columns(
                batch.num_rows, value, col("key"), col("topic"), col("tags"), col("properties"), col("partition")
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise SinkError(f"cannot encode the rows: {e}") from None

    def _add_arrow_fast(self, batch: RecordBatch) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = batch.num_rows
        cols = dict(zip(batch.schema.names, batch.columns, strict=True))
        value = cols["value"]
        if value.null_count:
            raise SinkError("a row has a null 'value'; a RocketMQ message needs a body")
        value = value.cast(pa.binary())

        # ---- where each row goes: an index into `dests` = [(topic, broker, queue id), ...]
        if self.opts.topic:
            topic_names = [self.opts.topic]
            topic_idx = np.zeros(n, dtype=np.int64)
        else:
            tcol = cols.get("topic")
            if tcol is None or tcol.null_count or (n and pc.min(pc.utf8_length(tcol)).as_py() == 0):
                raise SinkError("a row has no topic: set the 'topic' option or give a non-null 'topic' column")
            enc = pc.dictionary_encode(tcol)
            topic_names = enc.dictionary.to_pylist()
            topic_idx = np.asarray(enc.indices, dtype=np.int64)
        key = cols.get("key")
        if key is not None:
            if pa.types.is_binary(key.type) or pa.types.is_large_binary(key.type):
                try:
                    key = key.cast(pa.string())
                except pa.ArrowInvalid:
                    raise _FallBack() from None
            key_valid = np.asarray(pc.fill_null(pc.greater(pc.utf8_length(key), 0), False))
        partition = cols.get("partition")
        dests: list[tuple[str, str, int]] = []
        dest = np.empty(n, dtype=np.int64)
        for ti, topic in enumerate(topic_names):
            t = self._target(topic)
            rows = np.flatnonzero(topic_idx == ti) if len(topic_names) > 1 else np.arange(n)
            nq = len(t.queues)
            qsel = np.full(len(rows), -1, dtype=np.int64)
            if partition is not None:
                pv = np.asarray(pc.fill_null(partition.cast(pa.int64()), -1))[rows]
                for p in np.unique(pv[pv >= 0]).tolist():
                    q = t.by_qid.get(p)
                    if q is None:
                        raise SinkError(
                            f"partition {p} is not a writable queue of topic {topic!r} "
                            f"(writable queue ids: {sorted(t.by_qid)})"
                        )
                    qsel[pv == p] = t.queues.index(q)
            free = qsel < 0
            if key is not None:
                keyed = free & key_valid[rows]
                if keyed.any():
                    ks = key.take(pa.array(rows[keyed])).to_pylist()
                    qsel[keyed] = [zlib.crc32(k.encode("utf-8")) % nq for k in ks]
                free &= ~keyed
            m = int(free.sum())
            if m:
                qsel[free] = (t.rr + 1 + np.arange(m)) % nq
                t.rr += m
            dest[rows] = len(dests) + qsel
            dests.extend((topic, b, q) for b, q in t.queues)

        # ---- the properties string of every row: user properties, KEYS, TAGS, UNIQ_KEY
        pieces = []
        props_col = cols.get("properties")
        if props_col is not None and props_col.null_count < n:
            pieces.append(_user_properties(props_col))
        if key is not None:
            pieces.append(pc.if_else(pa.array(key_valid), pc.binary_join_element_wise("KEYS\x01", key, "\x02", ""), ""))
            _check_separators(key, "key")
        tags = cols.get("tags")
        if tags is not None:
            _check_separators(tags, "tags")
            if self.opts.tags:
                tags = pc.fill_null(tags, self.opts.tags)
            has = pc.fill_null(pc.greater(pc.utf8_length(tags), 0), False)
            pieces.append(pc.if_else(has, pc.binary_join_element_wise("TAGS\x01", tags, "\x02", ""), ""))
        elif self.opts.tags:
            pieces.append(pa.array([f"TAGS\x01{self.opts.tags}\x02"] * n, pa.string()))
        pieces.append(self._ids.array(n))
        props = (
            pc.binary_join_element_wise(*pieces, "", null_handling="replace", null_replacement="")
            if len(pieces) > 1
            else pieces[0]
        )
        props = props.cast(pa.binary())
        plen = np.asarray(pc.binary_length(props), dtype=np.int64)
        if (plen > 32767).any():
            raise SinkError(f"message properties are {int(plen.max())} bytes; RocketMQ allows at most 32767")
        blen = np.asarray(pc.binary_length(value), dtype=np.int64)

        # ---- batch items (module docstring of _records): header | body | PROPLEN | props
        head = np.zeros((n, 5), dtype=">i4")
        head[:, 0] = 20 + blen + 2 + plen
        head[:, 4] = blen
        head_arr = pa.Array.from_buffers(
            pa.binary(),
            n,
            [None, pa.py_buffer(np.arange(0, 20 * n + 1, 20, dtype=np.int32)), pa.py_buffer(head.view(np.uint8))],
        )
        plen_arr = pa.Array.from_buffers(
            pa.binary(),
            n,
            [
                None,
                pa.py_buffer(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
                pa.py_buffer(plen.astype(">i2").view(np.uint8)),
            ],
        )
        order = np.argsort(dest, kind="stable")
        items = pc.binary_join_element_wise(head_arr, value, plen_arr, props, b"").take(pa.array(order))
        offs = np.frombuffer(items.buffers()[1], dtype=np.int32)[items.offset : items.offset + n + 1].astype(np.int64)
        buf = memoryview(items.buffers()[2])
        base = offs[0]
        sorted_dest = dest[order]
        bounds = np.flatnonzero(np.diff(sorted_dest)) + 1
        starts = np.concatenate([[0], bounds]).tolist()
        ends = np.concatenate([bounds, [n]]).tolist()
        limit = self.opts.batch_size
        for a, b in zip(starts, ends, strict=True):
            topic, broker, qid = dests[int(sorted_dest[a])]
            i = a
            while i < b:  # split at batch_size messages or ~1 MiB
                j = min(b, i + limit)
                while j > i + 1 and offs[j] - offs[i] > _MAX_BATCH_BYTES:
                    j = i + max(1, (j - i) // 2)
                self._queue_send(topic, broker, qid, bytes(buf[offs[i] - base : offs[j] - base]), j - i)
                i = j

    # ------------------------------------------------------------------ sending

    def _seal(self, bkey: tuple[str, str, int]) -> None:
        items, _ = self._buffers.pop(bkey)
        self._queue_send(*bkey, b"".join(items), len(items))

    def _queue_send(self, topic: str, broker: str, qid: int, body: bytes, count: int) -> None:
        t = self._targets[topic]
        # The batch's own properties: the broker waits for the store (WAIT=true), as Java's
        # DefaultMQProducer sends; each item carries its own keys, tags and UNIQ_KEY.
        header = SendMessageRequestHeader(
            producer_group=self.opts.producer_group,
            topic=topic,
            default_topic=t.default_topic or AUTO_CREATE_TOPIC,
            default_topic_queue_nums=_DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id=qid,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            properties=_BATCH_PROPERTIES,
            reconsume_times=0,
            unit_mode=False,
            batch=True,
        )
        addr = t.addrs[broker]
        ready = self._ready.setdefault(addr, [])
        ready.append(
            (
                header,
                body,
                MessageQueue(topic, broker, qid),
                f"sending {count} messages to {topic}/{broker}/{qid}",
                count,
            )
        )
        if len(ready) >= self.opts.max_in_flight:
            self._send(addr)

    def _requests(self, ready: list[_Ready]) -> list[tuple[RemotingCommand, MessageQueue, str]]:
        return [(send_message(h, body, code=self._batch_code), mq, desc) for h, body, mq, desc, _ in ready]

    def _send(self, addr: str) -> None:
        ready = self._ready.pop(addr, [])
        if not ready:
            return
        timeout = self.opts.send_timeout_ms / 1000.0
        try:
            self.client.send_requests(addr, self._requests(ready), timeout=timeout)
        except RequestCodeNotSupportedError:
            if self._batch_code != RequestCode.SEND_BATCH_MESSAGE:
                raise
            # Brokers that only know the C++ clients' form: SEND_MESSAGE_V2 with the batch flag.
            # Nothing of a refused request was stored, so re-sending them all is safe.
            log.info("broker %s does not support SEND_BATCH_MESSAGE; using SEND_MESSAGE_V2 with the batch flag", addr)
            self._batch_code = RequestCode.SEND_MESSAGE_V2
            self.client.send_requests(addr, self._requests(ready), timeout=timeout)
        self.sent += sum(r[-1] for r in ready)

    def flush(self) -> int:
        """Send everything buffered; returns the number of messages sent so far."""
        for bkey in list(self._buffers):
            self._seal(bkey)
        for addr in list(self._ready):
            self._send(addr)
        return self.sent
