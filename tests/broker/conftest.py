"""Fixtures for the broker's protocol tests: a real name server + broker on ephemeral ports."""
import pytest
from broker_support import Env

from rmq._testing import run_standalone
from rmq.remoting.client import RemotingClient


@pytest.fixture
async def env(tmp_path):
    async with run_standalone(tmp_path / "store") as (ns, broker):
        client = RemotingClient()
        try:
            yield Env(ns, broker, client)
        finally:
            await client.close()


