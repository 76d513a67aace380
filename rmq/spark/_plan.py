"""Planning and reading queue ranges: the Spark-independent core of the source.

* :func:`resolve_queues` turns subscribe / subscribePattern / assign into the set of message
  queues ``(topic, broker_name, queue_id)`` with their master broker addresses;
* :func:`resolve_offsets` turns an :class:`~rmq.spark.options.OffsetSpec` into one offset per
  queue (GET_MIN/MAX_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP, pipelined per broker);
* :func:`plan_ranges` cuts ``[start, end)`` per queue into Spark partitions;
* :func:`read_range` pulls exactly one range and yields chunks of pull bodies (turned into
  Arrow by :func:`rmq.spark._records.chunk_to_arrow`). It is deterministic for its range: a
  retried task returns the same messages (or fails on data loss when ``failOnDataLoss`` is
  true).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from rmq.common.constants import MixAll, TopicValidator
from rmq.common.route import TopicRouteData
from rmq.errors import ClientError, RMQError, TopicNotExistError
from rmq.protocol.command import RemotingCommand
from rmq.spark._client import RocketMQClient
from rmq.spark._records import Chunk, queue_offset_at, record_starts
from rmq.spark.options import EARLIEST, LATEST, OffsetKey, OffsetSpec, OptionError, QueueKey, SourceOptions
from rmq.types import PullStatus

__all__ = [
    "QueueRange",
    "DataLossError",
    "resolve_queues",
    "resolve_offsets",
    "plan_ranges",
    "rate_limit",
    "read_range",
    "is_internal_topic",
]

log = logging.getLogger("rmq.spark")


def is_internal_topic(topic: str) -> bool:
    """Topics a pattern never matches: RocketMQ's own (Java ``TopicValidator.isSystemTopic``:
    schedule, transaction, trace, the auto-create template, ...) and every group's retry and
    dead-letter topics; like Kafka's internal topics for subscribePattern."""
    return TopicValidator.is_system_topic(topic) or MixAll.is_retry_topic(topic) or MixAll.is_dlq_topic(topic)


class DataLossError(RMQError):
    """Messages in a planned range are gone (retention deleted them, or the topic was
    recreated) and ``failOnDataLoss`` is true. Not retriable: the data will not come back."""


@dataclass(frozen=True)
class QueueRange:
    """Offsets ``[start, end)`` of one message queue, and where its master broker was at planning."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int
    addr: str

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)

    def __len__(self) -> int:
        return max(0, self.end - self.start)


# ------------------------------------------------------------------------------ queues


def _listed_master(route: TopicRouteData, broker: str) -> str:
    """The master address of a broker from ``route.readable_queues()``, which lists only brokers
    that have one."""
    addr = route.master_addr(broker)
    assert addr is not None
    return addr


def _routes(client: RocketMQClient, topics: Iterable[str], *, missing_ok: bool) -> dict[str, TopicRouteData]:
    out = {}
    for t in topics:
        try:
            out[t] = client.topic_route(t)
        except TopicNotExistError:
            if not missing_ok:
                raise OptionError(f"topic {t!r} does not exist (the name server has no route for it)") from None
            log.info("topic %r has no route yet; it will be picked up when it appears", t)
    return out


def resolve_queues(client: RocketMQClient, opts: SourceOptions) -> dict[QueueKey, str]:
    """``{(topic, broker_name, queue_id): master address}`` for the subscribed queues.

    A batch query refuses topics that do not exist; a stream treats them as empty for now
    (their queues are picked up when they appear, like Kafka's subscribe).
    """
    missing_ok = opts.streaming
    if opts.subscribe:
        routes = _routes(client, opts.subscribe, missing_ok=missing_ok)
    elif opts.subscribe_pattern is not None:
        rx = re.compile(opts.subscribe_pattern)
        skip = client.cluster_names()
        topics = [t for t in client.all_topics() if rx.fullmatch(t) and not is_internal_topic(t) and t not in skip]
        routes = _routes(client, topics, missing_ok=True)
    else:
        routes = _routes(client, list(opts.assign), missing_ok=missing_ok)
    out: dict[QueueKey, str] = {}
    for topic, route in routes.items():
        readable = route.readable_queues()
        if opts.assign:
            wanted = opts.assign[topic]
            for broker, qids in wanted.items():
                for qid in qids:
                    owners = [b for b, q in readable if q == qid and (broker is None or b == broker)]
                    if not owners:
                        where = f"broker {broker!r}" if broker else "any broker"
                        raise OptionError(
                            f"assign: queue {qid} of topic {topic!r} is not readable on {where} "
                            f"(readable: {_describe(readable)})"
                        )
                    if broker is None and len(owners) > 1:
                        raise OptionError(
                            f"assign: queue {qid} of topic {topic!r} exists on brokers "
                            f"{', '.join(owners)}; name the broker: "
                            f'{{"{topic}": {{"{owners[0]}": [{qid}]}}}}'
                        )
                    out[(topic, owners[0], qid)] = _listed_master(route, owners[0])
        else:
            for broker, qid in readable:
                out[(topic, broker, qid)] = _listed_master(route, broker)
    return out


def _describe(readable: Iterable[tuple[str, int]]) -> str:
    by: dict[str, list[int]] = {}
    for b, q in readable:
        by.setdefault(b, []).append(q)
    return "; ".join(f"{b}: {min(qs)}..{max(qs)}" for b, qs in by.items()) or "none"


def _resolve_key(spec: OffsetSpec, key: OffsetKey, queues: Mapping[QueueKey, str]) -> QueueKey:
    topic, broker, qid = key
    if broker is not None:
        if key not in queues:
            raise OptionError(
                f"{spec.option}: queue {qid} on broker {broker!r} of topic {topic!r} is not part of "
                f"this query (queues: {_describe([(b, q) for t, b, q in queues if t == topic])})"
            )
        return (topic, broker, qid)
    owners = sorted(b for t, b, q in queues if t == topic and q == qid)
    if not owners:
        raise OptionError(
            f"{spec.option}: queue {qid} of topic {topic!r} is not part of this query "
            f"(queues: {_describe([(b, q) for t, b, q in queues if t == topic])})"
        )
    if len(owners) > 1:
        raise OptionError(
            f"{spec.option}: queue {qid} of topic {topic!r} is ambiguous: it exists on brokers "
            f"{', '.join(owners)}; name the broker, e.g. "
            f'{{"{topic}": {{"{owners[0]}": {{"{qid}": ...}}}}}}'
        )
    return (topic, owners[0], qid)


def resolve_offsets(client: RocketMQClient, spec: OffsetSpec, queues: Mapping[QueueKey, str]) -> dict[QueueKey, int]:
    """One concrete offset per queue for ``spec``, asking each broker once (pipelined)."""
    # What to ask per queue: ("min"|"max", None) or ("time", ts), or a literal offset.
    plan: dict[QueueKey, int | tuple[str, int | None]] = {}
    default: tuple[str, int | None] = ("min", None) if spec.default == "earliest" else ("max", None)
    if spec.kind in ("earliest", "latest"):
        plan = {k: (("min", None) if spec.kind == "earliest" else ("max", None)) for k in queues}
    elif spec.kind == "timestamp":
        plan = {k: ("time", spec.timestamp) for k in queues}
    else:
        topics = {t for t, _, _ in queues}
        for key in spec.per_queue:
            if key[0] not in topics:
                raise OptionError(
                    f"{spec.option}: topic {key[0]!r} is not part of this query "
                    f"(topics: {', '.join(sorted(topics)) or 'none'})"
                )
        given = {_resolve_key(spec, k, queues): v for k, v in spec.per_queue.items()}
        for k in queues:
            v = given.get(k)
            if v is None:
                plan[k] = default
            elif v == EARLIEST:
                plan[k] = ("min", None)
            elif v == LATEST:
                plan[k] = ("max", None)
            elif spec.kind == "timestamps":
                plan[k] = ("time", v)
            else:
                plan[k] = int(v)
    out: dict[QueueKey, int] = {}
    by_addr: dict[str, list[tuple[QueueKey, tuple[str, int | None]]]] = {}
    for k, what in plan.items():
        if isinstance(what, int):
            out[k] = what
        else:
            by_addr.setdefault(queues[k], []).append((k, what))
    for addr, items in by_addr.items():
        queries = [(kind, k[0], k[2], ts) for k, (kind, ts) in items]
        # a timestamp search answers the max offset when no message is at or after it: ask for
        # the max in the same round trip to tell "no match" from a match
        timed = [(k, ts) for k, (kind, ts) in items if kind == "time"]
        queries += [("max", k[0], k[2], None) for k, _ in timed]
        got = client.queue_offsets(addr, queries)
        for (k, _), off in zip(items, got[: len(items)], strict=True):
            out[k] = off
        for (k, ts), max_off in zip(timed, got[len(items) :], strict=True):
            if out[k] < max_off:
                continue
            if spec.no_match == "error":
                raise OptionError(
                    f"{spec.option}: no message of queue {k[0]}/{k[1]}/{k[2]} was stored at or after {ts} "
                    f"(its latest offset is {max_off}); set startingOffsetsByTimestampStrategy=latest to "
                    f"start such queues at their latest offset"
                )
            out[k] = max_off
    return out


# ------------------------------------------------------------------------------ partitions


def plan_ranges(
    queues: Mapping[QueueKey, str],
    start: Mapping[QueueKey, int],
    end: Mapping[QueueKey, int],
    *,
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[QueueRange]:
    """Cut ``[start, end)`` of every queue into ranges; empty ranges are dropped.

    ``min_partitions`` splits the bigger ranges until there are at least that many (in
    proportion to their size, like Spark-Kafka's ``KafkaOffsetRangeCalculator``);
    ``max_records`` caps every range's length.
    """
    ranges = [QueueRange(k[0], k[1], k[2], start[k], end[k], queues[k]) for k in sorted(queues) if end[k] > start[k]]
    total = sum(len(r) for r in ranges)
    out = []
    for r in ranges:
        parts = 1
        if min_partitions and min_partitions > len(ranges) and total:
            parts = max(1, math.ceil(len(r) * min_partitions / total))
        if max_records:
            parts = max(parts, math.ceil(len(r) / max_records))
        parts = min(parts, len(r))
        step, extra = divmod(len(r), parts)
        s = r.start
        for i in range(parts):
            e = s + step + (1 if i < extra else 0)
            out.append(QueueRange(r.topic, r.broker_name, r.queue_id, s, e, r.addr))
            s = e
    return out


def rate_limit(begin: dict[QueueKey, int], end: dict[QueueKey, int], max_rows: int) -> dict[QueueKey, int]:
    """Cap the batch at ``max_rows`` offsets, shared in proportion to each queue's backlog
    (Spark-Kafka's ``maxOffsetsPerTrigger``); at least one offset moves when any is waiting."""
    backlog = {k: e - begin.get(k, 0) for k, e in end.items() if e > begin.get(k, 0)}
    total = sum(backlog.values())
    if total <= max_rows:
        return end
    out = dict(end)
    share = {k: (n * max_rows) // total for k, n in backlog.items()}
    left = max_rows - sum(share.values())
    for k in sorted(backlog, key=lambda k: (-(backlog[k] * max_rows % total), k)):
        if left <= 0:
            break
        if share[k] < backlog[k]:
            share[k] += 1
            left -= 1
    for k in backlog:
        out[k] = begin.get(k, 0) + share[k]
    return out


# ------------------------------------------------------------------------------ reading


def _lost(opts: SourceOptions, rng: QueueRange, lo: int, hi: int, why: str) -> None:
    msg = (
        f"messages {lo}..{hi - 1} of {rng.topic}/{rng.broker_name}/{rng.queue_id} are no longer "
        f"available ({why}); they were deleted by retention or the topic was recreated before "
        f"they were read."
    )
    if opts.fail_on_data_loss:
        raise DataLossError(msg + " Set the option failOnDataLoss=false to skip them and continue.")
    log.warning("%s Skipping them (failOnDataLoss=false).", msg)


def read_range(
    client: RocketMQClient, rng: QueueRange, opts: SourceOptions, *, chunk_rows: int = 8192, pipeline: int = 4
) -> Iterator[Chunk]:
    """Pull ``[rng.start, rng.end)`` and yield :class:`Chunk`s of about ``chunk_rows`` records
    (turn them into Arrow with :func:`~rmq.spark._records.chunk_to_arrow`).

    Without a tag filter, ``pipeline`` pulls for consecutive offsets are in flight at once;
    with one, pulls are sequential (the broker decides how far each one scanned).
    """
    chunk = Chunk()
    cursor = rng.start
    end = rng.end
    addr = rng.addr
    batch = opts.pull_batch_size
    depth = 1 if opts.tags is not None else pipeline
    timeout = opts.pull_timeout_ms / 1000.0
    retries = 0
    while cursor < end:
        reqs: list[tuple[int, int, RemotingCommand]] = []  # (offset, count, PULL_MESSAGE)
        off = cursor
        while len(reqs) < depth and off < end:
            n = min(batch, end - off)
            reqs.append(
                (off, n, client.pull_request(opts.consumer_group, rng.topic, rng.queue_id, off, n, opts.sub_expression))
            )
            off += n
        try:
            answers = client.invoke_all(addr, [c for _, _, c in reqs], timeout)
        except RMQError as e:
            if not e.retriable or retries >= 3:
                raise
            retries += 1
            log.warning(
                "pull of %s/%s/%d at %d failed (%s); retrying (%d/3)",
                rng.topic,
                rng.broker_name,
                rng.queue_id,
                cursor,
                e,
                retries,
            )
            time.sleep(0.2 * retries)
            addr = _refresh_addr(client, rng) or addr
            continue
        for (req_off, n, _), raw in zip(reqs, answers, strict=True):
            if req_off != cursor:
                break  # an earlier answer came up short; re-request from the cursor
            resp = client.pull_response(addr, raw, rng.topic, rng.queue_id)
            if resp.status is PullStatus.FOUND:
                body = resp.body
                starts = record_starts(body)
                first, after = _span(body, starts, cursor, end)
                if opts.tags is None and first is not None and first > cursor:
                    _lost(opts, rng, cursor, first, f"the broker returned offset {first} when asked for {cursor}")
                nxt = max(after, min(resp.next_begin_offset, end))
                if nxt <= cursor:
                    raise ClientError(
                        f"pull of {rng.topic}/{rng.broker_name}/{rng.queue_id} at {cursor} found "
                        f"messages but made no progress (nextBeginOffset {resp.next_begin_offset})"
                    )
                if opts.tags is None and after - cursor < n and after < end:
                    # The broker caps a pull (count or bytes); match it so the pipeline lines up.
                    batch = max(1, after - cursor)
                chunk.add(body, starts, cursor, end)
                cursor = nxt
                retries = 0
            elif resp.status is PullStatus.NO_MATCHED_MSG:
                if resp.next_begin_offset > cursor:  # the tag filter skipped these offsets
                    cursor = min(resp.next_begin_offset, end)
                    retries = 0
                else:
                    retries += 1
                    if retries > 5:
                        raise ClientError(
                            f"broker keeps asking to retry the pull of {rng.topic}/"
                            f"{rng.broker_name}/{rng.queue_id} at {cursor}: {resp.remark}"
                        )
                    time.sleep(0.05 * retries)
                    break
            elif resp.status is PullStatus.OFFSET_ILLEGAL:
                if resp.next_begin_offset > cursor:
                    hi = min(resp.next_begin_offset, end)
                    _lost(opts, rng, cursor, hi, f"the queue now starts at {resp.min_offset}")
                    cursor = hi
                else:
                    _lost(opts, rng, cursor, end, f"the queue now ends at {resp.max_offset}")
                    cursor = end
                break
            else:  # PULL_NOT_FOUND inside a planned range: the queue shrank
                _lost(opts, rng, cursor, end, f"the queue now holds {resp.min_offset}..{resp.max_offset - 1}")
                cursor = end
                break
            if chunk.full(chunk_rows):
                yield chunk
                chunk = Chunk()
    if chunk.records:
        yield chunk


def _span(body: bytes, starts: list[int], lo: int, hi: int) -> tuple[int | None, int]:
    """``(first, after)``: the first queue offset in ``[lo, hi)`` among the records (None if
    none) and one past the last such offset (``lo`` if none). Records come in queue order."""
    first = None
    for s in starts:
        q = queue_offset_at(body, s)
        if lo <= q < hi:
            first = q
            break
        if q >= hi:
            break
    if first is None:
        return None, lo
    for s in reversed(starts):
        q = queue_offset_at(body, s)
        if q < hi:
            return first, q + 1
    return first, lo


def _refresh_addr(client: RocketMQClient, rng: QueueRange) -> str | None:
    """The broker's master address now (it may have restarted elsewhere), or None."""
    try:
        return client.topic_route(rng.topic).master_addr(rng.broker_name)
    except RMQError as e:
        log.warning("could not refresh the route of %s: %s", rng.topic, e)
        return None
