"""Fixtures for the broker's protocol tests: a real name server + broker on ephemeral ports."""

import pytest

from rmq._testing import broker_env


@pytest.fixture
async def env(tmp_path):
    async with broker_env(tmp_path / "store") as e:
        yield e
