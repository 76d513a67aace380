"""rmq.common.tasks: the owner of background tasks and the graceful stop of a service task."""

import asyncio
import logging

from rmq.common.tasks import BackgroundTasks, stop_gracefully

log = logging.getLogger("rmq.test.tasks")


async def test_spawn_keeps_tasks_until_done_and_logs_a_death(caplog):
    tasks = BackgroundTasks("owner-x", log)
    done = asyncio.Event()

    async def ok():
        await done.wait()
        return 1

    async def boom():
        raise RuntimeError("kaput")

    t1 = tasks.spawn(ok(), "ok-task")
    assert t1.get_name() == "ok-task" and len(tasks) == 1 and list(tasks) == [t1]
    with caplog.at_level(logging.ERROR, logger="rmq.test.tasks"):
        t2 = tasks.spawn(boom(), "boom-task")
        await asyncio.gather(t2, return_exceptions=True)
        await asyncio.sleep(0)  # one loop turn: done callbacks run through call_soon
    assert len(tasks) == 1  # the dead one is dropped, the live one kept
    died = [r for r in caplog.records if "boom-task" in r.getMessage()]
    assert died and "owner-x" in died[0].getMessage() and died[0].exc_info[0] is RuntimeError
    done.set()
    assert await t1 == 1
    await asyncio.sleep(0)  # one loop turn: done callbacks run through call_soon
    assert len(tasks) == 0


async def test_close_cancels_owned_and_also_and_waits(caplog):
    tasks = BackgroundTasks("owner-y", log)
    stopped = []

    async def forever(tag):
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.append(tag)

    tasks.spawn(forever("a"))
    tasks.spawn(forever("b"))
    extra = asyncio.get_running_loop().create_task(forever("c"))
    await asyncio.sleep(0)  # one loop turn: the tasks start and reach their sleep
    with caplog.at_level(logging.ERROR, logger="rmq.test.tasks"):
        await tasks.close(also=[extra])
    assert sorted(stopped) == ["a", "b", "c"] and extra.cancelled() and len(tasks) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # a cancel is no death
    await tasks.close()  # idempotent, nothing left
    t = tasks.spawn(asyncio.sleep(0, "again"))  # still usable after close (owners may restart)
    assert await t == "again"


async def test_stop_gracefully_lets_the_task_finish_within_grace():
    stop = asyncio.Event()
    finished = []

    async def service():
        await stop.wait()
        await asyncio.sleep(0.01)  # the behaviour under test: some work left after the stop request
        finished.append(True)

    t = asyncio.get_running_loop().create_task(service())
    other = asyncio.get_running_loop().create_task(asyncio.sleep(3600))
    stop.set()
    await stop_gracefully(t, 5.0, log, "svc", also=(other, None))
    assert finished == [True] and not t.cancelled() and other.cancelled()


async def test_stop_gracefully_cancels_after_grace_and_logs_failures(caplog):
    async def stuck():
        await asyncio.sleep(3600)

    async def fails():
        raise ValueError("bad")

    t = asyncio.get_running_loop().create_task(stuck())
    with caplog.at_level(logging.WARNING, logger="rmq.test.tasks"):
        await stop_gracefully(t, 0.05, log, "stuck svc")
    assert t.cancelled()
    assert any("stuck svc did not stop within" in r.getMessage() for r in caplog.records)
    caplog.clear()
    f = asyncio.get_running_loop().create_task(fails())
    with caplog.at_level(logging.ERROR, logger="rmq.test.tasks"):
        await stop_gracefully(f, 1.0, log, "failing svc")
        await stop_gracefully(None, 1.0, log, "absent svc")
    assert [r.getMessage() for r in caplog.records] == ["failing svc task failed"]


async def test_wait_lets_tasks_finish_and_death_level(caplog):
    tasks = BackgroundTasks("producer P", log, death_level=logging.DEBUG)
    finished = []

    async def slow(tag):
        await asyncio.sleep(0.02)  # the behaviour under test: a task that takes a moment
        finished.append(tag)

    async def fails():
        raise OSError("send failed")

    tasks.spawn(slow("a"))
    with caplog.at_level(logging.DEBUG, logger="rmq.test.tasks"):
        f = tasks.spawn(fails(), "send-1")
        await tasks.wait()
    assert finished == ["a"] and not f.cancelled() and len(tasks) == 0
    died = [r for r in caplog.records if "send-1" in r.getMessage()]
    assert died and died[0].levelno == logging.DEBUG and "producer P" in died[0].getMessage()
    await tasks.wait()  # nothing running: returns at once


async def test_close_gives_up_on_a_task_that_refuses_to_stop(caplog):
    """A task that swallows its cancellation cannot hold a shutdown: close() names it after
    ``timeout`` seconds and returns."""
    tasks = BackgroundTasks("broker", log)
    release = asyncio.Event()
    started = asyncio.Event()

    async def stubborn():
        started.set()
        while not release.is_set():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue  # refuses to stop

    async def dies():
        raise ValueError("a value that cannot be written")

    t = tasks.spawn(stubborn(), "stubborn")
    died = tasks.spawn(dies(), "dies")
    await started.wait()
    await asyncio.wait({died})
    with caplog.at_level(logging.WARNING, logger="rmq.test.tasks"):
        await asyncio.wait_for(tasks.close(timeout=0.2), 5)
    assert any("did not stop" in r.getMessage() and "stubborn" in r.getMessage() for r in caplog.records)
    assert not t.done()
    release.set()
    t.cancel()
    await asyncio.gather(t, return_exceptions=True)


async def test_stop_gracefully_accepts_a_task_cancelled_before_or_during_the_stop():
    async def forever():
        await asyncio.Event().wait()

    early = asyncio.create_task(forever())
    early.cancel()
    await asyncio.wait({early})
    await stop_gracefully(early, 5.0, log, "early")  # already cancelled: nothing to wait for
    during = asyncio.create_task(forever())
    asyncio.get_running_loop().call_soon(during.cancel)  # someone else cancels it while we wait
    await stop_gracefully(during, 5.0, log, "during")
    assert early.cancelled() and during.cancelled()
