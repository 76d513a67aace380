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

Everything binds 127.0.0.1 only.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from typing import AsyncIterator

__all__ = [
    "StandaloneProcess",
    "free_port",
    "run_broker",
    "run_namesrv",
    "run_standalone",
    "wait_for_port",
]


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (bind to 0, read it, close). Racy by nature; the
    subprocess helper retries on a clash."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float = 10.0) -> bool:
    """True once something accepts TCP connections on ``host:port`` (polls every 50 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@contextlib.asynccontextmanager
async def run_namesrv(**config) -> AsyncIterator["object"]:
    """A started ``NamesrvController`` on 127.0.0.1:0 (``config``: ``NamesrvConfig`` fields)."""
    from rmq.config import NamesrvConfig
    from rmq.namesrv.controller import NamesrvController

    cfg = NamesrvConfig(listen_host="127.0.0.1", listen_port=0)
    for k, v in config.items():
        setattr(cfg, k, v)
    ctl = NamesrvController(cfg)
    await ctl.start()
    try:
        yield ctl
    finally:
        await ctl.shutdown()


def make_broker_configs(store_dir, namesrv=None, **overrides):
    """``(BrokerConfig, StoreConfig)`` for a test broker: port 0, small CommitLog files (4 MiB)
    so tests do not map 1 GiB, ``overrides`` given as snake_case fields of either."""
    from rmq.config import BrokerConfig
    from rmq.store import StoreConfig

    bc = BrokerConfig(listen_host="127.0.0.1", listen_port=0, broker_ip1="127.0.0.1")
    sc = StoreConfig(store_path_root_dir=str(store_dir))
    sc.mapped_file_size_commitlog = 4 * 1024 * 1024
    sc.mapped_file_size_consume_queue = 3000 * 20
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
async def run_broker(store_dir, namesrv=None, **overrides) -> AsyncIterator["object"]:
    """A started ``BrokerController`` on 127.0.0.1:0 with its store in ``store_dir``.

    Args:
        store_dir: the store root (reuse it to test a restart).
        namesrv: a NamesrvController or ``"host:port"`` to register with (default none).
        overrides: snake_case ``BrokerConfig`` / ``StoreConfig`` fields.
    """
    from rmq.broker.controller import BrokerController

    bc, sc = make_broker_configs(store_dir, namesrv, **overrides)
    broker = BrokerController(bc, sc)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.shutdown()


@contextlib.asynccontextmanager
async def run_standalone(store_dir, **overrides) -> AsyncIterator[tuple["object", "object"]]:
    """A name server and a broker registered with it: yields ``(namesrv, broker)``."""
    async with run_namesrv() as ns:
        async with run_broker(store_dir, namesrv=ns, **overrides) as broker:
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

    Attributes:
        namesrv_addr / broker_addr: ``"127.0.0.1:<port>"`` once started.
        pid: the daemon's pid (e.g. for CPU accounting from /proc/<pid>/stat).
        returncode: exit status after ``stop()``.

    Use as a context manager (``with StandaloneProcess(d) as p:``) or call ``start()`` and
    ``stop()``; ``stop()`` sends SIGTERM, waits up to ``timeout`` seconds (then SIGKILL) and
    returns the exit status (0 on a clean stop).
    """

    def __init__(self, store_dir, extra_args=(), namesrv_port: int | None = None, broker_port: int | None = None,
                 start_timeout: float = 20.0, env: dict | None = None, name: str = "rmq-standalone"):
        self.store_dir = os.path.abspath(str(store_dir))
        self.extra_args = list(extra_args)
        self._fixed_ports = (namesrv_port, broker_port)
        self.start_timeout = start_timeout
        self.env = env
        self.log_path = os.path.join(os.path.dirname(self.store_dir), f"{name}-{os.getpid()}-{id(self):x}.log")
        self.proc: subprocess.Popen | None = None
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

    def log_text(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "rmq", "standalone",
            "--namesrv-port", str(self.namesrv_port),
            "--broker-port", str(self.broker_port),
            "--store-dir", self.store_dir,
            *self.extra_args,
        ]

    def start(self) -> "StandaloneProcess":
        os.makedirs(self.store_dir, exist_ok=True)
        attempts = 1 if all(self._fixed_ports) else 3
        last = ""
        for _ in range(attempts):
            self.namesrv_port = self._fixed_ports[0] or free_port()
            self.broker_port = self._fixed_ports[1] or free_port()
            while self.broker_port == self.namesrv_port:
                self.broker_port = free_port()
            env = dict(os.environ)
            env.update(self.env or {})
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                             stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if "rmq standalone listening" in self.log_text() and wait_for_port("127.0.0.1", self.broker_port, 1.0):
                    return self
                time.sleep(0.05)
            last = self.log_text()[-2000:]
            if self.proc.poll() is None:
                self.stop()
                raise RuntimeError(f"rmq standalone did not start listening within {self.start_timeout}s:\n{last}")
            self.returncode = self.proc.returncode
            if self.returncode != 3:  # 3 = port taken: retry with new ports
                break
        raise RuntimeError(f"rmq standalone exited with status {self.returncode}:\n{last}")

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit status."""
        if self.proc is None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        return self.returncode

    def __enter__(self) -> "StandaloneProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
