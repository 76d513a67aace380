"""Consumer groups and connections: progress, connections, status, offset resets (Java
``DefaultMQAdminExt`` examineConsumeStats, examineConsumerConnectionInfo,
examineProducerConnectionInfo, resetOffsetByTimestamp, getConsumeStatus)."""
from __future__ import annotations

from ._base import AdminBase


class ConsumerAdmin(AdminBase):
    """Consumer and connection operations of :class:`rmq.client.admin.Admin`."""
