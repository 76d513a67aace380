"""No client can freeze the broker, stop its persistence or grow its tables without bound.

Every test runs a real ``rmq standalone`` subprocess and talks TCP to it; where the finding is
about freezing, a well-behaved second client (``NoisyNeighbour``) measures its round trips
while the bad one runs. The bound asserted for those (1 s) is generous on a loaded 2-core
machine: the behaviour they guard against froze every client for tens of seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct

import msgpack

from rmq._testing import NoisyNeighbour, StandaloneProcess, run_broker, wait_until
from rmq.common.constants import TopicValidator
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient
from rmq.remoting.codec import FrameDecoder

WORST_ROUND_TRIP = 2.0  # seconds, as the other NoisyNeighbour tests; the old code froze 46 s


def _config(store, name):
    path = os.path.join(str(store), "config", name)
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        return msgpack.unpackb(f.read(), strict_map_key=False)


def _stop_clean(proc: StandaloneProcess, errors_expected: bool = False) -> None:
    """SIGTERM: exit 0 and the store shut down (no abort marker left)."""
    assert proc.stop() == 0, proc.log_text()[-3000:]
    assert not os.path.exists(os.path.join(proc.store_dir, "abort")), "store.shutdown() did not run"
    if not errors_expected:
        assert "Traceback" not in proc.log_text(), proc.log_text()[-3000:]


class Client:
    def __init__(self, addr: str):
        self.addr = addr
        self.rc = RemotingClient()

    async def call(self, code, ext=None, body=None, timeout=10.0) -> RemotingCommand:
        return await self.rc.invoke(self.addr, RemotingCommand.request(code, ext, body), timeout=timeout)

    async def create_topic(self, topic, queues=4, perm=6):
        return await self.call(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": perm},
        )

    async def commit(self, group, topic, queue_id, offset):
        return await self.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)},
        )

    async def close(self):
        await self.rc.close()


def raw_call(addr: str, header_json: bytes, body: bytes = b"", timeout: float = 10.0) -> RemotingCommand:
    """One request written byte for byte (JSON header as given, e.g. with a ``\\ud800`` escape)."""
    host, port = addr.rsplit(":", 1)
    frame = struct.pack(">II", 4 + len(header_json) + len(body), len(header_json)) + header_json + body
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(frame)
        dec = FrameDecoder()
        while True:
            reply = dec.next_frame()
            if reply is not None and reply.is_response and reply.opaque == 7:
                return reply
            if reply is not None:
                continue  # a request from the broker (e.g. NOTIFY_CONSUMER_IDS_CHANGED)
            chunk = s.recv(65536)
            assert chunk, "the broker closed the connection"
            dec.feed(chunk)


def _header(code: int, ext_json: str) -> bytes:
    return (
        f'{{"code":{code},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON",'
        f'"version":399,"extFields":{ext_json}}}'
    ).encode()


def _heartbeat(groups, client_id="hostile@1"):
    return json.dumps(
        {
            "clientID": client_id,
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": g,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {"topic": "T", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 0}
                    ],
                }
                for g in groups
            ],
        }
    ).encode()


# --------------------------------------------------------------------------- finding 1


async def test_heartbeat_with_3000_new_groups_and_a_topic_burst_do_not_freeze_the_broker(tmp_path):
    """One HEART_BEAT naming 3000 new consumer groups, then 300 UPDATE_AND_CREATE_TOPIC at
    once: other clients keep their round trips small (tables are written off the loop,
    coalesced), and after a clean stop every group and topic is on disk."""
    store = tmp_path / "store"
    groups = [f"HG_{i}" for i in range(3000)]
    topics = [f"BurstTopic_{i}" for i in range(300)]
    with StandaloneProcess(store) as proc:
        c = Client(proc.broker_addr)
        try:
            body = _heartbeat(groups)  # built before the probe runs: the probe shares this process's GIL
            with NoisyNeighbour(proc.broker_addr) as probe:
                reply = await asyncio.to_thread(raw_call, proc.broker_addr, _header(RequestCode.HEART_BEAT, "{}"), body)
                assert reply.code == ResponseCode.SUCCESS, reply.remark
                replies = await asyncio.gather(*(c.create_topic(t) for t in topics))
                assert all(r.code == ResponseCode.SUCCESS for r in replies), [r.remark for r in replies][:3]
            print("noisy neighbour:", probe.summary())
            assert probe.worst < WORST_ROUND_TRIP, probe.summary()
            # written soon (configPersistInterval), not only at shutdown
            await wait_until(
                lambda: (
                    set(groups) <= set(_config(store, "subscriptionGroup.msgpack").get("subscriptionGroupTable", {}))
                ),
                timeout=20,
                what="the groups on disk while running",
            )
        finally:
            await c.close()
        _stop_clean(proc)
    on_disk_groups = _config(store, "subscriptionGroup.msgpack")["subscriptionGroupTable"]
    on_disk_topics = _config(store, "topics.msgpack")["topicConfigTable"]
    assert set(groups) <= set(on_disk_groups)
    assert {"%RETRY%" + g for g in groups} <= set(on_disk_topics)
    assert set(topics) <= set(on_disk_topics)


# --------------------------------------------------------------------------- finding 2 and SIGTERM


async def test_values_that_cannot_be_written_are_refused_and_persistence_goes_on(tmp_path):
    """commitOffset 2**64, perm 2**70, a group name with a lone surrogate (raw JSON escape),
    maxMsgNums 2**40: each answered with an error; a later valid commit is on disk after a
    restart; SIGTERM exits 0 without leaving the abort marker."""
    store = tmp_path / "store"
    with StandaloneProcess(store) as proc:
        c = Client(proc.broker_addr)
        try:
            assert (await c.create_topic("T", 4)).code == ResponseCode.SUCCESS
            resp = await c.commit("G", "T", 1, 2**64)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "commitOffset" in resp.remark, resp.remark
            resp = await c.create_topic("PermTopic", 4, perm=2**70)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "perm" in resp.remark, resp.remark
            # a lone surrogate in a header value, as raw JSON bytes
            for code, ext in (
                (
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    '{"consumerGroup":"G\\ud800","topic":"T","queueId":"0","commitOffset":"3"}',
                ),
                (
                    RequestCode.PULL_MESSAGE,
                    '{"consumerGroup":"\\ud800","topic":"T","queueId":"0","queueOffset":"0","maxMsgNums":"32",'
                    '"sysFlag":"0","commitOffset":"0","suspendTimeoutMillis":"0","subVersion":"0"}',
                ),
            ):
                reply = await asyncio.to_thread(raw_call, proc.broker_addr, _header(code, ext))
                assert reply.code == ResponseCode.SYSTEM_ERROR and "surrogate" in reply.remark, reply.remark
            # ... and in a body
            reply = await asyncio.to_thread(
                raw_call,
                proc.broker_addr,
                _header(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, "{}"),
                b'{"groupName":"SG\\ud800","retryQueueNums":1}',
            )
            assert reply.code == ResponseCode.SYSTEM_ERROR, reply.remark
            reply = await asyncio.to_thread(
                raw_call,
                proc.broker_addr,
                _header(RequestCode.HEART_BEAT, "{}"),
                b'{"clientID":"c\\udc00","consumerDataSet":[{"groupName":"HG"}]}',
            )
            assert reply.code == ResponseCode.SYSTEM_ERROR and "surrogate" in reply.remark, reply.remark
            resp = await c.call(
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "G",
                    "topic": "T",
                    "queueId": "0",
                    "queueOffset": "0",
                    "maxMsgNums": str(2**40),
                    "sysFlag": "0",
                    "commitOffset": "0",
                    "suspendTimeoutMillis": "0",
                    "subVersion": "0",
                },
            )
            assert resp.code == ResponseCode.SYSTEM_ERROR and "maxMsgNums" in resp.remark, resp.remark
            # persistence still works: a valid commit, topic and group
            assert (await c.commit("G", "T", 1, 77)).code == ResponseCode.SUCCESS
            assert (await c.create_topic("AfterTopic", 2)).code == ResponseCode.SUCCESS
        finally:
            await c.close()
        _stop_clean(proc)
    assert _config(store, "consumerOffset.msgpack")["offsetTable"]["T@G"][1] == 77
    assert "AfterTopic" in _config(store, "topics.msgpack")["topicConfigTable"]
    with StandaloneProcess(store) as proc:
        c = Client(proc.broker_addr)
        try:
            resp = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T", "queueId": "1"})
            assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "77"
        finally:
            await c.close()
        _stop_clean(proc)


async def test_a_write_error_is_logged_and_retried_and_sigterm_still_exits_0(tmp_path):
    """A table that cannot be written (its temporary file is a directory) is retried; once the
    obstacle goes the change reaches the disk; a SIGTERM while it fails still shuts the store
    down and exits 0."""
    store = tmp_path / "store"
    blocker = os.path.join(str(store), "config", "topics.msgpack.tmp")
    with StandaloneProcess(store) as proc:
        c = Client(proc.broker_addr)
        try:
            os.makedirs(blocker)
            assert (await c.create_topic("Blocked1", 2)).code == ResponseCode.SUCCESS
            await wait_until(
                lambda: "topics.msgpack failed" in proc.log_text(), timeout=20, what="the write error in the log"
            )
            os.rmdir(blocker)
            await wait_until(
                lambda: "Blocked1" in _config(store, "topics.msgpack").get("topicConfigTable", {}),
                timeout=30,
                what="the retried write",
            )
            os.makedirs(blocker)
            assert (await c.create_topic("Blocked2", 2)).code == ResponseCode.SUCCESS
        finally:
            await c.close()
        _stop_clean(proc, errors_expected=True)
        assert "persisting" in proc.log_text() and "at shutdown failed" in proc.log_text()
    os.rmdir(blocker)


# --------------------------------------------------------------------------- finding 6


async def test_retry_queue_nums_is_capped(tmp_path):
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with 2,000,000 retry queues is refused, and a group
    that has such a value from an older table gets a %RETRY% topic of at most 1024 queues."""
    store = tmp_path / "store"
    os.makedirs(store / "config")
    with open(store / "config" / "subscriptionGroup.msgpack", "wb") as f:
        f.write(
            msgpack.packb(
                {
                    "subscriptionGroupTable": {"OldBig": {"groupName": "OldBig", "retryQueueNums": 2_000_000}},
                    "dataVersion": {"timestamp": 0, "counter": 1},
                }
            )
        )
    with StandaloneProcess(store) as proc:
        c = Client(proc.broker_addr)
        try:
            resp = await c.call(
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                body=json.dumps({"groupName": "Big", "retryQueueNums": 2_000_000}).encode(),
            )
            assert resp.code == ResponseCode.SYSTEM_ERROR and "retryQueueNums" in resp.remark, resp.remark
            with NoisyNeighbour(proc.broker_addr) as probe:
                for g in ("Big", "OldBig"):
                    resp = await c.call(RequestCode.HEART_BEAT, body=_heartbeat([g]))
                    assert resp.code == ResponseCode.SUCCESS
                resp = await c.call(RequestCode.GET_ALL_TOPIC_CONFIG)
                table = json.loads(resp.body_bytes())["topicConfigTable"]
                resp = await c.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "%RETRY%OldBig"})
                assert resp.code == ResponseCode.SUCCESS
            print("noisy neighbour:", probe.summary())
            assert probe.worst < WORST_ROUND_TRIP, probe.summary()
            assert table["%RETRY%Big"]["writeQueueNums"] == 1  # the refused update left the default
            assert table["%RETRY%OldBig"]["writeQueueNums"] == 1024  # capped
            assert table["%RETRY%OldBig"]["readQueueNums"] == 1024
        finally:
            await c.close()
        _stop_clean(proc)


# --------------------------------------------------------------------------- finding 7


async def test_system_topics_are_refused_on_create_and_on_send(tmp_path):
    with StandaloneProcess(tmp_path / "store") as proc:
        c = Client(proc.broker_addr)
        try:
            before = json.loads((await c.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body_bytes())["topicConfigTable"]
            for topic in (
                "TBW102",
                "SCHEDULE_TOPIC_XXXX",
                "RMQ_SYS_TRANS_HALF_TOPIC",
                "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                "TRANS_CHECK_MAX_TIME_TOPIC",
                "OFFSET_MOVED_EVENT",
                "rmq_sys_anything",
            ):
                resp = await c.create_topic(topic, 4, perm=6)
                assert resp.code == ResponseCode.SYSTEM_ERROR, (topic, resp.remark)
                assert resp.remark == f"The topic[{topic}] is conflict with system topic."
            after = json.loads((await c.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body_bytes())["topicConfigTable"]
            assert after["TBW102"] == before["TBW102"]  # auto-create still on for everyone
            for topic in sorted(TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET):
                resp = await c.call(
                    RequestCode.SEND_MESSAGE,
                    {
                        "producerGroup": "PG",
                        "topic": topic,
                        "defaultTopic": "TBW102",
                        "defaultTopicQueueNums": "4",
                        "queueId": "0",
                        "sysFlag": "0",
                        "bornTimestamp": "0",
                        "flag": "0",
                        "properties": "",
                    },
                    b"x",
                )
                assert resp.code == ResponseCode.NO_PERMISSION, (topic, resp.remark)
                assert resp.remark == f"Sending message to topic[{topic}] is forbidden."
        finally:
            await c.close()
        _stop_clean(proc)


# --------------------------------------------------------------------------- finding 11


def _lock_body(group, client_id, mqs):
    return json.dumps(
        {
            "consumerGroup": group,
            "clientId": client_id,
            "mqSet": [{"topic": t, "brokerName": "broker-a", "queueId": q} for t, q in mqs],
        }
    ).encode()


async def test_lock_batch_is_bounded_and_expired_locks_leave_the_table(tmp_path):
    """100k queues in one LOCK_BATCH_MQ are refused at once; the table holds at most
    rebalanceLockMaxEntries; no log line per queue. The locks live 10 min here, so how slow
    the machine is cannot expire them mid-test (expiry: the next test, on a clock it moves)."""
    with StandaloneProcess(
        tmp_path / "store", extra_args=["--rebalanceLockMaxEntries=5000", "--rebalanceLockMaxLiveTime=600000"]
    ) as proc:
        c = Client(proc.broker_addr)
        try:
            huge = _lock_body("LG", "c1", [(f"T{i // 1000}", i % 1000) for i in range(100_000)])
            bodies = [
                _lock_body(group, "c1", [(f"Q{n}", i) for i in range(4000)]) for n, group in enumerate(("LG1", "LG2"))
            ]
            with NoisyNeighbour(proc.broker_addr) as probe:
                resp = await c.call(RequestCode.LOCK_BATCH_MQ, body=huge, timeout=30)
                assert resp.code == ResponseCode.SYSTEM_ERROR and "at most 4096" in resp.remark, resp.remark
                held = []
                for body in bodies:
                    resp = await c.call(RequestCode.LOCK_BATCH_MQ, body=body)
                    assert resp.code == ResponseCode.SUCCESS
                    held.append(len(json.loads(resp.body_bytes())["lockOKMQSet"]))
            print("noisy neighbour:", probe.summary())
            assert probe.worst < WORST_ROUND_TRIP, probe.summary()
            assert held == [4000, 1000], held  # 5000 locks in all
        finally:
            await c.close()
        _stop_clean(proc)
        lines = [ln for ln in proc.log_text().splitlines() if "rmq.broker.lock" in ln]
        assert len(lines) < 20, lines[:20]


async def test_expired_locks_free_the_full_table(tmp_path):
    """After rebalanceLockMaxLiveTime without renewal the old locks are dead: a full table takes
    a new group's locks again. The broker's lock table reads a clock the test moves (no
    wall-clock window), over TCP to a real broker."""
    now = [1000.0]
    async with run_broker(
        tmp_path / "store", rebalance_lock_max_entries=5000, rebalance_lock_max_live_time=1000
    ) as broker:
        broker.rebalance_lock_manager.clock = lambda: now[0]
        c = Client(broker.broker_addr)
        try:

            async def granted(group: str, client: str, topic: str) -> int:
                resp = await c.call(
                    RequestCode.LOCK_BATCH_MQ, body=_lock_body(group, client, [(topic, i) for i in range(4000)])
                )
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                return len(json.loads(resp.body_bytes())["lockOKMQSet"])

            assert [await granted("LG1", "c1", "Q0"), await granted("LG2", "c1", "Q1")] == [4000, 1000]
            now[0] += 0.9  # still alive: the table stays full
            assert await granted("LG3", "c2", "Q9") == 0
            now[0] += 0.2  # 1.1 s without renewal: dead
            assert await granted("LG3", "c2", "Q9") == 4000
            assert broker.rebalance_lock_manager.entries <= 5000
        finally:
            await c.close()


# --------------------------------------------------------------------------- finding 14


async def test_consumer_offsets_only_for_existing_queues_and_known_groups(tmp_path):
    store = tmp_path / "store"
    with StandaloneProcess(
        store, extra_args=["--autoCreateSubscriptionGroup=false", "--maxConsumerOffsetKeys=5"]
    ) as proc:
        c = Client(proc.broker_addr)
        try:
            assert (await c.create_topic("OT", 4)).code == ResponseCode.SUCCESS
            groups = [f"OG{i}" for i in range(7)]
            for g in groups:
                resp = await c.call(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps({"groupName": g}).encode()
                )
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            resp = await c.commit("NoSuchGroup", "OT", 0, 5)
            assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, resp.remark
            resp = await c.commit("OG0", "NoSuchTopic", 0, 5)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST, resp.remark
            for qid in (-1, 4, 2**31 - 1):
                resp = await c.commit("OG0", "OT", qid, 5)
                assert resp.code == ResponseCode.SYSTEM_ERROR, (qid, resp.remark)
            codes = [(await c.commit(g, "OT", 3, 10)).code for g in groups]
            assert codes[:5] == [ResponseCode.SUCCESS] * 5 and codes[5:] == [ResponseCode.SYSTEM_BUSY] * 2, codes
            assert (await c.commit("OG0", "OT", 2, 11)).code == ResponseCode.SUCCESS  # a known pair: fine
        finally:
            await c.close()
        _stop_clean(proc)
    table = _config(store, "consumerOffset.msgpack")["offsetTable"]
    assert set(table) == {f"OT@OG{i}" for i in range(5)}, table
    assert table["OT@OG0"] == {3: 10, 2: 11}


def test_sigterm_during_a_burst_exits_0(tmp_path):
    """SIGTERM while tables are dirty: the full shutdown runs (tables written, store shut
    down) and the process exits 0."""
    store = tmp_path / "store"
    with StandaloneProcess(store) as proc:
        reply = raw_call(
            proc.broker_addr, _header(RequestCode.HEART_BEAT, "{}"), _heartbeat([f"SG_{i}" for i in range(500)])
        )
        assert reply.code == ResponseCode.SUCCESS
        _stop_clean(proc)
    assert {f"SG_{i}" for i in range(500)} <= set(_config(store, "subscriptionGroup.msgpack")["subscriptionGroupTable"])


async def test_auto_created_groups_are_bounded(tmp_path):
    """Unknown groups named by pulls, commits or heartbeats are auto-created only up to
    maxSubscriptionGroupNums (the table holds 8 system groups to begin with)."""
    store = tmp_path / "store"
    with StandaloneProcess(store, extra_args=["--maxSubscriptionGroupNums=12"]) as proc:
        c = Client(proc.broker_addr)
        try:
            assert (await c.create_topic("AT", 4)).code == ResponseCode.SUCCESS
            reply = await asyncio.to_thread(
                raw_call,
                proc.broker_addr,
                _header(RequestCode.HEART_BEAT, "{}"),
                _heartbeat([f"AG{i}" for i in range(10)]),
            )
            assert reply.code == ResponseCode.SUCCESS
            codes = [(await c.commit(f"CG{i}", "AT", 0, 1)).code for i in range(2)]
            assert codes == [ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST] * 2, codes
            resp = await c.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            table = json.loads(resp.body_bytes())["subscriptionGroupTable"]
            assert len(table) == 12 and {f"AG{i}" for i in range(4)} <= set(table), sorted(table)
        finally:
            await c.close()
        _stop_clean(proc)


# --------------------------------------------------------------------------- per-connection bounds


def _hb(groups, subs_per_group=1, client_id="bounded@1"):
    return json.dumps(
        {
            "clientID": client_id,
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": g,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": f"T{i}", "subString": "*", "subVersion": 0} for i in range(subs_per_group)
                    ],
                }
                for g in groups
            ],
        }
    ).encode()


async def test_heartbeats_are_bounded_per_connection(tmp_path):
    """Groups per heartbeat, group memberships and subscriptions per connection are bounded
    (maxGroupsPerHeartbeat, maxClientsPerConnection, maxSubscriptionsPerConnection): past them
    a heartbeat gets SYSTEM_ERROR and registers nothing, with one rate-limited log line; other
    connections keep their own budget, and a connection may always refresh what it holds."""
    args = ["--maxGroupsPerHeartbeat=5", "--maxClientsPerConnection=8", "--maxSubscriptionsPerConnection=10"]
    with StandaloneProcess(tmp_path / "store", extra_args=args) as proc:
        a, b, watcher = Client(proc.broker_addr), Client(proc.broker_addr), Client(proc.broker_addr)

        async def members(group):
            r = await watcher.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
            return json.loads(r.body_bytes())["consumerIdList"] if r.code == ResponseCode.SUCCESS else []

        try:
            r = await a.call(RequestCode.HEART_BEAT, body=_hb([f"G{i}" for i in range(6)]))
            assert r.code == ResponseCode.SYSTEM_ERROR and "maxGroupsPerHeartbeat" in r.remark, r.remark
            assert await members("G0") == []  # nothing was registered
            first = [f"G{i}" for i in range(5)]
            assert (await a.call(RequestCode.HEART_BEAT, body=_hb(first))).code == ResponseCode.SUCCESS
            assert await members("G0") == ["bounded@1"]
            r = await a.call(RequestCode.HEART_BEAT, body=_hb([f"H{i}" for i in range(4)]))  # 9 groups > 8
            assert r.code == ResponseCode.SYSTEM_ERROR and "maxClientsPerConnection" in r.remark, r.remark
            assert await members("H0") == []
            assert (await a.call(RequestCode.HEART_BEAT, body=_hb(first))).code == ResponseCode.SUCCESS  # refresh
            assert (await a.call(RequestCode.HEART_BEAT, body=_hb(["H0", "H1", "H2"]))).code == ResponseCode.SUCCESS
            r = await a.call(RequestCode.HEART_BEAT, body=_hb(["G0"], subs_per_group=3))  # 7 + 3 = 10: fits
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await a.call(RequestCode.HEART_BEAT, body=_hb(["G1"], subs_per_group=3))  # 12 > 10
            assert r.code == ResponseCode.SYSTEM_ERROR and "maxSubscriptionsPerConnection" in r.remark, r.remark
            # another connection has its own budget
            assert (
                await b.call(RequestCode.HEART_BEAT, body=_hb(first, client_id="other@2"))
            ).code == ResponseCode.SUCCESS
            assert sorted(await members("G0")) == ["bounded@1", "other@2"]
            # the connection's memberships leave with it
            await a.close()

            async def gone():
                return await members("H0") == [] and await members("G0") == ["other@2"]

            await wait_until(gone, what="the closed connection's memberships removed")
        finally:
            for c in (a, b, watcher):
                await c.close()
        refused = [ln for ln in proc.log_text().splitlines() if "heartbeat from" in ln and "refused" in ln]
        assert len(refused) == 1, refused  # three refusals within 10 s: one line
        _stop_clean(proc)
