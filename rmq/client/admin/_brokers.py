"""Broker configuration and statistics (Java ``DefaultMQAdminExt`` getBrokerConfig,
updateBrokerConfig, fetchBrokerRuntimeStats, viewBrokerStatsData, fetchConsumeStatsInBroker)."""
from __future__ import annotations

from ._base import AdminBase


class BrokerAdmin(AdminBase):
    """Broker configuration and statistics of :class:`rmq.client.admin.Admin`."""
