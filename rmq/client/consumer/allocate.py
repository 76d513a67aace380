"""Queue allocation strategies for clustering consumers (Java ``AllocateMessageQueueStrategy``).

The algorithms live in :mod:`rmq.common.allocate` (the broker's QUERY_ASSIGNMENT uses them
too); this module types them for :class:`~rmq.types.MessageQueue` and re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rmq.common import allocate as _common
from rmq.common.allocate import AllocateConsistentHash, allocate_averagely, allocate_averagely_by_circle
from rmq.types import MessageQueue

__all__ = [
    "AllocateStrategy",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "AllocateConsistentHash",
    "STRATEGIES",
]

#: ``strategy(group, current_cid, all_queues_sorted, all_cids_sorted) -> my queues``
AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]

#: The strategies by Java name (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH).
STRATEGIES: dict[str, AllocateStrategy] = {name: s for name, s in _common.STRATEGIES.items()}
