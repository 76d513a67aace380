"""The console's doors, tried as an outsider would: every API call needs a login (reads too),
the session cookie is HttpOnly and SameSite=Strict and ends on logout, idle time and age, a
DNS-rebinding page (``Host: rebind.example:PORT``) can neither list nor delete topics, a
cross-site POST without the session's CSRF token changes nothing, failed logins are rate
limited, users files hold only hashes, and the console signs its requests for a cluster with
ACL on (``rmq console --access-key`` and ``rmq standalone --aclEnable=true`` alike)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
import textwrap
import urllib.error
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from rmq._testing import StandaloneProcess, free_port, run_standalone, wait_until_sync
from rmq.console import ConsoleConfig, ConsoleServer
from rmq.console.auth import LoginLimiter, SessionTable, hash_password, load_users, parse_users, verify_password
from rmq.console.server import CSRF_HEADER, host_allowed
from tests.console.console_support import PASSWORD, USER, USERS, get_json, login, login_sync

ACL_ADMIN, ACL_SECRET = "consoleAdmin", "console-secret-1"
PLAIN_ACL = textwrap.dedent(f"""
    accounts:
      - accessKey: plainUser
        secretKey: plain-secret-1
        admin: false
        defaultTopicPerm: SUB
      - accessKey: {ACL_ADMIN}
        secretKey: {ACL_SECRET}
        admin: true
    """)


@contextlib.asynccontextmanager
async def console(ns_addr: str, **kw: Any) -> AsyncIterator[tuple[ConsoleServer, str]]:
    server = ConsoleServer(ConsoleConfig(ns_addr, port=0, users=USERS, **kw))
    await server.start()
    try:
        yield server, server.url.rstrip("/")
    finally:
        await server.stop()


@pytest.fixture
async def env(tmp_path: pathlib.Path) -> AsyncIterator[tuple[ConsoleServer, str]]:
    async with run_standalone(tmp_path / "store") as (ns, _):
        async with console(f"127.0.0.1:{ns.port}", host_names=("console.example",)) as c:
            yield c


async def _topics(http: aiohttp.ClientSession, headers: dict[str, str]) -> list[str]:
    async with http.get("/api/topics", headers=headers) as r:
        assert r.status == 200, await r.text()
        return [t["topic"] for t in await r.json()]


async def test_every_api_call_needs_a_session_reads_too(env: Any) -> None:
    _, url = env
    async with aiohttp.ClientSession(url) as http:
        for path in ("/api/topics", "/api/version", "/api/cluster", "/api/session", "/api/no/such/thing"):
            async with http.get(path) as r:
                assert r.status == 401, path
                assert "log in" in (await r.json())["error"]
        async with http.post("/api/topic", json={"topic": "Anon"}) as r:
            assert r.status == 401
        async with http.get("/api/topics", headers={"Cookie": f"rmq_console_{env[0].port}=forged"}) as r:
            assert r.status == 401
        async with http.get("/") as r:  # the page (its login form) is served to anyone on a good host
            assert r.status == 200 and "Set-Cookie" not in r.headers


async def test_login_cookie_is_strict_and_logout_ends_the_session(env: Any) -> None:
    server, url = env
    async with aiohttp.ClientSession(url) as http:
        async with http.post("/api/login", json={"username": USER, "password": "wrong-password"}) as r:
            assert r.status == 401 and (await r.json())["error"] == "wrong user name or password"
            assert "Set-Cookie" not in r.headers
        async with http.post("/api/login", json={"username": "nobody", "password": PASSWORD}) as r:
            assert r.status == 401
        async with http.post("/api/login", json={"username": USER, "password": PASSWORD}) as r:
            assert r.status == 200
            body = await r.json()
            cookie = r.headers["Set-Cookie"]
        assert body["username"] == USER and len(body["csrfToken"]) >= 32
        attrs = {a.strip().split("=")[0].lower(): a.strip() for a in cookie.split(";")}
        assert cookie.startswith(f"rmq_console_{server.port}=")
        assert "httponly" in attrs and attrs["samesite"].lower() == "samesite=strict" and attrs["path"] == "Path=/"
        headers = {"Cookie": cookie.split(";")[0]}
        assert "TBW102" in await _topics(http, headers)
        async with http.get("/api/session", headers=headers) as r:
            assert (await r.json()) == body
        async with http.post("/api/logout", json={}, headers=headers) as r:  # no token: a forged logout
            assert r.status == 403
        async with http.post("/api/logout", json={}, headers={**headers, CSRF_HEADER: body["csrfToken"]}) as r:
            assert r.status == 200
        async with http.get("/api/topics", headers=headers) as r:
            assert r.status == 401


async def test_a_dns_rebinding_page_can_neither_list_nor_delete_topics(env: Any) -> None:
    """The attack of issue 23: a page on rebind.example, its name now resolving to 127.0.0.1,
    sends ``Host: rebind.example:PORT``. Even holding a valid session and token it gets
    nothing; the same calls for 127.0.0.1 / localhost / a --host-name go through."""
    server, url = env
    async with aiohttp.ClientSession(url) as http:
        auth = await login(http)
        async with http.post(
            "/api/topic", json={"topic": "Precious", "readQueueNums": 1, "writeQueueNums": 1}, headers=auth
        ) as r:
            assert r.status == 200, await r.text()
        rebind = {"Host": f"rebind.example:{server.port}"}
        for method, path, body in (
            ("GET", "/api/topics", None),
            ("POST", "/api/topic/delete", {"topic": "Precious"}),
            ("GET", "/", None),
            ("POST", "/api/login", {"username": USER, "password": PASSWORD}),
        ):
            async with http.request(
                method, path, json=body, headers={**auth, **rebind, "Origin": f"http://rebind.example:{server.port}"}
            ) as r:
                text = await r.text()
                assert r.status == 421, (path, text)
                assert "rebind.example" in text and "--host-name" in text and "Precious" not in text
        assert "Precious" in await _topics(http, auth)  # still there
        for host in (
            f"localhost:{server.port}",
            f"127.0.0.1:{server.port}",
            f"[::1]:{server.port}",
            f"console.example:{server.port}",
            "CONSOLE.EXAMPLE.",
        ):
            assert "Precious" in await _topics(http, {**auth, "Host": host}), host
    assert not host_allowed("rebind.example", "127.0.0.1", frozenset())
    assert not host_allowed("10.1.2.3", "127.0.0.1", frozenset())
    assert host_allowed("10.1.2.3", "10.1.2.3", frozenset()) and not host_allowed("10.1.2.3", "0.0.0.0", frozenset())


async def test_a_cross_site_post_without_the_token_changes_nothing(env: Any) -> None:
    """Whatever cookie a browser attaches, a write without the session's token (a form or a
    fetch from another site cannot read it) is refused; so is a foreign Origin and a form body."""
    _, url = env
    async with aiohttp.ClientSession(url) as http:
        auth = await login(http)
        async with http.post(
            "/api/topic", json={"topic": "Kept", "readQueueNums": 1, "writeQueueNums": 1}, headers=auth
        ) as r:
            assert r.status == 200
        cookie_only = {"Cookie": auth["Cookie"]}
        attempts: list[tuple[dict[str, str], Any]] = [
            (cookie_only, {"json": {"topic": "Kept"}}),
            ({**cookie_only, CSRF_HEADER: "guessed"}, {"json": {"topic": "Kept"}}),
            ({**auth, "Origin": "http://evil.example"}, {"json": {"topic": "Kept"}}),
            (cookie_only, {"data": {"topic": "Kept"}}),  # a plain HTML form
        ]
        for headers, body in attempts:
            async with http.post("/api/topic/delete", headers=headers, **body) as r:
                assert r.status == 403, (headers, await r.text())
        assert "Kept" in await _topics(http, auth)
        async with http.post("/api/topic/delete", json={"topic": "Kept"}, headers={**auth, "Origin": url}) as r:
            assert r.status == 200, await r.text()
        assert "Kept" not in await _topics(http, auth)


async def test_failed_logins_are_rate_limited(tmp_path: pathlib.Path) -> None:
    async with console(f"127.0.0.1:{free_port()}", login_attempts=3, login_window=3600) as (server, url):
        async with aiohttp.ClientSession(url) as http:
            for _ in range(3):
                async with http.post("/api/login", json={"username": USER, "password": "guess"}) as r:
                    assert r.status == 401
            async with http.post("/api/login", json={"username": USER, "password": PASSWORD}) as r:
                assert r.status == 429, await r.text()
                assert int(r.headers["Retry-After"]) > 0 and "too many failed logins" in (await r.json())["error"]
        assert len(server.logins) == 1


def test_the_login_and_session_tables_are_bounded_and_expire() -> None:
    now = [0.0]
    limiter = LoginLimiter(attempts=2, window=10, max_entries=3, clock=lambda: now[0])
    for addr in ("a", "b", "c", "d"):
        limiter.failed(addr)
    assert len(limiter) == 3 and limiter.retry_after("a") == 0  # a forgotten first
    limiter.failed("d")
    assert limiter.retry_after("d") == 10
    now[0] = 10.5
    assert limiter.retry_after("d") == 0
    limiter.failed("b")
    limiter.succeeded("b")
    assert limiter.retry_after("b") == 0

    evicted: list[int] = []
    now[0] = 0.0
    table = SessionTable(max_sessions=2, idle=10, max_age=25, clock=lambda: now[0], on_evict=lambda: evicted.append(1))
    t1, _ = table.create("u1")
    t2, _ = table.create("u2")
    now[0] = 1
    assert table.get(t1) is not None  # t1 used: t2 is now the least recently used
    t3, _ = table.create("u3")
    assert evicted == [1] and table.get(t2) is None and len(table) == 2
    now[0] = 9
    assert table.get(t1) is not None and table.get(t3) is not None
    now[0] = 18
    assert table.get(t1) is not None  # used 9 s ago: alive
    now[0] = 26
    assert table.get(t1) is None  # 26 s after the login: past max_age, however used
    now[0] = 40
    assert table.get(t3) is None  # idle 31 s
    table.drop("no-such-token")


def test_users_files_hold_hashes_only(tmp_path: pathlib.Path) -> None:
    h = hash_password("s3cret-password")
    assert h.startswith("scrypt$") and "s3cret" not in h and h != hash_password("s3cret-password")
    assert verify_password("s3cret-password", h) and not verify_password("s3cret-passwore", h)
    assert not verify_password("x", "scrypt$1$1$1$bad$bad")
    f = tmp_path / "users.properties"
    f.write_text(f"# console users\n\nalice = {h}\n")
    assert load_users(str(f)) == {"alice": h}
    f.write_text("alice=plain-text-password\n")
    with pytest.raises(ValueError) as e:
        load_users(str(f))
    assert "line 1" in str(e.value) and "plain-text-password" not in str(e.value) and "--hash-password" in str(e.value)
    with pytest.raises(ValueError, match="line 2"):
        parse_users(f"bob={h}\nbad name={h}\n", "users")
    f.write_text("# nobody\n")
    with pytest.raises(ValueError, match="no user"):
        load_users(str(f))
    with pytest.raises(ValueError, match="at least one user"):
        ConsoleServer(ConsoleConfig("127.0.0.1:9876"))


def test_hash_password_makes_a_users_line_and_the_console_needs_a_user(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rmq", "console", "--hash-password", "alice"],
        input="alice-password\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    users = parse_users(done.stdout, "stdout")
    assert verify_password("alice-password", users["alice"])
    env = {k: v for k, v in os.environ.items() if k != "RMQ_CONSOLE_PASSWORD"}
    for args, text in (
        (["--port", "0"], "nobody could log in"),
        (["--admin-user", "alice"], "--admin-user needs a password"),
        (["--users-file", str(tmp_path / "missing")], "cannot read the console's users file"),
        (["--admin-user", "alice", "--admin-password", "pw", "--host-name", "http://evil/"], "bad console host name"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "rmq", "console", "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode == 2 and text in done.stderr, done
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmq",
            "standalone",
            "--store-dir",
            str(tmp_path / "s"),
            "--consoleHostNames=ok.example,http://evil/",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "consoleHostNames" in done.stderr and "http://evil" in done.stderr, done


async def test_the_console_signs_for_a_cluster_with_acl_on(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    async with run_standalone(tmp_path / "store", acl_enable=True, rocketmq_home=str(home)) as (ns, _):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with console(ns_addr) as (_, url), aiohttp.ClientSession(url) as http:
            auth = await login(http)
            async with http.get("/api/cluster", headers=auth) as r:  # unsigned: the broker refuses
                assert "No accessKey is configured" in await r.text()
        async with (
            console(ns_addr, access_key=ACL_ADMIN, secret_key=ACL_SECRET) as (_, url),
            aiohttp.ClientSession(url) as http,
        ):
            auth = await login(http)
            async with http.post(
                "/api/topic", json={"topic": "AclTopic", "readQueueNums": 1, "writeQueueNums": 1}, headers=auth
            ) as r:
                assert r.status == 200, await r.text()
            assert "AclTopic" in await _topics(http, auth)
            async with http.get("/api/cluster", headers=auth) as r:
                text = await r.text()
                assert r.status == 200 and "AclException" not in text and '"version"' in text, text


def test_standalone_with_acl_gives_its_console_an_admin_account(tmp_path: pathlib.Path) -> None:
    """``rmq standalone --aclEnable=true``: the embedded console signs with plain_acl.yml's
    admin account, so it lists topics and the broker refuses nothing."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    port = free_port()
    with StandaloneProcess(
        tmp_path / "store",
        extra_args=[
            f"--consolePort={port}",
            "--aclEnable=true",
            f"--rocketmqHome={home}",
            "--consoleHostNames=mq.example",
        ],
    ) as proc:
        wait_until_sync(lambda: "rmq console on" in proc.log_text(), what="the console's line")
        assert f"signing with the ACL admin account {ACL_ADMIN}" in proc.log_text()
        url = f"http://127.0.0.1:{port}"
        password = (tmp_path / "store" / "console" / "admin-password").read_text().strip()
        auth = login_sync(url, "admin", password)
        assert "TBW102" in [t["topic"] for t in get_json(url, "/api/topics", auth)]
        assert proc.broker_addr in str(get_json(url, "/api/cluster", auth))
        assert get_json(url, "/api/session", {**auth, "Host": f"mq.example:{port}"})["username"] == "admin"
        with pytest.raises(urllib.error.HTTPError) as refused:
            get_json(url, "/api/session", {**auth, "Host": f"rebind.example:{port}"})
        assert refused.value.code == 421
    assert proc.returncode == 0
    assert "No accessKey" not in proc.log_text() and "AclException" not in proc.log_text()


def test_admin_exporter_and_console_share_the_cluster_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """One definition (rmq.cli.connection) for the three tools: the same name server, ACL and
    TLS flags, and the same default name server."""
    import argparse

    from rmq.cli import _parser
    from rmq.cli.connection import namesrv_of

    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    admin_sub = next(a for a in sub.choices["admin"]._actions if isinstance(a, argparse._SubParsersAction))
    shared = {
        "-n",
        "--namesrvAddr",
        "--namesrv",
        "--aclAccessKey",
        "--access-key",
        "--aclSecretKey",
        "--secret-key",
        "--tls",
        "--tls-config",
    }
    for name, p in (
        ("exporter", sub.choices["exporter"]),
        ("console", sub.choices["console"]),
        ("admin topicList", admin_sub.choices["topicList"]),
    ):
        flags = {o for a in p._actions for o in a.option_strings}
        assert shared <= flags, (name, shared - flags)
    args = parser.parse_args(["console", "--access-key", "ak", "--secret-key", "sk", "--tls-config", "t.properties"])
    assert (namesrv_of(args), args.aclAccessKey, args.aclSecretKey, args.tls_config) == (
        "127.0.0.1:9876",
        "ak",
        "sk",
        "t.properties",
    )
    assert (
        namesrv_of(parser.parse_args(["exporter", "-n", "10.0.0.1:9876;10.0.0.2:9876"]))
        == "10.0.0.1:9876;10.0.0.2:9876"
    )
