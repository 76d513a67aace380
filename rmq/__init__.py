"""rmq: a RocketMQ-compatible broker, name server and asyncio client SDK.

The SDK::

    import rmq

    async with rmq.Producer(namesrv_addr="127.0.0.1:9876", group="PG") as p:
        r = await p.send(rmq.Message(topic="T", body=b"x", tags="TagA"))

    c = rmq.PushConsumer(namesrv_addr="127.0.0.1:9876", group="CG")
    c.subscribe("T", "TagA || TagB")
    async with c:
        async for msg in c:
            ...
"""

from typing import TYPE_CHECKING, Any

from rmq import errors
from rmq._version import __version__
from rmq.common.topic_attributes import TopicMessageType
from rmq.errors import *  # noqa: F403  (the exception tree is public API)
from rmq.types import (
    ConsumeFromWhere,
    ConsumeMode,
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    ServiceState,
    TransactionSendResult,
)

if TYPE_CHECKING:  # loaded lazily by __getattr__ below
    from rmq.client import (
        Admin,
        AdminError,
        ConsumeMessageContext,
        ConsumeMessageHook,
        ConsumerOptions,
        ConsumerRebalanceListener,
        MessageSelector,
        Producer,
        PullConsumer,
        PullConsumerOptions,
        PushConsumer,
        PushConsumerOptions,
        SendMessageContext,
        SendMessageHook,
        SimpleConsumer,
        create_reply_message,
        reply,
    )

__all__ = [
    "__version__",
    # Clients API
    "Producer",
    "PushConsumer",
    "PullConsumer",
    "ConsumerOptions",
    "PushConsumerOptions",
    "PullConsumerOptions",
    "Admin",
    "AdminError",
    "MessageSelector",
    # Value types
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "PullResult",
    "PullStatus",
    "ConsumeResult",
    "MessageModel",
    "ConsumeFromWhere",
    "LocalTransactionState",
    "TransactionSendResult",
    "ServiceState",
    # Request-reply and hooks
    "reply",
    "create_reply_message",
    "SendMessageHook",
    "SendMessageContext",
    "ConsumeMessageHook",
    "ConsumeMessageContext",
]
__all__ += errors.__all__
__all__ += ["ConsumerRebalanceListener"]
# typed topics (Java 5 TopicMessageType: a topic's message.type, Admin.topic_message_type)
__all__ += ["TopicMessageType"]
# RocketMQ 5 consumption (POP): the simple consumer and the push consumer's consume mode
__all__ += ["SimpleConsumer", "ConsumeMode"]

# Body codecs of Producer(compress_type=...) (RocketMQ 5's CompressionType)
from rmq.common.compression import CompressionType  # noqa: E402

__all__ += ["CompressionType"]


_LAZY = (
    "Producer",
    "PushConsumer",
    "PullConsumer",
    "ConsumerOptions",
    "PushConsumerOptions",
    "PullConsumerOptions",
    "Admin",
    "AdminError",
    "ConsumerRebalanceListener",
    "MessageSelector",
    # request-reply and the send/consume hooks
    "reply",
    "create_reply_message",
    "SendMessageHook",
    "SendMessageContext",
    "ConsumeMessageHook",
    "ConsumeMessageContext",
    "SimpleConsumer",
)


def __getattr__(name: str) -> Any:
    # The clients import the remoting layer (and with it uvloop); load them on first use so
    # that `import rmq` stays cheap for the broker, the CLI and the store.
    if name in _LAZY:
        from rmq import client

        return getattr(client, name)
    raise AttributeError(f"module 'rmq' has no attribute {name!r}")
