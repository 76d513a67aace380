import pytest

from rmq.remoting import client, connection, dispatcher, server


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Each test sees the first log line of every kind: forget what earlier tests logged."""
    for module in (client, connection, dispatcher, server):
        module._rlog._state.clear()
    yield
