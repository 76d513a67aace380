"""The SDK's public surface: documented names only, options dataclasses, life-cycle states."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest
from sdk_support import SilentServer

import rmq
from rmq.client.consumer.consume_service import (
    ConsumeMessageConcurrentlyService,
    ConsumeMessageIteratorService,
    ConsumeMessageOrderlyService,
)

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET

# The documented SDK (the design notes' SDK section and the README), plus the read-only
# state/options properties.
DOCUMENTED = {
    rmq.Producer: {
        "start",
        "close",
        "send",
        "send_with_callback",
        "send_oneway",
        "send_batch",
        "send_in_transaction",
        "fetch_publish_message_queues",
        "client_id",
        "group",
        "state",
        "request",
        "add_send_hook",
        "send_and_wait",
        "flush",
        "cancel_timer",
        "create_topic",  # typed topics (Java MQProducer.createTopic with Java 5's attributes)
    },
    rmq.PushConsumer: {
        "subscribe",
        "unsubscribe",
        "start",
        "close",
        "pause",
        "resume",
        "paused",
        "stats",
        "getone",
        "reconsume_later",
        "client_id",
        "group",
        "options",
        "state",
        "add_consume_hook",
        "paused_queues",
        "assignment",
        "namespace",
    },
    rmq.PullConsumer: {
        "subscribe",
        "unsubscribe",
        "assign",
        "assignment",
        "fetch_message_queues",
        "start",
        "close",
        "poll",
        "seek",
        "seek_to_begin",
        "seek_to_end",
        "offset_for_timestamp",
        "commit",
        "committed",
        "pause",
        "resume",
        "paused",
        "client_id",
        "group",
        "options",
        "state",
        "namespace",
    },
    rmq.SimpleConsumer: {
        "subscribe",
        "unsubscribe",
        "subscription_expressions",
        "start",
        "shutdown",
        "close",
        "receive",
        "ack",
        "change_invisible_duration",
        "await_duration",
        "client_id",
        "group",
        "state",
        "namespace",
    },
}
# What the client instance calls on its members: none of it may show on the public classes.
INTERNAL = {
    "do_rebalance",
    "heartbeat_data",
    "offset_table_json",
    "running_info",
    "reset_offset",
    "consume_message_directly",
    "persist_consumer_offset",
    "subscribed_topics",
    "update_topic_subscribe_info",
    "has_subscribe_info",
    "publish_topics",
    "process_queue_table",
    "offset_store",
    "subscriptions",
    "send_message_back",
    "compute_pull_from_where",
}


@pytest.mark.parametrize("cls", list(DOCUMENTED), ids=lambda c: c.__name__)
def test_public_names_are_the_documented_ones(cls):
    obj = cls("127.0.0.1:1", "G")
    public = {n for n in dir(obj) if not n.startswith("_")}
    assert public == DOCUMENTED[cls]
    assert not public & INTERNAL
    for name in public:  # every public member says what it does
        assert inspect.getdoc(getattr(cls, name)), f"{cls.__name__}.{name} has no docstring"


@pytest.mark.parametrize(
    "module",
    [
        "rmq",
        "rmq.types",
        "rmq.client",
        "rmq.client.consumer",
        "rmq.client.consumer.options",
        "rmq.client.consumer.push",
        "rmq.client.consumer.pull",
        "rmq.client.consumer.consume_service",
        "rmq.client.consumer.simple",
        "rmq.client.consumer.pop",
        "rmq.client.consumer.pop_service",
        "rmq.client.producer",
        "rmq.client.instance",
        "rmq.client.hooks",
        "rmq.client.request_reply",
        "rmq.client.trace",
    ],
)
def test_every_module_declares_what_it_exports(module):
    mod = importlib.import_module(module)
    assert mod.__all__ and len(set(mod.__all__)) == len(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"


# ------------------------------------------------------------------------------------ options


@pytest.mark.parametrize(
    "cls, options_cls", [(rmq.PushConsumer, rmq.PushConsumerOptions), (rmq.PullConsumer, rmq.PullConsumerOptions)]
)
def test_constructor_keywords_are_the_options_fields_with_the_same_defaults(cls, options_cls):
    params = inspect.signature(cls).parameters
    fields = {f.name: f.default for f in dataclasses.fields(options_cls)}
    keywords = {
        n: p.default
        for n, p in params.items()
        if p.kind is p.KEYWORD_ONLY and n not in ("handler", "batch_handler", "orderly", "options")
    }
    assert keywords == fields
    shared = {f.name for f in dataclasses.fields(rmq.ConsumerOptions)}
    assert shared < set(fields) and len(shared) == 16
    for name in fields:  # each setting is documented with its default
        assert f"{name}:" in (cls.__doc__ or ""), f"{cls.__name__} does not document {name}"
        assert f"{name}:" in (options_cls.__doc__ or "") + (rmq.ConsumerOptions.__doc__ or "")


def test_keywords_build_the_options_and_options_can_be_shared():
    c = rmq.PushConsumer("127.0.0.1:1", "G", pull_batch_size=8, consume_concurrency=3)
    assert c.options == rmq.PushConsumerOptions(pull_batch_size=8, consume_concurrency=3)
    assert isinstance(c.options, rmq.ConsumerOptions)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.options.pull_batch_size = 9
    opts = rmq.PullConsumerOptions(auto_commit=False, message_model=rmq.MessageModel.BROADCASTING)
    a, b = rmq.PullConsumer("127.0.0.1:1", "A", options=opts), rmq.PullConsumer("127.0.0.1:1", "B", options=opts)
    assert a.options is b.options is opts
    assert a.options.pull_batch_size == 32 and a.options.poll_timeout == 5.0  # defaults
    with pytest.raises(rmq.ClientError, match="not both .*auto_commit_interval"):
        rmq.PullConsumer("127.0.0.1:1", "A", options=opts, auto_commit_interval=2.0)
    with pytest.raises(rmq.ClientError, match="PushConsumerOptions"):
        rmq.PushConsumer("127.0.0.1:1", "A", options=opts)  # a pull consumer's options


@pytest.mark.parametrize(
    "options_cls, field, bad",
    [
        (rmq.ConsumerOptions, "pull_batch_size", 0),
        (rmq.ConsumerOptions, "pull_batch_size", 1025),
        (rmq.ConsumerOptions, "allocate_strategy", "NOPE"),
        (rmq.ConsumerOptions, "message_model", "CLUSTERING"),
        (rmq.ConsumerOptions, "on_rebalance", 3),
        (rmq.PushConsumerOptions, "consume_concurrency", 1001),
        (rmq.PushConsumerOptions, "iterator_buffer", 0),
        (rmq.PushConsumerOptions, "delay_level_when_next_consume", 19),
        (rmq.PushConsumerOptions, "suspend_current_queue_time", -1.0),
        (rmq.PushConsumerOptions, "max_reconsume_times", -2),
        (rmq.PushConsumerOptions, "pop_invisible_time", 4.0),
        (rmq.PushConsumerOptions, "pop_batch_size", 33),
        (rmq.PushConsumerOptions, "pop_threshold_for_queue", 0),
        (rmq.PushConsumerOptions, "pop_retry_delays", ()),
        (rmq.PushConsumerOptions, "consume_mode", "POP"),
        (rmq.PullConsumerOptions, "auto_commit_interval", 0.5),
        (rmq.PullConsumerOptions, "pull_threshold_for_all", 0),
    ],
)
def test_out_of_range_options_are_refused_naming_the_field(options_cls, field, bad):
    with pytest.raises(rmq.ClientError, match=field.split("_")[0]):
        options_cls(**{field: bad})


def test_the_consume_service_is_chosen_by_the_mode():
    async def handler(msg):
        return None

    def services(**kw):
        return type(rmq.PushConsumer("127.0.0.1:1", "G", **kw)._impl.consume_service)

    assert services(handler=handler) is ConsumeMessageConcurrentlyService
    assert services(handler=handler, orderly=True) is ConsumeMessageOrderlyService
    assert services() is ConsumeMessageIteratorService
    assert services(orderly=True) is ConsumeMessageIteratorService
    with pytest.raises(rmq.ClientError, match="has a handler"):
        aiter(rmq.PushConsumer("127.0.0.1:1", "G", handler=handler))


# ------------------------------------------------------------------------------------ states


async def test_producer_life_cycle(cluster, namesrv_addr, unique):
    S = rmq.ServiceState
    p = rmq.Producer(namesrv_addr, unique("PG"))
    assert p.state is S.CREATE_JUST and p.client_id is None
    with pytest.raises(rmq.IllegalStateError, match="not running"):
        await p.send(rmq.Message("T", b"x"))
    await p.start()
    assert p.state is S.RUNNING and p.client_id
    with pytest.raises(rmq.IllegalStateError, match="only a new producer"):
        await p.start()  # Java: "maybe started once"
    await p.close()
    assert p.state is S.SHUTDOWN_ALREADY
    await p.close()  # idempotent
    for call in (
        lambda: p.send(rmq.Message("T", b"x")),
        lambda: p.send_batch([rmq.Message("T", b"x")]),
        lambda: p.send_oneway(rmq.Message("T", b"x")),
        lambda: p.fetch_publish_message_queues("T"),
    ):
        with pytest.raises(rmq.IllegalStateError):
            await call()
    with pytest.raises(rmq.IllegalStateError):
        await p.start()
    never = rmq.Producer(namesrv_addr, unique("PG"))
    await never.close()
    assert never.state is S.SHUTDOWN_ALREADY


async def test_a_failed_start_is_final(unique):
    S = rmq.ServiceState
    async with SilentServer() as silent:
        addr = f"127.0.0.1:{silent.port}"
        async with rmq.Producer(addr, unique("PG")) as p:
            twin = rmq.Producer(addr, p.group)
            with pytest.raises(rmq.ClientError, match="already registered"):
                await twin.start()
            assert twin.state is S.START_FAILED
            with pytest.raises(rmq.IllegalStateError):
                await twin.start()
            assert p.state is S.RUNNING


async def test_push_consumer_life_cycle(cluster, namesrv_addr, unique):
    S = rmq.ServiceState
    c = rmq.PushConsumer(namesrv_addr, unique("CG"), consume_from_where=FIRST)
    assert c.state is S.CREATE_JUST
    with pytest.raises(rmq.ClientError, match="subscribe"):
        await c.start()
    assert c.state is S.CREATE_JUST  # a refused start changes nothing
    c.subscribe(unique("T"))
    await c.start()
    assert c.state is S.RUNNING and c.client_id
    with pytest.raises(rmq.IllegalStateError):
        await c.start()
    await c.close()
    assert c.state is S.SHUTDOWN_ALREADY
    await c.close()
    with pytest.raises(rmq.IllegalStateError):
        await c.getone()  # closed: no next message
    with pytest.raises(rmq.IllegalStateError):
        await c.start()


async def test_pull_consumer_life_cycle(cluster, namesrv_addr, unique):
    S = rmq.ServiceState
    c = rmq.PullConsumer(namesrv_addr, unique("LG"))
    with pytest.raises(rmq.IllegalStateError):
        await c.poll(timeout=0)
    async with c:
        assert c.state is S.RUNNING
        assert await c.poll(timeout=0) == []
        with pytest.raises(rmq.IllegalStateError):
            await c.start()
    assert c.state is S.SHUTDOWN_ALREADY
    for call in (lambda: c.poll(timeout=0), lambda: c.commit(), lambda: c.fetch_message_queues("T")):
        with pytest.raises(rmq.IllegalStateError):
            await call()
    assert [m async for m in c] == []  # a closed consumer iterates nothing


async def test_a_consumer_whose_start_failed_cannot_start_again(cluster, namesrv_addr, unique):
    S = rmq.ServiceState
    group, topic = unique("CG"), unique("T")
    # same group, same client id (a DEFAULT name would give each its own, as Java's)
    first = rmq.PushConsumer(namesrv_addr, group, instance_name="twin")
    twin = rmq.PushConsumer(namesrv_addr, group, instance_name="twin")
    for c in (first, twin):
        c.subscribe(topic)
    async with first:
        with pytest.raises(rmq.ClientError, match="already registered"):
            await twin.start()
        assert twin.state is S.START_FAILED
        with pytest.raises(rmq.IllegalStateError):
            await twin.start()
        await twin.close()  # nothing to do, no harm to the first
        assert first.state is S.RUNNING and first._impl._instance.consumers[group] is first._impl
