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
from typing import Sequence

from rmq.errors import ClientError, RequestCodeNotSupportedError, TopicNotExistError
from rmq.remoting.codes import RequestCode
from rmq.remoting.command import RemotingCommand
from rmq.spark._client import RocketMQClient, TopicRoute
from rmq.spark._records import encode_batch_item, encode_properties
from rmq.spark.options import SinkOptions

__all__ = ["MessageSender", "SinkError", "AUTO_CREATE_TOPIC"]

log = logging.getLogger("rmq.spark")

AUTO_CREATE_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
_DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
_MAX_BATCH_BYTES = 1024 * 1024  # well under the broker's 4 MiB maxMessageSize for a whole batch
_RESERVED = frozenset({"KEYS", "TAGS", "UNIQ_KEY", "WAIT"})


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


class _TopicTarget:
    __slots__ = ("topic", "queues", "addrs", "default_topic", "rr", "by_qid")

    def __init__(self, topic: str, route: TopicRoute, default_topic: str | None) -> None:
        self.topic = topic
        self.queues = route.writable_queues()
        if default_topic:
            # Java's producer caps the template's queues at defaultTopicQueueNums.
            self.queues = [q for q in self.queues if q[1] < _DEFAULT_TOPIC_QUEUE_NUMS]
        self.addrs = {b: route.master_addr(b) for b, _ in self.queues}
        self.default_topic = default_topic
        self.rr = random.randrange(len(self.queues)) if self.queues else 0
        self.by_qid: dict[int, tuple] = {}
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
        self._buffers: dict[tuple, list] = {}  # (topic, broker, qid) -> [items, bytes]
        self._ready: dict[str, list] = {}  # addr -> [(cmd, description, count)]
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
                    raise SinkError(f"topic {topic!r} does not exist and the brokers do not auto-create topics "
                                    f"(no route for {AUTO_CREATE_TOPIC}); create it first") from None
                log.info("topic %r has no route; sending through %s so the broker creates it", topic, AUTO_CREATE_TOPIC)
                t = _TopicTarget(topic, route, AUTO_CREATE_TOPIC)
            if not t.queues:
                raise SinkError(f"topic {topic!r} has no writable queue on any broker with a master")
            self._targets[topic] = t
        return t

    def _pick(self, t: _TopicTarget, partition, key: bytes | None) -> tuple:
        if partition is not None:
            q = t.by_qid.get(int(partition))
            if q is None:
                raise SinkError(f"partition {partition} is not a writable queue of topic {t.topic!r} "
                                f"(writable queue ids: {sorted(t.by_qid)})")
            return q
        if key is not None:
            return t.queues[zlib.crc32(key) % len(t.queues)]
        t.rr += 1
        return t.queues[t.rr % len(t.queues)]

    # ------------------------------------------------------------------ adding rows

    def add_columns(self, n: int, value: Sequence, key: Sequence | None = None, topic: Sequence | None = None,
                    tags: Sequence | None = None, properties: Sequence | None = None,
                    partition: Sequence | None = None) -> None:
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
                for pk, pval in (pv.items() if isinstance(pv, dict) else pv):
                    if pk in _RESERVED:
                        raise SinkError(f"property {pk!r} is set by the sink (use the key/tags columns)")
                    if pval is not None:
                        props[pk] = pval
            if k:
                props["KEYS"] = k.decode("utf-8", "replace")
            tg = tags[i] if tags is not None else None
            if tg is None:
                tg = opt_tags
            if tg:
                props["TAGS"] = tg
            props["UNIQ_KEY"] = self._ids.next()
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

    def add_arrow_batch(self, batch) -> None:
        """Queue every row of a ``pyarrow.RecordBatch`` (columns looked up by name)."""
        names = batch.schema.names

        def col(name):
            return batch.column(names.index(name)).to_pylist() if name in names else None

        self.add_columns(batch.num_rows, col("value"), col("key"), col("topic"), col("tags"),
                         col("properties"), col("partition"))

    # ------------------------------------------------------------------ sending

    def _seal(self, bkey: tuple) -> None:
        items, _ = self._buffers.pop(bkey)
        topic, broker, qid = bkey
        t = self._targets[topic]
        fields = {
            "a": self.opts.producer_group,
            "b": topic,
            "c": t.default_topic or AUTO_CREATE_TOPIC,
            "d": _DEFAULT_TOPIC_QUEUE_NUMS,
            "e": qid,
            "f": 0,
            "g": int(time.time() * 1000),
            "h": 0,
            "i": "WAIT\x01true\x02",
            "j": 0,
            "k": False,
            "m": True,
        }
        addr = t.addrs[broker]
        ready = self._ready.setdefault(addr, [])
        ready.append((fields, b"".join(items), f"sending {len(items)} messages to {topic}/{broker}/{qid}", len(items)))
        if len(ready) >= self.opts.max_in_flight:
            self._send(addr)

    def _send(self, addr: str) -> None:
        ready = self._ready.pop(addr, [])
        if not ready:
            return
        timeout = self.opts.send_timeout_ms / 1000.0
        cmds = [RemotingCommand.request(self._batch_code, f, body) for f, body, _, _ in ready]
        try:
            self.client.send_requests(addr, cmds, [d for _, _, d, _ in ready], timeout=timeout)
        except RequestCodeNotSupportedError:
            if self._batch_code != RequestCode.SEND_BATCH_MESSAGE:
                raise
            # Brokers that only know the C++ clients' form: SEND_MESSAGE_V2 with the batch flag.
            # Nothing of a refused request was stored, so re-sending them all is safe.
            log.info("broker %s does not support SEND_BATCH_MESSAGE; using SEND_MESSAGE_V2 with m=true", addr)
            self._batch_code = RequestCode.SEND_MESSAGE_V2
            cmds = [RemotingCommand.request(self._batch_code, f, body) for f, body, _, _ in ready]
            self.client.send_requests(addr, cmds, [d for _, _, d, _ in ready], timeout=timeout)
        self.sent += sum(c for _, _, _, c in ready)

    def flush(self) -> int:
        """Send everything buffered; returns the number of messages sent so far."""
        for bkey in list(self._buffers):
            self._seal(bkey)
        for addr in list(self._ready):
            self._send(addr)
        return self.sent

