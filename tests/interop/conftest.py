"""Fixtures of the interop tests: the real clients (installed once per machine) and a real
``rmq standalone`` process on free 127.0.0.1 ports with a temporary store."""
import asyncio
import sys
import uuid
from pathlib import Path

import pytest

import interop_support as support

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import _common as bench_common  # noqa: E402  (Standalone launcher and protocol helpers, shared with `make bench`)

_install_report: list[str] = []


@pytest.fixture(scope="session")
def real_clients() -> support.Clients:
    """The C++ client's virtualenv and ali-ons' node_modules; installs them on first use."""
    try:
        clients = support.ensure_clients()
    except support.InstallError as exc:
        pytest.fail(f"installing the real RocketMQ clients failed (not skipping: interop is required):\n{exc}",
                    pytrace=False)
    if clients.install_seconds:
        _install_report.append(f"rmq interop: cold install of the real clients into {support.cache_dir()}: "
                               + ", ".join(f"{k} {v:.1f}s" for k, v in clients.install_seconds.items()))
    return clients


def pytest_terminal_summary(terminalreporter):
    for line in _install_report:
        terminalreporter.write_line(line)


class Broker:
    """A running ``rmq standalone``; ``namesrv`` is what clients are pointed at."""

    def __init__(self, standalone: bench_common.Standalone):
        self.standalone = standalone
        self.namesrv = standalone.namesrv_addr
        self.broker_addr = standalone.broker_addr

    def check_alive(self) -> None:
        if self.standalone.proc.poll() is not None:
            pytest.fail(f"rmq standalone died (exit {self.standalone.proc.returncode}):\n"
                        f"{self.standalone.log_tail(60)}", pytrace=False)

    def log_tail(self, lines: int = 60) -> str:
        return self.standalone.log_tail(lines)

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """UPDATE_AND_CREATE_TOPIC through the protocol (ali-ons has no TBW102 fallback)."""
        from rmq.remoting.client import RemotingClient

        async def go():
            client = RemotingClient([self.namesrv])
            try:
                await bench_common.ensure_topic(client, topic, queues)
            finally:
                await client.close()

        asyncio.run(go())


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    standalone = bench_common.Standalone(store_dir=str(tmp_path_factory.mktemp("rmq-standalone")))
    try:
        asyncio.run(standalone.start())
    except bench_common.BenchError as exc:
        pytest.fail(f"rmq standalone did not start: {exc}", pytrace=False)
    yield Broker(standalone)
    rc = standalone.stop()
    print(f"rmq standalone stopped with exit code {rc}")


@pytest.fixture
def names():
    """Fresh topic/group names and a body marker for one test."""
    tag = uuid.uuid4().hex[:8]

    class Names:
        marker = f"m{tag}:"
        topic = f"Interop_{tag}"
        group = f"GID_interop_{tag}"
        producer_group = f"PID_interop_{tag}"

    return Names
