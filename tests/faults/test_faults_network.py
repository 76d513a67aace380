"""The fault primitives of rmq._testing.faults on their own: partitions between network
namespaces (silence both ways, the rest of the segment untouched, healed on undo), isolation,
cleanup (also of a run that died), SIGSTOP/SIGCONT, and a tmpfs that fills up."""

import os
import socket
import subprocess
import sys
import threading

import pytest

from rmq._testing import skip_or_fail, wait_until_sync
from rmq._testing.faults import (
    CLIENTS,
    FaultUnavailable,
    Network,
    SmallDisk,
    netns_unavailable,
    pause,
    resume,
    small_disk_unavailable,
    sweep_stale,
)

pytestmark = pytest.mark.integration

ECHO = """
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 7000))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"hi")
    c.close()
"""
PROBE = """
import socket, sys
try:
    print(socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[2])).recv(2).decode())
except OSError as e:
    print(type(e).__name__)
"""


@pytest.fixture
def net():
    reason = netns_unavailable()
    if reason is not None:
        skip_or_fail(f"no network namespaces here: {reason}")
    with Network.create() as n:
        yield n


def _serve(net: Network, name: str) -> subprocess.Popen:
    node = net.add_node(name)
    proc = subprocess.Popen(["ip", "netns", "exec", node.netns, sys.executable, "-c", ECHO, node.ip])
    wait_until_sync(lambda: _from_clients(node.ip, 1.0) == "hi", 30, 0.05, f"the echo server in {name}")
    return proc


def _from_clients(ip: str, timeout: float) -> str:
    try:
        with socket.create_connection((ip, 7000), timeout=timeout) as s:
            return s.recv(2).decode()
    except OSError as e:
        return type(e).__name__


def _from(net: Network, name: str, ip: str, timeout: float = 10.0) -> str:
    """What a connection from node ``name`` to ``ip`` gets: "hi", or the error's name (a
    partition shows as TimeoutError after ``timeout``; a reachable peer answers well within
    the default 10 s even on a busy machine)."""
    ns = net.nodes[name].netns
    r = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", PROBE, ip, str(timeout)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.stdout.strip()


def test_a_partition_is_silence_between_two_nodes_only(net):
    a, b = _serve(net, "a"), _serve(net, "b")
    _serve(net, "c")
    ip_a, ip_b, ip_c = (net.nodes[n].ip for n in "abc")
    assert _from(net, "a", ip_b) == "hi"
    net.partition("a", "b")
    assert net.cuts == [("a", "b")]
    # silence (a timeout), not a refusal: what a cut cable does
    assert _from(net, "a", ip_b, 1.0) == "TimeoutError"
    assert _from(net, "b", ip_a, 1.0) == "TimeoutError"
    assert _from(net, "a", ip_c) == "hi" and _from(net, "c", ip_b) == "hi"
    assert _from_clients(ip_a, 10) == "hi" and _from_clients(ip_b, 10) == "hi"
    net.heal("a", "b")
    assert _from(net, "a", ip_b) == "hi" and _from(net, "b", ip_a) == "hi"
    net.partition(CLIENTS, "c")
    assert _from_clients(ip_c, 1.0) == "TimeoutError"
    assert _from(net, "a", ip_c) == "hi"
    net.isolate("a")
    assert _from_clients(ip_a, 1.0) == "TimeoutError" and _from(net, "b", ip_a, 1.0) == "TimeoutError"
    net.heal_all()
    assert _from_clients(ip_c, 10) == "hi" and _from_clients(ip_a, 10) == "hi"
    assert net.cuts == []
    for p in (a, b):
        assert p.poll() is None


def _netns_names() -> set[str]:
    return {
        line.split()[0]
        for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
        if line.strip()
    }


def test_close_kills_what_runs_inside_and_removes_everything_even_on_failure():
    reason = netns_unavailable()
    if reason is not None:
        skip_or_fail(f"no network namespaces here: {reason}")
    procs: list[subprocess.Popen] = []
    with pytest.raises(RuntimeError, match="the test failed"):
        with Network.create() as n:
            procs.append(_serve(n, "a"))
            names = {n.nodes["a"].netns}
            bridge = n.bridge
            assert names <= _netns_names()
            raise RuntimeError("the test failed")
    assert procs[0].wait(10) == -9
    assert not names & _netns_names()
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0


def test_leftovers_of_a_dead_run_are_swept():
    reason = netns_unavailable()
    if reason is not None:
        skip_or_fail(f"no network namespaces here: {reason}")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ns, br = f"rmqj{dead.pid}-00000-x", f"rjbd{dead.pid % 100000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "link", "add", br, "type", "bridge"], check=True)
    subprocess.run(["ip", "link", "set", "dev", br, "alias", f"rmq-jepsen:{dead.pid}"], check=True)
    live_ns = f"rmqj{os.getpid()}-00000-live"
    subprocess.run(["ip", "netns", "add", live_ns], check=True)
    try:
        removed = sweep_stale()
        assert ns in removed and br in removed
        assert ns not in _netns_names() and live_ns in _netns_names()
    finally:
        subprocess.run(["ip", "netns", "del", live_ns])
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", br], capture_output=True)


def test_a_loopback_network_refuses_partitions_saying_why():
    with Network.create(isolated=False) as n:
        node = n.add_node("a")
        assert node.ip == "127.0.0.1" and node.netns is None and not n.can_partition
        with pytest.raises(FaultUnavailable, match="network namespaces"):
            n.partition("a", CLIENTS)


class _Proc:
    def __init__(self, proc):
        self.proc = proc


def test_a_paused_process_answers_nothing_until_resumed():
    # a thread answering on a pipe would not do: the point is a process frozen whole
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfor line in sys.stdin:\n print(line.strip(), flush=True)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        d = _Proc(child)
        pause(d)
        wait_until_sync(lambda: _state(child.pid) == "T", 10, 0.01, "the child stopped")
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(child.stdout.readline()), daemon=True)
        child.stdin.write("ping\n")
        child.stdin.flush()
        reader.start()
        assert _state(child.pid) == "T" and not got
        resume(d)
        reader.join(30)
        assert got == ["ping\n"]
    finally:
        child.kill()
        child.wait()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_small_disk_fills_and_drains(tmp_path):
    reason = small_disk_unavailable()
    if reason is not None:
        skip_or_fail(reason)
    with SmallDisk(tmp_path / "d", 8 << 20) as disk:
        assert disk.free_bytes() > 7 << 20
        (tmp_path / "d" / "keep").write_bytes(b"x" * 4096)
        disk.fill()
        assert disk.free_bytes() == 0
        with pytest.raises(OSError) as e:
            with open(tmp_path / "d" / "more", "wb") as f:
                f.write(b"y" * 65536)
                f.flush()
                os.fsync(f.fileno())
        assert e.value.errno == 28  # ENOSPC
        disk.drain()
        assert disk.free_bytes() > 7 << 20
        assert (tmp_path / "d" / "keep").read_bytes() == b"x" * 4096
    assert not os.path.ismount(tmp_path / "d")
