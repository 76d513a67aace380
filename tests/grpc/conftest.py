"""Fixtures of the gRPC endpoint tests: the unmodified PyPI 5.x client in its own venv and
``rmq standalone`` subprocesses serving gRPC on a free port."""

from __future__ import annotations

import os
from pathlib import Path

import interop_support as support
import pytest
from grpc_support import start_grpc_broker


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
