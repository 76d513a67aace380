"""The SDK's shape: send() futures, rebalance listeners with revoked/assigned sets, per-queue
pause/resume, client namespaces, construction-time argument errors; against a real broker."""

from __future__ import annotations

import asyncio
import pickle

import pytest
from sdk_support import create_topic, holds, wait_until

import rmq
from rmq.client.arguments import Namespace

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


# ---------------------------------------------------------------------------- send() futures


async def test_send_returns_a_future_and_await_send_still_works(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=2)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        futs = [p.send(rmq.Message(topic, f"m{i}".encode())) for i in range(10)]
        assert all(isinstance(f, asyncio.Future) for f in futs)
        results = await asyncio.gather(*futs)
        assert all(r.status is rmq.SendStatus.SEND_OK for r in results)
        assert len({r.msg_id for r in results}) == 10
        # the old form: awaiting the call waits for the broker's answer
        r = await p.send(rmq.Message(topic, b"x"))
        assert isinstance(r, rmq.SendResult) and r.topic == topic
        r2 = await p.send_and_wait(rmq.Message(topic, b"y"))
        assert r2.queue_offset >= 0 and r2.msg_id != r.msg_id
        # a future kept and awaited later
        later = p.send(rmq.Message(topic, b"z"))
        await wait_until(later.done, timeout=10, what="the kept future resolved")
        assert (await later).status is rmq.SendStatus.SEND_OK
        # invalid input fails at the call, not in the future
        with pytest.raises(rmq.ClientError, match="empty"):
            p.send(rmq.Message(topic, b""))
        # close waits for futures still pending
        pending = [p.send(rmq.Message(topic, b"w")) for _ in range(5)]
    assert all(f.done() and f.result().status is rmq.SendStatus.SEND_OK for f in pending)
    with pytest.raises(rmq.IllegalStateError):
        p.send(rmq.Message(topic, b"after close"))


async def test_pending_sends_are_bounded(cluster, namesrv_addr, unique):
    # the futures of send() not resolved yet are bounded: past max_pending_sends the call
    # raises a retriable error, and sending works again once they resolve
    _, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=2)
    async with rmq.Producer(namesrv_addr, unique("PG"), max_pending_sends=3) as p:
        futs = [p.send(rmq.Message(topic, f"m{i}".encode())) for i in range(3)]  # none has run yet
        with pytest.raises(rmq.RemotingTooMuchRequestError, match="max_pending_sends=3") as ei:
            p.send(rmq.Message(topic, b"one too many"))
        assert ei.value.retriable
        with pytest.raises(rmq.RemotingTooMuchRequestError):
            p.send_with_callback(rmq.Message(topic, b"one too many"), lambda r, e: None)
        assert all(r.status is rmq.SendStatus.SEND_OK for r in await asyncio.gather(*futs))
        assert (await p.send(rmq.Message(topic, b"again"))).status is rmq.SendStatus.SEND_OK


async def test_send_future_carries_the_broker_error(tmp_path, unique, caplog):
    # a broker that refuses auto-creation: the future fails with TopicNotExistError after the
    # retries, which are logged once for the send, not once per attempt
    from rmq._testing import run_standalone

    async with run_standalone(tmp_path / "s", auto_create_topic_enable=False) as (ns, _):
        async with rmq.Producer(f"127.0.0.1:{ns.port}", unique("PG"), retry_times=2, send_timeout=5) as p:
            fut = p.send(rmq.Message(unique("NOPE"), b"x"))
            with pytest.raises(rmq.TopicNotExistError) as ei:
                await fut
            assert ei.value.retriable


# ---------------------------------------------------------------------------- construction errors


@pytest.mark.parametrize(
    "make, argument",
    [
        (lambda: rmq.Producer("127.0.0.1:9876", "PG", send_timeout=0), "send_timeout"),
        (lambda: rmq.Producer("127.0.0.1:9876", "PG", retry_times=-1), "retry_times"),
        (lambda: rmq.Producer("127.0.0.1:9876", "PG", compress_level=10), "compress_level"),
        (lambda: rmq.Producer("127.0.0.1:9876", "bad group!"), "group"),
        (lambda: rmq.Producer("127.0.0.1:9876", "DEFAULT_PRODUCER"), "group"),
        (lambda: rmq.Producer("nohost", "PG"), "namesrv_addr"),
        (lambda: rmq.Producer("127.0.0.1:70000", "PG"), "namesrv_addr"),
        (lambda: rmq.Producer("", "PG"), "namesrv_addr"),
        (lambda: rmq.Producer("127.0.0.1:9876", "PG", namespace="a%b"), "namespace"),
        (lambda: rmq.PushConsumer("127.0.0.1:9876", "CG", consume_timeout=0), "consume_timeout"),
        (lambda: rmq.PushConsumer("127.0.0.1:9876", "CG", pull_batch_size=2000), "pull_batch_size"),
        (lambda: rmq.PushConsumer("127.0.0.1:9876", "CG", on_error=5), "on_error"),
        (lambda: rmq.PushConsumer("127.0.0.1:9876", "CG", error_retries=0), "error_retries"),
        (lambda: rmq.PushConsumer("a:1;b", "CG"), "namesrv_addr"),
        (lambda: rmq.PullConsumer("127.0.0.1:9876", "CG", poll_timeout=-1), "poll_timeout"),
        (
            lambda: rmq.PullConsumer(
                "127.0.0.1:9876",
                "",
            ),
            "group",
        ),
        (lambda: rmq.PullConsumer("127.0.0.1:9876", "CG", allocate_strategy="NOPE"), "allocate_strategy"),
        (lambda: rmq.Producer("127.0.0.1:9876", "PG", trace_topic="bad topic!"), "trace_topic"),
        (lambda: rmq.Producer("127.0.0.1:9876", "PG", max_pending_sends=0), "max_pending_sends"),
        (lambda: rmq.MessageSelector.sql("  "), "expression"),
    ],
)
def test_bad_arguments_fail_at_construction_naming_the_argument(make, argument):
    with pytest.raises(ValueError) as ei:
        make()
    e = ei.value
    assert isinstance(e, rmq.ConfigError) and isinstance(e, rmq.ClientError) and not e.retriable
    assert e.argument == argument and str(e).startswith(f"{argument}: ")
    assert "allowed" in str(e) or argument in ("on_error",)
    assert pickle.loads(pickle.dumps(e)).argument == argument


# ---------------------------------------------------------------------------- namespaces


def test_namespace_wraps_as_java_namespace_util():
    ns = Namespace("NS")
    assert ns.wrap("T") == "NS%T" and ns.wrap("NS%T") == "NS%T"
    assert ns.wrap("%RETRY%G") == "%RETRY%NS%G" and ns.wrap("%DLQ%G") == "%DLQ%NS%G"
    assert ns.wrap("TBW102") == "TBW102" and ns.wrap("rmq_sys_x") == "rmq_sys_x"
    assert ns.wrap("CID_RMQ_SYS_X") == "CID_RMQ_SYS_X"
    assert ns.unwrap("NS%T") == "T" and ns.unwrap("%RETRY%NS%G") == "%RETRY%G"
    assert ns.unwrap("OTHER%T") == "OTHER%T" and ns.unwrap("T") == "T"
    assert Namespace(None).wrap("T") == "T" and not Namespace("")


async def test_namespace_round_trip(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic, cg, pg, name = unique("T"), unique("CG"), unique("PG"), unique("NS")
    got: list[rmq.MessageExt] = []
    assigned: list[rmq.MessageQueue] = []
    async with rmq.Producer(namesrv_addr, pg, namespace=name) as p:
        assert p.group == pg
        r = await p.send(rmq.Message(topic, b"hello", tags="A"))
        assert r.topic == topic and r.message_queue.topic == topic
        qs = await p.fetch_publish_message_queues(topic)
        assert qs and all(q.topic == topic for q in qs)
        r2 = await p.send(rmq.Message(topic, b"to-q0"), queue=qs[0])
        assert r2.message_queue == qs[0]

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=got.append,
        consume_from_where=FIRST,
        namespace=name,
        on_rebalance=lambda t, mqs: assigned.extend(mqs),
    )
    c.subscribe(topic)
    async with c:
        assert c.group == cg and c.namespace == name
        await wait_until(lambda: len(got) == 2, timeout=20, what="both messages")
        assert {m.topic for m in got} == {topic} and {m.body for m in got} == {b"hello", b"to-q0"}
        assert assigned and all(q.topic in (topic, f"%RETRY%{cg}") for q in assigned)
        assert all(q.topic in (topic, f"%RETRY%{cg}") for q in c.assignment())
        async with rmq.Admin(namesrv_addr) as admin:
            topics = await admin.fetch_all_topic_list()
            conn = await admin.examine_consumer_connection_info(f"{name}%{cg}")
        # the broker knows the wrapped names only
        assert f"{name}%{topic}" in topics and topic not in topics
        assert f"%RETRY%{name}%{cg}" in topics
        assert conn.connection_set
    # the offsets committed at close are the wrapped group's, of the wrapped topic
    assert f"{name}%{topic}@{name}%{cg}" in broker.consumer_offset_manager.offset_table

    # the lite pull consumer: queues in and out without the namespace
    pc = rmq.PullConsumer(namesrv_addr, unique("LG"), consume_from_where=FIRST, namespace=name, auto_commit=False)
    async with pc:
        mqs = await pc.fetch_message_queues(topic)
        assert all(q.topic == topic for q in mqs)
        pc.assign(mqs)
        msgs: list[rmq.MessageExt] = []
        await wait_until(lambda: _poll_into(pc, msgs, 2), timeout=10, what="two polled messages")
        assert {m.topic for m in msgs} == {topic}
        await pc.commit({mqs[0]: 1})
        assert await pc.committed(mqs[0]) == 1
        assert pc.assignment() == set(mqs)


async def _poll_into(c: rmq.PullConsumer, out: list, n: int) -> bool:
    out.extend(await c.poll(timeout=0.2))
    return len(out) >= n


# ---------------------------------------------------------------------------- rebalance listener


class _Recorder(rmq.ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.owned: set[rmq.MessageQueue] = set()
        self.events: list[tuple[str, frozenset[rmq.MessageQueue]]] = []

    async def on_queues_revoked(self, revoked: set[rmq.MessageQueue]) -> None:
        assert revoked <= self.owned, "revoked a queue never assigned"
        self.owned -= revoked
        self.events.append(("revoked", frozenset(revoked)))

    def on_queues_assigned(self, assigned: set[rmq.MessageQueue]) -> None:
        assert not assigned & self.owned, "assigned a queue already owned"
        self.owned |= assigned
        self.events.append(("assigned", frozenset(assigned)))


async def test_rebalance_listener_gets_revoked_and_assigned_sets(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=4)
    ra, rb = _Recorder(), _Recorder()

    def mine(r: _Recorder) -> set[rmq.MessageQueue]:
        return {q for q in r.owned if q.topic == topic}

    a = rmq.PushConsumer(namesrv_addr, cg, handler=lambda m: None, instance_name="a", on_rebalance=ra)
    a.subscribe(topic)
    async with a:
        await wait_until(lambda: len(mine(ra)) == 4, timeout=20, what="a owns all 4 queues")
        assert mine(ra) == {q for q in a.assignment() if q.topic == topic}
        b = rmq.PushConsumer(namesrv_addr, cg, handler=lambda m: None, instance_name="b", on_rebalance=rb)
        b.subscribe(topic)
        async with b:
            await wait_until(
                lambda: len(mine(ra)) == 2 and len(mine(rb)) == 2, timeout=30, what="2 + 2 queues after b joined"
            )
            assert not mine(ra) & mine(rb)
            revoked_a = [s for kind, s in ra.events if kind == "revoked" and any(q.topic == topic for q in s)]
            assert revoked_a and len(set().union(*revoked_a)) == 2
            assert {q for q in revoked_a[-1] if q.topic == topic} <= mine(rb) | set(revoked_a[-1])
        # b left: a gets b's queues back, announced as assigned
        await wait_until(lambda: len(mine(ra)) == 4, timeout=30, what="a owns all 4 again")
        assert ra.events[-1][0] == "assigned"


# ---------------------------------------------------------------------------- pause / resume


async def test_push_consumer_pauses_and_resumes_single_queues(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    bname = broker.broker_config.broker_name
    q0, q1 = rmq.MessageQueue(topic, bname, 0), rmq.MessageQueue(topic, bname, 1)
    got: list[rmq.MessageExt] = []
    c = rmq.PushConsumer(namesrv_addr, cg, handler=got.append, consume_from_where=FIRST)
    c.subscribe(topic)
    # paused before start: no pull of q1 is ever sent (a pull already waiting at the broker when
    # pause() is called may still answer once)
    c.pause([q1])
    assert c.paused_queues() == {q1} and not c.paused
    async with rmq.Producer(namesrv_addr, unique("PG")) as p, c:
        await wait_until(lambda: {q0, q1} <= c.assignment(), timeout=20, what="both queues assigned")
        for i in range(3):
            await p.send(rmq.Message(topic, f"a{i}".encode()), queue=q0)
            await p.send(rmq.Message(topic, f"b{i}".encode()), queue=q1)
        await wait_until(lambda: len(got) >= 3, timeout=20, what="q0's messages")
        await holds(lambda: all(m.queue_id == 0 for m in got), 2.0, "q1 paused, q0 flowing")
        c.resume([q1])
        assert c.paused_queues() == set()
        await wait_until(
            lambda: {m.body for m in got} >= {b"b0", b"b1", b"b2"}, timeout=20, what="q1's messages after resume"
        )
        assert sorted(m.body for m in got) == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]
        # pause() without queues is the whole consumer, resume() without queues all of it
        c.pause()
        c.pause([q0])
        assert c.paused and c.paused_queues() == {q0}
        c.resume()
        assert not c.paused and c.paused_queues() == set()
