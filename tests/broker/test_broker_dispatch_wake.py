"""Long polling woken by the C dispatcher (rmq/_dispatch.pxi): arrivals per (queue, distinct
tags code) for the queues with held pulls only."""

import asyncio

from broker_support import decode_records

from rmq import _store
from rmq._testing import wait_until
from rmq.protocol.codes import ResponseCode
from rmq.store import MessageInner


async def test_a_held_pull_wakes_when_one_of_several_tags_in_a_run_matches(env):
    await env.create_topic("LW", 1)
    store = env.broker.message_store
    await env.send("LW", b"first", tags="TagA")  # the queue is now in the dispatcher's cache
    pull = asyncio.ensure_future(env.pull("LW", offset=1, sys_flag=6, subscription="TagB", suspend_ms=15000))
    await wait_until(lambda: env.broker.pull_request_hold_service.held_count == 1, what="the pull to be held")
    assert ("LW", 0) in env.broker.pull_request_hold_service.pull_request_table
    calls = []
    store.add_arrival_listener(lambda *a: calls.append(a), watched={("LW", 0)})
    taken = store.reput.fast.taken
    # One loop turn: three records, one dispatch run, tags A B A on the one queue.
    for body, tag in ((b"a1", "TagA"), (b"b", "TagB"), (b"a2", "TagA")):
        assert store.append_message(MessageInner("LW", 0, body, properties={"TAGS": tag})).is_ok
    resp = await asyncio.wait_for(pull, 5)
    assert resp.code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(resp.body_bytes())] == [b"b"]
    assert store.reput.fast.taken - taken == 3  # dispatched by the C dispatcher
    # each distinct tags code of the run was told, with the offset after its last record
    assert sorted(calls) == sorted(
        [("LW", 0, 4, _store.java_hash_code("TagA")), ("LW", 0, 3, _store.java_hash_code("TagB"))]
    )
    assert env.broker.pull_request_hold_service.held_count == 0


async def test_a_held_pull_is_not_woken_by_other_tags_or_other_queues(env):
    await env.create_topic("LN", 2)
    store = env.broker.message_store
    await env.send("LN", b"first", queue_id=0, tags="TagA")
    await env.send("LN", b"first", queue_id=1, tags="TagB")
    pull = asyncio.ensure_future(
        env.pull("LN", queue_id=0, offset=1, sys_flag=6, subscription="TagB", suspend_ms=15000)
    )
    await wait_until(lambda: env.broker.pull_request_hold_service.held_count == 1, what="the pull to be held")
    runs = store.reput.runs
    assert store.append_message(MessageInner("LN", 0, b"a", properties={"TAGS": "TagA"})).is_ok
    assert store.append_message(MessageInner("LN", 1, b"b", properties={"TAGS": "TagB"})).is_ok
    await wait_until(
        lambda: store.reput.runs > runs and store.reput_from_offset == store.commit_log.max_offset,
        what="the dispatch run",
    )
    assert not pull.done() and env.broker.pull_request_hold_service.held_count == 1
    assert store.append_message(MessageInner("LN", 0, b"b0", properties={"TAGS": "TagB"})).is_ok
    # had the TagA arrival (or queue 1's) woken it, its answer would have come without b0
    resp = await asyncio.wait_for(pull, 5)
    assert resp.code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(resp.body_bytes())] == [b"b0"]
