"""Brokers as separate processes for the master/slave tests and benchmarks: ``rmq broker -c
broker.conf``, as the README tells an operator to run them, so a test can ``kill -9`` one."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from rmq._testing import free_broker_port, read_log, terminate, wait_for_port, wait_until_sync

__all__ = ["BrokerProcess"]


class BrokerProcess:
    """``python -m rmq broker -c <dir>/broker.conf``; the store in ``<dir>/store``, the log in
    ``<dir>/broker.log``. The listen port is fixed at construction, so a restart (``start()``
    again) comes back at the same address, as a real broker does.

    Args:
        directory: the broker's directory (created).
        namesrv_addr: ``host:port`` of the name server.
        host: the address it listens on, registers and is reached at (default 127.0.0.1).
        netns: a network namespace to run it in (``ip netns exec``; default None: this
            process's), as ``rmq._testing.faults.Network`` gives each node one.
        props: more broker.conf properties (``brokerId``, ``brokerRole``, ...).
    """

    def __init__(
        self, directory: Path, namesrv_addr: str, *, host: str = "127.0.0.1", netns: str | None = None, **props: object
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.netns = netns
        self.port = free_broker_port()
        self.conf = self.dir / "broker.conf"
        base: dict[str, object] = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": 0,
            "brokerRole": "ASYNC_MASTER",
            "namesrvAddr": namesrv_addr,
            "listenPort": self.port,
            "brokerIP1": host,
            "storePathRootDir": str(self.dir / "store"),
            "mappedFileSizeCommitLog": 4 * 1024 * 1024,
            "mappedFileSizeConsumeQueue": 60_000,
            "maxHashSlotNum": 20_000,
            "maxIndexNum": 80_000,
        }
        if host != "127.0.0.1":  # (the defaults already say 127.0.0.1)
            base.update(listenHost=host, brokerIP2=host)
        base.update(props)
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in base.items()))
        self.log_path = self.dir / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    def argv_prefix(self) -> list[str]:
        """What runs the command in its namespace: ``ip netns exec <netns>``, which enters it
        and then execs the command (so ``proc.pid`` is the broker's own pid), or nothing."""
        return ["ip", "netns", "exec", self.netns] if self.netns else []

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def log_text(self, start: int = 0) -> str:
        """The log from byte ``start`` (every run of this broker appends to it)."""
        return read_log(self.log_path, start)

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        """Start and return once this run logged "rmq broker ... listening" (the broker is ready
        and registered) and its port accepts connections."""
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*self.argv_prefix(), sys.executable, "-m", "rmq", "broker", "-c", str(self.conf)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(os.environ),
            )
        proc = self.proc

        def listening() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"rmq broker exited with {proc.returncode}:\n{self.log_text()[-3000:]}")
            return "rmq broker" in self.log_text(self._log_start) and wait_for_port(self.host, self.port, 0.5)

        try:
            wait_until_sync(listening, timeout, interval=0.05, what="rmq broker listening")
        except AssertionError:
            self.kill()
            raise RuntimeError(f"rmq broker did not start within {timeout}s:\n{self.log_text()[-3000:]}") from None
        return self

    async def astart(self, timeout: float = 30.0) -> BrokerProcess:
        """:meth:`start` in a thread, so the caller's event loop (an in-process name server
        answering the broker's registration) keeps running meanwhile."""
        return await asyncio.to_thread(self.start, timeout)

    def kill(self) -> None:
        """``kill -9``: no shutdown, no unregistration, no flush."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (a clean shutdown) and wait; SIGKILL after ``timeout``."""
        if self.proc is None:
            return None
        return terminate(self.proc, timeout)
