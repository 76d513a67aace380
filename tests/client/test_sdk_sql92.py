"""MessageSelector.sql / .tag in the SDK's push and pull consumers against a real broker."""

import pytest
from sdk_support import create_topic, holds, wait_until

import rmq
from rmq._testing import run_standalone
from rmq.protocol.codes import ResponseCode

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
N = 40


@pytest.fixture
async def fcluster(tmp_path):
    """Name server + broker with enablePropertyFilter=true."""
    async with run_standalone(tmp_path / "store", enable_property_filter=True) as (ns, broker):
        yield f"127.0.0.1:{ns.port}", broker


def _props(i: int) -> dict[str, str]:
    """A string, a long, a double and a boolean property; ``opt`` on every fourth message."""
    p = {
        "color": "red" if i % 2 else "blue",
        "n": str(i),
        "price": f"{i * 1.25}",
        "vip": "true" if i % 3 == 0 else "false",
    }
    if i % 4 == 0:
        p["opt"] = "x"
    return p


async def _produce(nsaddr, topic, group, n=N):
    async with rmq.Producer(nsaddr, group) as p:
        for i in range(n):
            await p.send(rmq.Message(topic, b"%d" % i, tags="A" if i % 5 else "B", properties=_props(i)))


EXPRESSIONS = {
    "n >= 30": lambda i: i >= 30,
    "color = 'red' AND vip = TRUE": lambda i: i % 2 == 1 and i % 3 == 0,
    "price BETWEEN 10.0 AND 20.0": lambda i: 10.0 <= i * 1.25 <= 20.0,
    "opt IS NULL AND n < 10": lambda i: i % 4 != 0 and i < 10,
    "color IN ('blue') AND NOT (n > 4)": lambda i: i % 2 == 0 and i <= 4,
}


async def test_push_consumers_filter_by_sql92(fcluster, unique):
    nsaddr, broker = fcluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=2)
    await _produce(nsaddr, topic, unique("PG"))
    got: dict[str, list[int]] = {e: [] for e in EXPRESSIONS}
    consumers = []
    for expr in EXPRESSIONS:

        async def handler(msg, expr=expr):
            got[expr].append(int(msg.body))

        c = rmq.PushConsumer(nsaddr, unique("CG"), handler=handler, consume_from_where=FIRST)
        c.subscribe(topic, rmq.MessageSelector.sql(expr))
        consumers.append(c)
    try:
        for c in consumers:
            await c.start()
        want = {e: sorted(i for i in range(N) if f(i)) for e, f in EXPRESSIONS.items()}
        await wait_until(
            lambda: all(len(got[e]) >= len(want[e]) for e in want),
            timeout=30,
            what="every consumer's matching messages",
        )
        # nothing else arrives: the broker skipped the others
        await holds(lambda: all(len(got[e]) == len(want[e]) for e in want), 1.0, "no extra messages")
        assert {e: sorted(v) for e, v in got.items()} == want
    finally:
        for c in consumers:
            await c.close()


async def test_pull_consumer_subscribes_with_selectors(fcluster, unique):
    nsaddr, broker = fcluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=2)
    await _produce(nsaddr, topic, unique("PG"))
    for selector, want in (
        (rmq.MessageSelector.sql("n < 8 AND color = 'red'"), [1, 3, 5, 7]),
        (rmq.MessageSelector.tag("B"), [0, 5, 10, 15, 20, 25, 30, 35]),
        ("B", [0, 5, 10, 15, 20, 25, 30, 35]),
    ):
        c = rmq.PullConsumer(nsaddr, unique("LG"), consume_from_where=FIRST)
        c.subscribe(topic, selector)
        out: list[int] = []
        async with c:

            async def polled_all(c: rmq.PullConsumer = c, out: list[int] = out, n: int = len(want)) -> bool:
                out.extend(int(m.body) for m in await c.poll(timeout=0.5))
                return len(out) >= n

            await wait_until(polled_all, 30, interval=0, what=f"{len(want)} messages for {selector}")
            out.extend(int(m.body) for m in await c.poll(timeout=0.5))  # and nothing more
        assert sorted(out) == want, selector


async def test_heartbeat_and_pull_carry_expression_type(fcluster, unique):
    nsaddr, broker = fcluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    c = rmq.PushConsumer(nsaddr, cg, handler=lambda m: None, consume_from_where=FIRST)
    c.subscribe(topic, rmq.MessageSelector.sql("n > 1"))
    async with c:
        info = broker.consumer_manager.get_consumer_group_info(cg)
        sub = info.find_subscription_data(topic)
        assert (sub.expression_type, sub.sub_string) == ("SQL92", "n > 1")
        # the retry topic stays a TAG "*" subscription (Java subscribes %RETRY% that way)
        retry = info.find_subscription_data(f"%RETRY%{cg}")
        assert (retry.expression_type, retry.sub_string) == ("TAG", "*")


async def test_bad_expression_fails_start(fcluster, unique):
    nsaddr, broker = fcluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=1)
    c = rmq.PushConsumer(nsaddr, unique("CG"), handler=lambda m: None)
    c.subscribe(topic, rmq.MessageSelector.sql("n > 'text'"))
    with pytest.raises(rmq.SubscriptionParseFailedError, match="Invalid MessageSelector") as ei:
        await c.start()
    assert ei.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert c._impl.state is rmq.ServiceState.START_FAILED
    p = rmq.PullConsumer(nsaddr, unique("LG"))
    p.subscribe(topic, rmq.MessageSelector.sql("n >"))
    with pytest.raises(rmq.SubscriptionParseFailedError):
        await p.start()


async def test_filtering_off_fails_start(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=1)
    c = rmq.PushConsumer(namesrv_addr, unique("CG"), handler=lambda m: None)
    c.subscribe(topic, rmq.MessageSelector.sql("n > 1"))
    with pytest.raises(
        rmq.BrokerResponseError, match="The broker does not support consumer to filter message by SQL92"
    ) as ei:
        await c.start()
    assert ei.value.code == ResponseCode.SYSTEM_ERROR
    # a TAG selector needs no check and works as before
    c2 = rmq.PushConsumer(namesrv_addr, unique("CG"), handler=lambda m: None)
    c2.subscribe(topic, rmq.MessageSelector.tag("A || B"))
    async with c2:
        assert c2._impl.subscriptions[topic].tags_set == {"A", "B"}


async def test_retry_of_a_filtered_message(tmp_path, unique):
    """A matching message whose handler fails comes back through %RETRY%<group> (a TAG "*"
    subscription, so the retry copy is not filtered again); non-matching ones never come."""
    async with run_standalone(
        tmp_path / "store", enable_property_filter=True, message_delay_level=" ".join(["1s"] * 18)
    ) as (ns, broker):
        await _retry_case(f"127.0.0.1:{ns.port}", broker, unique)


async def _retry_case(nsaddr, broker, unique):
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    seen: list[tuple[int, int]] = []

    async def handler(msg):
        seen.append((int(msg.body), msg.reconsume_times))
        if msg.reconsume_times == 0 and int(msg.body) == 2:
            return rmq.ConsumeResult.RECONSUME_LATER
        return None

    c = rmq.PushConsumer(nsaddr, cg, handler=handler, consume_from_where=FIRST)
    c.subscribe(topic, rmq.MessageSelector.sql("n BETWEEN 1 AND 3"))
    async with c:
        await _produce(nsaddr, topic, unique("PG"), n=6)
        await wait_until(lambda: (2, 1) in seen, timeout=30, what="the retried message")
    assert sorted(seen) == [(1, 0), (2, 0), (2, 1), (3, 0)]


def test_selector_values():
    s = rmq.MessageSelector.sql("a > 5 AND b = 'x'")
    assert (s.expression_type, s.expression) == ("SQL92", "a > 5 AND b = 'x'")
    assert rmq.MessageSelector.by_sql("a > 1") == rmq.MessageSelector.sql("a > 1")
    assert rmq.MessageSelector.tag(None).expression == "*"
    assert rmq.MessageSelector.by_tag(" A || B ").expression == "A || B"
    with pytest.raises(ValueError):
        rmq.MessageSelector.sql("  ")


async def test_bad_expression_subscribed_while_running_is_dropped(fcluster, unique, caplog):
    nsaddr, broker = fcluster
    t1, t2, cg = unique("T"), unique("T"), unique("CG")
    await create_topic(broker.broker_addr, t1, queues=1)
    await create_topic(broker.broker_addr, t2, queues=1)
    c = rmq.PushConsumer(nsaddr, cg, handler=lambda m: None)
    c.subscribe(t1, "*")
    async with c:
        c.subscribe(t2, rmq.MessageSelector.sql("n >"))
        await wait_until(lambda: t2 not in c._impl.subscriptions, what="the refused subscription dropped")
        assert "the broker refuses a subscription, dropped" in caplog.text
        assert t1 in c._impl.subscriptions
        c.subscribe(t2, rmq.MessageSelector.sql("n > 1"))
        await wait_until(
            lambda: broker.consumer_manager.get_consumer_group_info(cg).find_subscription_data(t2) is not None,
            what="the good subscription reaching the broker",
        )
        assert t2 in c._impl.subscriptions
