"""Fixtures for the SDK tests: a real name server + broker in-process on ephemeral ports."""

from __future__ import annotations

import itertools
import logging

import pytest

from rmq._testing import run_standalone

_seq = itertools.count()


@pytest.fixture
async def cluster(tmp_path):
    """(namesrv, broker) started in this test's loop with a fresh store."""
    async with run_standalone(tmp_path / "store") as (ns, broker):
        yield ns, broker


@pytest.fixture
def namesrv_addr(cluster) -> str:
    ns, _ = cluster
    return f"127.0.0.1:{ns.port}"


@pytest.fixture
def unique():
    """unique('T') → 'T_<n>' so tests never share topics or groups."""
    return lambda prefix: f"{prefix}_{next(_seq)}"


@pytest.fixture(autouse=True)
def _client_logs(caplog):
    caplog.set_level(logging.INFO, logger="rmq.client")
