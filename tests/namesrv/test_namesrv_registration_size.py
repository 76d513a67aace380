"""Registration at size, as Java 4.9.8: QUERY_DATA_VERSION (``BrokerOuterAPI.needRegister``: a
periodic round skips an unchanged topic table and still keeps the broker alive) and
``compressedRegister`` (``RegisterBrokerBody.encode(true)``), name server and broker over TCP."""

import json
import struct
import zlib

from rmq._testing import run_broker, run_namesrv
from rmq.broker.namesrv_api import encode_register_body
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient

ADDR = "127.0.0.1:10911"


def java_compressed_body(version: dict, lines: list[str], filter_servers: str = "[]") -> bytes:
    """What Java's RegisterBrokerBody.encode(true) writes, spelled out independently of rmq's
    encoder: big-endian int32 lengths, TopicConfig.encode() lines, DeflaterOutputStream."""
    out = bytearray()
    dv = json.dumps(version).encode()
    out += struct.pack(">i", len(dv)) + dv + struct.pack(">i", len(lines))
    for line in lines:
        b = line.encode()
        out += struct.pack(">i", len(b)) + b
    fs = filter_servers.encode()
    out += struct.pack(">i", len(fs)) + fs
    return zlib.compress(bytes(out), 9)


def register(body: bytes, compressed: bool, addr: str = ADDR) -> RemotingCommand:
    ext = {
        "brokerAddr": addr,
        "brokerId": "0",
        "brokerName": "broker-a",
        "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912",
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


def query(version: dict, addr: str = ADDR) -> RemotingCommand:
    ext = {"brokerAddr": addr, "brokerId": "0", "brokerName": "broker-a", "clusterName": "DefaultCluster"}
    return RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, ext, json.dumps(version).encode())


async def route(client: RemotingClient, addr: str, topic: str) -> dict | None:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return json.loads(resp.body_bytes()) if resp.code == ResponseCode.SUCCESS else None


async def test_a_java_compressed_registration_is_routed():
    body = java_compressed_body(
        {"timestamp": 5, "counter": 2},
        ["broker-a 1 1 7 SINGLE_TAG", "TopicA 8 8 6 SINGLE_TAG", "TopicRO 4 2 4 SINGLE_TAG"],
    )
    async with run_namesrv() as ns, RemotingClient() as c:
        resp = await c.invoke(ns.address, register(body, compressed=True))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        r = await route(c, ns.address, "TopicA")
        assert r is not None
        assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in r["queueDatas"]] == [(8, 8, 6)]
        ro = await route(c, ns.address, "TopicRO")
        assert ro is not None and ro["queueDatas"][0]["perm"] == 4 and ro["queueDatas"][0]["writeQueueNums"] == 2
        # the version it carried is the one held
        resp = await c.invoke(ns.address, query({"timestamp": 5, "counter": 2}))
        assert resp.ext_fields["changed"] == "false"


async def test_rmq_s_compressed_body_is_java_s_format():
    wrapper = {
        "topicConfigTable": {
            "broker-a": {"topicName": "broker-a", "readQueueNums": 1, "writeQueueNums": 1, "perm": 7},
            "T1": {"topicName": "T1", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0},
        },
        "dataVersion": {"timestamp": 9, "counter": 3},
    }
    ours = await encode_register_body(wrapper, compressed=True)
    raw = zlib.decompress(ours)
    expected = zlib.decompress(
        java_compressed_body({"timestamp": 9, "counter": 3}, ["broker-a 1 1 7 SINGLE_TAG", "T1 8 8 6 SINGLE_TAG"])
    )
    # the same stream but for JSON spacing of the dataVersion: compare field by field
    (n,) = struct.unpack(">i", raw[:4])
    assert json.loads(raw[4 : 4 + n]) == {"timestamp": 9, "counter": 3}
    (m,) = struct.unpack(">i", expected[:4])
    assert raw[4 + n :] == expected[4 + m :]


async def test_bad_compressed_bodies_are_refused_and_nothing_registers():
    bomb = zlib.compress(b"\0" * 50_000_000, 9)  # inflates far past what 1 topic needs
    async with run_namesrv(max_topics_per_broker=1) as ns, RemotingClient() as c:
        for body, says in (
            (b"not deflated", "does not inflate"),
            (bomb, "inflates past"),
            (java_compressed_body({}, ["A 1 1 6 SINGLE_TAG", "B 1 1 6 SINGLE_TAG"]), "2 topics"),
            (java_compressed_body({}, ["A 1 x 6 SINGLE_TAG"]), "non-integer"),
            (java_compressed_body({}, ["A 1 1 6"]), "5 fields"),
            (java_compressed_body({}, [])[:-6], "inflate"),
        ):
            resp = await c.invoke(ns.address, register(body, compressed=True))
            assert resp.code == ResponseCode.SYSTEM_ERROR and says in (resp.remark or ""), (says, resp.remark)
        assert ns.route_info_manager.broker_live_table == {}


async def test_query_data_version_refreshes_only_the_same_version_over_the_registering_connection():
    body = json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": {"broker-a": {"topicName": "broker-a", "readQueueNums": 1, "writeQueueNums": 1}},
                "dataVersion": {"timestamp": 1, "counter": 4},
            },
            "filterServerList": [],
        }
    ).encode()
    async with run_namesrv() as ns, RemotingClient() as broker_side, RemotingClient() as other:
        # unknown broker: changed, no version held
        resp = await broker_side.invoke(ns.address, query({"timestamp": 1, "counter": 4}))
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["changed"] == "true" and not resp.body
        assert (await broker_side.invoke(ns.address, register(body, compressed=False))).code == ResponseCode.SUCCESS
        live = ns.route_info_manager.broker_live_table[ADDR]

        live.last_update = 0.0
        resp = await broker_side.invoke(ns.address, query({"timestamp": 1, "counter": 4}))
        assert resp.ext_fields["changed"] == "false"
        assert json.loads(resp.body_bytes()) == {"timestamp": 1, "counter": 4}
        assert live.last_update > 0.0  # kept alive as by a registration

        live.last_update = 0.0
        resp = await broker_side.invoke(ns.address, query({"timestamp": 1, "counter": 5}))
        assert resp.ext_fields["changed"] == "true" and live.last_update == 0.0
        assert json.loads(resp.body_bytes()) == {"timestamp": 1, "counter": 4}

        # another connection cannot keep the broker alive
        resp = await other.invoke(ns.address, query({"timestamp": 1, "counter": 4}))
        assert resp.ext_fields["changed"] == "true" and live.last_update == 0.0


async def test_the_periodic_round_skips_an_unchanged_table_and_sends_a_changed_one(tmp_path):
    async with run_namesrv() as ns, run_broker(tmp_path, ns, force_register=False) as broker:
        api = broker.broker_outer_api
        live = ns.route_info_manager.broker_live_table[broker.broker_addr]
        sent = api.last_body_size
        api.last_body_size = 0
        live.last_update = 0.0
        assert await broker.register_broker_all(periodic=True)
        assert broker.register_skipped == 1 and api.last_body_size == 0  # asked, nothing sent
        assert live.last_update > 0.0

        # a new table version: the next round sends it
        broker.topic_config_manager.data_version.next_version()
        assert await broker.register_broker_all(periodic=True)
        assert broker.register_skipped == 1 and api.last_body_size >= sent
        held = ns.route_info_manager.broker_live_table[broker.broker_addr].data_version
        assert held == broker.topic_config_manager.data_version.to_json()


async def test_force_register_always_sends_and_compressed_register_routes(tmp_path):
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path, ns, force_register=True, compressed_register=True) as broker,
        RemotingClient() as c,
    ):
        api = broker.broker_outer_api
        compressed = api.last_body_size
        api.last_body_size = 0
        assert await broker.register_broker_all(periodic=True)
        assert broker.register_skipped == 0 and api.last_body_size == compressed
        json_body = await encode_register_body(broker.topic_config_manager.serialize_wrapper())
        assert compressed < len(json_body) / 3
        r = await route(c, ns.address, "TBW102")
        assert r is not None and r["queueDatas"][0]["brokerName"] == broker.broker_config.broker_name


async def test_a_topic_auto_created_by_a_send_registers_as_an_increment(tmp_path):
    """Java re-registers the whole table for each auto-created topic; rmq sends only the topic
    (the name server merges it), so its cost does not grow with the table."""
    import rmq
    from rmq._testing import wait_until

    async with run_namesrv() as ns, run_broker(tmp_path, ns) as broker, RemotingClient() as c:
        api = broker.broker_outer_api
        full = len(await encode_register_body(broker.topic_config_manager.serialize_wrapper()))
        async with rmq.Producer(f"127.0.0.1:{ns.port}", "PID_auto_incr") as producer:
            r = await producer.send(rmq.Message("AutoIncr", b"x"))
        assert r.status is rmq.SendStatus.SEND_OK

        async def routed() -> bool:
            return await route(c, ns.address, "AutoIncr") is not None

        await wait_until(routed, what="the auto-created topic routed")
        assert 0 < api.last_body_size < full / 3
        for topic in ("TBW102", broker.broker_config.broker_name):  # nothing else was dropped
            assert await route(c, ns.address, topic) is not None


def test_the_typed_decode_of_a_register_body_and_its_fallback():
    """A RegisterBrokerBody of the usual shape is decoded straight into TopicEntry values (the
    other TopicConfig fields skipped) and routes as the general decode does; any other shape
    (a number as a string, a null) goes back to the general decoder, whose checks name the
    entry; a typed value out of range is refused naming it."""
    import pytest

    from rmq.errors import RemotingCommandError
    from rmq.namesrv.route_manager import TopicEntry, decode_register_body, parse_topic_config_table

    def body(entry: dict) -> bytes:
        tc = {"topicName": "T", "topicFilterType": "SINGLE_TAG", "order": False, "attributes": {}, **entry}
        wrapper = {"topicConfigTable": {"T": tc}, "dataVersion": {"timestamp": 5, "counter": 7}}
        return json.dumps({"topicConfigSerializeWrapper": wrapper, "filterServerList": []}).encode()

    table, version = decode_register_body(body({"readQueueNums": 4, "writeQueueNums": 2, "perm": 6}))
    assert version == {"timestamp": 5, "counter": 7}
    assert table == {"T": TopicEntry(readQueueNums=4, writeQueueNums=2, perm=6, topicSysFlag=0)}
    qd = parse_topic_config_table("b", table, 10)["T"]
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag) == (4, 2, 6, 0)
    assert decode_register_body(body({"readQueueNums": "4"})) is None
    assert decode_register_body(body({"perm": None})) is None
    assert decode_register_body(b"{}") == ({}, {})
    typed, _ = decode_register_body(body({"readQueueNums": 70000}))
    with pytest.raises(RemotingCommandError, match=r"readQueueNums=70000 is out of range"):
        parse_topic_config_table("b", typed, 10)


def _held_by_routes(r) -> dict:
    """What the routes hold per broker, as the entries a registration is compared with."""
    from rmq.protocol.body.register import TopicEntry

    out: dict = {}
    for topic, queues in r.topic_queue_table.items():
        for broker, qd in queues.items():
            entry = TopicEntry(qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag)
            out.setdefault(broker, {})[topic] = entry
    return out


def _assert_consistent(r) -> None:
    # the per-broker entries a registration is compared with are exactly what the routes hold
    assert _held_by_routes(r) == {b: d for b, d in r._broker_topics.items() if d}


def _bodies(table: dict, version: int) -> list[tuple[str, object, dict]]:
    """The table as each decode gives it: JSON (typed), JSON through the general decoder, compressed."""
    from rmq.namesrv.processor import NamesrvProcessor
    from rmq.protocol.body.register import decode_compressed_register_body, topic_lines

    dv = {"timestamp": 1, "counter": version}
    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": dv}}).encode()
    typed, _ = NamesrvProcessor._json_register_body(body)
    general = json.loads(body)["topicConfigSerializeWrapper"]["topicConfigTable"]
    lines = [line for line in (topic_lines({t: tc}) for t, tc in table.items())]
    compressed, cdv = decode_compressed_register_body(
        java_compressed_body(dv, [line[4:].decode() for line in lines]), 1000
    )
    assert cdv == dv
    return [("typed", typed, dv), ("general", general, dv), ("compressed", compressed, dv)]


def test_a_new_table_version_rebuilds_only_the_changed_topics():
    """A master's full table of a new version (Java rebuilds every QueueData) costs the name
    server only its changed entries: an unchanged topic keeps its queue data object, a changed
    one gets new queue data, a topic no longer listed loses the broker, a new one is added; the
    same whichever way the body was decoded."""
    from rmq.namesrv.route_manager import RouteInfoManager

    def table(**changes: dict) -> dict:
        t = {f"T{i}": {"topicName": f"T{i}", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6} for i in range(50)}
        t["broker-a"] = {"topicName": "broker-a", "readQueueNums": 1, "writeQueueNums": 1, "perm": 7}
        for name, tc in changes.items():
            if tc:
                t[name] = {"topicName": name, "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, **tc}
            else:
                del t[name]
        return t

    for way in ("typed", "general", "compressed"):
        r = RouteInfoManager()
        [(_, t1, dv1)] = [b for b in _bodies(table(), 1) if b[0] == way]
        r.register_broker("C", ADDR, "broker-a", 0, "", t1, dv1)
        before = {t: qs["broker-a"] for t, qs in r.topic_queue_table.items()}
        assert len(before) == 51
        [(_, t2, dv2)] = [
            b for b in _bodies(table(T1={"writeQueueNums": 2}, T2=None, Tnew={"perm": 4}), 2) if b[0] == way
        ]
        r.register_broker("C", ADDR, "broker-a", 0, "", t2, dv2)
        after = {t: qs["broker-a"] for t, qs in r.topic_queue_table.items()}
        assert "T2" not in after and after["Tnew"].perm == 4, way
        assert after["T1"] is not before["T1"] and after["T1"].write_queue_nums == 2, way
        assert all(after[t] is before[t] for t in before if t not in ("T1", "T2")), way
        _assert_consistent(r)
        # the same version again: nothing checked, nothing applied
        r.register_broker("C", ADDR, "broker-a", 0, "", t2, dv2)
        assert all(r.topic_queue_table[t]["broker-a"] is after[t] for t in after)


def test_a_bad_changed_entry_refuses_the_new_version_and_changes_nothing():
    """An entry equal to what the routes hold was checked when it was stored; a changed or new
    one is checked as a first registration's would be, and one bad entry refuses the whole
    table: routes, held entries and the held version stay as they were."""
    import copy

    import pytest

    from rmq.errors import RemotingCommandError
    from rmq.namesrv.route_manager import RouteInfoManager

    base = {f"T{i}": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for i in range(10)}
    base["broker-a"] = {"readQueueNums": 1, "writeQueueNums": 1, "perm": 7}
    r = RouteInfoManager()
    r.register_broker("C", ADDR, "broker-a", 0, "", base, {"counter": 1})
    snapshot = (copy.deepcopy(r.topic_queue_table), copy.deepcopy(r._broker_topics))
    for bad, says in (
        ({"T3": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 99}}, r"perm=99 is out of range"),
        ({"T3": {"readQueueNums": 70000, "writeQueueNums": 4, "perm": 6}}, r"readQueueNums=70000"),
        ({"bad\nname": {"readQueueNums": 1}}, r"illegal topic name"),
        ({"T4": "not an object"}, r"is not an object"),
    ):
        with pytest.raises(RemotingCommandError, match=says):
            r.register_broker("C", ADDR, "broker-a", 0, "", {**base, **bad}, {"counter": 2})
        assert (r.topic_queue_table, r._broker_topics) == snapshot
        assert r.broker_live_table[ADDR].data_version == {"counter": 1}


def test_the_held_entries_follow_every_change_of_the_routes():
    """Increments, deleted topics, wiped and restored write perms and an unregistered broker
    keep the entries a registration is compared with equal to the routes; a wipe is undone by
    the broker's next table version even for the topics that did not change in it (Java rebuilds
    them all)."""
    from rmq.namesrv.route_manager import RouteInfoManager

    def tc(perm: int = 6) -> dict:
        return {"readQueueNums": 4, "writeQueueNums": 4, "perm": perm}

    r = RouteInfoManager()
    full_a = {"broker-a": tc(7), "A1": tc(), "A2": tc(), "S": tc()}
    r.register_broker("C", "127.0.0.1:1", "broker-a", 0, "", full_a, {"counter": 1})
    r.register_broker("C", "127.0.0.1:2", "broker-b", 0, "", {"broker-b": tc(7), "S": tc()}, {"counter": 1})
    _assert_consistent(r)
    r.register_broker("C", "127.0.0.1:1", "broker-a", 0, "", {"A3": tc()}, {"counter": 2})  # an increment
    assert set(r._broker_topics["broker-a"]) == {"broker-a", "A1", "A2", "A3", "S"}
    _assert_consistent(r)
    r.delete_topic("S")
    _assert_consistent(r)
    assert r.wipe_write_perm_of_broker("broker-a") == 4
    _assert_consistent(r)
    # a new version that changes only A1: A2 and the broker's topic get their own perms back too
    changed = {"broker-a": tc(7), "A1": tc(2), "A2": tc(), "A3": tc()}
    r.register_broker("C", "127.0.0.1:1", "broker-a", 0, "", changed, {"counter": 3})
    perms = {t: qs["broker-a"].perm for t, qs in r.topic_queue_table.items() if "broker-a" in qs}
    assert perms == {"broker-a": 7, "A1": 2, "A2": 6, "A3": 6}
    _assert_consistent(r)
    assert r.add_write_perm_of_broker("broker-a") == 4
    _assert_consistent(r)
    # a full table without A3 drops it; then the broker goes and takes its topics along
    r.register_broker("C", "127.0.0.1:1", "broker-a", 0, "", {"broker-a": tc(7), "A1": tc()}, {"counter": 4})
    assert "A3" not in r.topic_queue_table
    _assert_consistent(r)
    r.unregister_broker("C", "127.0.0.1:1", "broker-a", 0)
    assert set(r.topic_queue_table) == {"broker-b"} and "broker-a" not in r._broker_topics
    _assert_consistent(r)
