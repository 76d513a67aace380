"""The console's JSON API against a real broker (in process) and a real console server: errors
as readable JSON (never a traceback), bad input refused, writes only as same-origin JSON,
broker text carried as data, the page built without HTML parsing, bounded caches and history,
and the console beside ``rmq standalone`` (its port taken is a warning, not a failure)."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import rmq
from rmq._testing import StandaloneProcess, free_broker_port, free_port, run_standalone, wait_until
from rmq.console import ConsoleConfig, ConsoleServer
from rmq.console.sampler import TpsSampler
from rmq.console.server import STATIC_DIR, _Cache
from rmq.console.service import ConsoleService
from tests.console.console_support import PASSWORD, USER, USERS, get_json, login, login_sync


@contextlib.asynccontextmanager
async def console_for(ns_addr: str, **kw: Any) -> AsyncIterator[tuple[ConsoleServer, aiohttp.ClientSession]]:
    server = ConsoleServer(ConsoleConfig(ns_addr, port=0, users=USERS, **kw))
    await server.start()
    try:
        async with aiohttp.ClientSession(server.url.rstrip("/")) as anonymous:
            headers = await login(anonymous)
        async with aiohttp.ClientSession(server.url.rstrip("/"), headers=headers) as http:
            yield server, http
    finally:
        await server.stop()


@pytest.fixture
async def env(tmp_path: pathlib.Path) -> AsyncIterator[tuple[Any, ConsoleServer, aiohttp.ClientSession]]:
    async with run_standalone(tmp_path / "store") as (ns, broker):
        async with console_for(f"127.0.0.1:{ns.port}") as (server, http):
            yield broker, server, http


async def get(http: aiohttp.ClientSession, path: str, **params: Any) -> tuple[int, Any, str]:
    async with http.get(path, params=params) as r:
        text = await r.text()
        assert r.content_type == "application/json", text
        return r.status, await r.json(), text


async def post(http: aiohttp.ClientSession, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
    async with http.post(path, json=body, **kw) as r:
        return r.status, await r.json()


async def test_a_broker_refusal_is_a_readable_json_error(env: Any) -> None:
    _, _, http = env
    status, data, text = await get(http, "/api/topic/status", topic="NoSuchTopic")
    assert status == 502
    assert data["error"] == "the name server has no route for topic NoSuchTopic"
    assert "Traceback" not in text and 'File "' not in text
    status, data, _ = await get(http, "/api/group", group="NoSuchGroup")
    assert status == 200 and data["configs"] == [] and data["connections"] == [], data
    assert data["statsError"] == "the name server has no route for topic %RETRY%NoSuchGroup"


async def test_bad_input_is_refused_with_the_reason(env: Any) -> None:
    _, _, http = env
    assert (await get(http, "/api/topic/status"))[:2] == (400, {"error": "topic is required"})
    status, data, _ = await get(http, "/api/messages", topic="T", begin="yesterday")
    assert status == 400 and data["error"] == "begin must be a whole number, not 'yesterday'"
    status, data, _ = await get(http, "/api/message", msgId="zz")
    assert status == 400 and "is not an offset message id" in data["error"]
    status, data = await post(http, "/api/topic", {"topic": "Bad<Name>", "readQueueNums": 4})
    assert status == 400 and "illegal characters" in data["error"]
    status, data = await post(http, "/api/topic", {"topic": "GoodName", "perm": 3})
    assert status == 400 and data["error"].startswith("perm must be")
    status, data = await post(http, "/api/topic", {"topic": "SCHEDULE_TOPIC_XXXX"})
    assert status == 400 and "system" in data["error"]
    status, data = await post(http, "/api/group/reset", {"group": "G", "topics": ["T"], "timestamp": "soon"})
    assert status == 400 and "timestamp" in data["error"]
    async with http.post("/api/topic", data=b"{not json", headers={"Content-Type": "application/json"}) as r:
        assert r.status == 400 and (await r.json())["error"] == "the request body is not JSON"
    async with http.get("/api/no/such/thing") as r:
        assert r.status == 404 and r.content_type == "application/json"


async def test_a_message_that_is_not_there_is_404(env: Any) -> None:
    _broker, _, http = env
    status, data = await post(http, "/api/topic", {"topic": "T404", "readQueueNums": 2, "writeQueueNums": 2})
    assert status == 200, data
    status, data, _ = await get(http, "/api/message", msgId="0" * 32, topic="T404")
    assert status == 404 and data["error"] == f"no message with id {'0' * 32} in topic T404"


async def test_an_unreachable_cluster_is_a_readable_503(tmp_path: pathlib.Path) -> None:
    async with console_for(f"127.0.0.1:{free_port()}", admin_timeout=2.0) as (_, http):
        status, data, text = await get(http, "/api/cluster")
        assert status in (503, 504), data
        assert data["error"].startswith(("cannot reach the cluster", "no answer within")), data
        assert "Traceback" not in text


async def test_writes_are_same_origin_json_only(env: Any) -> None:
    _, server, http = env
    async with http.post("/api/topic", data={"topic": "FormTopic"}) as r:
        assert r.status == 403 and "application/json" in (await r.json())["error"]
    status, data = await post(http, "/api/topic", {"topic": "EvilTopic"}, headers={"Origin": "http://evil.example"})
    assert status == 403 and "own pages" in data["error"]
    origin = server.url.rstrip("/")
    status, data = await post(
        http, "/api/topic", {"topic": "OwnTopic", "readQueueNums": 2, "writeQueueNums": 2}, headers={"Origin": origin}
    )
    assert status == 200 and len(data["result"]) == 1, data


async def test_broker_text_travels_as_data_and_the_page_parses_no_html(env: Any) -> None:
    _, _, http = env
    status, _ = await post(http, "/api/topic", {"topic": "XssTopic", "readQueueNums": 1, "writeQueueNums": 1})
    assert status == 200
    body = "<script>alert(1)</script>"
    status, sent = await post(http, "/api/topic/send", {"topic": "XssTopic", "body": body, "keys": "k<1>"})
    assert status == 200 and sent["result"]["sendStatus"] == "SEND_OK", sent

    async def found() -> Any:
        _, data, _ = await get(http, "/api/messages", topic="XssTopic", key="k<1>")
        return data["messages"]

    rows = await wait_until(found, what="the message by its key")
    assert rows[0]["preview"] == body and rows[0]["keys"] == ["k<1>"]
    async with http.get("/") as r:
        assert r.status == 200
        csp = r.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        page = await r.text()
    assert "<script>" not in page.replace('<script src="/static/app.js"></script>', "")  # no inline script
    script = (STATIC_DIR / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, f"app.js uses {sink}: broker text must only ever become text nodes"
    async with http.get("/static/app.js") as r:
        assert r.status == 200 and "createTextNode" in await r.text()


async def test_topic_and_group_create_update_delete(env: Any) -> None:
    _, _, http = env
    status, data = await post(http, "/api/topic", {"topic": "CrudTopic", "readQueueNums": 4, "writeQueueNums": 4})
    assert status == 200, data
    status, data = await post(
        http, "/api/topic", {"topic": "CrudTopic", "readQueueNums": 2, "writeQueueNums": 2, "perm": 4}
    )
    assert status == 200, data
    _, route, _ = await get(http, "/api/topic/route", topic="CrudTopic")
    assert [(q["readQueueNums"], q["permText"]) for q in route["queueDatas"]] == [(2, "R--")]
    status, data = await post(http, "/api/topic/delete", {"topic": "CrudTopic"})
    assert status == 200, data
    status, data, _ = await get(http, "/api/topic/route", topic="CrudTopic")
    assert status == 502 and "no route" in data["error"]

    status, data = await post(
        http, "/api/group", {"group": "CrudGroup", "config": {"retryMaxTimes": 3, "consumeBroadcastEnable": False}}
    )
    assert status == 200, data
    _, detail, _ = await get(http, "/api/group", group="CrudGroup")
    assert detail["configs"][0]["config"]["retryMaxTimes"] == 3
    _, groups, _ = await get(http, "/api/groups")
    row = next(g for g in groups if g["group"] == "CrudGroup")
    assert row["system"] is False and row["count"] == 0 and row["retryMaxTimes"] == 3
    assert next(g for g in groups if g["group"] == "TOOLS_CONSUMER")["system"] is True
    status, data = await post(http, "/api/group", {"group": "CrudGroup", "config": {"retryMaxTimes": "many"}})
    assert status == 400 and "retryMaxTimes" in data["error"]
    status, data = await post(http, "/api/group/delete", {"group": "CrudGroup"})
    assert status == 200, data
    _, detail, _ = await get(http, "/api/group", group="CrudGroup")
    assert detail["configs"] == []


async def test_online_producers_of_a_group(env: Any) -> None:
    _broker, server, http = env
    status, _ = await post(http, "/api/topic", {"topic": "ProdTopic", "readQueueNums": 1, "writeQueueNums": 1})
    assert status == 200
    async with rmq.Producer(server.config.namesrv_addr, "ConsoleProducerGroup") as p:
        await p.send(rmq.Message("ProdTopic", b"x"))
        status, rows, _ = await get(http, "/api/producers", topic="ProdTopic", group="ConsoleProducerGroup")
        assert status == 200 and len(rows) == 1 and rows[0]["language"] == "PYTHON", rows


def test_the_get_cache_is_bounded() -> None:
    cache = _Cache(ttl=60.0, entries=3)
    for i in range(10):
        cache.put(f"/api/x?{i}", i)
    assert [cache.get(f"/api/x?{i}") for i in range(10)] == [None] * 7 + [7, 8, 9]
    cache.clear()
    assert cache.get("/api/x?9") is None


async def test_the_tps_history_is_bounded(tmp_path: pathlib.Path) -> None:
    async with run_standalone(tmp_path / "store") as (ns, _):
        async with rmq.client.admin.Admin(f"127.0.0.1:{ns.port}") as admin:
            sampler = TpsSampler(ConsoleService(admin), interval=0.05, history=0.2)
            assert sampler.points == 5
            sampler.start()
            try:
                await sampler.wait_round(12)
            finally:
                await sampler.stop()
            (series,) = sampler.brokers.values()
            assert len(series) == 5 and sampler.last_error == ""
            with pytest.raises(ValueError):
                TpsSampler(ConsoleService(admin), interval=0)


def test_standalone_serves_the_console_and_a_taken_port_is_a_warning(tmp_path: pathlib.Path) -> None:
    port = free_port()
    with StandaloneProcess(tmp_path / "a", extra_args=[f"--consolePort={port}"]) as first:
        from rmq._testing import wait_until_sync

        wait_until_sync(lambda: "rmq console on" in first.log_text(), what="the console's line")
        # the first start makes the admin password (0600, under the store) and says it once
        pw_file = tmp_path / "a" / "console" / "admin-password"
        password = pw_file.read_text().strip()
        assert pw_file.stat().st_mode & 0o777 == 0o600
        assert f"as admin with password {password}" in first.log_text()
        url = f"http://127.0.0.1:{port}"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/api/cluster", timeout=30)
        assert refused.value.code == 401
        cluster = get_json(url, "/api/cluster", login_sync(url, "admin", password))
        assert first.broker_addr in json.dumps(cluster)
        # a second standalone wanting the same console port still runs its broker
        with StandaloneProcess(tmp_path / "b", extra_args=[f"--consolePort={port}"]) as second:
            wait_until_sync(lambda: "console not started" in second.log_text(), what="the warning")
            assert "rmq standalone listening" in second.log_text()
        assert second.returncode == 0
        # and `rmq console` itself refuses a taken port with exit status 3
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rmq",
                "console",
                "--namesrv",
                first.namesrv_addr,
                "--port",
                str(port),
                "--admin-user",
                USER,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "RMQ_CONSOLE_PASSWORD": PASSWORD},
        )
        assert done.returncode == 3 and "cannot listen" in done.stderr, done
    assert first.returncode == 0
    # a restart keeps the password, and names its file instead of printing it
    with StandaloneProcess(tmp_path / "a", extra_args=[f"--consolePort={free_port()}"]) as again:
        wait_until_sync(lambda: "password in" in again.log_text(), what="the console's login line")
        assert password not in again.log_text()
        assert (tmp_path / "a" / "console" / "admin-password").read_text().strip() == password


def test_a_bad_console_port_stops_standalone(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rmq", "standalone", "--store-dir", str(tmp_path), "--consolePort=http"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "consolePort" in done.stderr, done


def test_the_console_stands_on_the_client_only() -> None:
    """rmq.console is over rmq.Admin: it never reaches into a daemon's internals."""
    import rmq.console
    from tests.common.test_common_layering import _imported_units

    root = pathlib.Path(rmq.console.__file__).parent
    used = {unit for f in root.rglob("*.py") for _, unit in _imported_units(f)}
    assert used and used <= {"console", "client", "common", "protocol", "remoting", "types", "errors", "_version"}, used


def test_the_page_ships_as_package_data() -> None:
    """Every file the page needs is matched by pyproject's package-data for rmq.console (an
    installed rmq serves the page without the source tree)."""
    import fnmatch
    import tomllib

    cfg = tomllib.loads((pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    patterns = cfg["tool"]["setuptools"]["package-data"]["rmq.console"]
    files = sorted(p.relative_to(STATIC_DIR.parent).as_posix() for p in STATIC_DIR.iterdir())
    assert {"static/index.html", "static/app.js", "static/app.css"} <= set(files)
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files), (files, patterns)


async def test_a_time_range_query_keeps_the_newest_within_its_limit(env: Any) -> None:
    _, server, http = env
    status, _ = await post(http, "/api/topic", {"topic": "RangeTopic", "readQueueNums": 2, "writeQueueNums": 2})
    assert status == 200
    async with rmq.Producer(server.config.namesrv_addr, "RangeProducer") as p:
        sent = [(await p.send(rmq.Message("RangeTopic", b"r%d" % i))).msg_id for i in range(12)]
    got = await server.service.messages_by_time("RangeTopic", 0, 2**62, limit=5)
    assert got["truncated"] is True and len(got["messages"]) == 5
    stamps = [(m["storeTimestamp"], m["queueOffset"]) for m in got["messages"]]
    assert stamps == sorted(stamps, reverse=True)
    everything = await server.service.messages_by_time("RangeTopic", 0, 2**62)
    assert everything["truncated"] is False and {m["msgId"] for m in everything["messages"]} == set(sent)
    assert {m["msgId"] for m in got["messages"]} <= set(sent)
    status, data, _ = await get(http, "/api/messages", topic="RangeTopic", begin=5, end=4)
    assert status == 400 and "before its beginning" in data["error"]


def test_standalone_without_aiohttp_warns_and_runs(tmp_path: pathlib.Path) -> None:
    """With aiohttp not importable, ``rmq standalone`` logs why there is no console and serves
    its broker all the same."""
    from rmq._testing import wait_for_port, wait_until_sync

    log_path = tmp_path / "standalone.log"
    ns_port, broker_port = free_port(), free_broker_port()
    code = (
        "import sys; sys.modules['aiohttp'] = None\n"  # `import aiohttp` now raises ImportError
        "from rmq.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                "standalone",
                "--store-dir",
                str(tmp_path / "store"),
                "--namesrv-port",
                str(ns_port),
                "--broker-port",
                str(broker_port),
                f"--consolePort={free_port()}",
                *StandaloneProcess.TEST_FILE_SIZES,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until_sync(
            lambda: "console not started" in log_path.read_text() or proc.poll() is not None,
            timeout=60,
            what="the console's warning",
        )
        text = log_path.read_text()
        assert "the console needs aiohttp" in text, text
        assert "rmq standalone listening" in text and wait_for_port("127.0.0.1", broker_port, 10.0)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0, log_path.read_text()
