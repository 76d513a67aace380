"""The asyncio RocketMQ client SDK: :class:`Producer`, :class:`PushConsumer`, :class:`PullConsumer`,
:class:`SimpleConsumer` (RocketMQ 5 POP) and the admin client :class:`Admin`.

Import from :mod:`rmq` directly (``rmq.Producer``); this package holds the implementation.
"""

from typing import TYPE_CHECKING

from rmq.common.lazy_exports import lazy_exports

if TYPE_CHECKING:  # loaded on first use by __getattr__ below
    from .admin import Admin, AdminError
    from .consumer import (
        AllocateConsistentHash,
        ConsumerOptions,
        ConsumerRebalanceListener,
        PullConsumer,
        PullConsumerOptions,
        PushConsumer,
        PushConsumerOptions,
        allocate_averagely,
        allocate_averagely_by_circle,
    )
    from .consumer.simple import SimpleConsumer
    from .hooks import ConsumeMessageContext, ConsumeMessageHook, SendMessageContext, SendMessageHook
    from .producer import MessageQueueSelector, Producer, select_by_hash
    from .request_reply import create_reply_message, reply
    from .selector import MessageSelector

__all__ = [
    "Producer",
    "PushConsumer",
    "PullConsumer",
    "ConsumerOptions",
    "PushConsumerOptions",
    "PullConsumerOptions",
    "MessageQueueSelector",
    "select_by_hash",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "AllocateConsistentHash",
    "Admin",
    "AdminError",
    "MessageSelector",
]
__all__ += [
    "reply",
    "create_reply_message",
    "SendMessageHook",
    "SendMessageContext",
    "ConsumeMessageHook",
    "ConsumeMessageContext",
]
__all__ += ["ConsumerRebalanceListener"]
__all__ += ["SimpleConsumer"]

# Where each public name lives. Importing one client must not import the others (``rmq admin``
# needs rmq.client.admin, not the consumers and the producer): see docs/design.md "Start-up time".
_WHERE = {
    "Admin": "admin",
    "AdminError": "admin",
    "AllocateConsistentHash": "consumer.allocate",
    "allocate_averagely": "consumer.allocate",
    "allocate_averagely_by_circle": "consumer.allocate",
    "ConsumerOptions": "consumer.options",
    "ConsumerRebalanceListener": "consumer.options",
    "PullConsumerOptions": "consumer.options",
    "PushConsumerOptions": "consumer.options",
    "PullConsumer": "consumer.pull",
    "PushConsumer": "consumer.push",
    "SimpleConsumer": "consumer.simple",
    "ConsumeMessageContext": "hooks",
    "ConsumeMessageHook": "hooks",
    "SendMessageContext": "hooks",
    "SendMessageHook": "hooks",
    "MessageQueueSelector": "producer",
    "Producer": "producer",
    "select_by_hash": "producer",
    "create_reply_message": "request_reply",
    "reply": "request_reply",
    "MessageSelector": "selector",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
