"""Fixtures of the interop tests: the real clients (installed once per machine) and a real
``rmq standalone`` process on free 127.0.0.1 ports with a temporary store."""

import uuid
from pathlib import Path

import interop_support as support
import pytest
from interop_broker import Broker

from rmq._testing import StandaloneProcess

REPO = Path(__file__).resolve().parents[2]

_install_report: list[str] = []


@pytest.fixture(scope="session")
def real_clients() -> support.Clients:
    """The C++ client's virtualenv and ali-ons' node_modules; installs them on first use."""
    try:
        clients = support.ensure_clients()
    except support.InstallError as exc:
        pytest.fail(
            f"installing the real RocketMQ clients failed (not skipping: interop is required):\n{exc}", pytrace=False
        )
    if clients.install_seconds:
        _install_report.append(
            f"rmq interop: cold install of the real clients into {support.cache_dir()}: "
            + ", ".join(f"{k} {v:.1f}s" for k, v in clients.install_seconds.items())
        )
    return clients


def pytest_terminal_summary(terminalreporter):
    for line in _install_report:
        terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = StandaloneProcess(tmp_path_factory.mktemp("rmq-standalone") / "store")
    try:
        proc.start()
    except RuntimeError as exc:
        pytest.fail(f"rmq standalone did not start: {exc}", pytrace=False)
    try:
        b = Broker(proc)
        b.wait_registered()
        yield b
    finally:
        rc = proc.stop()
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
