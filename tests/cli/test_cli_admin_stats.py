"""``rmq admin`` broker statistics and configuration commands as real CLI processes against a
real daemon with SDK producers and consumers moving messages: brokerStatus, statsAll,
brokerConsumeStats, getBrokerConfig, updateBrokerConfig, clusterList.

The daemon samples its statistics every 200 ms instead of every 10 s
(``--statsSampleIntervalMs=200``; the other windows scale with it), so the windows fill in
a fraction of a second; tests wait for the states, they never sleep.
"""

from __future__ import annotations

import signal
import subprocess
import uuid

import pytest
from cli_support import RMQ, admin

import rmq
from rmq._testing import free_broker_port, free_port, wait_for_port, wait_until, wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.heavy(70)]

#: the daemon samples its statistics every 200 ms instead of every 10 s (see the docstring)
DAEMON_ARGS = ["--statsSampleIntervalMs=200"]

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def status(daemon) -> dict[str, str]:
    r = admin("brokerStatus", "-n", daemon.namesrv_addr, "-b", daemon.broker_addr)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition(": ")
        out[key.strip()] = value
    return out


async def move_messages(daemon, topic: str, group: str, n: int) -> None:
    r = admin("updateTopic", "-n", daemon.namesrv_addr, "-b", daemon.broker_addr, "-t", topic, "-r", "2", "-w", "2")
    assert r.returncode == 0, r.stderr
    async with rmq.Producer(daemon.namesrv_addr, unique("PG")) as p:
        for i in range(n):
            await p.send(rmq.Message(topic, f"m{i}".encode()))
    got: list[bytes] = []

    async def handler(msg):
        got.append(msg.body)

    c = rmq.PushConsumer(daemon.namesrv_addr, group, handler=handler, consume_from_where=FIRST)
    c.subscribe(topic, "*")
    async with c:
        await wait_until(lambda: len(got) >= n, what=f"{n} messages consumed")
        # let the consumer commit its offsets before it goes (shutdown persists them too)


async def test_status_stats_all_and_consume_stats_show_what_moved(daemon):
    ns, addr = daemon.namesrv_addr, daemon.broker_addr
    topic, group = unique("CliT"), unique("CliG")
    before = status(daemon)
    await move_messages(daemon, topic, group, 25)
    after = status(daemon)
    assert int(after["msgPutTotalTodayNow"]) - int(before["msgPutTotalTodayNow"]) == 25
    assert int(after["msgGetTotalTodayNow"]) - int(before["msgGetTotalTodayNow"]) >= 25
    assert after["brokerVersion"] == "409" and len(after["putTps"].split(" ")) == 3

    # -c: every broker of the cluster, each line prefixed by its address
    r = admin("brokerStatus", "-n", ns, "-c", "DefaultCluster")
    assert r.returncode == 0 and any(
        line.split()[:2] == [addr, "msgPutTotalTodayNow"] for line in r.stdout.splitlines()
    ), r.stdout

    # statsAll: the topic's row with the group, 25 in and 25 out, nothing left behind
    def row():
        r = admin("statsAll", "-n", ns, "-t", topic)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[0].split() == [
            "#Topic",
            "#Consumer",
            "Group",
            "#Accumulation",
            "#InTPS",
            "#OutTPS",
            "#InMsg24Hour",
            "#OutMsg24Hour",
        ]
        rows = [line.split() for line in r.stdout.splitlines()[1:]]
        return rows[0] if rows and rows[0][-2:] == ["25", "25"] else None

    cells = wait_until_sync(row, what="statsAll counting 25 in and out")
    assert cells[:3] == [topic, group, "0"] and float(cells[3]) >= 0 and float(cells[4]) >= 0
    idle = unique("IdleT")
    assert admin("updateTopic", "-n", ns, "-b", addr, "-t", idle).returncode == 0
    idle_rows = [line.split() for line in admin("statsAll", "-n", ns).stdout.splitlines() if line.startswith(idle)]
    assert idle_rows == [[idle, "0", "0.00", "0", "NO_CONSUMER"]]
    assert idle not in admin("statsAll", "-n", ns, "-a").stdout  # -a: active topics only

    # brokerConsumeStats: the consumed queues, their offsets and the diff total
    r = admin("brokerConsumeStats", "-n", ns, "-b", addr)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith(topic)]
    assert {row[1] for row in rows} == {group} and sum(int(row[4]) for row in rows) == 25, r.stdout
    assert all(int(row[6]) == 0 for row in rows) and "Diff Total:" in r.stdout
    r = admin("brokerConsumeStats", "-n", ns, "-b", addr, "-l", "1")  # diffs below 1 hidden
    assert topic not in r.stdout


def test_cluster_list_has_the_load_and_disk_columns(daemon):
    r = admin("clusterList", "-n", daemon.namesrv_addr)
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split() == [
        "#Cluster",
        "Name",
        "#Broker",
        "Name",
        "#BID",
        "#Addr",
        "#Version",
        "#InTPS(LOAD)",
        "#OutTPS(LOAD)",
        "#PCWait(ms)",
        "#Hour",
        "#SPACE",
    ]
    cells = next(row.split() for row in rows if daemon.broker_addr in row)
    assert cells[:5] == ["DefaultCluster", "broker-a", "0", daemon.broker_addr, "V4_9_8"]
    assert cells[5].endswith("(0,0ms)") and float(cells[5].split("(")[0]) >= 0
    assert 0 <= float(cells[-1]) <= 1 and float(cells[-2]) >= 0
    r = admin("clusterList", "-n", daemon.namesrv_addr, "-m")
    assert r.returncode == 0 and r.stdout.split()[:4] == ["#Cluster", "Name", "#Broker", "Name"]
    assert "#InTotalToday" in r.stdout and "broker-a" in r.stdout


def test_get_and_update_broker_config(daemon):
    ns, addr = daemon.namesrv_addr, daemon.broker_addr

    def value(key: str, *target: str) -> str:
        r = admin("getBrokerConfig", "-n", ns, *(target or ("-b", addr)))
        assert r.returncode == 0, r.stderr
        return next(line.split("=  ", 1)[1] for line in r.stdout.splitlines() if line.split()[:1] == [key])

    assert value("autoCreateTopicEnable") == "true"
    r = admin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "maxMessageSize", "-v", "2000000")
    assert r.returncode == 0 and f"update broker config success, {addr}" in r.stdout, r.stderr
    assert value("maxMessageSize") == "2000000"
    assert value("maxMessageSize", "-c", "DefaultCluster") == "2000000"
    assert (
        f"============Master: {addr}============" in admin("getBrokerConfig", "-n", ns, "-c", "DefaultCluster").stdout
    )
    r = admin("updateBrokerConfig", "-n", ns, "-c", "DefaultCluster", "-k", "maxMessageSize", "-v", "3000000")
    assert r.returncode == 0 and value("maxMessageSize") == "3000000"
    r = admin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "maxMessageSize", "-v", "lots")
    assert r.returncode == 1 and "bad value for maxMessageSize: 'lots' (expected an integer)" in r.stderr
    r = admin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "brokerRole", "-v", "SLAVE")
    assert r.returncode == 1 and "brokerRole cannot be changed at runtime" in r.stderr
    r = admin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "maxMessageSize")  # -v missing
    assert r.returncode == 2
    assert value("maxMessageSize") == "3000000"


async def test_update_is_persisted_to_the_conf_file_and_survives_a_restart(tmp_path):
    ns_port, broker_port = free_port(), free_broker_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# operator's notes stay\n"
        f"namesrvAddr=127.0.0.1:{ns_port}\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
        f"listenPort={broker_port}\n"
        "maxMessageSize=4194304\n"
        "mappedFileSizeCommitLog=67108864\n"
    )
    ns_addr, addr = f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}"

    def start_broker(log_name: str) -> subprocess.Popen:
        with open(tmp_path / log_name, "w") as log:
            p = subprocess.Popen(RMQ + ["broker", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT)
        assert wait_for_port("127.0.0.1", broker_port), (tmp_path / log_name).read_text()
        return p

    with open(tmp_path / "ns.log", "w") as log_ns:
        ns = subprocess.Popen(RMQ + ["namesrv", "--port", str(ns_port)], stdout=log_ns, stderr=subprocess.STDOUT)
    broker = None
    try:
        assert wait_for_port("127.0.0.1", ns_port)
        broker = start_broker("b1.log")
        r = admin("updateBrokerConfig", "-n", ns_addr, "-b", addr, "-k", "maxMessageSize", "-v", "123456")
        assert r.returncode == 0, r.stderr
        r = admin("updateBrokerConfig", "-n", ns_addr, "-b", addr, "-k", "fileReservedTime", "-v", "12")
        assert r.returncode == 0, r.stderr
        lines = conf.read_text().splitlines()
        assert lines[0] == "# operator's notes stay" and "maxMessageSize=123456" in lines
        assert "fileReservedTime=12" in lines and "maxMessageSize=4194304" not in lines
        broker.send_signal(signal.SIGINT)
        assert broker.wait(60) == 0
        broker = start_broker("b2.log")  # the restarted broker reads the persisted values
        r = admin("getBrokerConfig", "-n", ns_addr, "-b", addr)
        assert r.returncode == 0, r.stderr
        config = {
            line.split("=  ")[0].strip(): line.split("=  ", 1)[1] for line in r.stdout.splitlines() if "=  " in line
        }
        assert config["maxMessageSize"] == "123456" and config["fileReservedTime"] == "12"
    finally:
        for p in (broker, ns):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGINT)
                p.wait(60)
