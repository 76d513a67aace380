"""Test support: real name servers and brokers on ephemeral ports, in-process or as a daemon.

In-process (async context managers, for protocol tests)::

    async with run_namesrv() as ns:                       # NamesrvController on 127.0.0.1:0
        ...
    async with run_broker(tmp_path, namesrv=ns) as broker:  # BrokerController, temp store
        ...
    async with run_standalone(tmp_path) as (ns, broker):  # both, broker registered with ns
        ...

As a subprocess (for interop tests and benches, which need a broker in its own process)::

    with StandaloneProcess(tmp_path / "store") as proc:    # python -m rmq standalone
        proc.namesrv_addr, proc.broker_addr                # "127.0.0.1:port"
        proc.stop()                                        # SIGTERM, wait, returns exit code

A broker under test with a raw client and request helpers (tests/broker, tests/semantics)::

    async with broker_env(tmp_path / "store") as env:      # BrokerEnv, see rmq._testing.env
        await env.create_topic("T"); await env.send("T", b"x"); await env.pull("T")

Everything binds 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from rmq._testing.env import BrokerEnv, broker_env, decode_props, encode_props, phy_offset

if TYPE_CHECKING:  # imported where used: `import rmq._testing` stays cheap
    import ssl

    from rmq.broker.controller import BrokerController
    from rmq.config import BrokerConfig
    from rmq.namesrv.controller import NamesrvController
    from rmq.remoting.tls import TlsSettings
    from rmq.store import StoreConfig

StrPath = str | os.PathLike[str]
_T = TypeVar("_T")

__all__ = [
    "BrokerEnv",
    "NoisyNeighbour",
    "StandaloneProcess",
    "broker_env",
    "decode_props",
    "encode_props",
    "free_port",
    "phy_offset",
    "run_broker",
    "run_namesrv",
    "run_standalone",
    "wait_for_port",
    "wait_until",
    "wait_until_sync",
]


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (Linux
    ``net.ipv4.ip_local_port_range``; 32768 when it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(host: str, ports: Iterable[int]) -> bool:
    socks: list[socket.socket] = []
    try:
        for port in ports:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def _worker_range(low: int, high: int) -> tuple[int, int]:
    """``low..high``, or this pytest-xdist worker's share of it: workers (``PYTEST_XDIST_WORKER``
    ``gw<i>`` of ``PYTEST_XDIST_WORKER_COUNT``, inherited by the daemons they start) pick ports
    from disjoint slices, so two test processes never pick the same port between a pick and
    its bind."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        index = int(worker.removeprefix("gw"))
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    except ValueError:
        return low, high
    if count <= 1 or not 0 <= index < count:
        return low, high
    share = (high - low + 1) // count
    return low + index * share, low + (index + 1) * share - 1


def _pick_port(host: str, neighbours: tuple[int, ...]) -> int:
    """A port that was free a moment ago, together with ``port + d`` for each ``d`` in
    ``neighbours``. Taken below the kernel's ephemeral range when it leaves room (10000 up to
    it): there no outgoing connection's local port can take it between this pick and the
    daemon's bind -- the clash a broker restarted on its old port, or its HA port
    (``listenPort + 1``), would otherwise meet now and then. Racy only with other listeners."""
    low, high = _worker_range(10000, _ephemeral_low() - 1)
    span = (min((*neighbours, 0)), max((*neighbours, 0)))
    if high - low > 1000:
        for _ in range(200):
            port = random.randint(low - span[0], high - span[1])
            if _bindable(host, [port + d for d in (0, *neighbours)]):
                return port
    for _ in range(100):  # (a machine whose ephemeral range leaves no room)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if 1024 - span[0] <= port <= 65535 - span[1] and _bindable(host, [port + d for d in neighbours]):
            return port
    raise RuntimeError(f"no free port with free neighbours {neighbours} found")


def _pick_avoiding(pick: Callable[[], int], avoid: set[int], spread: tuple[int, ...] = (0,)) -> int:
    """A port from ``pick()`` such that no ``port + d`` (``d`` in ``spread``) is in ``avoid``."""
    for _ in range(100):
        port = pick()
        if not any(port + d in avoid for d in spread):
            return port
    raise RuntimeError(f"no free port apart from {sorted(avoid)}")


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago, below the kernel's ephemeral range when it leaves
    room (see :func:`free_broker_port`). Racy by nature; the subprocess helper retries on a
    clash."""
    return _pick_port(host, ())


def free_broker_port(host: str = "127.0.0.1") -> int:
    """A free port for a broker on a fixed ``listenPort`` whose neighbours are free too: the
    HA port (``listenPort + 1``, a master's replication listener) and the VIP channel
    (``listenPort - 2``). Taken below the kernel's ephemeral range (10000 up to its start),
    so that no outgoing connection takes one of the three before the broker binds, or while
    a test restarts a broker on its old port."""
    return _pick_port(host, (-2, 1))


__all__ += ["free_broker_port"]


def terminate(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
    """SIGTERM ``proc`` (a clean shutdown) and wait; SIGKILL after ``timeout``. Its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


__all__ += ["terminate"]


def read_log(path: str | os.PathLike[str], start: int = 0) -> str:
    """A daemon's log file from byte ``start`` (default 0), undecodable bytes replaced; "" when
    there is no file yet (every run of a daemon appends to its log)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


__all__ += ["read_log"]


def wait_for_port(host: str, port: int, timeout: float = 60.0) -> bool:
    """True once something accepts TCP connections on ``host:port`` (polls every 50 ms), False
    after ``timeout`` seconds (default 60: a Python daemon takes 10 s and more to listen on a
    machine at load 20)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@contextlib.asynccontextmanager
async def run_namesrv(*, tls: TlsSettings | None = None, **config: Any) -> AsyncIterator[NamesrvController]:
    """A started ``NamesrvController`` on 127.0.0.1:0 (``config``: ``NamesrvConfig`` fields;
    ``tls``: its ``tls.*`` settings, default none)."""
    from rmq.config import NamesrvConfig
    from rmq.namesrv.controller import NamesrvController

    cfg = NamesrvConfig(listen_host="127.0.0.1", listen_port=0)
    for k, v in config.items():
        setattr(cfg, k, v)
    ctl = NamesrvController(cfg, tls=tls.server_options() if tls is not None else None)
    await ctl.start()
    try:
        yield ctl
    finally:
        await ctl.shutdown()


def make_broker_configs(
    store_dir: StrPath, namesrv: NamesrvController | str | None = None, **overrides: Any
) -> tuple[BrokerConfig, StoreConfig]:
    """``(BrokerConfig, StoreConfig)`` for a test broker: port 0, small CommitLog files (4 MiB)
    and index files (1.7 MB) so tests do not map 1 GiB, ``overrides`` given as snake_case fields of either."""
    from rmq.config import BrokerConfig
    from rmq.store import StoreConfig

    # metrics_port 0: many test brokers run side by side; a test that scrapes asks for a port
    bc = BrokerConfig(listen_host="127.0.0.1", listen_port=0, broker_ip1="127.0.0.1", metrics_port=0)
    sc = StoreConfig(store_path_root_dir=str(store_dir))
    sc.mapped_file_size_commitlog = 4 * 1024 * 1024
    sc.mapped_file_size_consume_queue = 3000 * 20
    sc.max_hash_slot_num, sc.max_index_num = 20_000, 80_000  # a 1.7 MB index file, not 420 MB
    if namesrv is not None:
        bc.namesrv_addr = namesrv if isinstance(namesrv, str) else f"127.0.0.1:{namesrv.port}"
    for k, v in overrides.items():
        if hasattr(bc, k):
            setattr(bc, k, v)
        elif hasattr(sc, k):
            setattr(sc, k, v)
        else:
            raise TypeError(f"unknown broker/store setting {k!r}")
    return bc, sc


@contextlib.asynccontextmanager
async def run_broker(
    store_dir: StrPath,
    namesrv: NamesrvController | str | None = None,
    *,
    tls: TlsSettings | None = None,
    **overrides: Any,
) -> AsyncIterator[BrokerController]:
    """A started ``BrokerController`` on 127.0.0.1:0 with its store in ``store_dir``.

    Args:
        store_dir: the store root (reuse it to test a restart).
        namesrv: a NamesrvController or ``"host:port"`` to register with (default none).
        tls: the broker's ``tls.*`` settings (``rmq.remoting.tls.TlsSettings``); default none.
        overrides: snake_case ``BrokerConfig`` / ``StoreConfig`` fields.
    """
    from rmq.broker.controller import BrokerController

    bc, sc = make_broker_configs(store_dir, namesrv, **overrides)
    broker = BrokerController(bc, sc, tls=tls)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.shutdown()


@contextlib.asynccontextmanager
async def run_standalone(
    store_dir: StrPath, *, tls: TlsSettings | None = None, **overrides: Any
) -> AsyncIterator[tuple[NamesrvController, BrokerController]]:
    """A name server and a broker registered with it: yields ``(namesrv, broker)``; ``tls``
    (both daemons' ``tls.*`` settings) as ``rmq standalone`` takes them."""
    async with run_namesrv(tls=tls) as ns:
        async with run_broker(store_dir, namesrv=ns, tls=tls, **overrides) as broker:
            yield ns, broker


class StandaloneProcess:
    """``python -m rmq standalone`` as a subprocess on free ports, for interop tests and benches.

    ``start()`` picks two free ports, launches the daemon with its store in ``store_dir`` and
    returns once both ports accept connections and the daemon has logged its "listening"
    line (a clash on a port that was free a moment ago is retried with new ports). The
    daemon's stdout and stderr go to ``<store_dir>/../<name>.log`` (never a pipe that could
    fill up); ``log_text()`` reads it.

    Args:
        store_dir: the store root directory (created if missing; reuse it to restart on the
            same data).
        extra_args: more daemon arguments, e.g. ``["--flushDiskType=SYNC_FLUSH"]``.
        namesrv_port / broker_port: fixed ports instead of free ones (default: free ones).
        start_timeout: seconds to wait for the daemon to listen (default 20).
        env: extra environment variables for the daemon.
        small_files: give the daemon 64 MiB CommitLog and 600 KB ConsumeQueue files (default
            True: the store allocates its files for real); False for its real defaults.
        cwd: the daemon's working directory (default this process's); with
            ``env={"PYTHONPATH": tree}`` it runs another checkout's rmq (benchmarks).
        brokers: ``--brokers N`` (default 1); above 1 the brokers listen on ephemeral ports
            unless ``broker_port`` is given, and ``broker_addr`` is not theirs (ask the name
            server's cluster info).
        grpc: serve the RocketMQ 5 gRPC endpoint on a free port (``grpc_port``; default False,
            one broker only). ``start()`` then also waits for the endpoint's "listening" line,
            and a gRPC port taken meanwhile (the broker logs it and runs on without the
            endpoint) is retried with new ports, as a taken remoting port is.

    Attributes:
        namesrv_addr / broker_addr: ``"127.0.0.1:<port>"`` once started.
        grpc_port: the gRPC endpoint's port once started (with ``grpc``), else 0.
        pid: the daemon's pid (e.g. for CPU accounting from /proc/<pid>/stat).
        returncode: exit status after ``stop()``.

    Use as a context manager (``with StandaloneProcess(d) as p:``) or call ``start()`` and
    ``stop()``; ``stop()`` sends SIGTERM, waits up to ``timeout`` seconds (then SIGKILL) and
    returns the exit status (0 on a clean stop).
    """

    def __init__(
        self,
        store_dir: StrPath,
        extra_args: Iterable[str] = (),
        namesrv_port: int | None = None,
        broker_port: int | None = None,
        start_timeout: float = 20.0,
        env: dict[str, str] | None = None,
        name: str = "rmq-standalone",
        small_files: bool = True,
        cwd: StrPath | None = None,
        brokers: int = 1,
        grpc: bool = False,
    ) -> None:
        if grpc and brokers != 1:
            raise ValueError("StandaloneProcess(grpc=True) serves one broker's endpoint: brokers must be 1")
        self.store_dir = os.path.abspath(str(store_dir))
        self.extra_args = list(extra_args)
        self._fixed_ports = (namesrv_port, broker_port)
        self.start_timeout = start_timeout
        self.env = env
        self.small_files = small_files
        self.cwd = cwd
        self.brokers = brokers
        self.grpc = grpc
        self.grpc_port = 0
        self.log_path = os.path.join(os.path.dirname(self.store_dir), f"{name}-{os.getpid()}-{id(self):x}.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.namesrv_port = 0
        self.broker_port = 0
        self.returncode: int | None = None

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_text(self, since: int = 0) -> str:
        """The daemon's log (from byte ``since``, default the start)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    #: Store files for tests: the store allocates its files for real (posix_fallocate), and
    #: a 1 GiB CommitLog plus 6 MB per ConsumeQueue for every daemon a suite starts would take
    #: many GB of the machine's disk. Given unless ``extra_args`` sets them or ``small_files``
    #: is False (benchmarks measure the daemon's real defaults).
    TEST_FILE_SIZES = (
        "--mappedFileSizeCommitLog=67108864",
        "--mappedFileSizeConsumeQueue=600000",
        "--maxHashSlotNum=20000",
        "--maxIndexNum=80000",
    )

    #: No metrics or gRPC endpoint unless ``extra_args`` sets ``--metricsPort`` / ``--grpcServerPort``
    #: (daemons run side by side).
    TEST_QUIET = ("--metricsPort=0", "--grpcServerPort=0")

    def command(self) -> list[str]:
        extra = [*self.extra_args, *([f"--grpcServerPort={self.grpc_port}"] if self.grpc_port else [])]
        sizes = [
            a
            for a in (*(self.TEST_FILE_SIZES if self.small_files else ()), *self.TEST_QUIET)
            if not any(x.startswith(a.split("=")[0] + "=") for x in extra)
        ]
        # No web console unless asked for: test and bench daemons run side by side, and the
        # console's sampler would add connections and CPU to what they measure.
        if not any(a.startswith("--consolePort=") for a in extra):
            sizes.append("--consolePort=0")
        return [
            sys.executable,
            "-m",
            "rmq",
            "standalone",
            "--namesrv-port",
            str(self.namesrv_port),
            "--broker-port",
            str(self.broker_port),
            "--store-dir",
            self.store_dir,
            *(["--brokers", str(self.brokers)] if self.brokers != 1 else []),
            *sizes,
            *extra,
        ]

    def start(self) -> StandaloneProcess:
        os.makedirs(self.store_dir, exist_ok=True)
        attempts = 1 if all(self._fixed_ports) and not self.grpc else 3
        last = ""
        for _ in range(attempts):
            # A port the caller named (``--metricsPort=N``...) or picked here a moment ago is not
            # bound yet, so the pickers' "is it free?" check cannot see it: skip those by hand.
            named = self._named_ports()
            self.namesrv_port = self._fixed_ports[0] or _pick_avoiding(free_port, named)
            broker_ports = (-2, 0, 1)  # (the VIP channel, the broker, its HA port)
            if self._fixed_ports[1]:
                self.broker_port = self._fixed_ports[1]
            elif self.brokers == 1:
                self.broker_port = _pick_avoiding(free_broker_port, {*named, self.namesrv_port}, broker_ports)
            else:
                self.broker_port = 0
            if self.grpc:
                mine = {self.namesrv_port, *(self.broker_port + d for d in broker_ports)}
                self.grpc_port = _pick_avoiding(free_port, {*named, *mine})
            env = dict(os.environ)
            env.update(self.env or {})
            # this attempt's lines: the log is appended to, a failed attempt's lines stay before
            log_from = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    self.command(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.cwd,
                    stdin=subprocess.DEVNULL,
                )
            deadline = time.monotonic() + self.start_timeout
            grpc_taken = False
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                text = self.log_text(log_from)
                if "rmq standalone listening" in text and (
                    self.broker_port == 0 or wait_for_port("127.0.0.1", self.broker_port, 1.0)
                ):
                    if not self.grpc or f"clients) listening on 127.0.0.1:{self.grpc_port}" in text:
                        return self
                    # GrpcEndpoint.start: a taken port is a warning and the broker runs on
                    grpc_taken = "gRPC endpoint not started" in text
                    if grpc_taken:
                        break
                time.sleep(0.05)
            last = self.log_text(log_from)[-2000:]
            if grpc_taken:
                self.stop()
                self.returncode = 3
                continue
            if self.proc.poll() is None:
                self.stop()
                raise RuntimeError(f"rmq standalone did not start listening within {self.start_timeout}s:\n{last}")
            self.returncode = self.proc.returncode
            if self.returncode != 3:  # 3 = port taken: retry with new ports
                break
        raise RuntimeError(f"rmq standalone exited with status {self.returncode}:\n{last}")

    def _named_ports(self) -> set[int]:
        """The ports ``extra_args`` sets (``--grpcServerPort=N``, ``--metricsPort=N``...)."""
        return {int(m.group(1)) for a in self.extra_args if (m := re.fullmatch(r"--\w*[Pp]ort=(\d+)", a))}

    def broker_pids(self) -> dict[str, int]:
        """With ``brokers`` > 1: each broker process's current pid by broker name, from the
        log (the "listening" line, then any "restarted (pid N)" line); else empty."""
        text = self.log_text()
        if self.brokers == 1 or "rmq standalone listening" not in text:
            return {}
        listening = text.split("rmq standalone listening", 1)[1].split("\n", 1)[0]
        pids = {name: int(pid) for name, pid in re.findall(r"([%|\w-]+) pid (\d+)", listening)}
        for name, pid in re.findall(r"broker ([%|\w-]+) restarted \(pid (\d+)\)", text):
            pids[name] = int(pid)
        return pids

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit status."""
        if self.proc is None:
            return self.returncode
        self.returncode = terminate(self.proc, timeout)
        return self.returncode

    def __enter__(self) -> StandaloneProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- state waits ----------------------------------------------------------------------------


@overload
async def wait_until(
    pred: Callable[[], Awaitable[_T]], timeout: float = 20.0, interval: float = 0.02, what: str = "condition"
) -> _T: ...


@overload
async def wait_until(
    pred: Callable[[], _T], timeout: float = 20.0, interval: float = 0.02, what: str = "condition"
) -> _T: ...


async def wait_until(
    pred: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02, what: str = "condition"
) -> Any:
    """Poll ``pred`` (a plain or async callable) until it returns something true, and return that.

    The one way tests wait for a state: never ``sleep(x)`` and then assert. Raises
    ``AssertionError`` naming ``what`` after ``timeout`` seconds.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        v = pred()
        if asyncio.iscoroutine(v):
            v = await v
        if v:
            return v
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


async def loop_turn() -> None:
    """Return once every callback the loop had ready when called has run (a marker callback
    queued behind them completes a future): a dispatch run scheduled by the appends before it,
    or the would-be run of a dropped one. An ordering, not a length of time."""
    import asyncio

    loop = asyncio.get_running_loop()
    marker: asyncio.Future[None] = loop.create_future()
    loop.call_soon(marker.set_result, None)
    await marker


__all__ += ["loop_turn"]


def wait_until_sync(
    pred: Callable[[], _T], timeout: float = 20.0, interval: float = 0.02, what: str = "condition"
) -> _T:
    """:func:`wait_until` for code without an event loop (subprocess tests, threads)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --- the noisy-neighbour probe -------------------------------------------------------------


class NoisyNeighbour:
    """A well-behaved client that measures its own round trips while a bad one runs.

    A thread with its own blocking socket (so it keeps measuring whatever the test's event
    loop is doing) sends one cheap request after another to ``addr`` and records each round
    trip; a request unanswered within ``timeout`` counts as a round trip of ``timeout`` and the
    probe reconnects. The default request is GET_MAX_OFFSET for ``TBW102`` queue 0, which every
    broker answers without touching the disk; pass ``code``/``ext_fields`` for a name server
    (e.g. GET_ROUTEINFO_BY_TOPIC), and ``tls`` (an ``ssl.SSLContext``) for a server that
    enforces TLS.

    Use::

        with NoisyNeighbour(proc.broker_addr) as probe:
            ...  # the bad client does its worst
        assert probe.worst < 1.0, probe.summary()

    Attributes:
        samples: round trips in seconds, in order.
        worst: the longest round trip (``0.0`` before the first sample).
        failures: requests that timed out or lost their connection.
    """

    def __init__(
        self,
        addr: str,
        *,
        code: int | None = None,
        ext_fields: dict[str, str] | None = None,
        interval: float = 0.01,
        timeout: float = 5.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        import threading

        from rmq.common.constants import TopicValidator
        from rmq.protocol.codes import RequestCode
        from rmq.protocol.headers.consumer import GetMaxOffsetRequestHeader

        self.addr = addr
        self.code = int(code if code is not None else RequestCode.GET_MAX_OFFSET)
        self.ext_fields = (
            ext_fields
            if ext_fields is not None
            else GetMaxOffsetRequestHeader(topic=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC, queue_id=0).to_ext_fields()
        )
        self.interval = interval
        self.timeout = timeout
        self.tls = tls
        self.samples: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="noisy-neighbour", daemon=True)

    @property
    def worst(self) -> float:
        return max(self.samples, default=0.0)

    def summary(self) -> str:
        s = sorted(self.samples)
        if not s:
            return "no samples"
        p50 = s[len(s) // 2]
        p99 = s[min(len(s) - 1, int(len(s) * 0.99))]
        return (
            f"{len(s)} round trips: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
            f"worst {s[-1] * 1000:.1f} ms, {self.failures} failures"
        )

    def start(self) -> NoisyNeighbour:
        self._thread.start()
        # One answered round trip before the bad client starts, so "worst" is about it.
        wait_until_sync(
            lambda: self.samples or not self._thread.is_alive(),
            timeout=self.timeout + 5,
            what=f"the first round trip to {self.addr}",
        )
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5)

    def __enter__(self) -> NoisyNeighbour:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _connect(self) -> socket.socket:
        host, port = self.addr.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=self.timeout)
        if self.tls is not None:
            s = self.tls.wrap_socket(s, server_hostname=host)
        s.settimeout(self.timeout)
        return s

    def _run(self) -> None:
        from rmq.protocol.command import RemotingCommand
        from rmq.remoting.codec import FrameDecoder, encode

        sock: socket.socket | None = None
        decoder = FrameDecoder()
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                if sock is None:
                    sock = self._connect()
                    decoder = FrameDecoder()
                cmd = RemotingCommand.request(self.code, dict(self.ext_fields))
                sock.sendall(b"".join(bytes(p) for p in encode(cmd)))
                while True:
                    reply = decoder.next_frame()
                    if reply is not None and reply.opaque == cmd.opaque:
                        break
                    if reply is None:
                        chunk = sock.recv(65536)
                        if not chunk:
                            raise ConnectionResetError("peer closed the connection")
                        decoder.feed(chunk)
                self.samples.append(time.monotonic() - t0)
            except (OSError, ValueError) as exc:  # timeout, reset, undecodable reply
                self.failures += 1
                self.samples.append(max(time.monotonic() - t0, self.timeout if isinstance(exc, TimeoutError) else 0.0))
                if sock is not None:
                    sock.close()
                    sock = None
                self._stop.wait(0.05)
            self._stop.wait(self.interval)
        if sock is not None:
            sock.close()


async def invoke_once(
    addr: str, code: int, ext_fields: dict[str, Any] | None = None, body: bytes | None = None, timeout: float = 10.0
) -> Any:
    """One request to ``addr`` on a fresh connection, closed afterwards: the answer
    (RemotingCommand); raises as ``RemotingClient.invoke`` does. ``timeout`` defaults to 10 s."""
    from rmq.protocol.command import RemotingCommand
    from rmq.remoting import RemotingClient

    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, ext_fields, body), timeout=timeout)
    finally:
        await client.close()


__all__ += ["invoke_once"]


def __getattr__(name: str) -> Any:
    """``EtcdProcess`` and ``ControllerProcess`` live in their own modules (which import this
    one); reached as attributes of the package all the same."""
    if name == "EtcdProcess":
        from rmq._testing.etcd import EtcdProcess

        return EtcdProcess
    if name == "ControllerProcess":
        from rmq._testing.controller import ControllerProcess

        return ControllerProcess
    raise AttributeError(f"module 'rmq._testing' has no attribute {name!r}")


__all__ += ["ControllerProcess", "EtcdProcess"]


def skip_or_fail(reason: str) -> None:
    """A test whose machine lacks what it needs (etcd, network namespaces, a tmpfs, Java for
    Spark): skipped with ``reason`` printed on a developer's machine, but a failure where
    ``RMQ_REQUIRE_ALL`` is set — `.ci/run` sets it, because `make test` installs everything
    these tests need and a skip there would hide that a suite never ran."""
    import pytest

    if os.environ.get("RMQ_REQUIRE_ALL"):
        pytest.fail(f"{reason} (RMQ_REQUIRE_ALL is set: `make test` should have provided it)", pytrace=False)
    pytest.skip(reason)


__all__ += ["skip_or_fail"]
