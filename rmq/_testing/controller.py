"""``rmq controller`` as a separate process for the controller tests: started the way an operator
starts it, so a test can ``kill -9`` it, stop it with SIGSTOP and wake it with SIGCONT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from rmq._testing import free_port, terminate, wait_for_port, wait_until_sync

__all__ = ["ControllerProcess"]


class ControllerProcess:
    """``python -m rmq controller --etcd <endpoint> --listen-port <port> --key=value...``; the log
    in ``<directory>/controller.log``. The port is fixed at construction (a restart comes back
    at the same address).

    Args:
        directory: for the log (created).
        etcd: etcd client URL(s).
        props: more properties (``scanNotActiveBrokerInterval=200``, ``etcdLeaseTtlSeconds=2``...).
    """

    def __init__(self, directory: Path, etcd: str, **props: object) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.etcd = etcd
        self.port = free_port()
        self.props = props
        self.log_path = self.dir / "controller.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "rmq",
            "controller",
            "--etcd",
            self.etcd,
            "--listen-port",
            str(self.port),
            *(f"--{k}={v}" for k, v in self.props.items()),
        ]

    def log_text(self, start: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self, timeout: float = 30.0) -> ControllerProcess:
        """Start; return once this run logged that it listens and the port accepts."""
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(os.environ)
            )
        proc = self.proc

        def listening() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"rmq controller exited with {proc.returncode}:\n{self.log_text()[-3000:]}")
            return "rmq controller listening" in self.log_text(self._log_start) and wait_for_port(
                "127.0.0.1", self.port, 0.5
            )

        try:
            wait_until_sync(listening, timeout, interval=0.05, what="rmq controller listening")
        except AssertionError:
            self.kill()
            raise RuntimeError(f"rmq controller did not start within {timeout}s:\n{self.log_text()[-3000:]}") from None
        return self

    def run_log(self) -> str:
        """The log of this run only."""
        return self.log_text(self._log_start)

    def pause(self) -> None:
        """SIGSTOP: the process stops, its sockets stay open (a zombie leader)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """``kill -9``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (the controller resigns) and wait; SIGKILL after ``timeout``."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        return terminate(self.proc, timeout)

    def __enter__(self) -> ControllerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
