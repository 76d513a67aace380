"""Queue allocation strategies; they live in :mod:`rmq.common.allocate` (the broker's
QUERY_ASSIGNMENT uses them too), re-exported here for the consumers."""

from rmq.common.allocate import (
    STRATEGIES,
    AllocateConsistentHash,
    AllocateStrategy,
    allocate_averagely,
    allocate_averagely_by_circle,
)

__all__ = [
    "AllocateStrategy",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "AllocateConsistentHash",
    "STRATEGIES",
]
