"""The dashboard's history from a real Prometheus (Debian's ``prometheus``, the server binary
``make test`` installs for promtool): it scrapes ``rmq exporter`` every second, and the
console given ``--prometheus-url`` draws ranges read from its ``query_range`` API; a
Prometheus that cannot be reached is an error on the page over the in-memory hour, not a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import subprocess
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from metrics_support import Exporter, http_get

from rmq._testing import broker_env, free_port, terminate, wait_for_port, wait_until
from rmq.console import ConsoleConfig, ConsoleServer
from rmq.console.sampler import PrometheusError, PrometheusHistory, check_prometheus_url
from tests.console.console_support import USERS, login

PROMETHEUS = "/usr/bin/prometheus"
TOPIC = "PromHistoryTopic"


class Prometheus:
    """The Prometheus server on a free port, scraping ``target`` every second."""

    def __init__(self, tmp_path: pathlib.Path, target: str) -> None:
        self.port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: rmq\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log = tmp_path / "prometheus.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.url = f"http://127.0.0.1:{self.port}"

    async def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result (empty while Prometheus is starting)."""
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
        try:
            status, _ctype, body = await asyncio.to_thread(
                http_get, self.port, "/api/v1/query?" + urllib.parse.urlencode({"query": promql}), 5.0
            )
        except OSError:
            return []
        return json.loads(body)["data"]["result"] if status == 200 else []

    def stop(self) -> None:
        terminate(self.proc)


@contextlib.asynccontextmanager
async def console_for(ns_addr: str, **kw: Any) -> AsyncIterator[aiohttp.ClientSession]:
    server = ConsoleServer(ConsoleConfig(ns_addr, port=0, users=USERS, **kw))
    await server.start()
    try:
        async with aiohttp.ClientSession(server.url.rstrip("/")) as anonymous:
            headers = await login(anonymous)
        async with aiohttp.ClientSession(server.url.rstrip("/"), headers=headers) as http:
            yield http
    finally:
        await server.stop()


async def dashboard(http: aiohttp.ClientSession, **params: str) -> tuple[int, Any]:
    async with http.get("/api/dashboard", params=params) as r:
        return r.status, await r.json()


async def test_dashboard_reads_its_history_from_prometheus(tmp_path):
    # a 100 ms statistics tick: the minute-window TPS the exporter reads moves at once
    async with broker_env(tmp_path / "store", stats_sample_interval_ms=100) as env:
        await env.create_topic(TOPIC, 2)
        stop = asyncio.Event()

        async def traffic() -> None:
            i = 0
            while not stop.is_set():
                await env.send(TOPIC, b"p%d" % i, queue_id=i % 2, wait_dispatch=False)
                i += 1
                await asyncio.sleep(0.02)  # pacing the load, not synchronizing anything

        sender = asyncio.create_task(traffic())
        exp = Exporter(tmp_path, env.ns_addr)
        prom = Prometheus(tmp_path, f"127.0.0.1:{exp.port}")
        try:
            assert await asyncio.to_thread(wait_for_port, "127.0.0.1", prom.port, 30), prom.log.read_text()
            # Prometheus has scraped the exporter's topic rate
            await wait_until(
                lambda: prom.query(f'rocketmq_producer_tps{{topic="{TOPIC}"}} > 0'),
                timeout=90,
                interval=0.5,
                what="Prometheus to hold the topic's TPS",
            )
            broker = f"{env.broker.broker_config.broker_name} ({env.broker.broker_addr})"
            async with console_for(env.ns_addr, prometheus_url=prom.url) as http:

                async def drawn() -> Any:
                    status, d = await dashboard(http, range="86400")
                    assert status == 200, d
                    tps = d["topics"].get(TOPIC, [])
                    return d if any(v > 0 for _, v in tps) and d["brokers"].get(broker) else None

                d = await wait_until(drawn, timeout=30, interval=0.5, what="the dashboard's day from Prometheus")
                assert d["source"] == "prometheus" and d["lastError"] == ""
                assert d["range"] == d["history"] == 86400 and d["step"] == 120  # a day in 720 points
                put = [p for _, p, _g in d["brokers"][broker]]
                assert any(v > 0 for v in put)
                assert not any(t.startswith(("%RETRY%", "%DLQ%")) for t in d["topics"])
                # the range is bounded both ways; a range that is no number is refused
                status, d = await dashboard(http, range="10")
                assert status == 200 and d["range"] == 60 and d["step"] == 1
                status, d = await dashboard(http, range=str(10**9))
                assert status == 200 and d["range"] == 30 * 86400
                status, d = await dashboard(http, range="soon")
                assert status == 400 and "range" in d["error"]
        finally:
            stop.set()
            await sender
            prom.stop()
            assert exp.stop() == 0, exp.log.read_text()[-2000:]


async def test_a_prometheus_that_cannot_be_reached_is_shown_not_a_crash(tmp_path):
    nowhere = f"http://127.0.0.1:{free_port()}"
    async with broker_env(tmp_path / "store") as env:
        async with console_for(env.ns_addr, prometheus_url=nowhere, sample_interval=0.2) as http:
            status, d = await dashboard(http, range="3600")
    assert status == 200
    assert d["source"] == "memory" and "history" in d and "brokers" in d  # the console's own hour
    assert nowhere in d["lastError"] and "cannot be reached" in d["lastError"]


async def test_answers_that_are_not_prometheus_are_errors(tmp_path):
    from aiohttp import web

    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("query_range") and (await request.post()).get("query", "").startswith("max"):
            return web.json_response({"status": "error", "errorType": "bad_data", "error": "parse error"}, status=400)
        return web.Response(text="<html>not prometheus</html>")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    history = PrometheusHistory(f"http://127.0.0.1:{port}/", timeout=5)
    try:
        with pytest.raises(PrometheusError) as info:
            await history.snapshot(3600)
        text = str(info.value)
        assert "refused the query (HTTP 400): parse error" in text or "without its JSON" in text, text
    finally:
        await history.close()
        await runner.cleanup()


def test_prometheus_url_is_checked():
    assert check_prometheus_url("http://prom:9090/") == "http://prom:9090"
    assert check_prometheus_url("https://h/prometheus") == "https://h/prometheus"
    for bad in ("prom:9090", "ftp://h", "http://", "http://h:99999", "http://h/?q=1"):
        with pytest.raises(ValueError, match="--prometheus-url"):
            check_prometheus_url(bad)


def test_a_bad_prometheus_url_stops_the_start():
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "rmq", "console", "-n", "127.0.0.1:1", "--port", "0", "--admin-user", "tester"]
        + ["--admin-password", "a-test-password", "--prometheus-url", "prom:9090"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "--prometheus-url" in r.stderr and "http(s)://host[:port][/path]" in r.stderr, r.stderr
