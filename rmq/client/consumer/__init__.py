"""Consumers: :class:`PushConsumer` (handler or ``async for``; PULL or POP), :class:`PullConsumer`
(lite pull) and :class:`SimpleConsumer` (RocketMQ 5, POP)."""

from .allocate import AllocateConsistentHash, allocate_averagely, allocate_averagely_by_circle
from .options import ConsumerOptions, ConsumerRebalanceListener, PullConsumerOptions, PushConsumerOptions
from .pull import PullConsumer
from .push import PushConsumer
from .simple import SimpleConsumer

__all__ = [
    "PushConsumer",
    "PullConsumer",
    "ConsumerOptions",
    "PushConsumerOptions",
    "PullConsumerOptions",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "AllocateConsistentHash",
]
__all__ += ["ConsumerRebalanceListener"]
__all__ += ["SimpleConsumer"]
