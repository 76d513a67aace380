"""The dashboard page with ``rmq console --prometheus-url`` (all real: ``rmq standalone``,
``rmq exporter``, Debian's Prometheus scraping it every second, ``rmq console``, headless
Chromium): the range choice appears, each range is asked of Prometheus at its own step, and the
brokers' line is drawn from what Prometheus holds."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from metrics_support import Exporter
from test_console_prometheus import Prometheus

import rmq
from rmq._testing import StandaloneProcess, free_port, terminate, wait_for_port, wait_until_sync
from tests.console.console_support import PASSWORD, USER, log_in

WAIT = 60_000


@pytest.fixture(scope="module")
def stack(cluster: StandaloneProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The exporter, Prometheus and a console reading from it; yields the console's URL."""
    d: pathlib.Path = tmp_path_factory.mktemp("prom-console")
    exp = Exporter(d, cluster.namesrv_addr)
    prom = Prometheus(d, f"127.0.0.1:{exp.port}")
    port = free_port()
    log = d / "console.log"
    with open(log, "wb") as out:
        console = subprocess.Popen(
            [sys.executable, "-m", "rmq", "console", "--namesrv", cluster.namesrv_addr, "--port", str(port)]
            + ["--admin-user", USER, "--prometheus-url", prom.url],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "RMQ_CONSOLE_PASSWORD": PASSWORD},
        )
    try:
        wait_until_sync(
            lambda: console.poll() is not None or "rmq console listening" in log.read_text(errors="replace"),
            30,
            what="rmq console listening",
        )
        assert console.poll() is None, log.read_text()
        assert wait_for_port("127.0.0.1", prom.port, 30), prom.log.read_text()
        yield f"http://127.0.0.1:{port}"
    finally:
        assert terminate(console) == 0, log.read_text()[-2000:]
        assert "Traceback" not in log.read_text(errors="replace")
        prom.stop()
        assert exp.stop() == 0, exp.log.read_text()[-2000:]


async def _produce(ns: str) -> None:
    from rmq.client.admin import Admin

    async with Admin(ns) as admin:
        for addr in await admin.master_addrs():
            await admin.create_and_update_topic_config(addr, "PromBrowserTopic", read_queue_nums=2, write_queue_nums=2)
    async with rmq.Producer(ns, "PromBrowserProducer") as p:
        for i in range(5):  # BROKER_PUT_NUMS exists once the broker has taken a message
            await p.send(rmq.Message("PromBrowserTopic", b"m%d" % i))


def test_dashboard_offers_ranges_read_from_prometheus(
    browser: Any, stack: str, cluster: StandaloneProcess, loop_thread: Any
) -> None:
    from playwright.sync_api import expect

    loop_thread.run(_produce(cluster.namesrv_addr))

    expect.set_options(timeout=WAIT)
    ctx = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=stack)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        pg.goto("/")
        log_in(pg)
        expect(pg.locator("main[data-page='home']")).to_be_visible()
        pg.goto("/#/dashboard")
        expect(pg.locator("main[data-page='dashboard']")).to_be_visible()
        expect(pg.locator("#dash-range-row")).to_be_visible()  # hidden over the in-memory hour
        expect(pg.locator("main")).to_contain_text("From Prometheus: one point every 5 s")  # 3600 s / 720
        pg.select_option("#dash-range", "604800")
        expect(pg.locator("main")).to_contain_text("From Prometheus: one point every 840 s")  # 7 days / 720
        pg.select_option("#dash-range", "3600")
        # the broker's line, once Prometheus has scraped the exporter's rocketmq_broker_tps
        expect(pg.locator("#broker-chart .legend")).to_contain_text(cluster.broker_addr)
        expect(pg.locator(".error")).to_have_count(0)
    finally:
        ctx.close()
    assert not errors, errors
