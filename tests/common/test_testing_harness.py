"""rmq._testing.BrokerEnv against a broker in another process (``python -m rmq standalone``):
the same helpers the in-process fixtures of tests/broker and tests/semantics use."""

import pytest

from rmq._testing import BrokerEnv, StandaloneProcess, decode_props, encode_props, phy_offset
from rmq.protocol.codes import ResponseCode
from rmq.remoting.client import RemotingClient

pytestmark = pytest.mark.integration  # a subprocess broker, and ports bound to check them


@pytest.mark.slow
async def test_broker_env_of_a_subprocess(tmp_path):
    with StandaloneProcess(tmp_path / "store") as proc:
        async with RemotingClient() as client:
            env = BrokerEnv.of_process(proc, client)
            assert env.addr == proc.broker_addr and env.ns_addr == proc.namesrv_addr
            await env.create_topic("EnvT", queues=2)
            resp = await env.send("EnvT", b"over-tcp", queue_id=1, keys="k1", props={"p": "v"})
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert phy_offset(resp.ext_fields["msgId"]) >= 0
            pulled = await env.pull("EnvT", queue_id=1, sys_flag=6)  # held until dispatched over there
            assert pulled.code == ResponseCode.SUCCESS and b"over-tcp" in pulled.body_bytes()
            assert (await env.route("EnvT")).code == ResponseCode.SUCCESS
            with pytest.raises(RuntimeError, match="another process"):
                _ = env.store
            await env.dispatched()  # a no-op for a subprocess
            bad = await env.create_topic("bad name", expect=None)
            assert bad.code != ResponseCode.SUCCESS
            with pytest.raises(AssertionError):
                await env.create_topic("bad name")


@pytest.mark.slow
def test_standalone_grpc_port_taken_meanwhile_is_retried(tmp_path, monkeypatch):
    """StandaloneProcess(grpc=True): when the picked gRPC port is taken before the broker binds
    it (the broker then logs a warning and runs on without its endpoint), start() starts the
    daemon again on another port instead of handing back a daemon with no endpoint."""
    import socket

    import grpc

    import rmq._testing as testing

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real_free_port = testing.free_port
    picks = [taken.getsockname()[1]]  # the first pick is the taken port, later ones real ones
    monkeypatch.setattr(testing, "free_port", lambda host="127.0.0.1": picks.pop() if picks else real_free_port(host))
    proc = StandaloneProcess(
        tmp_path / "store", namesrv_port=real_free_port(), broker_port=testing.free_broker_port(), grpc=True
    )
    try:
        with taken, proc:
            assert proc.grpc_port not in (0, taken.getsockname()[1])
            log = proc.log_text()
            assert log.count("gRPC endpoint not started") == 1, log[-3000:]
            with grpc.insecure_channel(f"127.0.0.1:{proc.grpc_port}") as channel:
                grpc.channel_ready_future(channel).result(timeout=30)
    finally:
        proc.stop()


def test_ports_named_or_picked_before_are_not_picked_again(tmp_path):
    """The ports a StandaloneProcess picks skip those its arguments name (``--metricsPort=N``),
    which are not bound yet when it picks, with the broker's VIP and HA neighbours."""
    from rmq._testing import _pick_avoiding

    proc = StandaloneProcess(tmp_path, ["--metricsPort=20001", "--grpcServerPort=20002", "--brokerName=x"])
    assert proc._named_ports() == {20001, 20002}
    picks = iter([20003, 20000, 20004, 20006])
    # 20003's and 20004's VIP ports (-2) and 20000's HA port (+1) are named ones; 20006 is clear
    assert _pick_avoiding(lambda: next(picks), {20001, 20002}, (-2, 0, 1)) == 20006
    with pytest.raises(RuntimeError, match="no free port"):
        _pick_avoiding(lambda: 20001, {20001})


def test_properties_round_trip():
    props = {"TAGS": "a", "KEYS": "k1 k2", "x": ""}
    assert decode_props(encode_props(props)) == props


def test_broker_ports_are_outside_the_ephemeral_range_with_free_neighbours():
    """A broker's port, its HA port (+1) and VIP port (-2) are picked below the kernel's range
    for outgoing connections, so no client connection can take one before a (re)start binds it."""
    import socket
    from pathlib import Path

    from rmq._testing import free_broker_port, free_port

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(20):
        port = free_broker_port()
        assert port - 2 >= 10000 and port + 1 < low
        with socket.socket() as a, socket.socket() as b, socket.socket() as c:
            for s, p in ((a, port - 2), (b, port), (c, port + 1)):
                s.bind(("127.0.0.1", p))
        assert 10000 <= free_port() < low


_GUARDED = """
import socket
import subprocess
import sys

import pytest


def test_binds():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


def test_spawns():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


async def test_spawns_on_the_loop():
    import asyncio
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await proc.wait()


def test_computes():
    assert sum(range(4)) == 6


@pytest.fixture
def env():
    yield None


def test_with_a_daemon_fixture(env):
    pass


@pytest.mark.integration
def test_marked():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
"""


def test_unit_mode_refuses_binds_and_children_and_deselects_integration(tmp_path):
    """`pytest --unit` (make unit) with tests/conftest.py: a test that binds or spawns fails
    naming what it did, a daemon fixture or the integration mark deselects the test."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests_dir = Path(__file__).resolve().parents[1]
    (tmp_path / "test_guarded.py").write_text(_GUARDED)
    # one loop in the child whatever this run uses (CI runs both): the counts below are uvloop's
    env = {
        **os.environ,
        "PYTHONPATH": f"{tests_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "RMQ_TEST_LOOPS": "uvloop",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "conftest",
            "--unit",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_guarded.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    text = out.stdout + out.stderr
    assert "3 failed, 1 passed, 2 deselected" in text, text
    assert "a unit test did socket.bind" in text and "a unit test did subprocess.Popen" in text, text
    assert "uvloop subprocess_exec" in text, text
