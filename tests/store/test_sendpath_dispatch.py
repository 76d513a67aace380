"""Dispatch driven by appends: one run per loop iteration, whatever the number of appends."""

from rmq._testing import wait_until
from rmq.store import MessageInner, PutMessageStatus


async def test_appends_of_one_loop_turn_are_dispatched_by_one_run(make_store):
    store = await make_store()
    arrived = []
    store.add_arrival_listener(lambda topic, qid, nxt, tags: arrived.append((topic, qid, nxt)))
    runs = store.reput.runs
    for i in range(50):  # one loop turn: like the SENDs of one read
        r = store.append_message(MessageInner("Coalesce", i % 2, b"x%d" % i))
        assert r.status == PutMessageStatus.PUT_OK
    assert store.reput.reput_from_offset == 0  # nothing dispatched inside the turn
    await wait_until(
        lambda: store.reput.reput_from_offset == store.commit_log.max_offset, 10, what="dispatch of the 50 appends"
    )
    assert store.reput.runs == runs + 1
    # every queue's waiters were told once, with the queue's next offset
    assert sorted(arrived) == [("Coalesce", 0, 25), ("Coalesce", 1, 25)]
    assert store.find_consume_queue("Coalesce", 1).get_max_offset_in_queue() == 25
    # the next turn's appends get their own run
    store.append_message(MessageInner("Coalesce", 0, b"late"))
    await wait_until(
        lambda: store.reput.reput_from_offset == store.commit_log.max_offset, 10, what="dispatch of the late append"
    )
    assert store.reput.runs == runs + 2 and arrived[-1] == ("Coalesce", 0, 26)


async def test_a_dispatch_failure_in_the_callback_is_retried_by_the_task(make_store, monkeypatch):
    store = await make_store()
    reput = store.reput
    real = reput.do_reput
    fail = {"left": 1}

    def flaky(*a, **kw):
        if fail["left"]:
            fail["left"] -= 1
            raise OSError(24, "Too many open files")
        return real(*a, **kw)

    monkeypatch.setattr(reput, "do_reput", flaky)
    store.append_message(MessageInner("Flaky", 0, b"a"))
    await wait_until(lambda: reput.dispatch_error is not None or fail["left"] == 0, 10, what="the failure")
    await wait_until(
        lambda: reput.reput_from_offset == store.commit_log.max_offset and reput.dispatch_error is None,
        10,
        what="the task's retry",
    )
    assert store.find_consume_queue("Flaky", 0).get_max_offset_in_queue() == 1


async def test_shutdown_drops_a_scheduled_run(make_store):
    store = await make_store()
    store.append_message(MessageInner("Stop", 0, b"a"))
    scheduled = store.reput._soon
    assert scheduled is not None
    await store.shutdown()
    # cancelled, so it never runs against the unmapped files
    assert store.reput._soon is None and scheduled.cancelled()
