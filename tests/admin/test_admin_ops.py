"""rmq.Admin's operations methods against real in-process name servers and brokers, with SDK
producers and consumers: name-server configuration, broker write permission, KV config,
subscription-group deletion, consume-queue queries, CommitLog/ConsumeQueue maintenance and the
metadata dumps a slave syncs."""

import json
import time

import pytest

import rmq
from rmq._testing import run_broker, run_namesrv, run_standalone, wait_until
from rmq.client.admin import Admin, AdminError
from rmq.common.constants import PermName
from rmq.common.message import java_string_hash
from rmq.protocol.codes import ResponseCode

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


# -- name-server configuration ----------------------------------------------------------------


async def test_namesrv_config_read_updated_checked_and_persisted(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("# operator's comment\nmaxBrokers=100\nlistenHost=127.0.0.1\n")
    async with run_namesrv(config_store_path=str(conf)) as ns:
        async with Admin(ns.address) as admin:
            cfg = (await admin.get_name_server_config())[ns.address]
            assert cfg["maxBrokers"] == "2048" and cfg["listenPort"] == str(ns.port)
            assert cfg["configStorePath"] == str(conf)

            await admin.update_name_server_config({"maxBrokers": "5", "brokerChannelExpiredSeconds": "90"})
            assert ns.config.max_brokers == 5 and ns.route_info_manager.limits.max_brokers == 5
            assert ns.route_info_manager.broker_channel_expired_seconds == 90.0
            assert (await admin.get_name_server_config())[ns.address]["maxBrokers"] == "5"
            text = conf.read_text()
            assert text.startswith("# operator's comment\nmaxBrokers=5\nlistenHost=127.0.0.1\n")
            assert "brokerChannelExpiredSeconds=90" in text

            refusals = [
                ({"listenPort": "1234"}, ResponseCode.SYSTEM_ERROR, "cannot be changed while the name server runs"),
                ({"maxBrokers": "0"}, ResponseCode.SYSTEM_ERROR, "bad value for maxBrokers"),
                ({"maxBrokrs": "7"}, ResponseCode.SYSTEM_ERROR, "did you mean maxBrokers"),
                ({"kvConfigPath": "/tmp/x"}, ResponseCode.NO_PERMISSION, "Can not update config in black list."),
                # one bad property refuses the whole update
                ({"maxTopics": "10", "maxKvNamespaces": "-1"}, ResponseCode.SYSTEM_ERROR, "maxKvNamespaces"),
            ]
            for props, code, remark in refusals:
                with pytest.raises(AdminError) as e:
                    await admin.update_name_server_config(props)
                assert e.value.code == code and remark in e.value.remark, (props, e.value)
            assert ns.config.max_topics == 500_000 and ns.config.max_brokers == 5
            assert conf.read_text() == text


# -- write permission -------------------------------------------------------------------------


async def _send_fresh(namesrv_addr: str, topic: str) -> rmq.SendResult:
    """A send from a new producer (its route is read now, not cached from before)."""
    async with rmq.Producer(namesrv_addr, f"PG_{topic}") as p:
        return await p.send(rmq.Message(topic, b"x"))


async def test_wipe_write_perm_stops_sends_until_added_back(tmp_path):
    async with run_standalone(tmp_path) as (ns, broker):
        async with Admin(ns.address) as admin:
            await admin.create_and_update_topic_config(
                broker.broker_addr, "WipeT", read_queue_nums=2, write_queue_nums=2
            )
            assert (await _send_fresh(ns.address, "WipeT")).status == rmq.SendStatus.SEND_OK

            n = await admin.wipe_write_perm_of_broker(ns.address, "broker-a")
            assert n == len([t for t, q in ns.route_info_manager.topic_queue_table.items() if "broker-a" in q]) > 1
            route = await admin.examine_topic_route_info("WipeT")
            assert [q.perm for q in route.queue_datas] == [PermName.PERM_READ]
            with pytest.raises(rmq.RMQError):
                await _send_fresh(ns.address, "WipeT")
            # the broker's periodic registration (same topic-table version) keeps the wipe, as Java's
            assert await broker.register_broker_all()
            assert [q.perm for q in (await admin.examine_topic_route_info("WipeT")).queue_datas] == [4]

            assert await admin.add_write_perm_of_broker(ns.address, "broker-a") == n
            assert [q.perm for q in (await admin.examine_topic_route_info("WipeT")).queue_datas] == [6]
            assert (await _send_fresh(ns.address, "WipeT")).status == rmq.SendStatus.SEND_OK
            assert await admin.wipe_write_perm_of_broker(ns.address, "no-such-broker") == 0


async def test_sends_fail_over_to_the_broker_that_keeps_its_write_perm(tmp_path):
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "a", namesrv=ns, broker_name="broker-a") as a,
        run_broker(tmp_path / "b", namesrv=ns, broker_name="broker-b") as b,
    ):
        async with Admin(ns.address) as admin:
            for broker in (a, b):
                await admin.create_and_update_topic_config(
                    broker.broker_addr, "FailT", read_queue_nums=2, write_queue_nums=2
                )
            assert await admin.wipe_write_perm_of_broker(ns.address, "broker-a") >= 1
            async with rmq.Producer(ns.address, "PG_FailT") as p:
                sent = [await p.send(rmq.Message("FailT", b"%d" % i)) for i in range(6)]
            assert {r.message_queue.broker_name for r in sent} == {"broker-b"}
            await admin.add_write_perm_of_broker(ns.address, "broker-a")
            async with rmq.Producer(ns.address, "PG_FailT2") as p:
                sent = [await p.send(rmq.Message("FailT", b"%d" % i)) for i in range(8)]
            assert {r.message_queue.broker_name for r in sent} == {"broker-a", "broker-b"}


async def test_a_changed_topic_table_restores_the_brokers_own_perms(tmp_path):
    """Java's name server rebuilds a broker's queue data when a full topic table of a new
    version arrives: a topic deletion on the broker ends a wipe. A topic creation registers
    only the new topic (Java registerIncrementBrokerData), which leaves the others wiped."""
    async with run_standalone(tmp_path) as (ns, broker):
        async with Admin(ns.address) as admin:
            for topic in ("WipeR", "WipeGone"):
                await admin.create_and_update_topic_config(
                    broker.broker_addr, topic, read_queue_nums=1, write_queue_nums=1
                )
            await admin.wipe_write_perm_of_broker(ns.address, "broker-a")
            await admin.create_and_update_topic_config(
                broker.broker_addr, "WipeR2", read_queue_nums=1, write_queue_nums=1
            )
            table = ns.route_info_manager.topic_queue_table
            assert (table["WipeR"]["broker-a"].perm, table["WipeR2"]["broker-a"].perm) == (4, 6)
            await admin.delete_topic_in_broker(broker.broker_addr, "WipeGone")
            await wait_until(
                lambda: table["WipeR"]["broker-a"].perm == 6, what="the route rebuilt from the new topic table"
            )
            assert "WipeGone" not in table


# -- KV config --------------------------------------------------------------------------------


async def test_kv_config_persisted_as_javas_kv_config_json(tmp_path):
    path = tmp_path / "namesrv" / "kvConfig.json"
    async with run_namesrv(kv_config_path=str(path)) as ns:
        async with Admin(ns.address) as admin:
            await admin.create_and_update_kv_config("ORDER_TOPIC_CONFIG", "OrderT", "broker-a:4")
            await admin.create_and_update_kv_config("NS2", "k", "v")
            assert await admin.get_kv_config("NS2", "k") == "v"
            assert await admin.get_kv_list_by_namespace("ORDER_TOPIC_CONFIG") == {"OrderT": "broker-a:4"}
            assert json.loads(path.read_text()) == {
                "configTable": {"ORDER_TOPIC_CONFIG": {"OrderT": "broker-a:4"}, "NS2": {"k": "v"}}
            }
            await admin.delete_kv_config("NS2", "k")
            await admin.delete_kv_config("NS2", "never-there")  # SUCCESS, as Java
            assert await admin.get_kv_config("NS2", "k") is None
            assert json.loads(path.read_text()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"OrderT": "broker-a:4"}}}
    async with run_namesrv(kv_config_path=str(path)) as ns:  # restart: reread
        async with Admin(ns.address) as admin:
            assert await admin.get_kv_config("ORDER_TOPIC_CONFIG", "OrderT") == "broker-a:4"
    # a file Java's name server wrote (fastjson, pretty) loads too; a corrupt one is kept aside
    path.write_text('{\n\t"configTable":{\n\t\t"J":{\n\t\t\t"a":"1"\n\t\t}\n\t}\n}')
    async with run_namesrv(kv_config_path=str(path)) as ns:
        assert ns.kv_config_manager.get("J", "a") == "1"
    path.write_text("{not json")
    async with run_namesrv(kv_config_path=str(path)) as ns:
        assert ns.kv_config_manager.table == {}
        assert (tmp_path / "namesrv" / "kvConfig.json.corrupt").read_text() == "{not json"


async def test_kv_config_bounds_refuse_and_leave_the_file_alone(tmp_path):
    path = tmp_path / "kv.json"
    async with run_namesrv(kv_config_path=str(path), max_kv_namespaces=1, max_kv_value_chars=4) as ns:
        async with Admin(ns.address) as admin:
            await admin.create_and_update_kv_config("A", "k", "1234")
            for args, why in ((("B", "k", "v"), "maxKvNamespaces=1"), (("A", "k", "12345"), "maxKvValueChars=4")):
                with pytest.raises(AdminError) as e:
                    await admin.create_and_update_kv_config(*args)
                assert e.value.code == ResponseCode.SYSTEM_ERROR and why in e.value.remark
            assert json.loads(path.read_text()) == {"configTable": {"A": {"k": "1234"}}}


# -- subscription groups and offsets ----------------------------------------------------------


async def test_delete_subscription_group_and_its_offsets(tmp_path):
    async with run_standalone(tmp_path) as (ns, broker):
        async with Admin(ns.address) as admin:
            addr = broker.broker_addr
            await admin.create_and_update_topic_config(addr, "DelG_T", read_queue_nums=1, write_queue_nums=1)
            async with rmq.Producer(ns.address, "PG_DelG") as p:
                for i in range(3):
                    await p.send(rmq.Message("DelG_T", b"m%d" % i))
            got: list[bytes] = []

            async def handler(msg):
                got.append(msg.body)

            c = rmq.PushConsumer(ns.address, "CG_DelG", handler=handler, consume_from_where=FIRST)
            c.subscribe("DelG_T", "*")
            async with c:
                await wait_until(lambda: len(got) == 3, what="3 messages consumed")
            offsets = await admin.get_all_consumer_offset(addr)
            assert offsets["DelG_T@CG_DelG"] == {0: 3}

            await admin.delete_subscription_group(addr, "CG_DelG")
            assert "CG_DelG" not in broker.subscription_group_manager.subscription_group_table
            assert (await admin.get_all_consumer_offset(addr))["DelG_T@CG_DelG"] == {0: 3}  # kept

            broker.subscription_group_manager.find_subscription_group_config("CG_DelG")  # back on use
            await admin.delete_subscription_group(addr, "CG_DelG", remove_offset=True)
            offsets = await admin.get_all_consumer_offset(addr)
            assert not any(k.endswith("@CG_DelG") for k in offsets)
            assert "%RETRY%CG_DelG@CG_DelG" not in offsets
            await admin.delete_subscription_group(addr, "CG_never_there")  # SUCCESS, as Java


async def test_slave_refuses_delete_subscription_group(tmp_path):
    async with run_namesrv() as ns, run_broker(tmp_path, namesrv=ns, broker_id=1, broker_role="SLAVE") as slave:
        async with Admin(ns.address) as admin:
            with pytest.raises(AdminError) as e:
                await admin.delete_subscription_group(slave.broker_addr, "G")
            assert e.value.remark == "Can't modify topic or subscription group from slave broker."


# -- consume queues ---------------------------------------------------------------------------


async def test_query_consume_queue_shows_the_sent_messages(tmp_path):
    async with run_standalone(tmp_path) as (ns, broker):
        async with Admin(ns.address) as admin:
            addr = broker.broker_addr
            await admin.create_and_update_topic_config(addr, "CqT", read_queue_nums=1, write_queue_nums=1)
            async with rmq.Producer(ns.address, "PG_Cq") as p:
                results = [await p.send(rmq.Message("CqT", b"body-%d" % i, tags="TagA")) for i in range(5)]
            await wait_until(lambda: broker.message_store.get_max_offset_in_queue("CqT", 0) == 5, what="dispatch")

            body = await admin.query_consume_queue(addr, "CqT", 0, 1, count=3)
            assert (body.min_queue_index, body.max_queue_index) == (0, 5)
            assert body.subscription_data is None and body.filter_data is None
            stored = [broker.message_store.look_message_by_offset_msg_id(r.offset_msg_id) for r in results]
            assert [(u.physic_offset, u.physic_size, u.tags_code) for u in body.queue_data] == [
                (m.commit_log_offset, m.store_size, java_string_hash("TagA")) for m in stored[1:4]
            ]
            m1 = stored[1]
            assert f"physicOffset={m1.commit_log_offset}, physicSize={m1.store_size}" in str(body.queue_data[0])

            assert len((await admin.query_consume_queue(addr, "CqT", 0, 3, count=10)).queue_data) == 2
            past = await admin.query_consume_queue(addr, "CqT", 0, 5)  # Java: remark, no units
            assert past.queue_data is None and past.max_queue_index == 5
            offline = await admin.query_consume_queue(addr, "CqT", 0, 0, consumer_group="CG_offline")
            assert offline.filter_data == "CG_offline@CqT is not online!" and offline.subscription_data is None

            c = rmq.PushConsumer(ns.address, "CG_Cq", handler=lambda m: None, consume_from_where=FIRST)
            c.subscribe("CqT", "TagA || TagB")
            async with c:
                await wait_until(
                    lambda: broker.consumer_manager.find_subscription_data("CG_Cq", "CqT") is not None,
                    what="the consumer's heartbeat",
                )
                online = await admin.query_consume_queue(addr, "CqT", 0, 0, consumer_group="CG_Cq")
            assert online.subscription_data["subString"] == "TagA || TagB"
            assert sorted(online.subscription_data["codeSet"]) == sorted(java_string_hash(t) for t in ("TagA", "TagB"))

            with pytest.raises(AdminError) as e:
                await admin.query_consume_queue(addr, "CqT", 7, 0)
            assert e.value.code == ResponseCode.SYSTEM_ERROR and e.value.remark == "7@CqT is not exist!"
            with pytest.raises(AdminError) as e:
                await admin.query_consume_queue(addr, "CqT", 0, 0, count=1_000_000)
            assert "count 1000000 is out of range" in e.value.remark


async def test_delete_expired_commit_log_and_clean_expired_consume_queues(tmp_path):
    """fileReservedTime=0 makes every full CommitLog file expired; deleteWhen is an hour that is
    not now, so only DELETE_EXPIRED_COMMITLOG's manual runs delete them. CLEAN_EXPIRED_CONSUMEQUEUE
    then destroys the queue whose messages all left the CommitLog."""
    not_now = str((time.localtime().tm_hour + 12) % 24)
    # the disk ratios at 100 %: how full this machine's disk is must not make the runs delete
    # (above diskMaxUsedSpaceRatio, 75 % by default, every clean run deletes whatever the hour)
    async with run_standalone(
        tmp_path,
        mapped_file_size_commitlog=64 * 1024,
        file_reserved_time=0,
        delete_when=not_now,
        clean_resource_interval=100,
        disk_max_used_space_ratio=100,
        disk_space_clean_forcibly_ratio=100,
        disk_space_warning_level_ratio=100,
    ) as (ns, broker):
        store = broker.message_store
        async with Admin(ns.address) as admin:
            addr = broker.broker_addr
            for t in ("OldT", "NewT"):
                await admin.create_and_update_topic_config(addr, t, read_queue_nums=1, write_queue_nums=1)
            async with rmq.Producer(ns.address, "PG_Old") as p:
                for _ in range(40):  # ~4 KiB each: three 64 KiB files
                    await p.send(rmq.Message("OldT", b"o" * 4000))
                for _ in range(20):
                    await p.send(rmq.Message("NewT", b"n" * 4000))
            await wait_until(lambda: store.dispatch_behind_bytes() == 0, what="dispatch")
            files_before = len(store.commit_log.mfq.files)
            assert files_before >= 3
            assert store.delete_expired_files() == 0 and store.commit_log.min_offset == 0  # not the hour

            assert await admin.delete_expired_commit_log_by_addr(addr)
            await wait_until(lambda: store.commit_log.min_offset > 0, what="a manual clean run")
            assert len(store.commit_log.mfq.files) < files_before
            old_end = store.find_consume_queue("OldT", 0, create=False).max_physic_offset
            assert old_end < store.commit_log.min_offset  # every OldT message aged out

            assert await admin.clean_expired_consumer_queue()
            assert store.find_consume_queue("OldT", 0, create=False) is None
            assert store.find_consume_queue("NewT", 0, create=False) is not None
            with pytest.raises(AdminError, match="0@OldT is not exist!"):
                await admin.query_consume_queue(addr, "OldT", 0, 0)
            assert (await admin.query_consume_queue(addr, "NewT", 0, 0)).max_queue_index == 20


async def test_delay_offsets_dump(tmp_path):
    async with run_standalone(tmp_path) as (ns, broker):
        async with Admin(ns.address) as admin:
            await admin.create_and_update_topic_config(
                broker.broker_addr, "DelayT", read_queue_nums=1, write_queue_nums=1
            )
            async with rmq.Producer(ns.address, "PG_Delay") as p:
                await p.send(rmq.Message("DelayT", b"later", delay_level=1))
            await wait_until(
                lambda: broker.schedule_service.table.offset_table.get(1, 0) == 1,
                what="the level-1 message delivered",
                timeout=30,
            )
            assert (await admin.get_all_delay_offset(broker.broker_addr))[1] == 1


# -- golden: Apache RocketMQ 4.9.8's answers decoded, ours compared in shape -------------------


def _golden(capture: str, code: int) -> list[tuple]:

    import remoting_golden as g

    rows = g.ha_frames() if capture == "ha" else g.mqadmin_frames()
    pairs = [(q["cmd"], a["cmd"]) for q, a in g.exchanges(rows, code) if a is not None]
    assert pairs, f"no answered {code} in the {capture} capture"
    return pairs


def _types(d: dict) -> dict:
    return {k: type(v).__name__ for k, v in d.items()}


async def _ask(admin: Admin, addr: str, java_request) -> "rmq.protocol.command.RemotingCommand":
    """Java's request, as captured (minus its ACL signature), sent to ``addr``."""
    from rmq.protocol.command import RemotingCommand

    ext = {k: v for k, v in java_request.ext_fields.items() if k not in ("Signature", "AccessKey")}
    return await admin._remote.invoke(
        addr, RemotingCommand.request(java_request.code, ext, java_request.body_bytes() or None), timeout=10
    )


@pytest.fixture
async def parity(tmp_path):
    """A broker with the capture's topic (ParityT, messages in queue 0) and group (AdmG)."""
    async with run_standalone(tmp_path) as (ns, broker):
        async with Admin(ns.address) as admin:
            await admin.create_and_update_topic_config(
                broker.broker_addr, "ParityT", read_queue_nums=1, write_queue_nums=1
            )
            await admin.create_and_update_subscription_group_config(broker.broker_addr, "AdmG")
            async with rmq.Producer(ns.address, "PG_Parity") as p:
                for i in range(12):
                    await p.send(rmq.Message("ParityT", b"p%d" % i, tags="T"))
            yield ns, broker, admin


async def test_golden_metadata_dumps_match_the_java_masters_shape(parity):
    """GET_ALL_TOPIC_CONFIG 21, GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, GET_ALL_CONSUMER_OFFSET 43,
    GET_ALL_DELAY_OFFSET 45: what a Java slave's SlaveSynchronize reads."""
    from rmq.protocol.requests.broker import parse_all_consumer_offset, parse_all_delay_offset

    _ns, broker, admin = parity
    addr = broker.broker_addr
    c = broker.consumer_offset_manager
    c.commit_offset("test", "AdmG", "ParityT", 0, 5)
    for code, table in ((21, "topicConfigTable"), (201, "subscriptionGroupTable")):
        for java_req, java in _golden("ha", code):
            ours = await _ask(admin, addr, java_req)
            assert ours.code == java.code == 0 and ours.ext_fields == java.ext_fields == {}
            j, o = json.loads(java.body_bytes()), json.loads(ours.body_bytes())
            assert set(j) == set(o) == {"dataVersion", table}
            assert _types(j["dataVersion"]) == _types(o["dataVersion"])
            java_entry, our_entries = next(iter(j[table].values())), list(o[table].values())
            assert our_entries and all(_types(e) == _types(java_entry) for e in our_entries)
            shared = set(j[table]) & set(o[table])
            assert shared, "system topics/groups in common"
            for name in shared:  # the system entries Java and rmq both have agree in value too
                assert set(o[table][name]) == set(j[table][name])
    for java_req, java in _golden("ha", 43):
        assert parse_all_consumer_offset(java) == {}
        ours = await _ask(admin, addr, java_req)
        assert json.loads(ours.body_bytes()) == {"offsetTable": {"ParityT@AdmG": {"0": 5}}}
        assert parse_all_consumer_offset(ours) == {"ParityT@AdmG": {0: 5}}
    for java_req, java in _golden("ha", 45):
        assert parse_all_delay_offset(java) == {}
        ours = await _ask(admin, addr, java_req)
        assert list(json.loads(ours.body_bytes())) == ["offsetTable"] and ours.code == 0


async def test_golden_write_perm_config_and_maintenance_answers(parity):
    """205/327 (name server), 319 (name server), 207/306/329/321 (broker): Java's answers
    decoded by rmq.Admin's parsers, ours to the same requests compared field by field."""
    from rmq.protocol.requests import check_success
    from rmq.protocol.requests.broker import parse_query_consume_queue
    from rmq.protocol.requests.namesrv import parse_add_write_perm, parse_namesrv_config, parse_wipe_write_perm

    ns, broker, admin = parity
    for code, parse, key in (
        (205, parse_wipe_write_perm, "wipeTopicCount"),
        (327, parse_add_write_perm, "addTopicCount"),
    ):
        for java_req, java in _golden("mqadmin", code):
            assert java_req.ext_fields["brokerName"] == "broker-a"
            assert parse(java) == 13
            ours = await _ask(admin, ns.address, java_req)
            assert ours.code == java.code == 0 and set(ours.ext_fields) == set(java.ext_fields) == {key}
            assert parse(ours) == len([q for q in ns.route_info_manager.topic_queue_table.values() if "broker-a" in q])
            assert not ours.body_bytes() and not java.body_bytes()
    for java_req, java in _golden("mqadmin", 319):
        java_cfg, our_cfg = parse_namesrv_config(java), parse_namesrv_config(await _ask(admin, ns.address, java_req))
        assert java_cfg["listenPort"] == "29876" and java_cfg["kvConfigPath"].endswith("kvConfig.json")
        assert our_cfg["listenPort"] == str(ns.port) and {"kvConfigPath", "configStorePath"} <= set(our_cfg)
    for code in (207, 306, 329):
        for java_req, java in _golden("mqadmin", code):
            check_success(java)
            ours = await _ask(admin, broker.broker_addr, java_req)
            assert (ours.code, ours.remark, ours.ext_fields, ours.body_bytes()) == (0, None, {}, b"")
            assert (java.code, java.remark, java.ext_fields, java.body_bytes()) == (0, None, {}, b"")
    assert "AdmG" not in broker.subscription_group_manager.subscription_group_table  # the 207 applied
    for java_req, java in _golden("mqadmin", 321):
        jb = parse_query_consume_queue(java)
        assert (jb.min_queue_index, len(jb.queue_data)) == (0, 10) and jb.queue_data[1].physic_offset == 848
        ours = await _ask(admin, broker.broker_addr, java_req)
        ob = parse_query_consume_queue(ours)
        assert (ob.min_queue_index, ob.max_queue_index, len(ob.queue_data)) == (0, 12, 10)
        j, o = json.loads(java.body_bytes()), json.loads(ours.body_bytes())
        assert set(j) == set(o) and [_types(u) for u in o["queueData"]] == [_types(u) for u in j["queueData"]]
        assert o["queueData"][0]["tagsCode"] == java_string_hash("T")


def test_bodies_read_fastjson_integer_keys_and_refuse_malformed_ones():
    """Java's fastjson writes Integer map keys unquoted (ConsumerOffsetManager's queue ids,
    DelayOffsetSerializeWrapper's levels)."""
    from rmq.errors import RemotingCommandError
    from rmq.protocol.body.ops import ConsumerOffsetTable, DelayOffsetTable, QueryConsumeQueueResponseBody
    from rmq.protocol.command import RemotingCommand
    from rmq.protocol.requests.broker import parse_all_consumer_offset

    assert ConsumerOffsetTable.decode(b'{"offsetTable":{"T@G":{0:5,1:7}}}').offset_table == {"T@G": {0: 5, 1: 7}}
    assert DelayOffsetTable.decode(b'{"offsetTable":{1:3,18:0}}').offset_table == {1: 3, 18: 0}
    table = ConsumerOffsetTable({"T@G": {1: 2}})
    assert ConsumerOffsetTable.decode(table.encode()) == table
    for bad in (b"[1]", b"{", b'{"offsetTable":{"T@G":{"x":1}}}', b'{"offsetTable":[1]}'):
        with pytest.raises(ValueError):
            ConsumerOffsetTable.decode(bad)
        # an answer carrying it is the caller's RemotingCommandError (rmq.protocol.requests.parse_body)
        with pytest.raises(RemotingCommandError, match="malformed ConsumerOffsetManager body"):
            parse_all_consumer_offset(RemotingCommand.request(43).response(ResponseCode.SUCCESS, None, {}, bad))
    with pytest.raises(ValueError):
        QueryConsumeQueueResponseBody.decode(b'{"queueData":[1]}')
