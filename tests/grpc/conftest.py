"""Fixtures of the gRPC endpoint tests: the unmodified PyPI 5.x client in its own venv, and
``rmq standalone`` alone or with a second broker, serving gRPC on free ports."""

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


@pytest.fixture(scope="session", params=["standalone", "cluster"])
def grpc_target(request, tmp_path_factory):
    """What the 5.x client suite runs against, given to the client as ONE endpoint: ``rmq
    standalone`` (broker-a), and again a two-broker cluster: the standalone plus ``rmq broker``
    broker-b on its name server, each serving gRPC on its own port (docs/design.md, gRPC
    endpoint: a cluster). Session scoped, so each is started once for every module using it."""
    workdir = tmp_path_factory.mktemp(f"rmq-grpc-{request.param}")
    _, target = start_grpc_broker(workdir / "store-a")
    try:
        if request.param == "cluster":
            target.add_peer(workdir / "broker-b", "broker-b")
        yield target
    finally:
        print(f"rmq standalone stopped with exit code {target.stop()}")


@pytest.fixture
def workdir(tmp_path) -> Path:
    os.makedirs(tmp_path, exist_ok=True)
    return tmp_path


@pytest.fixture(scope="session")
def clients_4x() -> support.Clients:
    """The 4.x clients of tests/interop (PyPI ``rocketmq==0.4.4`` over the Apache C++ core, npm
    ``ali-ons``), installed on first use; a failed install fails the test, as there."""
    try:
        return support.ensure_clients()
    except support.InstallError as exc:
        pytest.fail(f"installing the 4.x clients failed:\n{exc}", pytrace=False)
