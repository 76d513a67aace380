"""Broker configuration and statistics: brokerStatus, brokerConsumeStats, getBrokerConfig,
updateBrokerConfig, statsAll (Java ``tools/command/broker``, ``stats``)."""
from __future__ import annotations
