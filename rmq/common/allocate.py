"""Queue allocation strategies for clustering consumers (Java ``AllocateMessageQueueStrategy``).

Every member computes its own share from the same inputs: all queues of a topic and all member
client ids, both sorted. The strategies only have to agree with each other, not to be fair to
the last queue; they are the Java algorithms so that mixed Java/Python groups agree too.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from typing import Protocol, TypeVar

__all__ = [
    "QueueAllocator",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "AllocateConsistentHash",
    "STRATEGIES",
]


class _Queue(Protocol):
    # what the strategies read of a queue (rmq.types.MessageQueue, a layer above this one)
    @property
    def topic(self) -> str: ...
    @property
    def broker_name(self) -> str: ...
    @property
    def queue_id(self) -> int: ...


Q = TypeVar("Q", bound=_Queue)


class QueueAllocator(Protocol):
    """``strategy(group, current_cid, all_queues_sorted, all_cids_sorted) -> my queues``."""

    def __call__(self, group: str, current: str, mqs: Sequence[Q], cids: Sequence[str]) -> list[Q]: ...


def _check(current: str, mqs: Sequence[_Queue], cids: Sequence[str]) -> bool:
    return bool(current) and bool(mqs) and current in cids


def allocate_averagely(group: str, current: str, mqs: Sequence[Q], cids: Sequence[str]) -> list[Q]:
    """Contiguous blocks: with 8 queues and 3 members → 3, 3, 2 (Java ``AllocateMessageQueueAveragely``)."""
    if not _check(current, mqs, cids):
        return []
    index = cids.index(current)
    n, m = len(mqs), len(cids)
    mod = n % m
    if n <= m:
        average = 1
    elif mod > 0 and index < mod:
        average = n // m + 1
    else:
        average = n // m
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n - start)
    return [mqs[(start + i) % n] for i in range(max(count, 0))]


def allocate_averagely_by_circle(group: str, current: str, mqs: Sequence[Q], cids: Sequence[str]) -> list[Q]:
    """Round robin: member i gets queues i, i+m, i+2m … (Java ``AllocateMessageQueueAveragelyByCircle``)."""
    if not _check(current, mqs, cids):
        return []
    index = cids.index(current)
    return [mqs[i] for i in range(index, len(mqs), len(cids))]


def _md5_hash(key: str) -> int:
    # Java ConsistentHashRouter.MD5Hash: the first four digest bytes, little-endian, as a long.
    d = hashlib.md5(key.encode()).digest()
    return (d[3] << 24) | (d[2] << 16) | (d[1] << 8) | d[0]


class AllocateConsistentHash:
    """Consistent hashing with ``virtual_nodes`` per member (Java ``AllocateMessageQueueConsistentHash``):
    a member joining or leaving moves only the queues next to it on the ring."""

    def __init__(self, virtual_nodes: int = 10) -> None:
        if virtual_nodes < 0:
            raise ValueError("virtual_nodes must be >= 0")
        self.virtual_nodes = virtual_nodes

    def __call__(self, group: str, current: str, mqs: Sequence[Q], cids: Sequence[str]) -> list[Q]:
        if not _check(current, mqs, cids):
            return []
        ring: list[tuple[int, str]] = sorted(
            (_md5_hash(f"{cid}-{i}"), cid) for cid in cids for i in range(self.virtual_nodes)
        )
        keys = [h for h, _ in ring]
        out = []
        for mq in mqs:
            h = _md5_hash(f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]")
            i = bisect.bisect_left(keys, h)
            owner = ring[i % len(ring)][1]
            if owner == current:
                out.append(mq)
        return out


STRATEGIES: dict[str, QueueAllocator] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": AllocateConsistentHash(),
}
