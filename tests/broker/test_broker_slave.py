"""A SLAVE broker's own behaviour with a real master: the metadata copy (Java SlaveSynchronize:
GET_ALL_TOPIC_CONFIG 21, GET_ALL_CONSUMER_OFFSET 43, GET_ALL_DELAY_OFFSET 45,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201 every slaveSyncIntervalMs), which never empties its tables
when the master is down or answers garbage, and the slave's answers to pulls and offset queries
(Java PullMessageProcessor: a slave serves pulls whatever slaveReadEnable says and does not move
a consumer's offset).

Every broker and name server is real (in-process, ephemeral ports); the slave learns its master
from the name server's REGISTER_BROKER answer, as Java's does.
"""

import json

import pytest
from broker_support import decode_records

from rmq._testing import BrokerEnv, free_broker_port, run_broker, run_namesrv, wait_until
from rmq.broker.managers.config_store import ConfigManager
from rmq.broker.managers.consumer_offset import ConsumerOffsetManager
from rmq.broker.managers.subscription_group import SubscriptionGroupManager
from rmq.broker.managers.topic_config import TopicConfigManager
from rmq.config import BrokerConfig
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient
from rmq.remoting.server import RemotingServer

pytestmark = pytest.mark.timeout(120)

SLAVE = {"broker_id": 1, "broker_role": "SLAVE", "slave_sync_interval_ms": 200}


def _group_body(name: str, **fields) -> bytes:
    d = {
        "groupName": name,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": 16,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
    }
    d.update(fields)
    return json.dumps(d).encode()


async def _commit(env: BrokerEnv, group: str, topic: str, queue_id: int, offset: int) -> None:
    resp = await env.call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": str(offset)},
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def _synced(slave, topic: str, group: str, key: str, queue_id: int, offset: int) -> bool:
    return (
        slave.topic_config_manager.select_topic_config(topic) is not None
        and group in slave.subscription_group_manager.subscription_group_table
        and slave.consumer_offset_manager.offset_table.get(key, {}).get(queue_id) == offset
    )


async def test_slave_copies_the_masters_metadata_and_persists_it(tmp_path):
    async with run_namesrv() as ns, run_broker(tmp_path / "m", ns) as master:
        client = RemotingClient()
        try:
            m = BrokerEnv(ns, master, client)
            await m.create_topic("SyncT", queues=3, perm=6)
            resp = await m.call(
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                None,
                _group_body("CG_Sync", retryMaxTimes=3, whichBrokerWhenConsumeSlowly=1),
            )
            assert resp.code == ResponseCode.SUCCESS
            await _commit(m, "CG_Sync", "SyncT", 2, 17)
            master.schedule_service.table.offset_table[3] = 5  # delay level 3's progress
            async with run_broker(tmp_path / "s", ns, **SLAVE) as slave:
                # the master's address comes from the name server's answer to the registration
                assert slave.slave_synchronize.master_addr == master.broker_addr
                await wait_until(
                    lambda: _synced(slave, "SyncT", "CG_Sync", "SyncT@CG_Sync", 2, 17),
                    what="the slave to copy topic, group and offset",
                )
                await wait_until(
                    lambda: slave.schedule_service.table.offset_table.get(3) == 5,
                    what="the slave to copy the delay offsets",
                )
                tc = slave.topic_config_manager.select_topic_config("SyncT")
                assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (3, 3, 6)
                assert slave.subscription_group_manager.subscription_group_table["CG_Sync"].retry_max_times == 3
                # the versions are the master's, so an unchanged master is not copied again
                assert slave.topic_config_manager.data_version == master.topic_config_manager.data_version
                assert slave.subscription_group_manager.data_version == master.subscription_group_manager.data_version
                # a later change on the master arrives at the next round
                await _commit(m, "CG_Sync", "SyncT", 2, 40)
                await m.create_topic("SyncT2", queues=1)
                await wait_until(
                    lambda: _synced(slave, "SyncT2", "CG_Sync", "SyncT@CG_Sync", 2, 40),
                    what="the slave to copy the master's changes",
                )
                # the slave's own tables do not go to the name server as routes
                route = await m.route("SyncT")
                brokers = json.loads(route.body)["brokerDatas"]
                assert {int(k) for k in brokers[0]["brokerAddrs"]} == {0, 1}
        finally:
            await client.close()
    # what the slave copied is on its disk
    bc = BrokerConfig()
    cfg = tmp_path / "s" / "config"
    tcm = TopicConfigManager(str(cfg), bc)
    sgm = SubscriptionGroupManager(str(cfg), bc)
    com = ConsumerOffsetManager(str(cfg))
    for mgr in (tcm, sgm, com):
        assert ConfigManager.load(mgr)
    assert "SyncT2" in tcm.topic_config_table and "CG_Sync" in sgm.subscription_group_table
    assert com.offset_table["SyncT@CG_Sync"][2] == 40


async def test_slave_keeps_its_tables_when_the_master_is_down(tmp_path):
    async with run_namesrv() as ns:
        async with run_broker(tmp_path / "m", ns) as master:
            client = RemotingClient()
            try:
                m = BrokerEnv(ns, master, client)
                await m.create_topic("KeepT", queues=2)
                await _commit(m, "CG_Keep", "KeepT", 1, 9)
            finally:
                await client.close()
            async with run_broker(tmp_path / "s", ns, **SLAVE) as slave:
                await wait_until(
                    lambda: _synced(slave, "KeepT", "CG_Keep", "KeepT@CG_Keep", 1, 9), what="the first copy"
                )
                master_addr = master.broker_addr
                await master.shutdown()
                sync = slave.slave_synchronize
                # the slave still names the dead master until its next registration: rounds fail
                if sync.master_addr == master_addr:
                    failed = sync.failures
                    await wait_until(lambda: sync.failures >= failed + 2, what="two failed rounds")
                # its next registration's answer has no master: it stops asking
                await slave.register_broker_all()
                assert sync.master_addr is None
                assert await sync.sync_all() is False
                assert _synced(slave, "KeepT", "CG_Keep", "KeepT@CG_Keep", 1, 9)
                assert "CG_Keep" in slave.subscription_group_manager.subscription_group_table


class _GarbageMaster:
    """A peer at the master's address answering the four codes with ``answers[code]``
    (code, body): what a broken or hostile master could send."""

    def __init__(self, answers: dict[int, tuple[int, bytes]]) -> None:
        self.answers = answers
        self.server = RemotingServer("127.0.0.1", 0, name="garbage-master")
        self.asked: list[int] = []
        for code in answers:
            self.server.register_processor(code, self)

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        self.asked.append(cmd.code)
        code, body = self.answers[cmd.code]
        return cmd.response(code, None, {}, body)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"


GARBAGE_BODIES = [
    b"not json at all",
    b"[1,2,3]",
    b'{"topicConfigTable": 5, "subscriptionGroupTable": "x", "offsetTable": [1], "dataVersion": 7}',
    b'{"offsetTable": {"T@G": {"zero": "x"}}, "topicConfigTable": {"T": 1}, "subscriptionGroupTable": {"G": []}}',
]


@pytest.mark.parametrize("body", GARBAGE_BODIES, ids=["not-json", "array", "wrong-types", "wrong-entries"])
async def test_slave_keeps_its_tables_when_the_master_answers_garbage(tmp_path, body):
    codes = (
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.GET_ALL_CONSUMER_OFFSET,
        RequestCode.GET_ALL_DELAY_OFFSET,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    )
    fake = _GarbageMaster({c: (ResponseCode.SUCCESS, body) for c in codes})
    await fake.server.start()
    try:
        async with run_broker(tmp_path / "s", **SLAVE) as slave:
            slave.consumer_offset_manager.commit_offset("t", "CG", "Mine", 0, 3)
            slave.schedule_service.table.offset_table[2] = 8
            topics = dict(slave.topic_config_manager.topic_config_table)
            groups = dict(slave.subscription_group_manager.subscription_group_table)
            slave.slave_synchronize.set_master_addr(fake.addr)
            assert await slave.slave_synchronize.sync_all() is False
            assert sorted(set(fake.asked)) == sorted(codes)
            assert slave.topic_config_manager.topic_config_table == topics
            assert slave.subscription_group_manager.subscription_group_table == groups
            assert slave.consumer_offset_manager.offset_table == {"Mine@CG": {0: 3}}
            assert slave.schedule_service.table.offset_table.get(2) == 8
    finally:
        await fake.server.close()


async def test_slave_keeps_its_tables_when_the_master_answers_errors(tmp_path):
    codes = (
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.GET_ALL_CONSUMER_OFFSET,
        RequestCode.GET_ALL_DELAY_OFFSET,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    )
    fake = _GarbageMaster({c: (ResponseCode.SYSTEM_ERROR, b"") for c in codes})
    await fake.server.start()
    try:
        async with run_broker(tmp_path / "s", **SLAVE) as slave:
            slave.consumer_offset_manager.commit_offset("t", "CG", "Mine", 0, 3)
            topics = dict(slave.topic_config_manager.topic_config_table)
            slave.slave_synchronize.set_master_addr(fake.addr)
            assert await slave.slave_synchronize.sync_all() is False
            assert slave.topic_config_manager.topic_config_table == topics
            assert slave.consumer_offset_manager.offset_table == {"Mine@CG": {0: 3}}
    finally:
        await fake.server.close()


async def test_slave_skips_entries_that_cannot_be_its_own(tmp_path):
    """A master table with some bad entries: the good ones are copied, the bad ones dropped."""
    topics = {
        "dataVersion": {"timestamp": 1, "counter": 9},
        "topicConfigTable": {
            "GoodT": {"topicName": "GoodT", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
            "Bad T": {"topicName": "Bad T", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
            "HugeT": {"topicName": "HugeT", "readQueueNums": 10**6, "writeQueueNums": 1, "perm": 6},
            "Other": {"topicName": "NotOther", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
        },
    }
    groups = {
        "dataVersion": {"timestamp": 1, "counter": 2},
        "subscriptionGroupTable": {
            "CG_Good": json.loads(_group_body("CG_Good")),
            "CG bad": json.loads(_group_body("CG bad")),
        },
    }
    offsets = {"offsetTable": {"GoodT@CG_Good": {0: 5, 1: -1}}}
    fake = _GarbageMaster(
        {
            RequestCode.GET_ALL_TOPIC_CONFIG: (ResponseCode.SUCCESS, json.dumps(topics).encode()),
            RequestCode.GET_ALL_CONSUMER_OFFSET: (ResponseCode.SUCCESS, json.dumps(offsets).encode()),
            RequestCode.GET_ALL_DELAY_OFFSET: (ResponseCode.SUCCESS, b'{"offsetTable":{1:4,99:7}}'),
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (ResponseCode.SUCCESS, json.dumps(groups).encode()),
        }
    )
    await fake.server.start()
    try:
        async with run_broker(tmp_path / "s", **SLAVE) as slave:
            slave.slave_synchronize.set_master_addr(fake.addr)
            assert await slave.slave_synchronize.sync_all() is True
            assert set(slave.topic_config_manager.topic_config_table) == {"GoodT"}
            assert slave.topic_config_manager.data_version.counter == 9
            assert set(slave.subscription_group_manager.subscription_group_table) == {"CG_Good"}
            assert slave.consumer_offset_manager.offset_table == {"GoodT@CG_Good": {0: 5}}
            assert slave.schedule_service.table.offset_table == {1: 4}  # level 99 does not exist
    finally:
        await fake.server.close()


# -- pulls and offset queries on a slave ----------------------------------------------------------


async def _write_as_master_then_restart_as_slave(store, n: int, **slave_overrides):
    """Messages written by a master in ``store``; then the same store opened by a SLAVE broker
    (data written without replication, so these tests do not depend on the HA transfer)."""
    async with run_broker(store) as master:
        client = RemotingClient()
        try:
            m = BrokerEnv(None, master, client)
            await m.create_topic("SlaveReadT", queues=1)
            for i in range(n):
                resp = await m.send("SlaveReadT", f"m{i}".encode())
                assert resp.code == ResponseCode.SUCCESS
            await _commit(m, "CG_SR", "SlaveReadT", 0, 2)
        finally:
            await client.close()
    return run_broker(store, **SLAVE, **slave_overrides)


@pytest.mark.parametrize("slave_read_enable", [False, True])
async def test_slave_serves_pulls_and_offset_queries(tmp_path, slave_read_enable):
    """Java 4.9.8: a slave answers a pull with the messages whatever slaveReadEnable says (it
    sets PULL_RETRY_IMMEDIATELY, then the store's status overwrites it); the suggestion is the
    master without slaveReadEnable and the group's brokerId (0) with it."""
    async with await _write_as_master_then_restart_as_slave(
        tmp_path / "s", 5, slave_read_enable=slave_read_enable
    ) as slave:
        client = RemotingClient()
        try:
            s = BrokerEnv(None, slave, client)
            native = slave.pull_message_processor.fast
            taken = native.taken
            resp = await s.pull("SlaveReadT", offset=0, group="CG_SR", suspend_ms=0, sys_flag=4)
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
            assert resp.ext_fields["suggestWhichBrokerId"] == "0"
            assert resp.ext_fields["nextBeginOffset"] == "5"
            assert [r.body for r in decode_records(resp.body)] == [f"m{i}".encode() for i in range(5)]
            # its own offset queries
            q = await s.call(
                RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG_SR", "topic": "SlaveReadT", "queueId": 0}
            )
            assert (q.code, q.ext_fields["offset"]) == (ResponseCode.SUCCESS, "2")
            mx = await s.call(RequestCode.GET_MAX_OFFSET, {"topic": "SlaveReadT", "queueId": 0})
            assert (mx.code, mx.ext_fields["offset"]) == (ResponseCode.SUCCESS, "5")
            mn = await s.call(RequestCode.GET_MIN_OFFSET, {"topic": "SlaveReadT", "queueId": 0})
            assert (mn.code, mn.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
            # a commit while the master is away lands on the slave (Java
            # ConsumerManageProcessor.updateConsumerOffset has no role check)
            await _commit(s, "CG_SR", "SlaveReadT", 0, 4)
            assert slave.consumer_offset_manager.query_offset("CG_SR", "SlaveReadT", 0) == 4
            # ... but a pull's commit flag does not (Java: storeOffsetEnable is false on a SLAVE)
            resp = await s.pull("SlaveReadT", offset=4, group="CG_SR", suspend_ms=0, sys_flag=4 | 1, commit_offset=5)
            assert resp.code == ResponseCode.SUCCESS
            assert slave.consumer_offset_manager.query_offset("CG_SR", "SlaveReadT", 0) == 4
            # (the group known by then: the native pull path answered, with the same rules)
            assert native.taken > taken
        finally:
            await client.close()


async def test_slave_does_not_move_a_consumer_past_its_own_end(tmp_path):
    """A consumer ahead of a lagging slave gets PULL_RETRY_IMMEDIATELY at its own offset, not
    PULL_OFFSET_MOVED to the slave's end (Java: no correction on a SLAVE without
    offsetCheckInSlave); with offsetCheckInSlave the slave moves it as a master would."""
    async with await _write_as_master_then_restart_as_slave(tmp_path / "s", 3) as slave:
        client = RemotingClient()
        try:
            s = BrokerEnv(None, slave, client)
            resp = await s.pull("SlaveReadT", offset=50, group="CG_SR", suspend_ms=0)
            assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY, (resp.code, resp.remark)
            assert resp.ext_fields["nextBeginOffset"] == "50"
            assert resp.ext_fields["suggestWhichBrokerId"] == "0"
        finally:
            await client.close()
    async with run_broker(tmp_path / "s", **SLAVE, offset_check_in_slave=True) as slave:
        client = RemotingClient()
        try:
            s = BrokerEnv(None, slave, client)
            resp = await s.pull("SlaveReadT", offset=50, group="CG_SR", suspend_ms=0)
            assert resp.code == ResponseCode.PULL_OFFSET_MOVED
            # Java DefaultMessageStore.getMessage: past the end of a queue starting at 0 → 0
            assert resp.ext_fields["nextBeginOffset"] == "0"
        finally:
            await client.close()


async def test_master_suggests_the_slave_to_a_consumer_reading_from_disk(tmp_path):
    """With slaveReadEnable the master's answer to a consumer whose unread data exceeds the
    memory ratio names the group's whichBrokerWhenConsumeSlowly (1, the slave's brokerId)."""
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "m", ns, slave_read_enable=True, access_message_in_memory_max_ratio=0) as master,
    ):
        client = RemotingClient()
        try:
            m = BrokerEnv(ns, master, client)
            await m.create_topic("DiskT", queues=1)
            for _ in range(3):
                await m.send("DiskT", b"x" * 100)
            resp = await m.pull("DiskT", offset=0, group="CG_Disk", suspend_ms=0)
            assert resp.code == ResponseCode.SUCCESS
            assert resp.ext_fields["suggestWhichBrokerId"] == "1"
            # again, the group now in the table: answered by the native pull path alike
            taken = master.pull_message_processor.fast.taken
            resp = await m.pull("DiskT", offset=0, group="CG_Disk", suspend_ms=0)
            assert resp.code == ResponseCode.SUCCESS and master.pull_message_processor.fast.taken == taken + 1
            assert resp.ext_fields["suggestWhichBrokerId"] == "1"
        finally:
            await client.close()


# -- golden: a Java 4.9.8 slave's requests and its Java master's answers ---------------------------


def _golden_pairs(code: int) -> list[tuple]:

    import remoting_golden as g

    pairs = [(q["cmd"], a["cmd"]) for q, a in g.exchanges(g.ha_frames(), code) if a is not None]
    assert pairs, f"no answered {code} in the HA capture"
    return pairs


SYNC_CODES = (
    RequestCode.GET_ALL_TOPIC_CONFIG,
    RequestCode.GET_ALL_CONSUMER_OFFSET,
    RequestCode.GET_ALL_DELAY_OFFSET,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
)


def test_golden_our_sync_requests_are_the_java_slaves():
    from rmq.protocol.requests.broker import (
        get_all_consumer_offset,
        get_all_delay_offset,
        get_all_subscription_group_config,
        get_all_topic_config,
    )

    ours = {
        RequestCode.GET_ALL_TOPIC_CONFIG: get_all_topic_config(),
        RequestCode.GET_ALL_CONSUMER_OFFSET: get_all_consumer_offset(),
        RequestCode.GET_ALL_DELAY_OFFSET: get_all_delay_offset(),
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: get_all_subscription_group_config(),
    }
    for code in SYNC_CODES:
        for java, _ in _golden_pairs(code):
            mine = ours[code]
            assert (mine.code, mine.flag, mine.ext_fields or {}, mine.body_bytes() or b"") == (
                java.code,
                java.flag,
                java.ext_fields or {},
                java.body_bytes() or b"",
            )


async def test_golden_slave_copies_a_java_masters_answers(tmp_path):
    """The Java master's captured answers (its last answer to each code), served at the master's
    address: our slave takes the Java topic table (HaTopic, 4 queues) and groups with their
    dataVersions."""
    answers = {code: (ResponseCode.SUCCESS, _golden_pairs(code)[-1][1].body_bytes()) for code in SYNC_CODES}
    fake = _GarbageMaster(answers)
    await fake.server.start()
    try:
        async with run_broker(tmp_path / "s", **SLAVE) as slave:
            slave.slave_synchronize.set_master_addr(fake.addr)
            assert await slave.slave_synchronize.sync_all() is True
            java_topics = json.loads(answers[RequestCode.GET_ALL_TOPIC_CONFIG][1])
            java_groups = json.loads(answers[RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG][1])
            tcm, sgm = slave.topic_config_manager, slave.subscription_group_manager
            assert set(tcm.topic_config_table) == set(java_topics["topicConfigTable"])
            assert tcm.select_topic_config("HaTopic").to_json() == java_topics["topicConfigTable"]["HaTopic"]
            assert tcm.data_version.to_json() == java_topics["dataVersion"]
            assert set(sgm.subscription_group_table) == set(java_groups["subscriptionGroupTable"])
            assert sgm.data_version.to_json() == java_groups["dataVersion"]
            # the same versions again: nothing is replaced (Java compares DataVersion)
            tcm.topic_config_table["LocalOnly"] = tcm.topic_config_table["HaTopic"]
            assert await slave.slave_synchronize.sync_all() is True
            assert "LocalOnly" in tcm.topic_config_table
    finally:
        await fake.server.close()


async def test_vip_channel_serves_what_a_java_slave_reads_there(tmp_path):
    """Java's slave asks GET_ALL_TOPIC_CONFIG on its master's listenPort - 2 (MixAll
    .brokerVIPChannel); a broker on a fixed port answers it there, and nothing that writes."""
    port = free_broker_port()
    async with run_broker(tmp_path / "m", listen_port=port) as master:
        client = RemotingClient()
        try:
            assert master.vip_channel is not None and master.vip_channel.started
            vip = f"127.0.0.1:{port - 2}"
            m = BrokerEnv(None, master, client)
            await m.create_topic("VipT", queues=2)
            for code in SYNC_CODES:
                resp = await client.invoke(vip, RemotingCommand.request(code, None), timeout=5)
                assert resp.code == ResponseCode.SUCCESS, (code, resp.remark)
            resp = await client.invoke(vip, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, None), timeout=5)
            assert "VipT" in json.loads(resp.body)["topicConfigTable"]
            resp = await client.invoke(
                vip,
                RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {"topic": "NoT", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
                ),
                timeout=5,
            )
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await client.close()
    async with run_broker(tmp_path / "e") as ephemeral:
        assert ephemeral.vip_channel is None
