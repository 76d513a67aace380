"""The asyncio RocketMQ client SDK: :class:`Producer`, :class:`PushConsumer`, :class:`PullConsumer`,
:class:`SimpleConsumer` (RocketMQ 5 POP) and the admin client :class:`Admin`.

Import from :mod:`rmq` directly (``rmq.Producer``); this package holds the implementation.
"""

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
