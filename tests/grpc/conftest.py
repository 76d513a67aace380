"""Fixtures of the gRPC endpoint tests: the unmodified PyPI 5.x client in its own venv and
``rmq standalone`` subprocesses serving gRPC on a free port."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import interop_support as support
import pytest
from grpc_support import create_topic

from rmq._testing import StandaloneProcess, free_port


@pytest.fixture(scope="session")
def v5_python() -> Path:
    """The Python of the venv with ``rocketmq-python-client==5.1.2`` (installed on first use;
    the tests skip only when PyPI cannot be reached)."""
    try:
        return support.ensure_v5_client()
    except support.RegistryUnreachable as exc:
        pytest.skip(f"the 5.x client cannot be installed: {exc}")
    except support.InstallError as exc:
        pytest.fail(f"installing the 5.x client failed:\n{exc}", pytrace=False)


class GrpcBroker:
    """A running ``rmq standalone`` with its gRPC endpoint."""

    def __init__(self, proc: StandaloneProcess, grpc_port: int) -> None:
        self.proc = proc
        self.grpc_port = grpc_port
        self.endpoints = f"127.0.0.1:{grpc_port}"
        self.namesrv = proc.namesrv_addr
        self.broker_addr = proc.broker_addr

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.proc.log_text().splitlines()[-lines:])

    def create_topic(self, topic: str, queues: int = 4, rc=None) -> None:
        asyncio.run(create_topic(self.broker_addr, topic, queues, rc=rc))


def start_grpc_broker(store: Path, extra: list[str] = ()) -> tuple[StandaloneProcess, GrpcBroker]:
    port = free_port()
    proc = StandaloneProcess(
        store,
        extra_args=[
            f"--grpcServerPort={port}",
            # the recovery check comes 1 s after an unresolved half message, not 6 s / 60 s
            "--transactionTimeOut=1000",
            "--transactionCheckInterval=500",
            *extra,
        ],
    )
    try:
        proc.start()
    except RuntimeError as exc:
        pytest.fail(f"rmq standalone did not start: {exc}", pytrace=False)
    if f"listening on 127.0.0.1:{port}" not in proc.log_text():
        proc.stop()
        pytest.fail(f"the gRPC endpoint did not start on {port}:\n{proc.log_text()[-3000:]}", pytrace=False)
    return proc, GrpcBroker(proc, port)


@pytest.fixture(scope="module")
def grpc_broker(tmp_path_factory):
    proc, broker = start_grpc_broker(tmp_path_factory.mktemp("rmq-grpc") / "store")
    try:
        yield broker
    finally:
        print(f"rmq standalone stopped with exit code {proc.stop()}")


@pytest.fixture
def workdir(tmp_path) -> Path:
    os.makedirs(tmp_path, exist_ok=True)
    return tmp_path
