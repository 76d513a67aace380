"""Fixtures of the message-semantics tests: a real name server + broker on ephemeral 127.0.0.1
ports. Most tests use short delay levels (``SHORT_LEVELS``) so retries come back within a second
or two; the one test of Java's real level 2 (5 s) uses the default.
"""

import pytest
from semantics_support import SHORT_LEVELS

from rmq._testing import broker_env


@pytest.fixture
async def wire(tmp_path):
    """A standalone with short delay levels and fast transaction checks, and a raw client."""
    async with broker_env(
        tmp_path / "store",
        message_delay_level=SHORT_LEVELS,
        transaction_time_out=600,
        transaction_check_interval=300,
        transaction_check_max=3,
    ) as w:
        yield w
