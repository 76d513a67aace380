"""Finding and reading messages: by key, unique key, message id and offset (Java
``DefaultMQAdminExt`` queryMessage, viewMessage, queryTopicConsumeByWho)."""
from __future__ import annotations

from ._base import AdminBase


class MessageAdmin(AdminBase):
    """Message lookups of :class:`rmq.client.admin.Admin`."""
