"""The mqadmin commands rmq admin gained last (cleanUnusedTopic, exportConfigs, exportMetadata,
exportMetrics, producer, sendMsgStatus, startMonitoring, updateOrderConf) as real CLI processes
against real daemons, and ``rmq admin --help`` listing all 56 of mqadmin 4.9.8's commands."""

import asyncio
import json
import signal
import subprocess

import pytest
from cli_support import RMQ, admin

import rmq
from rmq._testing import run_standalone, wait_until
from rmq.client.admin import Admin, AdminError

pytestmark = [pytest.mark.slow, pytest.mark.heavy(50)]

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET

#: Apache RocketMQ 4.9.8's MQAdminStartup.initCommand list, by commandName().
MQADMIN_4_9_8 = {
    "allocateMQ",
    "brokerConsumeStats",
    "brokerStatus",
    "checkMsgSendRT",
    "cleanExpiredCQ",
    "cleanUnusedTopic",
    "cloneGroupOffset",
    "clusterAclConfigVersion",
    "clusterList",
    "clusterRT",
    "consumeMessage",
    "consumerConnection",
    "consumerProgress",
    "consumerStatus",
    "deleteAclConfig",
    "deleteExpiredCommitLog",
    "deleteKvConfig",
    "deleteSubGroup",
    "deleteTopic",
    "exportConfigs",
    "exportMetadata",
    "exportMetrics",
    "getBrokerConfig",
    "getConsumerConfig",
    "getNamesrvConfig",
    "printMsg",
    "printMsgByQueue",
    "producer",
    "producerConnection",
    "queryCq",
    "queryMsgById",
    "queryMsgByKey",
    "queryMsgByOffset",
    "queryMsgByUniqueKey",
    "queryMsgTraceById",
    "resetOffsetByTime",
    "sendMessage",
    "sendMsgStatus",
    "skipAccumulatedMessage",
    "startMonitoring",
    "statsAll",
    "topicClusterList",
    "topicList",
    "topicRoute",
    "topicStatus",
    "updateAclConfig",
    "updateBrokerConfig",
    "updateGlobalWhiteAddr",
    "updateKvConfig",
    "updateNamesrvConfig",
    "updateOrderConf",
    "updateSubGroup",
    "updateTopic",
    "updateTopicPerm",
    "wipeWritePerm",
    "addWritePerm",
}


async def aadmin(*args: str) -> subprocess.CompletedProcess:
    """``admin`` off the event loop, so the SDK clients and in-process daemons keep running."""
    return await asyncio.to_thread(admin, *args)


def test_help_lists_every_mqadmin_command():
    r = subprocess.run([*RMQ, "admin", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    listed = {
        line.split()[0]
        for line in r.stdout.split("commands:")[1].splitlines()[1:]
        if line.startswith("    ") and not line.startswith("     ")
    }
    assert len(MQADMIN_4_9_8) == 56
    assert listed >= MQADMIN_4_9_8, MQADMIN_4_9_8 - listed


@pytest.fixture
async def cluster(tmp_path):
    """An in-process name server and broker with a user topic (4 queues), a user group, and a
    consumer and producer online; yields ``(ns_addr, broker, producer)``."""
    async with run_standalone(tmp_path / "store") as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with Admin(ns_addr) as a:
            await a.create_and_update_topic_config(broker.broker_addr, "ToolT", read_queue_nums=4, write_queue_nums=4)
            await a.create_and_update_subscription_group_config(broker.broker_addr, "ToolCG")
        async with rmq.Producer(ns_addr, "ToolPG") as p:
            for i in range(8):
                await p.send(rmq.Message("ToolT", f"m{i}", keys=[f"k{i}"]))
            yield ns_addr, broker, p


async def test_export_metadata_configs_and_metrics(cluster, tmp_path):
    ns, broker, _ = cluster
    out = tmp_path / "export"
    cluster_name = broker.broker_config.broker_cluster_name
    r = await aadmin("exportMetadata", "-n", ns, "-c", cluster_name, "-f", str(out))
    assert r.returncode == 0 and r.stdout == f"export {out / 'metadata.json'} success\n", r.stderr
    text = (out / "metadata.json").read_text()
    assert text.startswith('{\n\t"') and '":' in text and '": ' not in text  # fastjson's pretty form
    meta = json.loads(text)
    topics, groups = meta["topicConfigTable"], meta["subscriptionGroupTable"]
    assert topics["ToolT"]["readQueueNums"] == 4 and topics["ToolT"]["writeQueueNums"] == 4
    assert topics["ToolT"]["topicName"] == "ToolT" and topics["ToolT"]["perm"] == 6
    # system topics, retry/DLQ topics and system groups are left out, as Java's getUser* do
    assert not {"TBW102", "SCHEDULE_TOPIC_XXXX", cluster_name, broker.broker_config.broker_name} & set(topics)
    assert not [t for t in topics if t.startswith("%")]
    assert groups["ToolCG"]["groupName"] == "ToolCG" and "TOOLS_CONSUMER" not in groups
    assert isinstance(meta["exportTime"], int)

    # -t / -g write only that table; -s keeps the %RETRY% topics; -b with -t keeps dataVersion
    async with Admin(ns) as a:
        await a.create_and_update_topic_config(
            broker.broker_addr, "%RETRY%ToolCG", read_queue_nums=1, write_queue_nums=1
        )
    r = await aadmin("exportMetadata", "-n", ns, "-c", cluster_name, "-t", "-s", "-f", str(out))
    assert r.returncode == 0, r.stderr
    only_topics = json.loads((out / "topic.json").read_text())
    assert set(only_topics) == {"topicConfigTable", "exportTime"} and "%RETRY%ToolCG" in only_topics["topicConfigTable"]
    r = await aadmin("exportMetadata", "-n", ns, "-b", broker.broker_addr, "-g", "-f", str(out))
    assert r.returncode == 0, r.stderr
    only_groups = json.loads((out / "subscriptionGroup.json").read_text())
    assert (
        set(only_groups) == {"dataVersion", "subscriptionGroupTable"}
        and "ToolCG" in only_groups["subscriptionGroupTable"]
    )
    r = await aadmin("exportMetadata", "-n", ns, "-f", str(out))
    assert r.returncode == 2 and "-c" in r.stderr and "-b" in r.stderr

    r = await aadmin("exportConfigs", "-n", ns, "-c", cluster_name, "-f", str(out))
    assert r.returncode == 0 and r.stdout == f"export {out / 'configs.json'} success\n", r.stderr
    configs = json.loads((out / "configs.json").read_text())
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    props = configs["brokerConfigs"][broker.broker_config.broker_name]
    assert props["brokerClusterName"] == cluster_name and props["brokerId"] == "0"
    assert props["flushDiskType"] == "ASYNC_FLUSH" and props["autoCreateTopicEnable"] in ("true", "false")
    r = await aadmin("exportConfigs", "-n", ns, "-c", "NoSuchCluster", "-f", str(out))
    assert r.returncode == 1 and "NoSuchCluster" in r.stderr

    r = await aadmin("exportMetrics", "-n", ns, "-c", cluster_name, "-f", str(out))
    assert r.returncode == 0 and r.stdout == f"export {out / 'metrics.json'} success\n", r.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    report = metrics["evaluateReport"][broker.broker_config.broker_name]
    assert report["runtimeQuota"]["topicSize"] == 1 and report["runtimeQuota"]["groupSize"] == 1
    assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_8"
    assert set(report["runtimeQuota"]["tps"]) == {"normalInTps", "normalOutTps", "transInTps", "scheduleInTps"}
    assert metrics["totalData"]["totalOneDayNum"]["transOneDayInNum"] == 0
    assert set(metrics["totalData"]["totalTps"]) == {
        "totalNormalInTps",
        "totalNormalOutTps",
        "totalTransInTps",
        "totalScheduleInTps",
    }


async def test_producer_lists_the_online_producers(cluster):
    ns, broker, p = cluster
    r = await aadmin("producer", "-n", ns, "-b", broker.broker_addr)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("producer group (ToolPG) instance : "))
    assert f"clientId={p.client_id},remoteIP=/127.0.0.1:" in line and ", language=PYTHON, version=" in line
    assert int(line.rsplit("lastUpdateTimestamp=", 1)[1]) > 1_600_000_000_000
    r = await aadmin("producer", "-n", ns)
    assert r.returncode == 2 and "-b" in r.stderr


async def test_update_order_conf_put_get_delete(cluster):
    ns, broker, _ = cluster
    name = broker.broker_config.broker_name
    r = await aadmin("updateOrderConf", "-n", ns, "-t", "ToolT", "-m", "put", "-v", f"{name}:4")
    assert r.returncode == 0 and r.stdout == f"update orderConf success. topic=[ToolT], orderConf=[{name}:4]\n"
    r = await aadmin("updateOrderConf", "-n", ns, "-t", "ToolT", "-m", "get")
    assert r.returncode == 0 and r.stdout == f"get orderConf success. topic=[ToolT], orderConf=[{name}:4] \n"
    async with Admin(ns) as a:
        # Java's name server attaches it to routes only with orderMessageEnable (false by default)
        assert (await a.examine_topic_route_info("ToolT")).order_topic_conf is None
        r = await aadmin("updateNamesrvConfig", "-n", ns, "-k", "orderMessageEnable", "-v", "true")
        assert r.returncode == 0, r.stderr
        assert (await a.examine_topic_route_info("ToolT")).order_topic_conf == f"{name}:4"
    r = await aadmin("updateOrderConf", "-n", ns, "-t", "ToolT", "-m", "delete")
    assert r.returncode == 0 and r.stdout == "delete orderConf success. topic=[ToolT]\n"
    r = await aadmin("updateOrderConf", "-n", ns, "-t", "ToolT", "-m", "get")
    assert r.returncode == 1 and "ToolT" in r.stderr
    r = await aadmin("updateOrderConf", "-n", ns, "-t", "ToolT", "-m", "put")
    assert r.returncode == 2 and "-v" in r.stderr
    r = await aadmin("updateOrderConf", "-n", ns, "-t", "ToolT", "-m", "post")
    assert r.returncode == 2 and "put" in r.stderr


async def test_send_msg_status_sends_to_the_broker_topic(cluster):
    ns, broker, _ = cluster
    name = broker.broker_config.broker_name
    r = await aadmin("sendMsgStatus", "-n", ns, "-b", name, "-s", "22", "-c", "3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line.startswith("rt=") and "ms, SendResult=SendResult [sendStatus=SEND_OK, msgId=" in line
        assert f"messageQueue=MessageQueue [topic={name}, brokerName={name}, queueId=0]" in line
    async with Admin(ns) as a:  # Java's warm-up message, then 3 of 2 x "hello jodie"
        msgs = (await a.pull(rmq.MessageQueue(name, name, 0), 0, 32)).messages
    assert [m.body for m in msgs] == [b"hello jodie" * 2] * 4


async def test_clean_unused_topic_drops_queues_without_a_topic_config(cluster):
    ns, broker, _ = cluster
    store = broker.message_store
    async with rmq.Producer(ns, "OrphanPG") as p:
        await p.send(rmq.Message("OrphanT", b"x"))  # auto-created from TBW102
    assert "OrphanT" in store.consume_queue_table
    broker.topic_config_manager.delete_topic_config("OrphanT")  # a config lost, its queues left behind
    r = await aadmin("cleanUnusedTopic", "-n", ns, "-b", broker.broker_addr)
    assert r.returncode == 0 and r.stdout == "success\n", r.stderr
    assert "OrphanT" not in store.consume_queue_table and "ToolT" in store.consume_queue_table
    r = await aadmin("cleanUnusedTopic", "-n", ns, "-c", broker.broker_config.broker_cluster_name)
    assert r.returncode == 0 and r.stdout == "success\n", r.stderr
    assert "ToolT" in store.consume_queue_table
    r = await aadmin("cleanUnusedTopic", "-n", ns, "-c", "NoSuchCluster")
    assert r.returncode == 1 and "NoSuchCluster" in r.stderr


async def test_start_monitoring_reports_undone_messages(cluster):
    """One round while the group has consumed one of ToolT's 8 messages and holds the next: the
    undone count is the broker's backlog for the group; then a run without --rounds is ended by
    SIGINT once its first round is printed."""
    ns, _, _ = cluster
    got: list[rmq.MessageExt] = []
    consumed, release = asyncio.Event(), asyncio.Event()

    async def handler(msg: rmq.MessageExt) -> None:
        got.append(msg)
        if len(got) >= 2:
            consumed.set()
            await release.wait()  # hold the rest: the offsets stay where they are

    c = rmq.PushConsumer(
        ns, "ToolCG", handler=handler, consume_from_where=FIRST, consume_concurrency=1, pull_batch_size=1
    )
    c.subscribe("ToolT")
    async with c:
        try:
            await asyncio.wait_for(consumed.wait(), 60)
            await _monitor(ns)
        finally:
            release.set()


async def _monitor(ns: str) -> None:
    """While ToolCG's consumer holds its second message: one round, then SIGINT."""

    async def committed() -> bool:
        async with Admin(ns) as a:
            try:
                stats = await a.examine_consume_stats("ToolCG")
            except AdminError:  # no offset committed yet
                return False
        return sum(ow.consumer_offset for ow in stats.offset_table.values()) >= 1

    await wait_until(committed, 30, interval=0.2, what="an offset committed")
    r = await aadmin("startMonitoring", "-n", ns, "--rounds", "1", "--interval", "0.1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "[MONITOR] =========================================beginRound"
    assert lines[-1] == "[MONITOR] =========================================endRound"
    report = next(x for x in lines if "consumerGroup=ToolCG, topic=ToolT," in x)
    assert report.startswith("[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup=ToolCG, topic=ToolT, ")
    fields = dict(kv.split("=") for kv in report.split("[", 2)[2].rstrip("]").split(", "))
    async with Admin(ns) as a:
        stats = await a.examine_consume_stats("ToolCG")
    expected = sum(ow.broker_offset - ow.consumer_offset for ow in stats.offset_table.values())
    assert int(fields["undoneMsgsTotal"]) == expected and 0 < expected <= 8
    assert 0 < int(fields["undoneMsgsSingleMQ"]) <= expected
    assert int(fields["undoneMsgsDelayTimeMills"]) >= 0

    proc = await asyncio.create_subprocess_exec(
        *RMQ,
        "admin",
        "startMonitoring",
        "-n",
        ns,
        "--interval",
        "3600",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    while not (await asyncio.wait_for(proc.stdout.readline(), 120)).endswith(b"endRound\n"):
        pass
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 60) == 130
    r = await aadmin("startMonitoring", "-n", ns, "--interval", "0")
    assert r.returncode == 2 and "--interval" in r.stderr
