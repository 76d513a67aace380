"""The simple consumer (RocketMQ 5's ``SimpleConsumer``): the application receives, acks and
changes the invisible duration of messages itself, over POP.

Example::

    async with rmq.SimpleConsumer("127.0.0.1:9876", "CG", subscriptions={"T": "*"}) as c:
        for msg in await c.receive(max_messages=16, invisible_duration=30):
            ...
            await c.ack(msg)

:class:`SimpleConsumer` holds a :class:`SimpleConsumerImpl`, a :class:`ConsumerBase` without
rebalance or offsets: the client instance keeps its routes fresh and heartbeats it (so tools list
it as a member of the group). Each :meth:`SimpleConsumer.receive` pops one broker: the topics are
taken in turn, and within a topic its brokers (Java 5 ``SimpleConsumerImpl.receive0`` with its
``SubscriptionLoadBalancer``, which hands out each broker's queue id -1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any

from rmq.client.selector import MessageSelector
from rmq.common.tasks import BackgroundTasks
from rmq.errors import (
    ClientError,
    RemotingConnectError,
    RMQError,
    RouteError,
    SystemBusyError,
    TopicNotExistError,
)
from rmq.protocol.requests.pop import PopStatus
from rmq.types import ConsumeFromWhere, MessageExt, ServiceState

from .base import ConsumerBase, ConsumerFacade
from .options import ConsumerOptions, check_range
from .pop import PopCalls, pop_queues
from .process_queue import ProcessQueue

__all__ = ["SimpleConsumer", "SimpleConsumerImpl"]

log = logging.getLogger("rmq.client")

#: The invisible durations a broker accepts (1 s .. 12 h: Java 5 ``PopMessageProcessor`` /
#: ``ChangeInvisibleTimeProcessor`` refuse others with MESSAGE_ILLEGAL).
MIN_INVISIBLE_DURATION = 1.0
MAX_INVISIBLE_DURATION = 12 * 3600.0


class SimpleConsumerImpl(ConsumerBase):
    """A POP consumer without rebalance or offsets (the client instance's side)."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(
        self, namesrv_addr: str | list[str], group: str, options: ConsumerOptions, *, await_duration: float
    ) -> None:
        super().__init__(namesrv_addr, group, options)
        self.await_duration = await_duration
        self.pops = PopCalls(self)
        self._tasks = BackgroundTasks(f"group {group}", log)
        self._topic_index = 0
        self._broker_index: dict[str, int] = {}

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro, f"rmq-{name}-{self.group}")

    def _start_queue(self, pq: ProcessQueue) -> None:  # never called: no rebalance
        raise AssertionError("a simple consumer owns no queues")

    async def do_rebalance(self) -> None:
        """No client rebalance: the broker assigns messages."""

    async def start(self) -> None:
        self.check_startable()
        if not self.subscriptions:
            raise ClientError("subscribe to at least one topic before start()")
        await self._start_base()

    async def close(self) -> None:
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.CREATE_JUST:
                self.state = ServiceState.SHUTDOWN_ALREADY
            return
        if self.closing:
            return
        self.closing = True
        await self._tasks.close()
        await self._stop_base()
        self.state = ServiceState.SHUTDOWN_ALREADY

    async def receive(self, max_messages: int, invisible_duration: float) -> list[MessageExt]:
        """POP the next broker in turn (see the module)."""
        inst = self.check_running()
        topics = sorted(self.subscriptions)
        if not topics:
            raise ClientError("no subscription")
        topic = topics[self._topic_index % len(topics)]
        self._topic_index += 1
        mqs = pop_queues(self, topic)
        if not mqs:
            await inst.update_topic_route(topic)
            mqs = pop_queues(self, topic)
        if not mqs:
            if inst.topic_route_table.get(topic) is None:
                raise TopicNotExistError(17, f"no route of topic {self.ns.unwrap(topic)}")
            raise RouteError(f"no readable queue with a master for topic {self.ns.unwrap(topic)}")
        i = self._broker_index.get(topic, 0)
        self._broker_index[topic] = i + 1
        mq = mqs[i % len(mqs)]
        try:
            result = await self.pops.pop(
                mq,
                self.subscriptions[topic],
                max_nums=max_messages,
                invisible_time=invisible_duration,
                poll_time=self.await_duration,
            )
        except RemotingConnectError:
            # the broker may have moved or gone: the next receive sees the fresh route
            try:
                await inst.update_topic_route(topic)
            except RMQError as e:
                log.debug("group %s: route refresh after a failed receive failed: %r", self.group, e)
            raise
        if result.status is PopStatus.POLLING_FULL:
            raise SystemBusyError(2, f"broker {mq.broker_name} holds too many long-polling requests (POLLING_FULL)")
        return self.app_messages(result.messages)


class SimpleConsumer(ConsumerFacade[SimpleConsumerImpl]):
    """An asyncio simple consumer (RocketMQ 5 ``SimpleConsumer``), over POP: the application
    receives messages, each invisible to the rest of the group for ``invisible_duration``, and
    acks each one; one not acked in time is delivered again (to any member), its
    :attr:`~rmq.MessageExt.delivery_attempt` one higher, up to the group's retry limit, then it
    goes to ``%DLQ%group``. Any number of members may receive from the same queues.

    Args:
        namesrv_addr: name server address(es), ``"host:port"``, ``"a:1;b:2"`` or a list.
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 chars).
        subscriptions: ``{topic: expression}``: a tag expression (``"*"``, ``"TagA || TagB"``)
            or a :class:`rmq.MessageSelector`; default None = subscribe later with
            :meth:`subscribe` (before :meth:`start`).
        await_duration: seconds the broker may hold a :meth:`receive` that finds nothing
            (long polling), [0, 300]; default 20 (the Python 5.x client's). The client waits
            3 s more for the answer.
        consume_from_where: where a group new to a queue starts: ``CONSUME_FROM_LAST_OFFSET``
            (default; Java's ConsumeInitMode.MAX, which still starts at 0 on a queue whose
            first message is in memory) or ``CONSUME_FROM_FIRST_OFFSET`` (MIN).
        instance_name: part of the client id ``ip@pid#instance_name``; default ``"DEFAULT"``.
            Two consumers of one group in one process need different names.
        client_ip: address in the client id; default: the one used to reach the name server.
        namespace: Java's client namespace (topics and the group are ``namespace%name`` on
            the broker); default None.
        access_key / secret_key / security_token: ACL credentials (signed as Java's
            ``AclClientRPCHook``); default None = unsigned.
        tls: ``True`` (system trust store) or an ``ssl.SSLContext``; default None = plain TCP.
        value_deserializer: ``fn(body: bytes) -> value`` behind ``message.value`` (aiokafka's);
            default None = the body.

    Raises:
        rmq.errors.ConfigError: a setting out of range, a bad group, topic or name server address.
    """

    def __init__(
        self,
        namesrv_addr: str | list[str],
        group: str,
        subscriptions: Mapping[str, str | MessageSelector] | None = None,
        *,
        await_duration: float = 20.0,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        instance_name: str = "DEFAULT",
        client_ip: str | None = None,
        namespace: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
        tls: bool | ssl.SSLContext | None = None,
        value_deserializer: Callable[[bytes], Any] | None = None,
    ) -> None:
        check_range("await_duration", await_duration, 0, 300)
        opts = ConsumerOptions(
            consume_from_where=consume_from_where,
            instance_name=instance_name,
            client_ip=client_ip,
            namespace=namespace,
            access_key=access_key,
            secret_key=secret_key,
            security_token=security_token,
            tls=tls,
            value_deserializer=value_deserializer,
        )
        self._impl = SimpleConsumerImpl(namesrv_addr, group, opts, await_duration=float(await_duration))
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)

    @property
    def await_duration(self) -> float:
        """Seconds the broker may hold a :meth:`receive` (long polling)."""
        return self._impl.await_duration

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Receive ``topic`` (without the namespace) filtered by a tag expression or a
        :class:`rmq.MessageSelector`; a later call for the topic replaces the expression."""
        self._impl.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic``."""
        self._impl.unsubscribe(topic)

    def subscription_expressions(self) -> dict[str, str]:
        """``{topic: expression}`` (without the namespace)."""
        return {self._impl.ns.unwrap(t): s.sub_string for t, s in self._impl.subscriptions.items()}

    async def start(self) -> None:
        """Fetch the routes and join the group (heartbeats).

        Raises:
            rmq.errors.ClientError: no subscription yet.
            rmq.errors.IllegalStateError: started before.
        """
        await self._impl.start()

    async def shutdown(self) -> None:
        """Leave the group and close the connections. Messages received and not acked come
        back after their invisible duration. Idempotent."""
        await self._impl.close()

    close = shutdown

    async def __aenter__(self) -> SimpleConsumer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    async def receive(self, max_messages: int = 32, invisible_duration: float = 30.0) -> list[MessageExt]:
        """Up to ``max_messages`` messages, [1, 32]; default 32. Each stays invisible to the group
        for ``invisible_duration`` seconds, [1, 43200]; default 30: ack it (or change the
        duration) before then, or it is delivered again. Waits up to ``await_duration`` when
        there is none; returns ``[]`` then. Every call asks the next broker in turn (topics in
        turn, then each topic's brokers).

        Raises:
            rmq.errors.IllegalStateError: not running.
            rmq.errors.TopicNotExistError: a subscribed topic has no route (retriable).
            rmq.errors.BrokerResponseError: the broker refused (``retriable`` set: SystemBusyError
                when it holds too many long-polling requests).
            rmq.errors.RemotingError: the broker could not be reached (retriable).
        """
        check_range("max_messages", max_messages, 1, 32)
        check_range("invisible_duration", invisible_duration, MIN_INVISIBLE_DURATION, MAX_INVISIBLE_DURATION)
        return await self._impl.receive(max_messages, float(invisible_duration))

    async def ack(self, message: MessageExt) -> None:
        """Acknowledge ``message`` (by its receipt handle): it will not be delivered again.

        Raises:
            rmq.errors.ClientError: the message was not received by POP.
            rmq.errors.BrokerResponseError: the broker refused, e.g. the handle is no longer
                valid (the invisible duration passed and the message was delivered again).
            rmq.errors.RemotingError: the broker could not be reached (retriable).
        """
        impl = self._impl
        impl.check_running()
        await impl.pops.ack(_wire(impl, message))

    async def change_invisible_duration(self, message: MessageExt, invisible_duration: float) -> MessageExt:
        """Keep ``message`` invisible for ``invisible_duration`` seconds from now, [1, 43200].
        Returns the message with its new receipt handle; ack
        that one (the old handle is spent).

        Raises as :meth:`ack`.
        """
        check_range("invisible_duration", invisible_duration, MIN_INVISIBLE_DURATION, MAX_INVISIBLE_DURATION)
        impl = self._impl
        impl.check_running()
        wired = _wire(impl, message)
        new = await impl.pops.change_invisible_time(wired, float(invisible_duration))
        return impl.app_messages([new])[0]


def _wire(impl: SimpleConsumerImpl, message: MessageExt) -> MessageExt:
    """The message as the broker names it (the namespace put back on its topic)."""
    if not impl.ns:
        return message
    return dataclasses.replace(message, topic=impl.ns.wrap(message.topic))
