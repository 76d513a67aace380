"""Name-server configuration, broker write permission, KV config and store maintenance (Java
``DefaultMQAdminExt`` getNameServerConfig, wipeWritePermOfBroker, cleanExpiredConsumerQueue,
deleteExpiredCommitLog, queryConsumeQueue, deleteSubscriptionGroup)."""
from __future__ import annotations

from ._base import AdminBase


class OpsAdmin(AdminBase):
    """Operations of :class:`rmq.client.admin.Admin` on name servers and brokers' stores."""
