"""Send and consume hooks (Java ``SendMessageHook`` / ``SendMessageContext`` and
``ConsumeMessageHook`` / ``ConsumeMessageContext``): the SDK-level counterpart of an RPC hook.

A send hook sees every send attempt of a producer (``producer.add_send_hook(hook)``)::

    class Timing(rmq.SendMessageHook):
        def send_message_before(self, ctx: rmq.SendMessageContext) -> None:
            ctx.props["t0"] = time.monotonic()

        def send_message_after(self, ctx: rmq.SendMessageContext) -> None:
            print(ctx.topic, ctx.send_result or ctx.exception, time.monotonic() - ctx.props["t0"])

A consume hook sees every handler call of a push consumer (``consumer.add_consume_hook(hook)``):
``consume_message_before(ctx)`` before the handler runs (or before ``async for`` hands the
message over) and ``consume_message_after(ctx)`` after it, with ``ctx.success``.

Hooks run on the event loop, synchronously, in the order they were added: keep them short
(hand heavier work to a task or a queue, as the trace hook does). An exception in a hook is
logged (rate-limited, per hook) and never breaks the send or the consumption; the other hooks
still run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from rmq.common.log import RateLimitedLog, clip
from rmq.common.message import MessageConst, string_to_properties
from rmq.types import MessageExt, MessageQueue, SendResult

__all__ = [
    "SendMessageContext",
    "SendMessageHook",
    "ConsumeMessageContext",
    "ConsumeMessageHook",
    "run_send_hooks",
    "run_consume_before",
    "run_consume_after",
    "close_hooks",
    "MessageType",
]

log = logging.getLogger("rmq.client")
_rlog = RateLimitedLog(log)
_R = TypeVar("_R")


class MessageType:
    """Java ``MessageType`` ordinals, as the trace data writes them."""

    NORMAL = 0
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3


@dataclass(slots=True)
class SendMessageContext:
    """One send attempt (Java ``SendMessageContext``).

    Attributes:
        producer_group: the producer's group.
        topic: the message's topic.
        properties: the message's properties as sent (system ones included: ``UNIQ_KEY``,
            ``TAGS``, ``KEYS`` …).
        body_length: bytes of the body as sent (after compression, if any).
        mq: the queue this attempt goes to.
        broker_addr: the broker's address.
        communication_mode: ``"SYNC"`` or ``"ONEWAY"`` (no ``send_result`` then).
        msg_type: a :class:`MessageType` ordinal (normal, transactional half, delayed).
        send_result: set before ``send_message_after`` when the broker accepted the message.
        exception: set before ``send_message_after`` when the attempt failed.
        props: free for the hooks (Java's ``mqTraceContext``/``props``); starts empty.
    """

    producer_group: str
    topic: str
    properties: Mapping[str, str]
    body_length: int
    mq: MessageQueue
    broker_addr: str
    communication_mode: str = "SYNC"
    msg_type: int = MessageType.NORMAL
    send_result: SendResult | None = None
    exception: BaseException | None = None
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def msg_id(self) -> str:
        """The client message id (``UNIQ_KEY``; comma-joined for a batch)."""
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> str | None:
        """The ``KEYS`` property (space-separated), or None."""
        return self.properties.get(MessageConst.KEYS)

    @classmethod
    def of(
        cls,
        group: str,
        topic: str,
        properties: str,
        body_length: int,
        sys_flag: int,
        mq: MessageQueue,
        broker_addr: str,
        mode: str = "SYNC",
    ) -> SendMessageContext:
        props = string_to_properties(properties)
        if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
            msg_type = MessageType.TRANS_HALF
        elif props.get(MessageConst.DELAY_TIME_LEVEL) or MessageConst.TIMER_DELIVER_MS in props:
            msg_type = MessageType.DELAY  # a delay level or a timer message
        else:
            msg_type = MessageType.NORMAL
        return cls(group, topic, props, body_length, mq, broker_addr, mode, msg_type)


@runtime_checkable
class SendMessageHook(Protocol):
    """What ``Producer.add_send_hook`` takes (Java ``SendMessageHook``). ``hook_name`` is
    optional (it names the hook in log lines); a hook may also have ``async def close()``,
    awaited when the producer closes."""

    def send_message_before(self, ctx: SendMessageContext) -> None: ...
    def send_message_after(self, ctx: SendMessageContext) -> None: ...


@dataclass(slots=True)
class ConsumeMessageContext:
    """One handler call (Java ``ConsumeMessageContext``).

    Attributes:
        consumer_group: the consumer's group.
        msgs: the messages handed to the handler (one, or a batch of one queue).
        mq: their queue.
        success: set before ``consume_message_after``: the handler consumed them.
        status: ``"CONSUME_SUCCESS"`` or ``"RECONSUME_LATER"`` (Java's ConsumeConcurrentlyStatus
            names), set with ``success``.
        props: free for the hooks; starts empty.
    """

    consumer_group: str
    msgs: Sequence[MessageExt]
    mq: MessageQueue
    success: bool = False
    status: str = ""
    props: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ConsumeMessageHook(Protocol):
    """What ``PushConsumer.add_consume_hook`` takes (Java ``ConsumeMessageHook``); may also
    have ``async def close()``, awaited when the consumer closes."""

    def consume_message_before(self, ctx: ConsumeMessageContext) -> None: ...
    def consume_message_after(self, ctx: ConsumeMessageContext) -> None: ...


def _name(hook: object) -> str:
    name = getattr(hook, "hook_name", None)
    if callable(name):
        try:
            return str(name())
        except Exception:  # noqa: BLE001 - only a label
            pass
    return type(hook).__name__


def _call(hook: object, method: str, ctx: object) -> None:
    try:
        getattr(hook, method)(ctx)
    except Exception as e:  # noqa: BLE001 - a hook never breaks a send or a consumption
        name = _name(hook)
        _rlog.warning(f"hook:{name}:{method}", "hook %s.%s raised %s", name, method, clip(repr(e)))


async def run_send_hooks(hooks: Sequence[SendMessageHook], ctx: SendMessageContext, send: Awaitable[_R]) -> _R:
    """``send_message_before`` of each hook, the send, then ``send_message_after`` of each with
    the result (a oneway send has none) or the exception (which is then raised as it was)."""
    for h in hooks:
        _call(h, "send_message_before", ctx)
    try:
        result = await send
    except BaseException as e:
        ctx.exception = e
        for h in hooks:
            _call(h, "send_message_after", ctx)
        raise
    if isinstance(result, SendResult):
        ctx.send_result = result
    for h in hooks:
        _call(h, "send_message_after", ctx)
    return result


def run_consume_before(
    hooks: Sequence[ConsumeMessageHook], group: str, msgs: Sequence[MessageExt]
) -> ConsumeMessageContext:
    ctx = ConsumeMessageContext(group, list(msgs), msgs[0].queue)
    for h in hooks:
        _call(h, "consume_message_before", ctx)
    return ctx


def run_consume_after(hooks: Sequence[ConsumeMessageHook], ctx: ConsumeMessageContext, success: bool) -> None:
    ctx.success = success
    ctx.status = "CONSUME_SUCCESS" if success else "RECONSUME_LATER"
    for h in hooks:
        _call(h, "consume_message_after", ctx)


async def close_hooks(hooks: Sequence[object]) -> None:
    """Await each hook's ``close()`` if it has one (the trace hook flushes its queue)."""
    for h in hooks:
        close = getattr(h, "close", None)
        if close is None:
            continue
        try:
            await close()
        except Exception as e:  # noqa: BLE001 - closing the client goes on
            _rlog.warning(f"hook:{_name(h)}:close", "hook %s.close raised %s", _name(h), clip(repr(e)))
