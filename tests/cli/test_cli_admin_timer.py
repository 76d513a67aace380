"""``rmq admin timerStatus`` over Java 5's GET_TIMER_CHECK_POINT (60) and GET_TIMER_METRICS (61):
the timer store's checkpoint (seven longs, Java ``TimerCheckpoint.encode``) and its pending
timers per real topic (Java ``TimerMetrics`` JSON), served by the broker and read by rmq.Admin."""

import datetime

import pytest
from cli_support import admin_async

import rmq
from rmq._testing import run_broker, run_namesrv, wait_until

pytestmark = pytest.mark.timeout(120)


async def test_timer_status_shows_the_checkpoint_and_pending_timers_per_topic(tmp_path):
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "b", ns, timer_precision_ms=100, timer_flush_interval_ms=100) as broker,
    ):
        nsaddr = f"127.0.0.1:{ns.port}"
        async with rmq.Admin(nsaddr) as admin:
            await admin.create_and_update_topic_config(broker.broker_addr, "TimerAdminT")
            async with rmq.Producer(nsaddr, "TimerAdminPG") as p:
                for _ in range(3):
                    await p.send(rmq.Message("TimerAdminT", b"later", delay=datetime.timedelta(hours=1)))
            timer = broker.timer_message_store
            await wait_until(lambda: timer.checkpoint.last_timer_queue_offset == 3, what="the checkpoint")
            ck = await admin.get_timer_check_point(broker.broker_addr)
            assert ck["lastTimerQueueOffset"] == 3 and ck["lastReadTimeMs"] > 0 and ck["counter"] >= 1
            assert ck["lastTimerLogFlushPos"] == 3 * 64
            assert (await admin.get_timer_metrics(broker.broker_addr))["TimerAdminT"][0] == 3
        code, out, err = await admin_async("timerStatus", "-n", nsaddr, "-b", broker.broker_addr)
        assert code == 0, err
        # "<addr> <key>: <value>" (the address has a colon of its own)
        rows = {k.split(None, 1)[1].strip(): v.strip() for k, v in (line.rsplit(":", 1) for line in out.splitlines())}
        assert rows["lastTimerQueueOffset"] == "3" and rows["pending TimerAdminT"] == "3"
        code, out, err = await admin_async("timerStatus", "-n", nsaddr, "-b", "127.0.0.1:1")
        assert code == 1 and "127.0.0.1:1" in err
