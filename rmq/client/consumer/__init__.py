"""Consumers: :class:`PushConsumer` (handler or ``async for``; PULL or POP), :class:`PullConsumer`
(lite pull) and :class:`SimpleConsumer` (RocketMQ 5, POP)."""

import sys
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # __import__, not importlib.import_module: `python -X importtime` reports only the former
    module = f"{__name__}.{where}"
    __import__(module)
    value = getattr(sys.modules[module], name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
