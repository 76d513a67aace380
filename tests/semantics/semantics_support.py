"""Helpers of the message-semantics tests: raw requests to a real broker over TCP.

The environment is ``rmq._testing.BrokerEnv`` (``Wire`` is its old name here); ``wait_for`` is
``rmq._testing.wait_until``.
"""

from rmq._testing import BrokerEnv, phy_offset, wait_until

# level:   1    2    3    4    5    6 ...  (index = level - 1)
SHORT_LEVELS = "1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s"

Wire = BrokerEnv
wait_for = wait_until

__all__ = ["SHORT_LEVELS", "Wire", "phy_offset", "wait_for"]
