"""Fault injection for the Jepsen-style tests (``rmq._testing.jepsen``): processes killed with
SIGKILL, paused with SIGSTOP and woken with SIGCONT (a "zombie"), restarted; network partitions
between daemons on this one machine; a disk that fills up. Every fault has its undo, and every
resource made here is removed again, also when the test fails.

**Network.** :class:`Network` is the test's own layer-2 segment: a Linux bridge in this
process's namespace holding the first address of a private /24 (the "clients" side: this
process's SDK producers, readers and in-process name server use it), and one network namespace
per daemon (:meth:`Network.add_node`), joined to the bridge by a veth pair, with the next
addresses. A daemon runs in its node with ``ip netns exec`` (``BrokerProcess(netns=...)``).

A partition between two nodes (or a node and the clients) is made in each one's neighbour table:
a permanent entry that maps the other's address to a MAC address nobody has, so its frames
go nowhere and TCP sees silence, as on a real cut cable (connections time out, nothing is
refused). This needs nothing but ``ip``: the kernel here has no ``sch_netem`` and no
``act_gact`` (``tc ... netem loss 100%`` and ``tc filter ... action drop`` both fail), and
iptables/nft are not installed. A partition is per pair, so a master can be cut off from the
controller and still serve clients. :meth:`Network.isolate` cuts one node from everyone by
taking its bridge port down.

Names carry this process's pid (namespaces ``rmqj<pid>-<tag>-<node>``, the bridge's alias
``rmq-jepsen:<pid>``): :func:`sweep_stale` removes what a killed test run left behind, and
every :class:`Network` calls it when it starts. Where namespaces cannot be made (not root, no
``ip``, a container without the capability), :func:`netns_unavailable` says why and a
:class:`Network` made with ``isolated=False`` puts every node on 127.0.0.1 (no partitions).

**Disk.** :class:`SmallDisk` is a tmpfs of a given size mounted at a directory (a broker's
store root); :meth:`SmallDisk.fill` takes all its free space with a filler file and
:meth:`SmallDisk.drain` gives it back. tmpfs works as root here; a loop file system would need
``mkfs`` and loop devices for no gain.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = [
    "CLIENTS",
    "FaultUnavailable",
    "Network",
    "Node",
    "SmallDisk",
    "kill9",
    "netns_unavailable",
    "pause",
    "resume",
    "small_disk_unavailable",
    "sweep_stale",
]

#: The MAC address a partitioned peer's address is mapped to: locally administered, unicast,
#: and owned by no interface, so the bridge floods the frame and every port drops it.
_NOWHERE_MAC = "02:00:5e:00:de:ad"
_ALIAS = "rmq-jepsen:"
_LOCK = os.path.join(tempfile.gettempdir(), "rmq-jepsen-net.lock")

#: The node name of this process's side of the segment (clients, the in-process name server).
CLIENTS = "clients"


class FaultUnavailable(RuntimeError):
    """This machine cannot inject the fault (the message says why)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip() or r.returncode}")
    return r


_NETNS_REASON: list[str | None] = []


def netns_unavailable() -> str | None:
    """Why daemons cannot get their own network namespace here, or None when they can (root,
    ``ip`` installed, and a namespace, a veth pair and a bridge can be made; checked once)."""
    if _NETNS_REASON:
        return _NETNS_REASON[0]
    reason: str | None = None
    if os.geteuid() != 0:
        reason = "network namespaces need root (ip netns add)"
    elif shutil.which("ip") is None:
        reason = "ip(8) is not installed (Debian's iproute2)"
    else:
        probe = f"rmqjprobe{os.getpid()}"
        try:
            for args in (("netns", "add", probe), ("link", "add", probe, "type", "bridge")):
                r = _ip(*args, check=False)
                if r.returncode != 0:
                    reason = f"ip {' '.join(args)} failed: {r.stderr.strip()}"
                    break
        finally:
            _ip("link", "del", probe, check=False)
            _ip("netns", "del", probe, check=False)
    _NETNS_REASON.append(reason)
    return reason


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _netns_pids(ns: str) -> list[int]:
    r = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def _delete_netns(ns: str) -> None:
    """Kill what still runs in ``ns`` (daemons a failed test left) and delete it; its veth end
    goes with it, and with that end its peer on the bridge."""
    for pid in _netns_pids(ns):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _ip("netns", "del", ns, check=False)


def sweep_stale() -> list[str]:
    """Delete the namespaces and bridges of test runs whose process is gone (a run killed
    before its cleanup); returns what it deleted. Never touches a live run's."""
    removed: list[str] = []
    if netns_unavailable() is not None:
        return removed
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith("rmqj") and "-" in name:
            pid = name[4:].split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                _delete_netns(name)
                removed.append(name)
    r = _ip("-o", "link", "show", "type", "bridge", check=False)
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2 or "alias" not in parts:
            continue
        alias = parts[parts.index("alias") + 1]
        pid = alias.removeprefix(_ALIAS)
        if alias.startswith(_ALIAS) and pid.isdigit() and not _pid_alive(int(pid)):
            dev = parts[1].rstrip(":").split("@")[0]
            _ip("link", "del", dev, check=False)
            removed.append(dev)
    return removed


@dataclass
class Node:
    """One daemon's place on the segment.

    Attributes:
        name: the test's name for it (``"m"``, ``"s"``, ``"ctl1"``...).
        ip: its address (127.0.0.1 on a loopback-only :class:`Network`).
        netns: its namespace (None on a loopback-only network: run the daemon as usual).
        host_if: the bridge's end of its veth pair ("" when none).
        inner_if: its own end, inside ``netns``.
        mac: ``inner_if``'s MAC address.
    """

    name: str
    ip: str
    netns: str | None = None
    host_if: str = ""
    inner_if: str = ""
    mac: str = ""


@dataclass
class Network:
    """The test's network: see the module's docstring. Use as a context manager (``with
    Network.create() as net:``) so that it is removed whatever happens; ``close()`` kills the
    processes still running in its namespaces, deletes them and the bridge.

    Args:
        isolated: True (the default) for namespaces; False for a loopback-only network
            where every node is 127.0.0.1 (no partitions; for machines without namespaces
            and for tests that need none).
    """

    isolated: bool = True
    tag: str = field(default_factory=lambda: f"{random.getrandbits(20):05x}")
    nodes: dict[str, Node] = field(default_factory=dict)
    host_ip: str = "127.0.0.1"
    bridge: str = ""
    _subnet: ipaddress.IPv4Network | None = None
    _cuts: set[frozenset[str]] = field(default_factory=set)
    _down: set[str] = field(default_factory=set)

    @classmethod
    def create(cls, isolated: bool = True) -> Network:
        """A started network (``isolated`` as the class says); raises
        :class:`FaultUnavailable` naming the reason when namespaces were asked for and this
        machine cannot make them."""
        net = cls(isolated=isolated)
        if isolated:
            reason = netns_unavailable()
            if reason is not None:
                raise FaultUnavailable(reason)
            sweep_stale()
            try:
                net._make_bridge()
            except BaseException:
                net.close()
                raise
        return net

    @property
    def can_partition(self) -> bool:
        return self.isolated

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make_bridge(self) -> None:
        # The lock keeps two runs (two pytest workers, two engineers) from taking the same /24
        # between looking at the routes and adding the bridge's address.
        self.bridge = f"rjb{self.tag}"
        with open(_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            taken = [
                ipaddress.ip_network(w, strict=False)
                for line in _ip("-4", "-o", "addr", "show").stdout.splitlines()
                for w in line.split()
                if "/" in w and w[0].isdigit()
            ]
            rng = random.Random()
            for _ in range(500):
                subnet = ipaddress.IPv4Network(f"10.{rng.randint(128, 254)}.{rng.randint(0, 255)}.0/24")
                if not any(subnet.overlaps(t) for t in taken):
                    break
            else:
                raise FaultUnavailable("no free 10.x.y.0/24 for the test network")
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("link", "set", "dev", self.bridge, "alias", f"{_ALIAS}{os.getpid()}")
            self._subnet = subnet
            self.host_ip = str(subnet.network_address + 1)
            _ip("addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        self.nodes[CLIENTS] = Node(CLIENTS, self.host_ip, None, self.bridge, self.bridge)

    @property
    def subnet(self) -> str:
        """The segment's network (``10.x.y.0/24``; ``127.0.0.0/8`` on a loopback-only one):
        what a master's ``haAllowedSlaves`` must allow."""
        return str(self._subnet) if self._subnet is not None else "127.0.0.0/8"

    def add_node(self, name: str) -> Node:
        """A new node ``name`` with its own namespace and address (127.0.0.1 and no namespace
        on a loopback-only network)."""
        if name in self.nodes:
            raise ValueError(f"node {name!r} exists")
        if not self.isolated:
            node = self.nodes[name] = Node(name, "127.0.0.1")
            return node
        assert self._subnet is not None
        index = len(self.nodes)  # the clients' .1 is node 0
        if index > 200:
            raise ValueError("at most 200 nodes")
        ns = f"rmqj{os.getpid()}-{self.tag}-{name}"
        host_if, inner_if = f"rj{self.tag}h{index}", f"rj{self.tag}n{index}"
        ip = str(self._subnet.network_address + 10 + index)
        node = Node(name, ip, ns, host_if, inner_if)
        self.nodes[name] = node
        _ip("netns", "add", ns)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", inner_if)
        _ip("link", "set", inner_if, "netns", ns)
        _ip("link", "set", host_if, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", inner_if)
        _ip("-n", ns, "link", "set", inner_if, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        out = _ip("-n", ns, "-o", "link", "show", inner_if).stdout.split()
        node.mac = out[out.index("link/ether") + 1]
        return node

    # ---------------------------------------------------------------- partitions

    def _need_isolation(self, what: str) -> None:
        if not self.isolated:
            raise FaultUnavailable(f"{what} needs network namespaces; this network is loopback only")

    def _blackhole(self, at: Node, peer: Node) -> None:
        if at.netns is None:
            _ip("neigh", "replace", peer.ip, "lladdr", _NOWHERE_MAC, "nud", "permanent", "dev", self.bridge)
        else:
            dev = at.inner_if
            _ip("-n", at.netns, "neigh", "replace", peer.ip, "lladdr", _NOWHERE_MAC, "nud", "permanent", "dev", dev)

    def _restore(self, at: Node, peer: Node) -> None:
        # Back to the peer's real address at once (not left for ARP to resolve again): a
        # deleted entry would leave the first segments after the heal to a new ARP round.
        dev = self.bridge if at.netns is None else at.inner_if
        prefix = [] if at.netns is None else ["-n", at.netns]
        if peer.mac:
            _ip(*prefix, "neigh", "replace", peer.ip, "lladdr", peer.mac, "nud", "reachable", "dev", dev, check=False)
        else:
            _ip(*prefix, "neigh", "del", peer.ip, "dev", dev, check=False)

    def partition(self, a: str, b: str) -> None:
        """Cut ``a`` and ``b`` (node names; :data:`CLIENTS` for this process's side) off from
        each other, both ways; each still reaches every other node. Undo: :meth:`heal`."""
        self._need_isolation("a partition")
        na, nb = self.nodes[a], self.nodes[b]
        self._blackhole(na, nb)
        self._blackhole(nb, na)
        self._cuts.add(frozenset((a, b)))

    def heal(self, a: str, b: str) -> None:
        """Undo :meth:`partition` of ``a`` and ``b``."""
        na, nb = self.nodes[a], self.nodes[b]
        self._restore(na, nb)
        self._restore(nb, na)
        self._cuts.discard(frozenset((a, b)))

    def isolate(self, name: str) -> None:
        """Cut node ``name`` off from everyone (its bridge port down). Undo: :meth:`rejoin`."""
        self._need_isolation("isolating a node")
        _ip("link", "set", self.nodes[name].host_if, "down")
        self._down.add(name)

    def rejoin(self, name: str) -> None:
        """Undo :meth:`isolate`."""
        _ip("link", "set", self.nodes[name].host_if, "up")
        self._down.discard(name)

    def heal_all(self) -> None:
        """Undo every partition and isolation in force."""
        for cut in list(self._cuts):
            self.heal(*sorted(cut))
        for name in list(self._down):
            self.rejoin(name)

    @property
    def cuts(self) -> list[tuple[str, str]]:
        """The partitions in force, as sorted pairs."""
        return sorted(tuple(sorted(c)) for c in self._cuts)  # type: ignore[misc]

    def close(self) -> None:
        """Kill what runs in the namespaces, delete them and the bridge (idempotent)."""
        for node in self.nodes.values():
            if node.netns is not None:
                _delete_netns(node.netns)
        if self.bridge:
            _ip("link", "del", self.bridge, check=False)
            self.bridge = ""
        self.nodes.clear()
        self._cuts.clear()
        self._down.clear()


# ------------------------------------------------------------------------------- processes


class _HasProc(Protocol):
    proc: subprocess.Popen[bytes] | None


def _live(d: _HasProc) -> subprocess.Popen[bytes]:
    if d.proc is None or d.proc.poll() is not None:
        raise RuntimeError(f"{d!r} is not running")
    return d.proc


def kill9(d: _HasProc) -> None:
    """``kill -9`` the daemon (no shutdown, no flush) and reap it. Undo: start it again."""
    proc = _live(d)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def pause(d: _HasProc) -> None:
    """SIGSTOP: the daemon freezes with its sockets open (peers see silence, not a close):
    a "zombie" that will wake up later thinking nothing happened. Undo: :func:`resume`."""
    _live(d).send_signal(signal.SIGSTOP)


def resume(d: _HasProc) -> None:
    """SIGCONT: undo :func:`pause` (harmless on a running daemon)."""
    proc = d.proc
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGCONT)


# ------------------------------------------------------------------------------------ disk


def small_disk_unavailable() -> str | None:
    """Why a :class:`SmallDisk` cannot be mounted here, or None."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount(8)/umount(8) are not installed"
    return None


class SmallDisk:
    """A tmpfs of ``size`` bytes at ``path`` (created): a store root that can be filled up.

    ``fill()`` takes all the free space (a store then refuses writes: its disk guard sees more
    than ``diskSpaceWarningLevelRatio`` used, and a new file cannot be allocated);
    ``drain()`` frees it again; ``close()`` unmounts (lazily: a daemon killed a moment ago may
    still hold a mapping). A context manager.
    """

    FILLER = ".rmq-jepsen-filler"

    def __init__(self, path: str | os.PathLike[str], size: int) -> None:
        self.path = Path(path)
        self.size = size
        self.mounted = False

    def mount(self) -> SmallDisk:
        reason = small_disk_unavailable()
        if reason is not None:
            raise FaultUnavailable(reason)
        self.path.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0755", "tmpfs", str(self.path)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise FaultUnavailable(f"mount -t tmpfs failed: {r.stderr.strip()}")
        self.mounted = True
        return self

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def used_ratio(self) -> float:
        """The share of the disk in use (0..1), the filler included."""
        st = os.statvfs(self.path)
        return 1.0 - st.f_bavail / st.f_blocks if st.f_blocks else 0.0

    def fill(self, leave: int = 0) -> int:
        """Take the free space but ``leave`` bytes; returns the filler's size."""
        filler = self.path / self.FILLER
        with open(filler, "ab") as f:
            want = max(self.free_bytes() - leave, 0)
            with contextlib.suppress(OSError):
                os.posix_fallocate(f.fileno(), f.tell(), want)
            block = b"\0" * 65536
            with contextlib.suppress(OSError):  # ENOSPC: full
                while self.free_bytes() > leave:
                    f.write(block[: max(4096, min(len(block), self.free_bytes() - leave))])
                    f.flush()
            return os.fstat(f.fileno()).st_size

    def drain(self) -> None:
        """Undo :meth:`fill`."""
        with contextlib.suppress(FileNotFoundError):
            (self.path / self.FILLER).unlink()

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False

    def __enter__(self) -> SmallDisk:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def network(isolated: bool = True) -> Iterator[Network]:
    """``with network() as net:`` = ``with Network.create(isolated) as net:``."""
    with Network.create(isolated) as net:
        yield net


__all__ += ["network"]
