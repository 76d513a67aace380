"""LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42): one holder per queue, expiry, own unlocks only."""

import json

from semantics_support import wait_for

import rmq
from rmq.broker.rebalance_lock import MessageQueue
from rmq.protocol.codes import ResponseCode


def _mqs(topic, n, broker="broker-a"):
    return [(topic, broker, q) for q in range(n)]


def _locked(resp):
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return sorted(d["queueId"] for d in json.loads(resp.body_bytes())["lockOKMQSet"])


async def test_lock_is_exclusive_renewable_and_expires(wire):
    w = wire
    a, b = "10.0.0.1@1", "10.0.0.2@2"
    assert _locked(await w.lock("G", a, _mqs("T", 4)[:2])) == [0, 1]
    # B asks for all four: gets only the free ones
    assert _locked(await w.lock("G", b, _mqs("T", 4))) == [2, 3]
    # A renews its own (and is refused B's)
    assert _locked(await w.lock("G", a, _mqs("T", 4))) == [0, 1]
    # another group is independent
    assert _locked(await w.lock("G2", b, _mqs("T", 4))) == [0, 1, 2, 3]
    # B may not unlock A's queues; A may
    assert (await w.lock("G", b, _mqs("T", 1), unlock=True)).code == ResponseCode.SUCCESS
    assert _locked(await w.lock("G", b, _mqs("T", 1))) == []
    assert (await w.lock("G", a, _mqs("T", 1), unlock=True)).code == ResponseCode.SUCCESS
    assert _locked(await w.lock("G", b, _mqs("T", 1))) == [0]
    # a lock not renewed for lock_max_live_time lapses (60 s in production; shortened here)
    w.broker.rebalance_lock_manager.lock_max_live_time = 0.3

    async def a_gets_all():  # A renews its own queues while B's lapse
        return _locked(await w.lock("G", a, _mqs("T", 4))) == [0, 1, 2, 3]

    await wait_for(a_gets_all, timeout=10, what="B's unrenewed locks to lapse")


async def test_bad_lock_bodies_get_clear_errors(wire):
    w = wire
    for body, words in [
        (b"", "empty"),
        (b"{", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'{"clientId":"c","mqSet":[]}', "consumerGroup"),
        (b'{"consumerGroup":"G","mqSet":[]}', "clientId"),
        (b'{"consumerGroup":"G","clientId":"c","mqSet":{}}', "array"),
        (b'{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T","brokerName":"b"}]}', "queueId"),
    ]:
        resp = await w.call(41, None, body)
        assert resp.code == ResponseCode.SYSTEM_ERROR and words in resp.remark, (body, resp.remark)
    # the broker still works
    assert _locked(await w.lock("G", "c", _mqs("T", 1))) == [0]


async def test_two_orderly_sdk_consumers_never_hold_the_same_queue(wire, monkeypatch):
    """Two members of one orderly group: each queue locked by at most one, every queue locked
    by someone once they settle, and each member consumes only queues it holds."""
    import rmq.client.consumer.push as push
    import rmq.client.instance as instance

    # the SDK's 20 s lockAll and rebalance timers, shortened: a queue the other member still
    # held at the first rebalance is locked at the next
    monkeypatch.setattr(push, "LOCK_RENEW_INTERVAL", 1.0)
    monkeypatch.setattr(instance, "REBALANCE_INTERVAL", 1.0)
    w = wire
    topic, group = "OrdLockT", "GID_ord_lock"
    await w.create_topic(topic, queues=4)
    got: dict[str, list] = {"A": [], "B": []}
    violations = []
    mgr = w.broker.rebalance_lock_manager

    def make(name, cid_holder):
        async def handler(msg):
            holder = mgr.holder(group, MessageQueue(topic, "broker-a", msg.queue_id))
            if holder != cid_holder[0]:
                violations.append((name, msg.queue_id, holder))
            got[name].append((msg.queue_id, int(msg.body)))

        return handler

    cid_a, cid_b = [None], [None]
    ca = rmq.PushConsumer(
        w.ns.address,
        group,
        handler=make("A", cid_a),
        orderly=True,
        instance_name="A",
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    cb = rmq.PushConsumer(
        w.ns.address,
        group,
        handler=make("B", cid_b),
        orderly=True,
        instance_name="B",
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    for c in (ca, cb):
        c.subscribe(topic)
    async with ca, cb:
        cid_a[0], cid_b[0] = ca.client_id, cb.client_id
        mqs = [MessageQueue(topic, "broker-a", q) for q in range(4)]
        # the first member may lock all four before the second joins; after the rebalance
        # each holds two (the other's queues are unlocked before they are taken)
        await wait_for(
            lambda: (
                sorted(mgr.holder(group, mq) or "" for mq in mqs) == sorted([ca.client_id] * 2 + [cb.client_id] * 2)
            ),
            timeout=25,
            what="2 + 2 queues locked",
        )
        async with rmq.Producer(w.ns.address, "PID_ord_lock") as p:
            for i in range(40):
                await p.send(rmq.Message(topic, str(i).encode()), queue=mqs[i % 4])
        await wait_for(lambda: len(got["A"]) + len(got["B"]) >= 40, timeout=20, what="40 messages")
    assert violations == []
    for name in ("A", "B"):
        for q in {qid for qid, _ in got[name]}:
            seq = [n for qid, n in got[name] if qid == q]
            assert seq == sorted(seq), (name, q, seq)
    assert {q for q, _ in got["A"]}.isdisjoint({q for q, _ in got["B"]})
