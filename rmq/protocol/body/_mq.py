"""The one encoder and decoder of ``MessageQueue`` map keys, as fastjson writes a Java
``Map<MessageQueue, V>`` (``TopicStatsTable``, ``ConsumeStats``, ``ResetOffsetBody``,
``GetConsumerStatusBody``, ``ConsumerRunningInfo.mqTable``): the key is the queue's JSON object,
fields in alphabetical order, compact (``{"brokerName":"b","queueId":0,"topic":"T"}:…``).
:func:`rmq.common.fastjson.loads` reads such a key back as that text; :func:`mq_of` turns it
into a MessageQueue."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from rmq.common import fastjson
from rmq.types import MessageQueue

__all__ = ["dumps_mq_map", "mq_key", "mq_of", "mq_table"]

V = TypeVar("V")


def mq_key(mq: MessageQueue) -> str:
    """A ``MessageQueue`` as fastjson writes it when it keys a map (fields sorted, compact)."""
    return fastjson.canonical(mq.to_json())


def mq_of(key: Any) -> MessageQueue:
    """The MessageQueue a map key names: the object text :func:`rmq.common.fastjson.loads`
    gives an object key, a ``{…}`` mapping, or our SDK's older ``"topic|broker|queueId"``
    string. Raises ``ValueError`` otherwise."""
    try:
        if isinstance(key, str) and key.startswith("{"):
            key = fastjson.object_key(key)
        if isinstance(key, Mapping):
            return MessageQueue.from_json(key)
        if isinstance(key, str) and key.count("|") == 2:
            topic, broker, qid = key.split("|")
            return MessageQueue(topic, broker, int(qid))
    except (KeyError, TypeError, ValueError):
        pass
    raise ValueError(f"not a message queue: {str(key)[:200]!r}")


def dumps_mq_map(table: Mapping[MessageQueue, V], value: Callable[[V], Any] = lambda v: v, *, sort: bool = True) -> str:
    """A Java ``Map<MessageQueue, V>`` as fastjson writes it: object keys, each value as compact
    JSON of ``value(v)`` (default: ``v`` itself); queues in order unless ``sort=False`` (then in
    the table's order)."""
    items: Iterable[tuple[MessageQueue, V]] = sorted(table.items()) if sort else table.items()
    return "{" + ",".join(mq_key(mq) + ":" + json.dumps(value(v), separators=(",", ":")) for mq, v in items) + "}"


def mq_table(raw: Any) -> dict[MessageQueue, Any]:
    """A parsed ``Map<MessageQueue, V>`` (a mapping, or a list of ``[mq, value]`` pairs) keyed by
    MessageQueue; ``{}`` for anything else; ``ValueError`` for a key that is not a queue."""
    if isinstance(raw, list):
        try:
            return {mq_of(k): v for k, v in raw}
        except (TypeError, ValueError) as e:
            raise ValueError(f"not a list of [queue, value] pairs: {e}") from None
    if not isinstance(raw, Mapping):
        return {}
    return {mq_of(k): v for k, v in raw.items()}
