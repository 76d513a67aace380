"""A real etcd for the controller tests: Debian's ``/usr/bin/etcd`` (package ``etcd-server``,
which ``make test`` installs) as a one-member cluster on free loopback ports in a directory of
the test's, so a test can stop it, ``kill -9`` it and start it again on the same ports and data."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

from rmq._testing import free_port, terminate, wait_until_sync

__all__ = ["ETCD", "EtcdProcess", "etcd_missing"]

#: Where Debian's etcd-server puts the daemon (override with $RMQ_ETCD).
ETCD = os.environ.get("RMQ_ETCD", "/usr/bin/etcd")


def etcd_missing() -> str | None:
    """Why no etcd can be started here (for a skip reason), or None."""
    if os.path.exists(ETCD) or shutil.which(ETCD):
        return None
    return f"{ETCD} not found: install Debian's etcd-server (make test does: apt-get install etcd-server)"


class EtcdProcess:
    """``etcd`` with its data in ``<directory>/data`` and its log in ``<directory>/etcd.log``.

    Args:
        directory: created if needed.
        name: the member name (default ``rmq-test``).
    """

    def __init__(self, directory: Path, name: str = "rmq-test") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.client_port = free_port()
        self.peer_port = free_port()
        while self.peer_port == self.client_port:
            self.peer_port = free_port()
        self.log_path = self.dir / "etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<client port>``: what ``rmq controller --etcd`` takes."""
        return f"http://127.0.0.1:{self.client_port}"

    def command(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [
            ETCD,
            "--name",
            self.name,
            "--data-dir",
            str(self.dir / "data"),
            "--listen-client-urls",
            self.endpoint,
            "--advertise-client-urls",
            self.endpoint,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"{self.name}={peer}",
            # a short election tick: a restarted member leads (and serves) sooner
            "--heartbeat-interval",
            "50",
            "--election-timeout",
            "500",
        ]

    def healthy(self) -> bool:
        """True when the member answers a linearizable read (``/health``)."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def start(self, timeout: float = 30.0) -> EtcdProcess:
        """Start and return once it is healthy."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir
            )
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {proc.returncode}:\n{self.log_text()[-3000:]}")
            return self.healthy()

        try:
            wait_until_sync(up, timeout, interval=0.05, what="etcd healthy")
        except AssertionError:
            self.kill()
            raise RuntimeError(f"etcd did not start within {timeout}s:\n{self.log_text()[-3000:]}") from None
        return self

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``)."""
        if self.proc is None:
            return None
        return terminate(self.proc, timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> EtcdProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
