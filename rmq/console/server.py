"""The console's HTTP server (aiohttp): the page and its assets, and the JSON API under
``/api/`` that the page's script calls.

Every API call runs under a timeout (``request_timeout``) and at most ``max_concurrent`` at
once (further ones wait their turn), so a page left open in many tabs cannot flood the
brokers; GET answers are cached for ``cache_ttl`` seconds in a table of at most
``cache_entries`` (pages poll every few seconds). Any write empties the cache.

A broker's refusal becomes ``{"error": text, "code": n, "remark": text}`` with status 502, a
bad request 400, a missing message 404, an unreachable peer 503, a timeout 504; anything else
is logged with its traceback and answered ``{"error": "internal error: <type>"}`` (500), never
a traceback in the page. Every answer forbids framing and inline script
(Content-Security-Policy).

Guards, in this order, on every request (:meth:`ConsoleServer._guard`):

* **Host** (DNS rebinding): the ``Host`` header must name a loopback name or address, the
  address the console binds, or one of ``host_names``; else 421 with a text saying how to add
  the name. A page from ``rebind.example`` whose name now resolves to 127.0.0.1 sends
  ``Host: rebind.example:PORT`` and is refused before anything else, the page itself included.
* **Session**: every ``/api/`` call but ``/api/login`` needs the session cookie that a login
  set (reads too), else 401.
* **CSRF**: every write (POST) must be ``application/json``, carry the session's token in
  ``X-CSRF-Token`` (the login's answer, and ``GET /api/session``), and, when the browser sends
  ``Origin``, come from the console's own origin; else 403. The cookie is ``SameSite=Strict``
  and ``HttpOnly`` as well.
"""

from __future__ import annotations

import asyncio
import csv
import functools
import hmac
import io
import ipaddress
import json
import logging
import pathlib
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from rmq import __version__
from rmq.client.admin import Admin, AdminError
from rmq.common.constants import TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.errors import BrokerResponseError, RemotingError

from .auth import USER_NAME, LoginLimiter, SessionTable, hash_password, verify_password
from .sampler import PrometheusError, PrometheusHistory, TpsSampler
from .service import ConsoleService, now_ms

__all__ = ["ConsoleConfig", "ConsoleServer", "CSRF_HEADER", "STATIC_DIR", "check_host_names", "host_allowed"]

log = logging.getLogger("rmq.console")
_warn = RateLimitedLog(log)

#: The page, its script and its style sheet (package data).
STATIC_DIR = pathlib.Path(__file__).parent / "static"

_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_HOST_NAME = re.compile(r"[a-z0-9_.\-]{1,253}|[0-9a-f:.]{2,45}")
#: The header every write carries the session's CSRF token in.
CSRF_HEADER = "X-CSRF-Token"
#: Reads only an admin account may make (the ACL accounts: names and rights of the cluster's users).
ADMIN_READS = frozenset({"/api/acl"})
#: Name server addresses the OPS page remembers (the current one and those switched to).
MAX_KNOWN_NAMESRVS = 16
#: Items of an ACL list (an account's topic or group rights, the global white list).
MAX_ACL_ITEMS = 1000


@functools.cache
def _dummy_hash() -> str:
    """Checked against when the user name is unknown, so a wrong name costs what a wrong
    password does (made on first use: scrypt is not free at import)."""
    return hash_password("", salt=b"rmq-console-none")


@dataclass
class ConsoleConfig:
    """Settings of ``rmq console``.

    Attributes:
        namesrv_addr: the name server(s), ``"host:port"`` or ``"h1:p1;h2:p2"``.
        users: ``{name: scrypt hash}`` who may log in (see :mod:`rmq.console.auth`); at least
            one is required (default none: ``ConsoleServer`` refuses to be built).
        read_only_users: names among ``users`` that may only read (default none: every user
            is an admin); they get 403 for every write and for the ACL page.
        host_names: names (or addresses) a ``Host`` header may carry besides loopback ones and
            ``host`` (default none); what a proxy or a DNS name in front of the console uses.
        access_key / secret_key: ACL credentials the console signs its cluster requests with
            (default None: unsigned).
        tls: TLS to the cluster as ``rmq.Admin`` takes it (default None: plain TCP).
        session_idle / session_max_age: a session ends 1800 s after its last use or 43200 s
            (12 h) after its login; max_sessions: 1024 kept (the least recently used dropped).
        login_attempts / login_window: 5 failed logins from one address within 60 s refuse it
            (429) until the first of them is 60 s old; login_table: 4096 addresses tracked.
        host: address the HTTP server binds (default 127.0.0.1: the console can change the
            cluster, so it is not exposed unless asked for).
        port: HTTP port (default 8080; 0 picks a free one).
        admin_timeout: seconds per remote call of the admin (default 5, mqadmin's).
        request_timeout: seconds one API call may take in all (default 30).
        max_concurrent: API calls served at once (default 8).
        max_waiting: API calls in the house at once, running or waiting (default 64); past it
            a call is answered 503 at once.
        cache_ttl / cache_entries: GET answers reused for 2 s, at most 128 kept.
        sample_interval / history: the dashboard's TPS sampling (10 s, 3600 s kept).
        max_topics_sampled: topics whose TPS is sampled (default 64).
        prometheus_url: a Prometheus scraping ``rmq exporter`` (or the brokers): the dashboard
            reads its history from there, any range up to 30 days (default None: the in-memory
            hour; see :class:`rmq.console.sampler.PrometheusHistory`).
        max_body_bytes: the largest request body accepted (default 256 KiB).
    """

    namesrv_addr: str
    host: str = "127.0.0.1"
    port: int = 8080
    admin_timeout: float = 5.0
    request_timeout: float = 30.0
    max_concurrent: int = 8
    max_waiting: int = 64
    cache_ttl: float = 2.0
    cache_entries: int = 128
    sample_interval: float = 10.0
    history: float = 3600.0
    max_topics_sampled: int = 64
    max_body_bytes: int = 256 * 1024
    users: dict[str, str] = field(default_factory=dict)
    read_only_users: frozenset[str] = frozenset()
    host_names: tuple[str, ...] = ()
    access_key: str | None = None
    secret_key: str | None = None
    tls: bool | ssl.SSLContext | None = None
    session_idle: float = 1800.0
    session_max_age: float = 43200.0
    max_sessions: int = 1024
    login_attempts: int = 5
    login_window: float = 60.0
    login_table: int = 4096
    prometheus_url: str | None = None


class _Cache:
    """GET answers by URL for ``ttl`` seconds, at most ``entries`` (oldest dropped)."""

    def __init__(self, ttl: float, entries: int) -> None:
        self.ttl = ttl
        self.entries = entries
        self._data: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any:
        hit = self._data.get(key)
        if hit is None or time.monotonic() - hit[0] > self.ttl:
            return None
        return hit[1]

    def put(self, key: str, value: Any) -> None:
        self._data[key] = (time.monotonic(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.entries:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()


class ApiError(Exception):
    """An answer other than 200 that the handler decided on (status and text)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Handler = Callable[[web.Request], Awaitable[Any]]


def _int(value: str | None, name: str, default: int | None = None) -> int:
    if value is None or value == "":
        if default is None:
            raise ValueError(f"{name} is required")
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {clip(value, 40)!r}") from None


def _str(q: Any, name: str, *, required: bool = True, limit: int = 1024) -> str:
    v = q.get(name)
    if v is None or v == "":
        if required:
            raise ValueError(f"{name} is required")
        return ""
    if not isinstance(v, str):
        raise ValueError(f"{name} must be text")
    if len(v) > limit:
        raise ValueError(f"{name} is longer than {limit} characters")
    return v.strip()


class ConsoleServer:
    """The console: an :class:`Admin`, the TPS sampler and the HTTP server.

    ``await start()`` binds (OSError when the port is taken), ``await stop()`` closes all;
    ``port`` is the bound port (useful with port 0). ValueError when ``config`` has no user, a
    bad user name or host name.
    """

    def __init__(self, config: ConsoleConfig) -> None:
        if not config.users:
            raise ValueError("the console needs at least one user (a users file, or an admin user and password)")
        bad = [u for u in config.users if not USER_NAME.fullmatch(u)]
        if bad:
            raise ValueError(f"bad console user name {bad[0]!r} (letters, digits, '_', '.', '@', '-'; at most 64)")
        unknown = sorted(set(config.read_only_users) - set(config.users))
        if unknown:
            raise ValueError(f"read-only console user {unknown[0]!r} is not a user")
        self._host_names = check_host_names(config.host_names)
        self.config = config
        self.sessions = SessionTable(
            max_sessions=config.max_sessions,
            idle=config.session_idle,
            max_age=config.session_max_age,
            on_evict=self._session_evicted,
        )
        self.logins = LoginLimiter(
            attempts=config.login_attempts, window=config.login_window, max_entries=config.login_table
        )
        # scrypt takes 16 MiB and tens of ms in a thread: two at once, at most 16 waiting
        self._login_gate = asyncio.Semaphore(2)
        self._logins_waiting = 0
        # the OPS page's client options (the name server, the VIP channel, TLS), switchable
        self.namesrv_addr = config.namesrv_addr
        self.known_namesrvs: list[str] = [config.namesrv_addr]
        self.vip_channel = False
        self.use_tls = bool(config.tls)
        self.admin = self._new_admin(self.namesrv_addr, self.vip_channel, self.use_tls)
        self._switch_lock = asyncio.Lock()
        self.service = ConsoleService(self.admin)
        self.sampler = TpsSampler(
            self.service, interval=config.sample_interval, history=config.history, max_topics=config.max_topics_sampled
        )
        #: the dashboard's history beyond the hour (``--prometheus-url``); ValueError for a bad URL
        self.history = PrometheusHistory(config.prometheus_url) if config.prometheus_url else None
        self._cache = _Cache(config.cache_ttl, config.cache_entries)
        self._gate = asyncio.Semaphore(config.max_concurrent)
        self._waiting = 0
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.app = self._build_app()

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind and serve; start sampling. OSError (port taken) leaves nothing running."""
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, self.config.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            await self.admin.close()
            raise
        self._runner = runner
        addrs = runner.addresses
        self.port = int(addrs[0][1]) if addrs else self.config.port
        self.sampler.start()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.config.host in ("", "0.0.0.0") else self.config.host
        return f"http://{host}:{self.port}/"

    async def stop(self) -> None:
        """Stop sampling, close the HTTP server and the admin's connections (idempotent)."""
        await self.sampler.stop()
        if self.history is not None:
            await self.history.close()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        await self.admin.close()

    # -- the app ---------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_body_bytes, middlewares=[_headers, self._guard])
        r = app.router
        r.add_post("/api/login", self._login)
        r.add_post("/api/logout", self._logout)
        r.add_get("/api/session", self._session)
        r.add_get("/", self._index)
        r.add_static("/static/", STATIC_DIR, follow_symlinks=False)
        s = self.service
        get = self._get
        r.add_get("/api/version", get(self._version))
        r.add_get("/api/cluster", get(lambda q: s.cluster()))
        r.add_get("/api/broker/runtime", get(lambda q: s.broker_runtime(_str(q.query, "addr"))))
        r.add_get("/api/broker/config", get(lambda q: s.broker_config(_str(q.query, "addr"))))
        r.add_get("/api/topics", get(lambda q: s.topics()))
        r.add_get("/api/topic/status", get(lambda q: s.topic_status(_str(q.query, "topic"))))
        r.add_get("/api/topic/route", get(lambda q: s.topic_route(_str(q.query, "topic"))))
        r.add_get("/api/topic/config", get(lambda q: s.topic_config(_str(q.query, "topic"))))
        r.add_get("/api/topic/consumers", get(lambda q: s.topic_consumers(_str(q.query, "topic"))))
        r.add_get("/api/groups", get(lambda q: s.groups()))
        r.add_get("/api/group", get(lambda q: s.group_detail(_str(q.query, "group"))))
        r.add_get(
            "/api/group/running", get(lambda q: s.running_info(_str(q.query, "group"), _str(q.query, "clientId")))
        )
        r.add_get("/api/producers", get(lambda q: s.producers(_str(q.query, "topic"), _str(q.query, "group"))))
        r.add_get("/api/messages", get(self._messages))
        r.add_get(
            "/api/message",
            get(lambda q: s.message_detail(_str(q.query, "msgId"), _str(q.query, "topic", required=False) or None)),
        )
        r.add_get("/api/dlq", get(lambda q: s.dlq_messages(_str(q.query, "group"), *_range(q))))
        r.add_get("/api/dashboard", get(self._dashboard))
        r.add_get("/api/dlq/export", self._dlq_export)
        # the pages of rocketmq-dashboard's message trace, ACL, OPS and RocketMQ 5 views
        r.add_get(
            "/api/trace",
            get(
                lambda q: s.message_trace(
                    msg_id=_str(q.query, "msgId", required=False, limit=128),
                    key=_str(q.query, "key", required=False, limit=128),
                    topic=_str(q.query, "topic", required=False, limit=255),
                    trace_topic=_str(q.query, "traceTopic", required=False, limit=255)
                    or TopicValidator.RMQ_SYS_TRACE_TOPIC,
                )
            ),
        )
        r.add_get("/api/acl", get(lambda q: s.acl()))
        r.add_get("/api/ops", get(self._ops))
        r.add_get("/api/v5/types", get(lambda q: s.v5_topic_types()))
        r.add_get("/api/v5/timers", get(lambda q: s.v5_timers()))
        r.add_get(
            "/api/v5/mode",
            get(lambda q: s.consume_mode(_str(q.query, "topic", limit=255), _str(q.query, "group", limit=255))),
        )
        post = self._write
        r.add_post("/api/topic", post(self._topic_update))
        r.add_post("/api/topic/delete", post(lambda b: s.delete_topic(_str(b, "topic"))))
        r.add_post(
            "/api/topic/send",
            post(
                lambda b: s.send_test_message(
                    _str(b, "topic"),
                    _str(b, "body", required=False, limit=self.config.max_body_bytes),
                    _str(b, "keys", required=False),
                    _str(b, "tags", required=False),
                    _str(b, "messageGroup", required=False),
                )
            ),
        )
        r.add_post("/api/group", post(self._group_update))
        r.add_post("/api/group/delete", post(lambda b: s.delete_group(_str(b, "group"))))
        r.add_post("/api/group/reset", post(self._reset))
        r.add_post(
            "/api/message/resend",
            post(
                lambda b: s.resend(
                    _str(b, "msgId"),
                    _str(b, "group"),
                    _str(b, "clientId", required=False),
                    _str(b, "topic", required=False) or None,
                )
            ),
        )
        r.add_post("/api/dlq/resend", post(self._dlq_resend))
        r.add_post("/api/acl/account", post(lambda b: s.acl_update(_acl_account(b))))
        r.add_post("/api/acl/delete", post(lambda b: s.acl_delete(_access_key(b.get("accessKey")))))
        r.add_post("/api/acl/white", post(lambda b: s.acl_white_list(_addr_list(b.get("addrs"), "addrs"))))
        r.add_post("/api/ops/namesrv", post(self._ops_namesrv))
        r.add_post("/api/ops/client", post(self._ops_client))
        r.add_post(
            "/api/v5/mode",
            post(
                lambda b: s.set_consume_mode(
                    _str(b, "topic", limit=255),
                    _str(b, "group", limit=255),
                    _str(b, "mode", limit=8),
                    _int(str(b.get("popShareQueueNum", "")), "popShareQueueNum", 0),
                )
            ),
        )
        return app

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC_DIR / "index.html")

    async def _version(self, request: web.Request) -> Any:
        return {"version": __version__, "namesrvAddr": self.namesrv_addr}

    # -- OPS: the console's own client (the dashboard's OpsController) ------------------------

    def _new_admin(self, namesrv_addr: str, vip_channel: bool, use_tls: bool) -> Admin:
        c = self.config
        tls = (c.tls if c.tls else True) if use_tls else None
        return Admin(
            namesrv_addr,
            timeout=c.admin_timeout,
            access_key=c.access_key,
            secret_key=c.secret_key,
            tls=tls,
            vip_channel=vip_channel,
        )

    async def _ops(self, request: web.Request) -> Any:
        return self.ops_state()

    def ops_state(self) -> dict[str, Any]:
        """What the OPS page shows: the name server in use, those known, the VIP and TLS options."""
        return {
            "namesrvAddr": self.namesrv_addr,
            "namesrvAddrs": list(self.known_namesrvs),
            "vipChannel": self.vip_channel,
            "tls": self.use_tls,
        }

    async def _ops_namesrv(self, b: dict[str, Any]) -> Any:
        addr = _namesrv_addr(b.get("namesrvAddr"))
        await self._switch(addr, self.vip_channel, self.use_tls)
        return self.ops_state()

    async def _ops_client(self, b: dict[str, Any]) -> Any:
        vip, tls = b.get("vipChannel", self.vip_channel), b.get("tls", self.use_tls)
        if not isinstance(vip, bool) or not isinstance(tls, bool):
            raise ValueError("vipChannel and tls must be true or false")
        await self._switch(self.namesrv_addr, vip, tls)
        return self.ops_state()

    async def _switch(self, namesrv_addr: str, vip_channel: bool, use_tls: bool) -> None:
        """Point the console at ``namesrv_addr`` with these client options, once a new admin
        has read the cluster through them: GET_BROKER_CLUSTER_INFO from the name server (at
        least one master), then GET_BROKER_RUNTIME_INFO and GET_BROKER_CONSUME_STATS from each
        master (two reads the pages make; through the VIP channel when it is on, where an rmq
        broker answers only its slave's codes). Any failure leaves the console as it was."""
        async with self._switch_lock:
            new = self._new_admin(namesrv_addr, vip_channel, use_tls)
            try:
                info = await new.examine_broker_cluster_info()
                masters = info.master_addrs()
                if not masters:
                    raise AdminError("the name server knows no master broker")
                for addr in masters.values():
                    await new.fetch_broker_runtime_stats(addr)
                    await new.fetch_consume_stats_in_broker(addr)
            except (AdminError, BrokerResponseError, RemotingError, OSError, TimeoutError) as e:
                await new.close()
                on = {True: "on", False: "off"}
                what = f"name server {namesrv_addr}, VIP channel {on[vip_channel]}, TLS {on[use_tls]}"
                raise ApiError(
                    502, f"not switched: the cluster does not answer with {what}: {e or type(e).__name__}"
                ) from None
            except BaseException:
                await new.close()
                raise
            old, self.admin = self.admin, new
            self.service.admin = new
            self.namesrv_addr, self.vip_channel, self.use_tls = namesrv_addr, vip_channel, use_tls
            if namesrv_addr not in self.known_namesrvs:
                self.known_namesrvs.append(namesrv_addr)
                del self.known_namesrvs[:-MAX_KNOWN_NAMESRVS]
            self._cache.clear()
            log.info("console: now using %s (VIP channel %s, TLS %s)", namesrv_addr, vip_channel, use_tls)
        await old.close()

    async def _dlq_export(self, request: web.Request) -> web.StreamResponse:
        """``GET /api/dlq/export?group&begin&end&format=csv|json``: the dead letters a search
        shows (at most ``MAX_TIME_RANGE_MESSAGES``, the newest), as a file to save."""
        fmt = request.query.get("format", "csv")
        if fmt not in ("csv", "json"):
            return web.json_response({"error": "format must be csv or json"}, status=400)

        async def rows() -> Any:
            return await self.service.dlq_messages(_str(request.query, "group", limit=255), *_range(request))

        status, data = await self._run(rows)
        if status != 200:
            return web.json_response(data, status=status)
        group = re.sub(r"[^A-Za-z0-9_.\-]", "_", request.query.get("group", "group"))[:64]
        body = export_rows(data["messages"], fmt)
        return web.Response(
            text=body,
            content_type="text/csv" if fmt == "csv" else "application/json",
            headers={"Content-Disposition": f'attachment; filename="dlq-{group}.{fmt}"'},
        )

    async def _messages(self, request: web.Request) -> Any:
        q = request.query
        topic = _str(q, "topic")
        if q.get("key"):
            return await self.service.messages_by_key(topic, _str(q, "key"))
        return await self.service.messages_by_time(topic, *_range(request))

    async def _topic_update(self, b: dict[str, Any]) -> Any:
        return await self.service.create_or_update_topic(
            _str(b, "topic"),
            read_queue_nums=_int(str(b.get("readQueueNums", "")), "readQueueNums", 8),
            write_queue_nums=_int(str(b.get("writeQueueNums", "")), "writeQueueNums", 8),
            perm=_int(str(b.get("perm", "")), "perm", 6),
            order=bool(b.get("order", False)),
            cluster=_str(b, "cluster", required=False) or None,
            broker_addr=_str(b, "brokerAddr", required=False) or None,
            message_type=_str(b, "messageType", required=False) or None,
        )

    async def _group_update(self, b: dict[str, Any]) -> Any:
        config = b.get("config") or {}
        if not isinstance(config, dict):
            raise ValueError("config must be an object")
        return await self.service.create_or_update_group(
            _str(b, "group"),
            config,
            cluster=_str(b, "cluster", required=False) or None,
            broker_addr=_str(b, "brokerAddr", required=False) or None,
        )

    async def _reset(self, b: dict[str, Any]) -> Any:
        topics = b.get("topics")
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics) or len(topics) > 1000:
            raise ValueError("topics must be a list of topic names")
        ts = b.get("timestamp")
        if not isinstance(ts, int) or isinstance(ts, bool) or ts < -1:
            raise ValueError("timestamp must be ms since the epoch, or -1 for the end (skip accumulated)")
        return await self.service.reset_offset(_str(b, "group"), topics, ts)

    async def _dlq_resend(self, b: dict[str, Any]) -> Any:
        ids = b.get("msgIds")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or not 0 < len(ids) <= 100:
            raise ValueError("msgIds must be a list of 1 to 100 message ids")
        return await self.service.dlq_resend(_str(b, "group"), ids)

    # -- login and the guards -----------------------------------------------------------------

    @property
    def cookie_name(self) -> str:
        """The session cookie's name: per port, as cookies are shared by every port of a host
        (two consoles on one machine must not log each other out)."""
        return f"rmq_console_{self.port}"

    def _session_evicted(self) -> None:
        _warn.warning(
            "console-sessions",
            "console: %d sessions open (max_sessions); the least recently used was logged out",
            self.config.max_sessions,
        )

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Host, then session (``/api/`` but login), then CSRF (writes): see the module docstring."""
        host = _host_name(request.host)
        if not host_allowed(host, self.config.host, self._host_names):
            _warn.warning(
                "console-host",
                "console: refused a request for host %r (not a loopback name, the bound address or a --host-name)",
                clip(host, 80),
            )
            return web.Response(
                status=421,
                text=(
                    f"rmq console: the host name {clip(host, 80)!r} is not one this console answers to (a page "
                    "rebinding its DNS name to this machine sends such a name). Use http://127.0.0.1 or "
                    "http://localhost, or start the console with --host-name NAME for a name that should reach it.\n"
                ),
            )
        path = request.path
        if not path.startswith("/api/") or path == "/api/login":
            response: web.StreamResponse = await handler(request)
            return response
        session = self.sessions.get(request.cookies.get(self.cookie_name))
        if session is None:
            return web.json_response({"error": "not logged in (or the session expired): log in again"}, status=401)
        read_only = session.user in self.config.read_only_users
        if read_only and (path in ADMIN_READS or (request.method not in ("GET", "HEAD") and path != "/api/logout")):
            return web.json_response(
                {"error": f"{session.user} is a read-only account: only an admin account may do this"}, status=403
            )
        if request.method not in ("GET", "HEAD"):
            problem = _check_write(request)
            if problem is None:
                sent = request.headers.get(CSRF_HEADER, "")
                if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
                    problem = f"writes need the session's token in the {CSRF_HEADER} header"
            if problem is not None:
                return web.json_response({"error": problem}, status=403)
        response = await handler(request)
        return response

    async def _login(self, request: web.Request) -> web.StreamResponse:
        """``POST /api/login {"username", "password"}``: 200 ``{"username", "csrfToken"}`` and
        the session cookie; 401 for a wrong name or password; 429 past the attempts."""
        problem = _check_write(request)
        if problem is not None:
            return web.json_response({"error": problem}, status=403)
        try:
            body = await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError):
            return web.json_response({"error": "the request body is not JSON"}, status=400)
        user, password = (body.get("username"), body.get("password")) if isinstance(body, dict) else (None, None)
        if not isinstance(user, str) or not isinstance(password, str) or len(user) > 64 or len(password) > 1024:
            return web.json_response({"error": "username and password are required (text)"}, status=400)
        who = request.remote or "?"
        if self._logins_waiting >= 16:
            _warn.warning("console-logins-busy", "console: 16 logins waiting for a password check; more are refused")
            return web.json_response({"error": "too many logins at once; try again shortly"}, status=503)
        self._logins_waiting += 1
        try:
            async with self._login_gate:
                wait = self.logins.retry_after(who)
                if wait > 0:
                    _warn.warning(
                        "console-login-limit", "console: failed logins from %s: refused for %.0f s", who, wait
                    )
                    return web.json_response(
                        {"error": f"too many failed logins from this address; try again in {wait:.0f} s"},
                        status=429,
                        headers={"Retry-After": str(max(1, round(wait)))},
                    )
                encoded = self.config.users.get(user)
                ok = await asyncio.to_thread(lambda: verify_password(password, encoded or _dummy_hash()))
        finally:
            self._logins_waiting -= 1
        if not ok or encoded is None:
            self.logins.failed(who)
            _warn.warning("console-login-failed", "console: failed login for %r from %s", clip(user, 64), who)
            return web.json_response({"error": "wrong user name or password"}, status=401)
        self.logins.succeeded(who)
        token, session = self.sessions.create(user)
        log.info("console: %s logged in from %s", user, who)
        response = web.json_response(
            {"username": user, "csrfToken": session.csrf, "admin": user not in self.config.read_only_users}
        )
        response.set_cookie(self.cookie_name, token, path="/", httponly=True, samesite="Strict")
        return response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        """``POST /api/logout`` (a write: session and CSRF token needed): ends the session."""
        self.sessions.drop(request.cookies.get(self.cookie_name))
        response = web.json_response({"result": "logged out"})
        response.del_cookie(self.cookie_name, path="/")
        return response

    async def _session(self, request: web.Request) -> web.StreamResponse:
        """``GET /api/session``: who is logged in and the CSRF token (a reloaded page's)."""
        session = self.sessions.get(request.cookies.get(self.cookie_name))
        if session is None:  # (the guard let it through a moment ago: it cannot end in between)
            return web.json_response({"error": "not logged in"}, status=401)
        return web.json_response(
            {
                "username": session.user,
                "csrfToken": session.csrf,
                "admin": session.user not in self.config.read_only_users,
            }
        )

    async def _dashboard(self, request: web.Request) -> dict[str, Any]:
        """``GET /api/dashboard[?range=seconds]``: the TPS history, from Prometheus when the
        console has one (a failure is shown on the page with the in-memory hour instead), else
        the in-memory hour."""
        snap = {**self.sampler.snapshot(), "source": "memory"}
        if self.history is None:
            return snap
        range_s = self.history.range_of(request.query.get("range"))
        try:
            return await self.history.snapshot(range_s)
        except PrometheusError as e:
            return {**snap, "lastError": f"{e}; showing the console's own last hour"}

    # -- request plumbing --------------------------------------------------------------------

    def _get(self, fn: Callable[[web.Request], Awaitable[Any]]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            key = str(request.rel_url)
            cached = self._cache.get(key)
            if cached is not None:
                return web.json_response(cached)
            status, data = await self._run(lambda: fn(request))
            if status == 200:
                self._cache.put(key, data)
            return web.json_response(data, status=status)

        return handler

    def _write(self, fn: Callable[[dict[str, Any]], Awaitable[Any]]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            try:  # (the guard has checked the session, the CSRF token and the type)
                body = await request.json(loads=json.loads)
            except (ValueError, UnicodeDecodeError):
                return web.json_response({"error": "the request body is not JSON"}, status=400)
            except web.HTTPRequestEntityTooLarge:
                return web.json_response(
                    {"error": f"the request body is over {self.config.max_body_bytes} bytes"}, status=413
                )
            if not isinstance(body, dict):
                return web.json_response({"error": "the request body must be a JSON object"}, status=400)
            self._cache.clear()
            status, data = await self._run(lambda: fn(body))
            self._cache.clear()
            return web.json_response(data if status != 200 else {"result": data}, status=status)

        return handler

    async def _run(self, call: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
        """One API call under the gate and the timeout; errors become (status, {"error"…}).
        Past ``max_waiting`` calls waiting for the gate, a call is refused at once (503)."""
        if self._waiting >= self.config.max_waiting:
            return 503, {"error": f"the console is busy ({self._waiting} requests waiting); try again shortly"}
        self._waiting += 1
        try:
            return await self._run_gated(call)
        finally:
            self._waiting -= 1

    async def _run_gated(self, call: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
        try:
            async with self._gate, asyncio.timeout(self.config.request_timeout):
                return 200, await call()
        except (AdminError, BrokerResponseError) as e:
            return 502, {"error": str(e), "code": e.code, "remark": e.remark, "addr": getattr(e, "addr", None)}
        except TimeoutError:
            return 504, {"error": f"no answer within {self.config.request_timeout:g} s"}
        except RemotingError as e:
            return 503, {"error": f"cannot reach the cluster: {e}"}
        except OSError as e:
            return 503, {"error": f"cannot reach the cluster: {e.strerror or e}"}
        except LookupError as e:
            return 404, {"error": str(e.args[0]) if e.args else "not found"}
        except ValueError as e:
            return 400, {"error": str(e)}
        except ApiError as e:
            return e.status, {"error": str(e)}
        except Exception as e:  # noqa: BLE001 - a page gets a line, the log gets the traceback
            # rate-limited: a page (or any HTTP client) can repeat the call that fails
            _warn.error(f"api-{type(e).__name__}", "console: API call failed", exc_info=True)
            return 500, {"error": f"internal error: {type(e).__name__} (details in the console's log)"}


def _host_name(host: str) -> str:
    """The name of a ``Host`` header: no port, lower case, no trailing dot, IPv6 unbracketed."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    name, sep, port = host.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        host = name
    return host.rstrip(".")


def check_host_names(names: tuple[str, ...] | list[str]) -> frozenset[str]:
    """``names`` as :func:`host_allowed` compares them; ValueError naming one that is not a
    DNS name or an IP address (a scheme, port or path is a mistake, not a name)."""
    out = frozenset(_host_name(h) for h in names)
    for h in sorted(out):
        if not _HOST_NAME.fullmatch(h):
            raise ValueError(
                f"bad console host name {h!r} (expected a DNS name or an IP address, without scheme, port or path)"
            )
    return out


def host_allowed(host: str, bound: str, names: frozenset[str]) -> bool:
    """Whether a request naming ``host`` (see :func:`_host_name`) is for this console: a
    loopback name or address, the address it binds (``bound``, unless a wildcard), or one of
    ``names``. A rebinding page's own DNS name is none of them."""
    if host in names or host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if ip.is_loopback:
        return True
    return bound not in ("", "0.0.0.0", "::") and host == _host_name(bound)


def _check_write(request: web.Request) -> str | None:
    """Writes only as JSON from this origin: a cross-site form can send neither the type nor
    (in a browser) a same-origin Origin header."""
    if request.content_type != "application/json":
        return "writes must be sent as application/json"
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        return "writes are accepted from the console's own pages only"
    return None


_PERMS = frozenset({"DENY", "PUB", "SUB", "PUB|SUB"})
_NAMESRV = re.compile(r"[A-Za-z0-9_.\-]{1,253}:(\d{1,5})")


def _access_key(v: Any) -> str:
    # Java PlainPermissionManager: an accessKey longer than 6 characters; bounded here
    if not isinstance(v, str) or not 6 < len(v.strip()) <= 128 or any(c.isspace() for c in v.strip()):
        raise ValueError("accessKey must be 7 to 128 characters without spaces")
    return v.strip()


def _perm(v: Any, name: str) -> str:
    v = v or "DENY"
    if v not in _PERMS:
        raise ValueError(f"{name} must be one of DENY, PUB, SUB, PUB|SUB")
    return str(v)


def _perm_list(v: Any, name: str) -> list[str]:
    if v is None or v == "":
        return []
    if not isinstance(v, list) or len(v) > MAX_ACL_ITEMS:
        raise ValueError(f"{name} must be a list of at most {MAX_ACL_ITEMS} items name=PERM")
    out = []
    for item in v:
        if not isinstance(item, str) or len(item) > 300 or "=" not in item:
            raise ValueError(f"{name}: each item is name=PERM (at most 300 characters)")
        n, _, p = item.strip().partition("=")
        out.append(f"{n.strip()}={_perm(p.strip(), name)}")
    return out


def _acl_account(b: dict[str, Any]) -> dict[str, Any]:
    """An account of the ACL page's form, checked (the broker checks again)."""
    secret = b.get("secretKey") or ""
    if not isinstance(secret, str) or (secret and not 6 < len(secret) <= 128):
        raise ValueError("secretKey must be 7 to 128 characters (empty: keep the account's)")
    admin = b.get("admin", False)
    if not isinstance(admin, bool):
        raise ValueError("admin must be true or false")
    return {
        "accessKey": _access_key(b.get("accessKey")),
        "secretKey": secret,
        "admin": admin,
        "whiteRemoteAddress": _str(b, "whiteRemoteAddress", required=False, limit=256),
        "defaultTopicPerm": _perm(b.get("defaultTopicPerm"), "defaultTopicPerm"),
        "defaultGroupPerm": _perm(b.get("defaultGroupPerm"), "defaultGroupPerm"),
        "topicPerms": _perm_list(b.get("topicPerms"), "topicPerms"),
        "groupPerms": _perm_list(b.get("groupPerms"), "groupPerms"),
    }


def _addr_list(v: Any, name: str) -> list[str]:
    if not isinstance(v, list) or len(v) > MAX_ACL_ITEMS or not all(isinstance(a, str) and len(a) <= 256 for a in v):
        raise ValueError(f"{name} must be a list of at most {MAX_ACL_ITEMS} addresses (256 characters each)")
    return [a.strip() for a in v if a.strip()]


def _namesrv_addr(v: Any) -> str:
    """``host:port[;host:port...]``, at most 8 addresses, ports 1..65535; ValueError otherwise."""
    if not isinstance(v, str) or not v.strip() or len(v) > 1024:
        raise ValueError("namesrvAddr must be host:port (several separated by ';')")
    addrs = [a.strip() for a in v.split(";") if a.strip()]
    if not 0 < len(addrs) <= 8:
        raise ValueError("namesrvAddr: 1 to 8 addresses host:port separated by ';'")
    for a in addrs:
        m = _NAMESRV.fullmatch(a)
        if m is None or not 0 < int(m[1]) <= 65535:
            raise ValueError(f"bad name server address {clip(a, 80)!r} (expected host:port, port 1..65535)")
    return ";".join(addrs)


def export_rows(messages: list[dict[str, Any]], fmt: str) -> str:
    """Message rows as CSV (a header line; a cell starting with ``= + - @`` gets a leading
    ``'`` so a spreadsheet does not run it as a formula) or as a JSON array."""
    cols = (
        "msgId",
        "offsetMsgId",
        "topic",
        "tags",
        "keys",
        "storeTimestamp",
        "bornHost",
        "reconsumeTimes",
        "bodySize",
        "preview",
    )
    if fmt == "json":
        return json.dumps([{c: m.get(c) for c in cols} for m in messages], ensure_ascii=False, indent=1)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(cols)
    for m in messages:
        cells = [" ".join(m[c]) if c == "keys" else m.get(c, "") for c in cols]
        w.writerow([("'" + v) if isinstance(v, str) and v[:1] in ("=", "+", "-", "@") else v for v in cells])
    return out.getvalue()


def _range(request: web.Request) -> tuple[int, int]:
    q = request.query
    end = _int(q.get("end"), "end", now_ms())
    begin = _int(q.get("begin"), "begin", end - 3600_000)
    return begin, end


async def _now(value: Any) -> Any:
    return value


@web.middleware
async def _headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as e:
        if request.path.startswith("/api/"):
            response = web.json_response({"error": e.reason}, status=e.status)
        else:
            raise
    for k, v in _SECURITY_HEADERS.items():
        response.headers.setdefault(k, v)
    return response
