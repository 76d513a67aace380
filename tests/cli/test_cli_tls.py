"""``rmq standalone`` / ``rmq namesrv`` started with tls.* properties, served over TLS: the SDK,
``rmq admin --tls``, the Spark connector's blocking transport, and a stuck handshake next to a
well-behaved TLS client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from tls_support import Pki, make_pki

import rmq
from rmq._testing import NoisyNeighbour, StandaloneProcess, free_broker_port, free_port, wait_until_sync
from rmq.protocol.requests.namesrv import get_all_topic_list, parse_topic_list
from rmq.remoting.blocking import BlockingRemotingClient
from rmq.spark._client import close_shared_clients, shared_client
from rmq.spark.options import OptionError, parse_sink_options, parse_source_options

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def daemon(pki, tmp_path_factory):
    """An enforcing standalone: the broker registers with its name server over TLS."""
    with StandaloneProcess(tmp_path_factory.mktemp("tls") / "store", pki.server_args("enforcing")) as p:
        yield p


def admin(pki: Pki, *args: str, tls_args: tuple[str, ...] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, SSL_CERT_FILE=pki.ca_pem)  # --tls trusts the "system" store: our CA
    return subprocess.run(
        [sys.executable, "-m", "rmq", "admin", *args, *(tls_args if tls_args is not None else ("--tls",))],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_daemon_serves_tls_and_registers_over_it(pki, daemon):
    assert "TLS enforcing" in daemon.log_text()
    r = admin(pki, "clusterList", "-n", daemon.namesrv_addr)
    assert r.returncode == 0, r.stderr
    # the broker is listed, so its registration went through the enforcing name server
    assert daemon.broker_addr in r.stdout


def test_admin_tls_flags(pki, daemon, tmp_path):
    ns = daemon.namesrv_addr
    r = admin(pki, "updateTopic", "-n", ns, "-t", "TlsAdminT", "-r", "2", "-w", "2")
    assert r.returncode == 0, r.stderr
    assert "TlsAdminT" in admin(pki, "topicList", "-n", ns).stdout.split()
    conf = tmp_path / "tls.properties"
    conf.write_text(f"tls.client.trustCertPath={pki.ca_pem}\n")
    r = admin(pki, "topicList", "-n", ns, tls_args=("--tls-config", str(conf)))
    assert r.returncode == 0 and "TlsAdminT" in r.stdout.split(), r.stderr
    plain = admin(pki, "topicList", "-n", ns, tls_args=())
    assert plain.returncode == 2 and "rmq admin topicList:" in plain.stderr
    missing = admin(pki, "topicList", "-n", ns, tls_args=("--tls-config", str(tmp_path / "none.properties")))
    assert missing.returncode == 2 and "tls.config.file" in missing.stderr


async def test_sdk_against_the_daemon(pki, daemon):
    tls = pki.client_context()
    async with rmq.Admin(daemon.namesrv_addr, tls=tls) as a:
        await a.create_and_update_topic_config(daemon.broker_addr, "TlsSdkT", read_queue_nums=1, write_queue_nums=1)
    async with rmq.Producer(daemon.namesrv_addr, "G_tls_daemon", tls=tls) as p:
        r = await p.send(rmq.Message("TlsSdkT", b"over tls"))
        assert r.status is rmq.SendStatus.SEND_OK


def test_blocking_transport_and_spark_options_over_tls(pki, daemon):
    client = BlockingRemotingClient([daemon.namesrv_addr], tls=pki.client_context(), timeout=10)
    try:
        assert "DefaultCluster" in parse_topic_list(client.invoke_namesrv(get_all_topic_list()))
        conn = client._conns[daemon.namesrv_addr]
        assert not conn.looks_dead()  # a quiet TLS connection is alive
        assert "DefaultCluster" in parse_topic_list(client.invoke_namesrv(get_all_topic_list()))
    finally:
        client.close()
    opts = parse_source_options(
        {"nameServer": daemon.namesrv_addr, "subscribe": "TBW102", "tls.client.trustCertPath": pki.ca_pem},
        streaming=False,
    )
    assert opts.tls
    try:
        c = shared_client(opts.name_servers, 5.0, tls=opts.tls)
        assert "DefaultCluster" in c.cluster_names()
        route = c.topic_route("TBW102")
        addr = route.broker_datas[0].broker_addrs[0]
        assert c.max_offset(addr, "TBW102", 0) >= 0
        plain = shared_client(opts.name_servers, 5.0)  # no TLS options: refused
        with pytest.raises(rmq.errors.RMQError):
            plain.all_topics()
    finally:
        close_shared_clients()
    sink = parse_sink_options({"nameServer": daemon.namesrv_addr, "tls": "true"})
    assert sink.tls == (("tls.client.authserver", "true"),)
    with pytest.raises(OptionError, match="tls.client.trustCertPath"):
        parse_source_options(
            {"nameServer": "127.0.0.1:1", "topic": "T", "tls.client.trustCertPath": "/no/ca.pem"}, streaming=False
        )
    with pytest.raises(OptionError, match="tls: false"):
        parse_sink_options({"nameServer": "127.0.0.1:1", "tls": "false", "tls.client.trustCertPath": pki.ca_pem})


def test_stuck_handshakes_do_not_hurt_a_tls_client(pki, daemon):
    socks = []
    try:
        with NoisyNeighbour(daemon.broker_addr, tls=pki.client_context()) as probe:
            for _ in range(50):  # half a ClientHello each, then silence
                s = socket.create_connection(("127.0.0.1", daemon.broker_port), timeout=5)
                s.sendall(b"\x16\x03\x01\x00")
                socks.append(s)
            plain = socket.create_connection(("127.0.0.1", daemon.broker_port), timeout=10)
            plain.sendall(b"\x00\x00\x00\x10plain-request!!!")
            try:  # enforcing: a plain client is closed (a reset: it sent bytes nobody read)
                assert plain.recv(1) == b""
            except ConnectionResetError:
                pass
            finally:
                plain.close()
        assert probe.worst < 3.0, probe.summary()
        assert probe.failures == 0, probe.summary()
    finally:
        for s in socks:
            s.close()
    wait_until_sync(
        lambda: "this server only accepts TLS (tls.server.mode=enforcing)" in daemon.log_text(),
        timeout=10,
        what="the enforcing log line",
    )


def test_daemon_start_checks_the_tls_files(pki, tmp_path):
    def start(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "rmq", "namesrv", "--port", str(free_port()), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    r = start(
        "--tls.server.mode=enforcing",
        f"--tls.server.certPath={tmp_path / 'missing.pem'}",
        f"--tls.server.keyPath={pki.server_key}",
    )
    assert r.returncode == 2 and "tls.server.certPath" in r.stderr, r.stderr
    r = start("--tls.server.mode=enforcing")
    assert r.returncode == 2 and "needs tls.server.certPath" in r.stderr, r.stderr
    r = start("--tls.server.mod=enforcing")
    assert r.returncode == 2 and "did you mean tls.server.mode" in r.stderr, r.stderr
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"tls.config.file={tmp_path / 'nope.properties'}\n")
    r = start("-c", str(conf))
    assert r.returncode == 2 and "tls.config.file" in r.stderr, r.stderr


def test_namesrv_daemon_reads_tls_from_its_conf_file(pki, tmp_path):
    """``rmq namesrv -c namesrv.conf`` with tls.* lines (and tls.config.file) serves TLS only."""
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(f"tls.server.certPath={pki.server_cert}\ntls.server.keyPath={pki.server_key}\n")
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"tls.server.mode=enforcing\ntls.config.file={tls_file}\n")
    port = free_port()
    log_path = tmp_path / "namesrv.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "namesrv", "-c", str(conf), "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until_sync(
            lambda: "TLS enforcing" in log_path.read_text() or proc.poll() is not None,
            timeout=30,
            what="rmq namesrv listening",
        )
        assert proc.poll() is None, log_path.read_text()
        r = admin(pki, "topicList", "-n", f"127.0.0.1:{port}")
        assert r.returncode == 0, r.stderr
        plain = admin(pki, "topicList", "-n", f"127.0.0.1:{port}", tls_args=())
        assert plain.returncode == 2, plain.stdout
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_broker_daemon_registers_over_tls_with_an_enforcing_name_server(pki, daemon, tmp_path):
    """``rmq broker`` with tls.enable=true (its own port plain) registers with the enforcing
    name server of the standalone (Java BrokerStartup: useTLS from tls.enable)."""
    port = free_broker_port()
    common = [
        "--brokerName=broker-tls",
        f"--namesrvAddr={daemon.namesrv_addr}",
        f"--listenPort={port}",
        f"--storePathRootDir={tmp_path / 'store'}",
        *StandaloneProcess.TEST_FILE_SIZES,
    ]
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rmq",
                "broker",
                *common,
                "--tls.enable=true",
                f"--tls.client.trustCertPath={pki.ca_pem}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:

        def listed() -> bool:
            assert proc.poll() is None, log_path.read_text()
            r = admin(pki, "clusterList", "-n", daemon.namesrv_addr)
            return f"127.0.0.1:{port}" in r.stdout

        wait_until_sync(listed, timeout=60, what="broker-tls in the cluster list")
    finally:
        proc.terminate()
        assert proc.wait(30) == 0, log_path.read_text()


def _tls_conf(pki: Pki, tmp_path) -> str:
    conf = tmp_path / "client-tls.properties"
    conf.write_text(f"tls.client.trustCertPath={pki.ca_pem}\n")
    return str(conf)


def test_exporter_and_console_take_the_admins_tls_config(pki, daemon, tmp_path):
    """``rmq exporter`` and ``rmq console`` take ``--tls-config`` through the flags they share
    with ``rmq admin`` (rmq.cli.connection): both read the enforcing cluster."""
    from metrics_support import http_get

    from tests.console.console_support import PASSWORD, USER, get_json, login_sync

    conf = _tls_conf(pki, tmp_path)
    ports = {"exporter": free_port(), "console": free_port()}
    procs = {}
    env = {k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"}
    with open(tmp_path / "exporter.log", "wb") as out:
        procs["exporter"] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rmq",
                "exporter",
                "-n",
                daemon.namesrv_addr,
                "--tls-config",
                conf,
                "--port",
                str(ports["exporter"]),
                "--interval",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    with open(tmp_path / "console.log", "wb") as out:
        procs["console"] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rmq",
                "console",
                "-n",
                daemon.namesrv_addr,
                "--tls-config",
                conf,
                "--port",
                str(ports["console"]),
                "--admin-user",
                USER,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**env, "RMQ_CONSOLE_PASSWORD": PASSWORD},
        )
    try:

        def exporter_up() -> bool:
            assert procs["exporter"].poll() is None, (tmp_path / "exporter.log").read_text()
            try:
                status, _, body = http_get(ports["exporter"], "/metrics", 5.0)
            except OSError:
                return False
            return status == 200 and "rmq_exporter_up{" in body and '"} 1' in body

        wait_until_sync(exporter_up, 60, what="the exporter's metrics over TLS")

        def console_lists() -> bool:
            assert procs["console"].poll() is None, (tmp_path / "console.log").read_text()
            return "rmq console listening" in (tmp_path / "console.log").read_text()

        wait_until_sync(console_lists, 60, what="the console listening")
        url = f"http://127.0.0.1:{ports['console']}"
        cluster = get_json(url, "/api/cluster", login_sync(url))
        assert daemon.broker_addr in str(cluster) and "error" not in str(cluster["brokers"]), cluster
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(30)
