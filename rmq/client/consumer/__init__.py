"""Consumers: :class:`PushConsumer` (handler or ``async for``; PULL or POP), :class:`PullConsumer`
(lite pull) and :class:`SimpleConsumer` (RocketMQ 5, POP)."""

from typing import TYPE_CHECKING

from rmq.common.lazy_exports import lazy_exports

if TYPE_CHECKING:  # loaded on first use by __getattr__ below
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

# Where each public name lives: importing one module of this package (the admin client's
# rmq.client.consumer.allocate) must not import every consumer (docs/design.md "Start-up time").
_WHERE = {
    "AllocateConsistentHash": "allocate",
    "allocate_averagely": "allocate",
    "allocate_averagely_by_circle": "allocate",
    "ConsumerOptions": "options",
    "ConsumerRebalanceListener": "options",
    "PullConsumerOptions": "options",
    "PushConsumerOptions": "options",
    "PullConsumer": "pull",
    "PushConsumer": "push",
    "SimpleConsumer": "simple",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
