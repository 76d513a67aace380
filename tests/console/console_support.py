"""What the console tests share: the test account, and logging in over HTTP (aiohttp for the
in-process server, urllib for a console in a subprocess)."""

from __future__ import annotations

import json
import urllib.request
from http.cookies import SimpleCookie
from typing import Any

import aiohttp

from rmq.console.auth import hash_password
from rmq.console.server import CSRF_HEADER

USER = "tester"
PASSWORD = "console-test-password"
USERS = {USER: hash_password(PASSWORD)}


async def login(http: aiohttp.ClientSession, user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    """Log in through ``http`` (base URL set); returns the headers a logged-in client sends:
    the session cookie and the CSRF token. AssertionError when the login is refused."""
    async with http.post("/api/login", json={"username": user, "password": password}) as r:
        data = await r.json()
        assert r.status == 200, data
        cookie = SimpleCookie(r.headers["Set-Cookie"])
    (morsel,) = cookie.values()
    return {"Cookie": f"{morsel.key}={morsel.value}", CSRF_HEADER: data["csrfToken"]}


def login_sync(base_url: str, user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    """:func:`login` for a console in another process (urllib)."""
    req = urllib.request.Request(
        f"{base_url.rstrip('/')}/api/login",
        method="POST",
        data=json.dumps({"username": user, "password": password}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        data = json.loads(r.read())
        cookie = SimpleCookie(r.headers["Set-Cookie"])
    (morsel,) = cookie.values()
    return {"Cookie": f"{morsel.key}={morsel.value}", CSRF_HEADER: data["csrfToken"]}


def get_json(base_url: str, path: str, headers: dict[str, str]) -> Any:
    """GET ``path`` of a console in another process, logged in with ``headers``."""
    req = urllib.request.Request(f"{base_url.rstrip('/')}{path}", headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def log_in(pg: Any, user: str = USER, password: str = PASSWORD) -> None:
    """Fill a browser page's login form and submit it (the caller waits for what follows)."""
    pg.fill("#login-user", user)
    pg.fill("#login-password", password)
    pg.click("#login-submit")
