"""The console's message trace, ACL, OPS and RocketMQ 5 routes, DLQ export and account roles
against a real broker (in process) and a real console server: what each answers, what it
refuses (bad input, a read-only account, a broker with ACL off, a name server that does not
answer) and that a refused switch leaves the console as it was."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import datetime
import io
import json
import pathlib
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import rmq
from rmq._testing import NoisyNeighbour, StandaloneProcess, free_port, run_standalone, wait_until
from rmq.common.constants import MixAll
from rmq.console import ConsoleConfig, ConsoleServer
from rmq.console.auth import hash_password, parse_users_file
from rmq.console.server import export_rows
from rmq.types import ConsumeFromWhere, ConsumeResult, MessageExt
from tests.console.console_support import PASSWORD, USERS, login

READER = "reader"
ALL_USERS = {**USERS, READER: hash_password(PASSWORD)}

ACL_ADMIN, ACL_SECRET = "consoleAdmin", "console-secret-1"
PLAIN_ACL = textwrap.dedent(f"""
    globalWhiteRemoteAddresses:
      - 10.10.103.*
    accounts:
      - accessKey: plainUser
        secretKey: plain-secret-1
        admin: false
        defaultTopicPerm: SUB
        topicPerms:
          - TopicA=PUB|SUB
      - accessKey: {ACL_ADMIN}
        secretKey: {ACL_SECRET}
        admin: true
    """)


@contextlib.asynccontextmanager
async def console_for(
    ns_addr: str, **kw: Any
) -> AsyncIterator[tuple[ConsoleServer, aiohttp.ClientSession, dict[str, str]]]:
    """A console whose USER is an admin and READER read-only: ``(server, admin session, the
    reader's headers)``."""
    server = ConsoleServer(ConsoleConfig(ns_addr, port=0, users=ALL_USERS, read_only_users=frozenset({READER}), **kw))
    await server.start()
    try:
        async with aiohttp.ClientSession(server.url.rstrip("/")) as anonymous:
            headers = await login(anonymous)
            reader = await login(anonymous, READER, PASSWORD)
        async with aiohttp.ClientSession(server.url.rstrip("/"), headers=headers) as http:
            yield server, http, reader
    finally:
        await server.stop()


async def get(
    http: aiohttp.ClientSession, path: str, headers: dict[str, str] | None = None, **params: Any
) -> tuple[int, Any]:
    async with http.get(path, params=params, headers=headers) as r:
        return r.status, await r.json()


async def post(
    http: aiohttp.ClientSession, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    async with http.post(path, json=body, headers=headers) as r:
        return r.status, await r.json()


# -- roles ---------------------------------------------------------------------------------------


def test_users_file_roles() -> None:
    h = hash_password("x", salt=b"0123456789abcdef")
    users, read_only = parse_users_file(f"a={h}\nb={h},0\nc={h},1\n", "users")
    assert set(users) == {"a", "b", "c"} and read_only == frozenset({"b"})
    with pytest.raises(ValueError, match="line 1: the role of a must be ,0"):
        parse_users_file(f"a={h},admin\n", "users")
    with pytest.raises(ValueError, match="read-only console user 'nobody' is not a user"):
        ConsoleServer(ConsoleConfig("127.0.0.1:9876", users=USERS, read_only_users=frozenset({"nobody"})))


def test_export_rows_csv_and_json() -> None:
    rows = [
        {
            "msgId": "A1",
            "offsetMsgId": "O1",
            "topic": "%DLQ%g",
            "tags": "T",
            "keys": ["k1", "k2"],
            "storeTimestamp": 5,
            "bornHost": "h:1",
            "reconsumeTimes": 3,
            "bodySize": 4,
            "preview": "=cmd|' /C calc'!A0",
        },
    ]
    text = export_rows(rows, "csv")
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0][0] == "msgId" and parsed[1][:5] == ["A1", "O1", "%DLQ%g", "T", "k1 k2"]
    assert parsed[1][-1] == "'=cmd|' /C calc'!A0"  # never a formula in a spreadsheet
    assert json.loads(export_rows(rows, "json"))[0]["keys"] == ["k1", "k2"]


def test_vip_channel_is_the_port_below_by_two() -> None:
    """Java ``MixAll.brokerVIPChannel``: what ``Admin(vip_channel=True)`` calls instead of a broker."""
    assert MixAll.broker_vip_channel(True, "10.0.0.1:10911") == "10.0.0.1:10909"
    assert MixAll.broker_vip_channel(False, "10.0.0.1:10911") == "10.0.0.1:10911"
    assert MixAll.broker_vip_channel(True, "no-port") == "no-port"
    assert rmq.Admin("127.0.0.1:1", vip_channel=True).vip_channel and not rmq.Admin("127.0.0.1:1").vip_channel


# -- message trace -------------------------------------------------------------------------------


async def test_trace_by_message_id_and_by_key(tmp_path: pathlib.Path) -> None:
    async with run_standalone(tmp_path / "store", trace_topic_enable=True) as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        topic, group = "TraceTopic", "TraceGroup"
        async with console_for(ns_addr) as (_, http, reader):
            handled: list[MessageExt] = []

            async def handler(msg: MessageExt) -> ConsumeResult:
                handled.append(msg)
                return ConsumeResult.SUCCESS

            consumer = rmq.PushConsumer(
                ns_addr,
                group,
                handler=handler,
                trace=True,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )
            consumer.subscribe(topic, "*")
            async with rmq.Producer(ns_addr, "TracePG", trace=True) as producer:
                async with rmq.Admin(ns_addr) as admin:
                    await admin.create_and_update_topic_config(
                        broker.broker_addr, topic, read_queue_nums=1, write_queue_nums=1
                    )
                sent = await producer.send(rmq.Message(topic, b"traced", keys=("order-7",)))
                await consumer.start()
                try:
                    await wait_until(lambda: handled, what="the consumer to take the message")

                    async def traced() -> Any:
                        status, data = await get(http, "/api/trace", msgId=sent.msg_id)
                        msgs = data.get("messages") if status == 200 else None
                        if msgs and msgs[0]["pub"] and any(s["status"] == "success" for s in msgs[0]["subs"]):
                            return msgs[0]
                        return None

                    m = await wait_until(traced, timeout=60, what="the Pub and Sub traces")
                finally:
                    await consumer.close()
            assert m["msgId"] == sent.msg_id and m["topic"] == topic and m["keys"] == "order-7"
            assert m["pub"]["group"] == "TracePG" and m["pub"]["status"] == "success" and m["pub"]["timestamp"] > 0
            sub = next(s for s in m["subs"] if s["status"] == "success")
            assert sub["group"] == group and sub["timestamp"] >= m["pub"]["timestamp"] and sub["costTime"] >= 0
            assert sub["clientHost"]
            # by key, and by key within another topic (nothing)
            status, data = await get(http, "/api/trace", key="order-7", topic=topic)
            assert status == 200 and [x["msgId"] for x in data["messages"]] == [sent.msg_id], data
            status, data = await get(http, "/api/trace", key="order-7", topic="OtherTopic")
            assert status == 200 and data["messages"] == []
            # a read-only account may read traces
            status, data = await get(http, "/api/trace", headers=reader, msgId=sent.msg_id)
            assert status == 200 and data["messages"]
            # a trace topic nobody wrote: 404 saying how to get traces
            status, data = await get(http, "/api/trace", msgId=sent.msg_id, traceTopic="NoTraceTopic")
            assert status == 404 and "traceTopicEnable=true" in data["error"], data
            status, data = await get(http, "/api/trace")
            assert status == 400 and data["error"] == "msgId or key is required"
            status, data = await get(http, "/api/trace", key="k" * 129)
            assert status == 400 and "longer than 128" in data["error"]


# -- ACL -----------------------------------------------------------------------------------------


async def test_acl_accounts_and_white_list(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    async with run_standalone(tmp_path / "store", acl_enable=True, rocketmq_home=str(home)) as (ns, _):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with console_for(ns_addr, access_key=ACL_ADMIN, secret_key=ACL_SECRET) as (_, http, reader):
            status, acl = await get(http, "/api/acl")
            assert status == 200 and acl["enabled"], acl
            keys = {a["accessKey"]: a for a in acl["accounts"]}
            assert set(keys) == {"plainUser", ACL_ADMIN}
            assert keys["plainUser"]["topicPerms"] == ["TopicA=PUB|SUB"] and keys[ACL_ADMIN]["admin"]
            assert "10.10.103.*" in acl["globalWhiteAddrs"]
            assert ACL_SECRET not in json.dumps(acl) and "plain-secret-1" not in json.dumps(acl)  # never sent

            # create, then update without a secret (kept), then delete
            account = {
                "accessKey": "pageUser1",
                "secretKey": "page-secret-1",
                "defaultTopicPerm": "PUB",
                "topicPerms": ["TopicB=SUB"],
                "groupPerms": ["GroupB=SUB"],
            }
            status, data = await post(http, "/api/acl/account", account)
            assert status == 200, data
            status, data = await post(http, "/api/acl/account", {**account, "secretKey": "", "defaultGroupPerm": "SUB"})
            assert status == 200, data
            _, acl = await get(http, "/api/acl")
            row = next(a for a in acl["accounts"] if a["accessKey"] == "pageUser1")
            assert (
                row["defaultTopicPerm"] == "PUB"
                and row["defaultGroupPerm"] == "SUB"
                and row["topicPerms"] == ["TopicB=SUB"]
            )
            # the kept secret still signs: a client with it may send to TopicB? (SUB only) — it
            # may read its route, which needs a valid signature
            async with rmq.Admin(ns_addr, access_key="pageUser1", secret_key="page-secret-1") as a:
                await a.examine_broker_cluster_info()
            status, data = await post(http, "/api/acl/account", {**account, "accessKey": "newUser9", "secretKey": ""})
            assert status == 400 and "secretKey is required for a new account" in data["error"]
            for bad, why in [
                ({**account, "accessKey": "short"}, "accessKey must be 7 to 128"),
                ({**account, "defaultTopicPerm": "ALL"}, "defaultTopicPerm must be one of"),
                ({**account, "topicPerms": ["TopicB"]}, "each item is name=PERM"),
                ({**account, "topicPerms": ["T=x"] * 1001}, "at most 1000"),
            ]:
                status, data = await post(http, "/api/acl/account", bad)
                assert status == 400 and why in data["error"], (bad, data)

            status, data = await post(http, "/api/acl/white", {"addrs": ["192.168.1.*", "10.0.0.1"]})
            assert status == 200, data
            _, acl = await get(http, "/api/acl")
            assert acl["globalWhiteAddrs"] == ["10.0.0.1", "192.168.1.*"]

            status, data = await post(http, "/api/acl/delete", {"accessKey": "pageUser1"})
            assert status == 200, data
            _, acl = await get(http, "/api/acl")
            assert "pageUser1" not in {a["accessKey"] for a in acl["accounts"]}
            status, data = await post(http, "/api/acl/delete", {"accessKey": "pageUser1"})
            assert status == 404 and "no broker has the ACL account pageUser1" in data["error"]

            # a read-only account neither sees nor changes the ACL
            status, data = await get(http, "/api/acl", headers=reader)
            assert status == 403 and "read-only account" in data["error"]
            status, data = await post(http, "/api/acl/delete", {"accessKey": "plainUser"}, headers=reader)
            assert status == 403 and "read-only account" in data["error"]
            status, data = await post(http, "/api/topic", {"topic": "ReaderTopic"}, headers=reader)
            assert status == 403
            async with http.get("/api/session", headers=reader) as r:
                assert (await r.json())["admin"] is False
            async with http.get("/api/session") as r:
                assert (await r.json())["admin"] is True


async def test_acl_off_is_refused_clearly(tmp_path: pathlib.Path) -> None:
    async with run_standalone(tmp_path / "store") as (ns, _):
        async with console_for(f"127.0.0.1:{ns.port}") as (_, http, _reader):
            status, acl = await get(http, "/api/acl")
            assert status == 200 and acl["enabled"] is False and acl["accounts"] == []
            assert "aclEnable=false" in acl["brokers"][0]["error"]
            status, data = await post(
                http, "/api/acl/account", {"accessKey": "pageUser1", "secretKey": "page-secret-1"}
            )
            assert status == 502 and data["error"].startswith("ACL is off on every broker (aclEnable=false)"), data
            status, data = await post(http, "/api/acl/white", {"addrs": []})
            assert status == 502 and "ACL is off on every broker" in data["error"]


# -- OPS -----------------------------------------------------------------------------------------


async def test_ops_switches_only_to_a_cluster_that_answers(tmp_path: pathlib.Path) -> None:
    async with run_standalone(tmp_path / "store") as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with console_for(ns_addr) as (server, http, reader):
            status, ops = await get(http, "/api/ops")
            assert status == 200 and ops == {
                "namesrvAddr": ns_addr,
                "namesrvAddrs": [ns_addr],
                "vipChannel": False,
                "tls": False,
            }
            for bad in ["", "no-port", "host:0", "host:70000", "a:1;" * 9, "h st:1", 5]:
                status, data = await post(http, "/api/ops/namesrv", {"namesrvAddr": bad})
                assert status == 400, (bad, data)
            # nobody listens there: refused, the console unchanged
            dead = f"127.0.0.1:{free_port()}"
            status, data = await post(http, "/api/ops/namesrv", {"namesrvAddr": dead})
            assert status == 502 and data["error"].startswith(
                f"not switched: the cluster does not answer with name server {dead}"
            )
            assert server.namesrv_addr == ns_addr
            status, data = await get(http, "/api/cluster")
            assert status == 200 and data["brokers"][0]["addr"] == broker.broker_addr
            # the same name server by another name: switched, remembered, and used
            other = f"localhost:{ns.port}"
            status, data = await post(http, "/api/ops/namesrv", {"namesrvAddr": other})
            assert status == 200 and data["result"]["namesrvAddr"] == other, data
            assert data["result"]["namesrvAddrs"] == [ns_addr, other]
            assert server.admin.namesrv_addrs == [other] and server.service.admin is server.admin
            status, data = await get(http, "/api/version")
            assert data["namesrvAddr"] == other
            # TLS to a plain cluster, and the VIP channel of a broker on an ephemeral port (it
            # has none): both refused, nothing changed
            for body in ({"tls": True}, {"vipChannel": True}):
                status, data = await post(http, "/api/ops/client", body)
                assert status == 502 and data["error"].startswith("not switched"), data
                _, ops = await get(http, "/api/ops")
                assert ops["tls"] is False and ops["vipChannel"] is False
            status, data = await post(http, "/api/ops/client", {"tls": "yes"})
            assert status == 400
            # a read-only account sees, but cannot switch
            status, _ = await get(http, "/api/ops", headers=reader)
            assert status == 200
            status, data = await post(http, "/api/ops/namesrv", {"namesrvAddr": ns_addr}, headers=reader)
            assert status == 403


# -- RocketMQ 5 views ----------------------------------------------------------------------------


async def test_v5_types_consume_mode_and_timers(tmp_path: pathlib.Path) -> None:
    async with run_standalone(tmp_path / "store") as (ns, _):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with console_for(ns_addr) as (_, http, reader):
            status, data = await post(
                http, "/api/topic", {"topic": "V5Fifo", "messageType": "FIFO", "readQueueNums": 2, "writeQueueNums": 2}
            )
            assert status == 200, data
            status, data = await post(
                http,
                "/api/topic",
                {"topic": "V5Timer", "messageType": "DELAY", "readQueueNums": 1, "writeQueueNums": 1},
            )
            assert status == 200, data
            status, types = await get(http, "/api/v5/types")
            assert status == 200
            by = {t["topic"]: t["messageType"] for t in types}
            assert by["V5Fifo"] == "FIFO" and by["V5Timer"] == "DELAY", by

            status, modes = await get(http, "/api/v5/mode", topic="V5Fifo", group="V5Group")
            assert status == 200 and [m["mode"] for m in modes] == ["PULL"], modes
            status, data = await post(
                http, "/api/v5/mode", {"topic": "V5Fifo", "group": "V5Group", "mode": "POP", "popShareQueueNum": 1}
            )
            assert status == 200, data
            status, modes = await get(http, "/api/v5/mode", topic="V5Fifo", group="V5Group")
            assert status == 200 and [m["mode"] for m in modes] == ["POP"] and modes[0]["queues"] == 2, modes
            for bad, why in [
                ({"mode": "PUSH"}, "mode must be PULL or POP"),
                ({"popShareQueueNum": 5000}, "popShareQueueNum must be 0..1024"),
            ]:
                status, data = await post(
                    http, "/api/v5/mode", {"topic": "V5Fifo", "group": "V5Group", "mode": "POP", **bad}
                )
                assert status == 400 and why in data["error"], data
            status, _ = await post(
                http, "/api/v5/mode", {"topic": "V5Fifo", "group": "V5Group", "mode": "PULL"}, headers=reader
            )
            assert status == 403

            # a timer message an hour ahead: pending on its topic
            async with rmq.Producer(ns_addr, "V5PG") as p:
                later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
                await p.send(rmq.Message("V5Timer", b"later", delivery_time=later))

            async def pending() -> Any:
                status, d = await get(http, "/api/v5/timers")
                assert status == 200, d
                return next((t for t in d["topics"] if t["topic"] == "V5Timer" and t["count"] >= 1), None)

            row = await wait_until(pending, timeout=30, what="the timer message pending")
            assert row["lastChange"] > 0
            _, d = await get(http, "/api/v5/timers")
            assert d["brokers"][0]["timerCongestNum"] >= 1, d


# -- hostile input ---------------------------------------------------------------------------------

WORST_ROUND_TRIP = 2.0  # seconds, as the other NoisyNeighbour tests


async def test_hostile_input_to_the_new_routes_is_refused_while_others_are_served(tmp_path: pathlib.Path) -> None:
    """Malformed, oversized and wrong-typed bodies and queries to the trace, ACL, OPS and RocketMQ 5
    routes each get a 4xx answer (never a 500 or a hang) and change nothing, while a second
    client's round trips to the broker (NoisyNeighbour) and a read-only reader's to the console
    stay answered."""
    big = "x" * 300_000  # past the console's body limit (max_body_bytes)
    hostile_posts: list[tuple[str, Any]] = [
        ("/api/acl/account", {"accessKey": "a" * 5000, "secretKey": "s"}),
        ("/api/acl/account", {"accessKey": ["list"], "secretKey": {"d": 1}}),
        ("/api/acl/delete", {"accessKey": None}),
        ("/api/acl/white", {"addrs": "not-a-list"}),
        ("/api/acl/white", {"addrs": ["1.2.3.*"] * 10_000}),
        ("/api/ops/namesrv", {"namesrvAddr": "a:1;" * 500}),
        ("/api/ops/client", {"vipChannel": "maybe"}),
        ("/api/v5/mode", {"topic": "T", "group": "G", "mode": "SIDEWAYS"}),
        ("/api/v5/mode", {"topic": "", "group": "G" * 1000, "mode": "POP", "popShareQueueNum": -1}),
        ("/api/acl/account", {"accessKey": big}),
        ("/api/v5/mode", [1, 2, 3]),
    ]
    hostile_gets: list[tuple[str, dict[str, str]]] = [
        ("/api/trace", {"msgId": "Z" * 4000}),
        ("/api/trace", {"key": ""}),
        ("/api/v5/mode", {"topic": "T" * 4000, "group": "G"}),
        ("/api/dlq/export", {"group": "", "format": "xml"}),
    ]
    # the broker in its own process: the probe's round trips must not share the test's loop
    with StandaloneProcess(tmp_path / "store") as proc:
        async with console_for(proc.namesrv_addr) as (_server, http, reader):
            before = await get(http, "/api/ops")
            statuses: list[int] = []
            reader_rtts: list[float] = []
            stop = asyncio.Event()

            async def read_along() -> None:
                loop = asyncio.get_running_loop()
                while not stop.is_set():
                    t0 = loop.time()
                    status, _ = await get(http, "/api/ops", headers=reader)
                    assert status == 200
                    reader_rtts.append(loop.time() - t0)

            with NoisyNeighbour(proc.broker_addr) as probe:
                reading = asyncio.ensure_future(read_along())
                try:
                    for _ in range(5):
                        for path, body in hostile_posts:
                            async with http.post(path, json=body) as r:
                                statuses.append(r.status)
                        for path, params in hostile_gets:
                            async with http.get(path, params=params) as r:
                                statuses.append(r.status)
                        async with http.post(
                            "/api/acl/account", data=b"{not json", headers={"Content-Type": "application/json"}
                        ) as r:
                            statuses.append(r.status)
                    await wait_until(lambda: len(reader_rtts) >= 5, what="the reader's round trips")
                finally:
                    stop.set()
                    await reading
                print(
                    "neighbour:", probe.summary(), "reader worst:", max(reader_rtts), "statuses:", sorted(set(statuses))
                )
                assert probe.failures == 0, probe.summary()
                assert probe.worst < WORST_ROUND_TRIP, probe.summary()
            assert all(400 <= s < 500 for s in statuses), sorted(set(statuses))
            assert max(reader_rtts) < WORST_ROUND_TRIP, reader_rtts
            assert await get(http, "/api/ops") == before  # nothing switched
