"""Fixtures of the controller tests: a real etcd (Debian's etcd-server, which ``make test``
installs) and real ``rmq controller`` processes on it, with short timeouts so failovers take
seconds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq._testing import skip_or_fail
from rmq._testing.controller import ControllerProcess
from rmq._testing.etcd import EtcdProcess, etcd_missing

#: Lease 2 s (etcd's minimum is about 1.5 s here), heartbeats dead after 1 s, a scan every 100 ms.
FAST = {
    "etcdLeaseTtlSeconds": 2,
    "etcdTimeoutMs": 1000,
    "scanNotActiveBrokerInterval": 100,
    "controllerHeartBeatTimeoutMills": 1000,
}


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    why = etcd_missing()
    if why is not None:
        skip_or_fail(why)
    e = EtcdProcess(tmp_path / "etcd").start()
    try:
        yield e
    finally:
        e.kill()


@pytest.fixture
def start_controller(tmp_path: Path, etcd: EtcdProcess) -> Iterator[Callable[..., ControllerProcess]]:
    """``start_controller(**props)``: one more controller on the test's etcd (FAST settings)."""
    started: list[ControllerProcess] = []

    def start(**props: object) -> ControllerProcess:
        c = ControllerProcess(tmp_path / f"controller{len(started)}", etcd.endpoint, **{**FAST, **props})
        started.append(c)
        return c.start()

    try:
        yield start
    finally:
        for c in started:
            c.kill()
