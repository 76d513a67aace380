"""``rmq admin`` topic, cluster and message-tool commands as real CLI processes
(``python -m rmq admin ...``) against a real daemon (``python -m rmq standalone``), with real
SDK producers and consumers; the printed columns and values checked."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import pytest
from cli_support import admin, admin_async

import rmq
from rmq._testing import StandaloneProcess, wait_until
from rmq.cli.admin import add_parser
from rmq.cli.admin._cmd import COMMANDS
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient
from rmq.types import MessageQueue

pytestmark = [pytest.mark.slow, pytest.mark.heavy(70)]

TOPIC_COMMANDS = [
    "updateTopic",
    "deleteTopic",
    "updateSubGroup",
    "topicList",
    "topicRoute",
    "clusterList",
    "updateTopicPerm",
    "topicStatus",
    "topicClusterList",
    "allocateMQ",
    "sendMessage",
    "consumeMessage",
    "printMsg",
    "printMsgByQueue",
    "checkMsgSendRT",
    "clusterRT",
]


def make_topic(daemon: StandaloneProcess, topic: str, queues: int = 4) -> None:
    r = admin(
        "updateTopic",
        "-n",
        daemon.namesrv_addr,
        "-t",
        topic,
        "-b",
        daemon.broker_addr,
        "-r",
        str(queues),
        "-w",
        str(queues),
    )
    assert r.returncode == 0, r.stderr


def produce(daemon: StandaloneProcess, topic: str, sends: list[tuple[int, str | None, str]]) -> list[str]:
    """(queue id, tag, body) with a real SDK producer; the message ids."""

    async def go() -> list[str]:
        async with rmq.Producer(daemon.namesrv_addr, "GID_cli_topics_p") as p:
            return [
                (
                    await p.send(
                        rmq.Message(topic, body.encode(), tags=tag), queue=MessageQueue(topic, "broker-a", qid)
                    )
                ).msg_id
                for qid, tag, body in sends
            ]

    return asyncio.run(go())


def rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.strip()]


# ------------------------------------------------------------------------ the CLI itself


def test_admin_help_lists_every_command_with_its_help_line():
    r = subprocess.run(
        [sys.executable, "-m", "rmq", "admin", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0
    text = " ".join(r.stdout.split())  # argparse may wrap a help line
    for c in COMMANDS.values():
        assert f" {c.name} {' '.join(c.help.split())}" in text, c.name
    assert set(TOPIC_COMMANDS) <= set(COMMANDS)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    top = argparse.ArgumentParser()
    add_parser(top.add_subparsers())
    admin_parser = next(a for a in top._subparsers._group_actions)._name_parser_map["admin"]  # type: ignore[union-attr]
    sub = next(a for a in admin_parser._subparsers._group_actions)  # type: ignore[union-attr]
    return dict(sub._name_parser_map)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", TOPIC_COMMANDS)
def test_each_command_help_names_its_flags_and_their_defaults(name):
    parser = _parsers()[name]
    text = parser.format_help()
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        assert all(o in text for o in action.option_strings), (name, action.option_strings)
        if not action.required:
            assert (action.help and "default" in action.help) or "required" in action.help, (name, action.dest)


def test_version_and_unknown_flags():
    r = subprocess.run([sys.executable, "-m", "rmq", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("rmq ")
    r = admin("topicStatus", "-n", "127.0.0.1:1", "-t", "T", "--bogus", "1")
    assert r.returncode == 2 and "arguments: --bogus" in r.stderr
    r = admin("noSuchCommand")
    assert r.returncode == 2 and "noSuchCommand" in r.stderr


def test_namesrv_addr_from_the_environment(daemon):
    env = {**os.environ, "NAMESRV_ADDR": daemon.namesrv_addr}
    r = admin("topicList", env=env)
    assert r.returncode == 0 and "TBW102" in r.stdout.split(), r.stderr
    r = admin("topicList", env={**os.environ, "NAMESRV_ADDR": "nohost"})
    assert r.returncode == 2 and "NAMESRV_ADDR" in r.stderr
    r = admin("topicList", "-n", daemon.namesrv_addr, env={**os.environ, "NAMESRV_ADDR": "127.0.0.1:1"})
    assert r.returncode == 0, r.stderr  # -n wins


# ------------------------------------------------------------------------ topics


def test_topic_status_prints_each_queue_offsets(daemon):
    make_topic(daemon, "CliStatus", 3)
    produce(daemon, "CliStatus", [(1, "A", "x")] * 4 + [(2, None, "y")])
    r = admin("topicStatus", "-n", daemon.namesrv_addr, "-t", "CliStatus")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("#Broker Name") and "#Min Offset" in lines[0] and lines[0].endswith("#Last Updated")
    got = {int(c[1]): (c[0], int(c[2]), int(c[3]), " ".join(c[4:])) for c in rows(r.stdout)[1:]}
    assert {q: v[:3] for q, v in got.items()} == {0: ("broker-a", 0, 0), 1: ("broker-a", 0, 4), 2: ("broker-a", 0, 1)}
    assert got[0][3] == "" and time.strftime("%Y-%m-%d") in got[1][3]  # yyyy-MM-dd HH:mm:ss,SSS
    r = admin("topicStatus", "-n", daemon.namesrv_addr, "-t", "CliNoSuchTopic")
    assert r.returncode == 1 and "CliNoSuchTopic" in r.stderr


def test_topic_route_list_and_topic_cluster_list(daemon):
    make_topic(daemon, "CliRoute", 5)
    r = admin("topicRoute", "-n", daemon.namesrv_addr, "-t", "CliRoute", "-l")
    assert r.returncode == 0, r.stderr
    table = rows(r.stdout)
    assert table[0] == ["#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"]
    assert table[1] == ["DefaultCluster", "broker-a", f"{{0={daemon.broker_addr}}}", "5", "5", "6"]
    assert table[2] == ["-" * 158] and table[3] == ["Total:", "1", "5", "5"]
    r = admin("topicClusterList", "-n", daemon.namesrv_addr, "-t", "CliRoute")
    assert r.returncode == 0 and r.stdout.split() == ["DefaultCluster"]


def test_update_topic_unit_flags_set_the_sys_flag(daemon):
    r = admin(
        "updateTopic",
        "-n",
        daemon.namesrv_addr,
        "-t",
        "CliUnit",
        "-c",
        "DefaultCluster",
        "-u",
        "true",
        "-s",
        "true",
        "-r",
        "2",
        "-w",
        "2",
    )
    assert r.returncode == 0, r.stderr
    route = json.loads(admin("topicRoute", "-n", daemon.namesrv_addr, "-t", "CliUnit").stdout)
    assert route["queueDatas"][0]["topicSysFlag"] == 3


def test_update_topic_perm_on_a_broker_then_a_cluster(daemon):
    ns = daemon.namesrv_addr
    make_topic(daemon, "CliPerm", 2)
    r = admin("updateTopicPerm", "-n", ns, "-t", "CliPerm", "-p", "4", "-b", daemon.broker_addr)
    assert r.returncode == 0 and r.stdout.strip() == f"update topic perm from 6 to 4 in {daemon.broker_addr} success."
    r = admin("updateTopicPerm", "-n", ns, "-t", "CliPerm", "-p", "4", "-b", daemon.broker_addr)
    assert r.returncode == 0 and r.stdout.strip() == "new perm equals to the old one!"
    assert json.loads(admin("topicRoute", "-n", ns, "-t", "CliPerm").stdout)["queueDatas"][0]["perm"] == 4
    r = admin("updateTopicPerm", "-n", ns, "-t", "CliPerm", "-p", "6", "-c", "DefaultCluster")
    assert r.returncode == 0 and r.stdout.strip() == f"update topic perm from 4 to 6 in {daemon.broker_addr} success."
    r = admin("updateTopicPerm", "-n", ns, "-t", "CliPerm", "-p", "6")
    assert r.returncode == 2 and "-c/--clusterName" in r.stderr
    r = admin("updateTopicPerm", "-n", ns, "-t", "CliPerm", "-p", "4", "-b", "127.0.0.1:1")
    assert r.returncode == 1 and "not the master" in r.stderr


def test_allocate_mq_prints_the_averagely_allocation(daemon):
    make_topic(daemon, "CliAlloc", 4)
    r = admin("allocateMQ", "-n", daemon.namesrv_addr, "-t", "CliAlloc", "-i", "10.0.0.1,10.0.0.2,10.0.0.3")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)["result"]
    assert {ip: [q["queueId"] for q in mqs] for ip, mqs in result.items()} == {
        "10.0.0.1": [0, 1],
        "10.0.0.2": [2],
        "10.0.0.3": [3],
    }
    assert result["10.0.0.2"][0] == {"topic": "CliAlloc", "brokerName": "broker-a", "queueId": 2}
    assert '{"brokerName":"broker-a","queueId":2,"topic":"CliAlloc"}' in r.stdout  # fastjson's field order
    r = admin("allocateMQ", "-n", daemon.namesrv_addr, "-t", "CliAlloc", "-i", "a,a")
    assert r.returncode == 2 and "twice" in r.stderr


async def test_topic_list_with_clusters_and_consumer_groups(daemon):
    ns = daemon.namesrv_addr
    make_topic(daemon, "CliTL", 2)
    consumer = rmq.PushConsumer(ns, "GID_cli_tl", handler=lambda m: rmq.ConsumeResult.SUCCESS)
    consumer.subscribe("CliTL")
    await consumer.start()
    try:

        async def routed() -> bool:
            code, out, _ = await admin_async("topicList", "-n", ns)
            return code == 0 and "%RETRY%GID_cli_tl" in out.split()

        await wait_until(routed, timeout=30, what="the group's retry topic registered")
        code, out, err = await admin_async("topicList", "-n", ns, "-c")
    finally:
        await consumer.close()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]
    assert lines[0].index("#Topic") == 22 and lines[0].index("#Consumer Group") == 72  # %-20s  %-48s  %-48s
    table = {c[1]: c for c in rows(out)[1:] if len(c) >= 2}
    assert table["CliTL"][0] == "DefaultCluster"
    assert not [t for t in table if t.startswith(("%RETRY%", "%DLQ%"))]
    if "QUERY_TOPIC_CONSUME_BY_WHO" in err:  # a broker without code 300: groups blank, said once on stderr
        assert table["CliTL"] == ["DefaultCluster", "CliTL"]
    else:
        assert ["DefaultCluster", "CliTL", "GID_cli_tl"] in rows(out)


# ------------------------------------------------------------------------ message tools


async def test_send_message_arrives_at_an_sdk_consumer(daemon):
    ns = daemon.namesrv_addr
    make_topic(daemon, "CliSend", 4)
    code, out, err = await admin_async(
        "sendMessage",
        "-n",
        ns,
        "-t",
        "CliSend",
        "-p",
        "héllo admin",
        "-k",
        "K1",
        "-c",
        "TagS",
        "-b",
        "broker-a",
        "-i",
        "3",
    )
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split("  ")[0].strip() == "#Broker Name" and header.endswith("#MsgId")
    broker, qid, status, msg_id = row.split()
    assert (broker, qid, status) == ("broker-a", "3", "SEND_OK") and len(msg_id) == 32
    got: list[rmq.MessageExt] = []
    consumer = rmq.PullConsumer(ns, "GID_cli_send", consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.assign([MessageQueue("CliSend", "broker-a", 3)])
    await consumer.start()
    try:

        async def polled() -> bool:
            got.extend(await consumer.poll(timeout=1))
            return bool(got)

        await wait_until(polled, timeout=30, what="the sent message")
    finally:
        await consumer.close()
    [m] = got
    assert (m.body.decode(), m.tags, m.keys, m.msg_id) == ("héllo admin", "TagS", ("K1",), msg_id)
    code, _, err = await admin_async("sendMessage", "-n", ns, "-t", "CliSend", "-p", "x", "-i", "1")
    assert code == 2 and "Broker name" in err


def test_consume_message_prints_up_to_count(daemon):
    ns = daemon.namesrv_addr
    make_topic(daemon, "CliConsume", 2)
    ids = produce(daemon, "CliConsume", [(0, "A", f"c{i}") for i in range(5)] + [(1, "B", "d0")])
    r = admin("consumeMessage", "-n", ns, "-t", "CliConsume", "-c", "3")
    assert r.returncode == 0, r.stderr
    msgs = [line for line in r.stdout.splitlines() if line.startswith("MSGID: ")]
    assert [m.split()[1] for m in msgs] == ids[:3] and msgs[0].endswith("BODY: c0")
    assert "The older 3 message of the 0 queue will be provided" in r.stdout and "Consume ok" in r.stdout
    r = admin("consumeMessage", "-n", ns, "-t", "CliConsume", "-b", "broker-a", "-i", "0", "-o", "4")
    assert [line.rsplit("BODY: ", 1)[1] for line in r.stdout.splitlines() if line.startswith("MSGID")] == ["c4"]
    r = admin("consumeMessage", "-n", ns, "-t", "CliConsume", "-i", "0")
    assert r.returncode == 2 and "brokerName before queueId" in r.stderr
    r = admin("consumeMessage", "-n", ns, "-t", "CliConsume", "-s", "20", "-e", "10")
    assert r.returncode == 2 and "beginTimestamp is less than or equal to the endTimestamp" in r.stderr
    r = admin("consumeMessage", "-n", ns, "-t", "CliConsume", "-s", str(int(time.time() * 1000) + 3_600_000))
    assert r.returncode == 2 and "beginTimestamp before now" in r.stderr
    r = admin("consumeMessage", "-n", ns, "-t", "CliConsume", "-b", "broker-x", "-i", "0")
    assert r.returncode == 1 and "broker-x" in r.stderr


def test_print_msg_filters_by_tag_and_time_and_hides_bodies(daemon):
    ns = daemon.namesrv_addr
    make_topic(daemon, "CliPrint", 2)
    produce(daemon, "CliPrint", [(i % 2, "TagA" if i % 3 else "TagB", f"p{i}") for i in range(9)])
    r = admin("printMsg", "-n", ns, "-t", "CliPrint", "-s", "TagB")
    assert r.returncode == 0, r.stderr
    bodies = sorted(line.rsplit("BODY: ", 1)[1] for line in r.stdout.splitlines() if line.startswith("MSGID"))
    assert bodies == ["p0", "p3", "p6"]
    assert (
        "minOffset=0, maxOffset=5, MessageQueue [topic=CliPrint, brokerName=broker-a, queueId=0]"
        in r.stdout.splitlines()
    )
    assert r.stdout.count("-" * 56) == 2
    r = admin("printMsg", "-n", ns, "-t", "CliPrint", "-d", "false", "-b", str(int(time.time() * 1000) - 600_000))
    lines = [line for line in r.stdout.splitlines() if line.startswith("MSGID")]
    assert len(lines) == 9 and all(line.endswith("BODY: NOT PRINT BODY") for line in lines)
    future = time.strftime("%Y-%m-%d#%H:%M:%S:000", time.localtime(time.time() + 3600))
    r = admin("printMsg", "-n", ns, "-t", "CliPrint", "-b", future)
    assert r.returncode == 0 and not [line for line in r.stdout.splitlines() if line.startswith("MSGID")]
    r = admin("printMsg", "-n", ns, "-t", "CliPrint", "-c", "NoSuchCharset")
    assert r.returncode == 2 and "charset" in r.stderr


def test_print_msg_by_queue_counts_by_tag(daemon):
    ns = daemon.namesrv_addr
    make_topic(daemon, "CliByQ", 2)
    produce(daemon, "CliByQ", [(1, "TagA", "a")] * 3 + [(1, "TagB", "b")] + [(0, "TagC", "c")])
    r = admin("printMsgByQueue", "-n", ns, "-t", "CliByQ", "-a", "broker-a", "-i", "1", "-f", "true")
    assert r.returncode == 0, r.stderr
    assert rows(r.stdout) == [["Tag:", "TagA", "Count:", "3"], ["Tag:", "TagB", "Count:", "1"]]  # no -p: no messages
    r = admin("printMsgByQueue", "-n", ns, "-t", "CliByQ", "-a", "broker-a", "-i", "1", "-p", "true", "-d", "true")
    assert [line.rsplit("BODY: ", 1)[1] for line in r.stdout.splitlines()] == ["a", "a", "a", "b"]
    produce(daemon, "CliByQ", [(0, "TagC", "c")] * 40 + [(0, "TagD", "d")])  # a whole batch without TagD first
    r = admin(
        "printMsgByQueue",
        "-n",
        ns,
        "-t",
        "CliByQ",
        "-a",
        "broker-a",
        "-i",
        "0",
        "-s",
        "TagD",
        "-p",
        "true",
        "-d",
        "true",
        "-f",
        "true",
    )
    assert r.returncode == 0, r.stderr
    assert [line.rsplit("BODY: ", 1)[1] for line in r.stdout.splitlines() if line.startswith("MSGID")] == ["d"]
    assert rows(r.stdout)[-1] == ["Tag:", "TagD", "Count:", "1"]
    r = admin("printMsgByQueue", "-n", ns, "-t", "CliByQ", "-i", "1")
    assert r.returncode == 2 and "-a/--brokerName" in r.stderr


def test_check_msg_send_rt_prints_each_send(daemon):
    make_topic(daemon, "CliRT", 2)
    r = admin("checkMsgSendRT", "-n", daemon.namesrv_addr, "-t", "CliRT", "-a", "4", "-s", "32")
    assert r.returncode == 0, r.stderr
    table = rows(r.stdout)
    assert table[0] == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"]
    assert [(c[0], c[1], c[2]) for c in table[1:5]] == [("broker-a", str(i % 2), "true") for i in range(4)]
    assert table[5][:2] == ["Avg", "RT:"] and float(table[5][2]) >= 0
    status = rows(admin("topicStatus", "-n", daemon.namesrv_addr, "-t", "CliRT").stdout)
    assert [int(c[3]) for c in status[1:]] == [2, 2]


async def test_cluster_rt_prints_a_line_per_broker_each_round_until_stopped(daemon):
    tlog = ["room1", "DefaultCluster", "broker-a"]
    for extra, check in (
        ([], lambda line: line.split()[:2] == ["DefaultCluster", "broker-a"]),
        (["-p", "true", "-m", "room1"], lambda line: line.split("|")[1:4] == tlog),
    ):
        p = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rmq",
            "admin",
            "clusterRT",
            "-n",
            daemon.namesrv_addr,
            "-a",
            "3",
            "-s",
            "8",
            "-i",
            "3600",
            *extra,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert p.stdout is not None
            first = (await asyncio.wait_for(p.stdout.readline(), 60)).decode()
            if not extra:
                assert first.split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount", "#failCount"]
                first = (await asyncio.wait_for(p.stdout.readline(), 60)).decode()
                assert first.split()[3:] == ["3", "0"] and float(first.split()[2]) >= 0
            assert check(first.strip()), first
            assert p.returncode is None  # still running: a round each interval, as Java's
        finally:
            p.terminate()
            await p.wait()
    r = admin("clusterRT", "-n", daemon.namesrv_addr, "-c", "NoSuchCluster", "-a", "1")
    assert r.returncode == 1 and "cluster [NoSuchCluster] not exist" in r.stderr


def test_update_sub_group_sends_the_new_flags(daemon):
    r = admin(
        "updateSubGroup",
        "-n",
        daemon.namesrv_addr,
        "-g",
        "GID_cli_sub",
        "-m",
        "false",
        "-q",
        "3",
        "-i",
        "1",
        "-w",
        "0",
        "-a",
        "false",
        "-r",
        "5",
    )
    assert r.returncode == 0 and f"create subscription group to {daemon.broker_addr} success." in r.stdout, r.stderr

    async def fetch() -> dict[str, object]:
        client = RemotingClient([daemon.namesrv_addr])
        try:
            resp = await client.invoke(
                daemon.broker_addr, RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}), timeout=5
            )
        finally:
            await client.close()
        table: dict[str, dict[str, object]] = json.loads(resp.body_bytes())["subscriptionGroupTable"]
        return table["GID_cli_sub"]

    cfg = asyncio.run(fetch())
    assert (
        cfg["consumeFromMinEnable"],
        cfg["retryQueueNums"],
        cfg["brokerId"],
        cfg["whichBrokerWhenConsumeSlowly"],
        cfg["notifyConsumerIdsChangedEnable"],
        cfg["retryMaxTimes"],
    ) == (False, 3, 1, 0, False, 5)
