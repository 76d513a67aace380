"""The daemons as real subprocesses: `rmq standalone`, `rmq namesrv`, `rmq broker -c`."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from rmq._testing import StandaloneProcess, free_broker_port, free_port, invoke_once, wait_for_port, wait_until
from rmq.config import ConfigError, apply_properties, parse_overrides, parse_properties
from rmq.protocol.codes import RequestCode, ResponseCode

pytestmark = pytest.mark.heavy(110)

RMQ = [sys.executable, "-m", "rmq"]


def run(args, timeout=30):
    return subprocess.run(RMQ + args, capture_output=True, text=True, timeout=timeout)


async def test_standalone_listens_serves_and_stops_cleanly(tmp_path):
    # orderMessageEnable is the name server's property: standalone hands it over, not to the broker
    proc = StandaloneProcess(tmp_path / "store", ["--flushDiskType=SYNC_FLUSH", "--orderMessageEnable=true"]).start()
    try:
        log = proc.log_text()
        assert f"name server on {proc.namesrv_addr}" in log and f"on {proc.broker_addr}" in log
        resp = await invoke_once(
            proc.namesrv_addr,
            RequestCode.PUT_KV_CONFIG,
            {"namespace": "ORDER_TOPIC_CONFIG", "key": "TBW102", "value": "broker-a:2"},
        )
        assert resp.code == ResponseCode.SUCCESS
        resp = await invoke_once(proc.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert resp.code == ResponseCode.SUCCESS
        route = json.loads(resp.body_bytes())
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": proc.broker_addr}
        assert route["orderTopicConf"] == "broker-a:2"
        assert (tmp_path / "store" / "abort").exists()  # running: the marker is there
    finally:
        status = proc.stop()
    assert status == 0, proc.log_text()
    assert not (tmp_path / "store" / "abort").exists()
    assert "rmq standalone stopping" in proc.log_text()


async def test_restart_on_same_store_keeps_data(tmp_path):
    store = tmp_path / "store"
    with StandaloneProcess(store) as proc:
        ext = {
            "producerGroup": "P",
            "topic": "Restart",
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": 0,
            "sysFlag": 0,
            "bornTimestamp": "0",
            "flag": 0,
            "properties": "TAGS\x01a\x02",
        }
        resp = await invoke_once(proc.broker_addr, RequestCode.SEND_MESSAGE, ext, b"persisted")
        assert resp.code == ResponseCode.SUCCESS
        msg_id = resp.ext_fields["msgId"]
        await invoke_once(
            proc.broker_addr,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "Restart", "queueId": 0, "commitOffset": "1"},
        )
        ports = (proc.namesrv_port, proc.broker_port)
    assert proc.returncode == 0
    with StandaloneProcess(store, namesrv_port=ports[0], broker_port=ports[1]) as proc:
        resp = await invoke_once(proc.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Restart"})
        assert resp.code == ResponseCode.SUCCESS
        resp = await invoke_once(
            proc.broker_addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "Restart", "queueId": 0},
        )
        assert resp.ext_fields["offset"] == "1"
        pull = {
            "consumerGroup": "G",
            "topic": "Restart",
            "queueId": 0,
            "queueOffset": "0",
            "maxMsgNums": 32,
            "sysFlag": 4,
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        }
        resp = await invoke_once(proc.broker_addr, RequestCode.PULL_MESSAGE, pull)
        assert resp.code == ResponseCode.SUCCESS and b"persisted" in resp.body_bytes()
        assert bytes.fromhex(msg_id)[8:] in resp.body_bytes()  # same physical offset


def test_port_taken_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run(
            [
                "standalone",
                "--namesrv-port",
                str(port),
                "--broker-port",
                str(free_port()),
                "--store-dir",
                str(tmp_path / "s"),
            ]
        )
    assert r.returncode == 3
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "address already in use" in r.stderr
    assert "Traceback" not in r.stderr


def test_ha_port_taken_names_ha_listen_port(tmp_path):
    """A master listens on haListenPort (listenPort + 1) too; when that is taken, the error
    names it rather than the broker's own port."""
    # The broker port comes from below the ephemeral range (free_broker_port), so that no
    # outgoing connection of a parallel test takes it between our probe and the broker's bind;
    # another test binding it meanwhile is still possible, and is retried with a printed reason.
    for attempt in range(5):
        broker_port = free_broker_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", broker_port + 1))
            except OSError as e:
                print(f"port {broker_port + 1} taken meanwhile ({e}); trying another")
                continue
            s.listen()
            r = run(
                [
                    "standalone",
                    "--namesrv-port",
                    str(free_port()),
                    "--broker-port",
                    str(broker_port),
                    "--store-dir",
                    str(tmp_path / f"s{attempt}"),
                    "--consolePort=0",
                    "--metricsPort=0",
                ]
            )
        assert r.returncode == 3, r.stderr
        if f"cannot listen on 127.0.0.1:{broker_port} for the broker" in r.stderr:
            print(f"broker port {broker_port} taken meanwhile by another process; trying another")
            continue
        ha_port = broker_port + 1
        assert f"cannot listen on 127.0.0.1:{ha_port} (haListenPort)" in r.stderr
        assert "address already in use" in r.stderr
        assert "Traceback" not in r.stderr
        return
    raise AssertionError("no free broker port with a bindable neighbour in 5 attempts")


def test_locked_store_is_a_clear_error(tmp_path):
    store = tmp_path / "store"
    with StandaloneProcess(store):
        r = run(
            [
                "standalone",
                "--namesrv-port",
                str(free_port()),
                "--broker-port",
                str(free_port()),
                "--store-dir",
                str(store),
            ]
        )
    assert r.returncode == 4
    assert "cannot open the store" in r.stderr and "locked" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_property_value_and_unknown_key(tmp_path):
    r = run(["standalone", "--store-dir", str(tmp_path / "s"), "--flushDiskType=SOMETIMES"])
    assert r.returncode == 2 and "flushDiskType" in r.stderr and "ASYNC_FLUSH" in r.stderr
    r = run(["standalone", "--store-dir", str(tmp_path / "s"), "--autoCreateTopicEnable=maybe"])
    assert r.returncode == 2 and "autoCreateTopicEnable" in r.stderr
    r = run(["standalone", "--store-dir", str(tmp_path / "s"), "--orderMessageEnable=maybe"])
    assert r.returncode == 2 and "orderMessageEnable" in r.stderr and "maybe" in r.stderr
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=eleven\n")
    r = run(["broker", "-c", str(conf)])
    assert r.returncode == 2 and "listenPort" in r.stderr and "eleven" in r.stderr
    r = run(["broker", "-c", str(tmp_path / "missing.conf")])
    assert r.returncode == 2 and "cannot read config file" in r.stderr

    r = run(["standalone", "--store-dir", str(tmp_path / "s"), "--noSuchKey=1", "--flushDiskTyp=SYNC_FLUSH"])
    assert r.returncode == 2 and "noSuchKey" in r.stderr and "Traceback" not in r.stderr
    proc = StandaloneProcess(tmp_path / "store2", ["--noSuchKey=1", "--lenient-config"]).start()
    try:
        assert "unknown config key 'noSuchKey' (ignored)" in proc.log_text()
    finally:
        assert proc.stop() == 0


def test_namesrv_acl_and_ranges_stop_start_up_naming_the_property(tmp_path):
    """The name server's aclEnable without a home, a bad accounts file, and the expiry the
    issue-23 attacker set: exit 2 naming the property, no traceback."""
    env = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}
    r = subprocess.run(
        RMQ + ["namesrv", "--port", "0", "--aclEnable=true"], capture_output=True, text=True, timeout=30, env=env
    )
    assert r.returncode == 2 and "rocketmqHome" in r.stderr and "Traceback" not in r.stderr, r.stderr
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text("accounts: [ {accessKey: abc\n")
    r = run(["namesrv", "--port", "0", "--aclEnable=true", f"--rocketmqHome={tmp_path}"])
    assert r.returncode == 2 and "plain_acl.yml" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = run(["namesrv", "--port", "0", "--brokerChannelExpiredSeconds=0.001"])
    assert r.returncode == 2 and "brokerChannelExpiredSeconds" in r.stderr and "60" in r.stderr, r.stderr


async def test_namesrv_and_broker_daemons_with_conf_file(tmp_path):
    ns_port, broker_port = free_port(), free_broker_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# a RocketMQ broker.conf\n"
        "brokerClusterName = TestCluster\n"
        "brokerName=broker-x\n"
        "brokerId=0\n"
        "brokerIP1=127.0.0.1\n"
        f"namesrvAddr=127.0.0.1:{ns_port}\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
        "brokerRole=ASYNC_MASTER\n"
        "flushDiskType=ASYNC_FLUSH\n"
        "autoCreateTopicEnable=true\n"
        "deleteWhen=04\n"
    )
    with open(tmp_path / "ns.log", "w") as log_ns:  # the child keeps its own copy of the descriptor
        ns = subprocess.Popen(RMQ + ["namesrv", "--port", str(ns_port)], stdout=log_ns, stderr=subprocess.STDOUT)
    with open(tmp_path / "b.log", "w") as log_b:
        broker = subprocess.Popen(
            RMQ + ["broker", "-c", str(conf), f"--listenPort={broker_port}"], stdout=log_b, stderr=subprocess.STDOUT
        )
    try:
        assert wait_for_port("127.0.0.1", ns_port) and wait_for_port("127.0.0.1", broker_port)

        async def registered():
            resp = await invoke_once(f"127.0.0.1:{ns_port}", RequestCode.GET_BROKER_CLUSTER_INFO)
            info = json.loads(resp.body_bytes())
            return info if info["clusterAddrTable"] else None

        info = await wait_until(registered, what="the broker in the name server's cluster table")
        assert info["clusterAddrTable"] == {"TestCluster": ["broker-x"]}
        assert info["brokerAddrTable"]["broker-x"]["brokerAddrs"] == {"0": f"127.0.0.1:{broker_port}"}
    finally:
        for p in (broker, ns):
            p.send_signal(signal.SIGINT)
        assert broker.wait(60) == 0 and ns.wait(60) == 0
    text = (tmp_path / "b.log").read_text()
    assert f"rmq broker broker-x listening on 127.0.0.1:{broker_port}" in text
    assert "rmq namesrv listening on" in (tmp_path / "ns.log").read_text()
    assert not (tmp_path / "store" / "abort").exists()


def test_properties_loader_units():
    props = parse_properties(
        "# c\n! c\nbrokerName = b1\nlistenPort:10\nnamesrvAddr 1.2.3.4:9876;5.6.7.8:9876\nlongKey=a\\\n   b\n"
    )
    assert props == {
        "brokerName": "b1",
        "listenPort": "10",
        "namesrvAddr": "1.2.3.4:9876;5.6.7.8:9876",
        "longKey": "ab",
    }
    from rmq.config import BrokerConfig
    from rmq.store import StoreConfig

    bc, sc = BrokerConfig(), StoreConfig()
    with pytest.raises(ConfigError, match="longKey"):
        apply_properties({**props}, bc, sc)
    warnings = apply_properties(
        {**props, "flushDiskType": "sync_flush", "mappedFileSizeCommitLog": "1048576"}, bc, sc, lenient=True
    )
    assert warnings == ["unknown config key 'longKey' (ignored)"]
    assert bc.namesrv_addr_list == ["1.2.3.4:9876", "5.6.7.8:9876"] and bc.listen_port == 10
    assert sc.flush_disk_type == "SYNC_FLUSH" and sc.mapped_file_size_commitlog == 1048576
    assert parse_overrides(["--a=1", "--b"]) == {"a": "1", "b": "true"}
    with pytest.raises(ConfigError):
        parse_overrides(["positional"])
    with pytest.raises(ConfigError, match="brokerId"):
        apply_properties({"brokerId": "x"}, BrokerConfig())


def test_help_works():
    r = run(["--help"])
    assert r.returncode == 0 and "standalone" in r.stdout


async def test_namesrv_conf_file_and_overrides(tmp_path):
    """`rmq namesrv -c namesrv.conf --key=value`: NamesrvConfig properties from the file, the
    overrides win, and the values take effect (PUT_KV_CONFIG bounds)."""
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"# a namesrv.conf\nlistenPort={port}\nmaxKvValueChars=10\nmaxKvKeyChars=100\n")
    with open(tmp_path / "ns.log", "w") as log_ns:
        ns = subprocess.Popen(
            RMQ + ["namesrv", "-c", str(conf), "--maxKvKeyChars=5"], stdout=log_ns, stderr=subprocess.STDOUT
        )
    try:
        assert wait_for_port("127.0.0.1", port)
        addr = f"127.0.0.1:{port}"

        async def put(key, value):
            return await invoke_once(addr, RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": key, "value": value})

        assert (await put("k", "0123456789")).code == ResponseCode.SUCCESS
        r = await put("k", "01234567890")  # 11 > maxKvValueChars=10 (file)
        assert r.code == ResponseCode.SYSTEM_ERROR and "maxKvValueChars" in r.remark
        r = await put("kkkkkk", "v")  # 6 > maxKvKeyChars=5 (override beats the file)
        assert r.code == ResponseCode.SYSTEM_ERROR and "maxKvKeyChars" in r.remark
    finally:
        ns.send_signal(signal.SIGINT)
        assert ns.wait(60) == 0
    assert f"rmq namesrv listening on 127.0.0.1:{port}" in (tmp_path / "ns.log").read_text()


@pytest.mark.parametrize(
    "args,words",
    [
        (["--maxBrokers=0"], ["maxBrokers", "1..1000000"]),
        (["--listenPort=70000"], ["listenPort", "0..65535"]),
        (["--maxBrokerz=5"], ["did you mean maxBrokers?"]),
        (["--idleTimeout=soon"], ["idleTimeout"]),
        (["stray"], ["stray"]),
    ],
)
def test_namesrv_bad_properties_exit_2(args, words):
    r = run(["namesrv", "--port", "0", *args])
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert all(w in r.stderr for w in words) and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_namesrv_bad_conf_file_exit_2(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("maxTopics=-1\n")
    r = run(["namesrv", "-c", str(conf), "--port", "0"])
    assert r.returncode == 2 and "maxTopics" in r.stderr, r.stderr[-2000:]
    r = run(["namesrv", "-c", str(tmp_path / "missing.conf")])
    assert r.returncode == 2 and "missing.conf" in r.stderr, r.stderr[-2000:]
