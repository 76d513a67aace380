"""Consumers: :class:`PushConsumer` (handler or ``async for``) and :class:`PullConsumer` (lite pull)."""
from .allocate import (AllocateConsistentHash, allocate_averagely,  # noqa: F401
                       allocate_averagely_by_circle)
from .pull import PullConsumer
from .push import PushConsumer

__all__ = ["PushConsumer", "PullConsumer", "allocate_averagely", "allocate_averagely_by_circle",
           "AllocateConsistentHash"]
