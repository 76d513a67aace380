"""Bodies of the message lookups (Java ``org.apache.rocketmq.common.protocol.body.GroupList``):
QUERY_TOPIC_CONSUME_BY_WHO (300) answers ``{"groupList": [...]}``."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from rmq.remoting.body import json_object

__all__ = ["GroupList"]


@dataclass
class GroupList:
    """Java ``GroupList``: a set of consumer group names (sorted here, so replies are stable)."""

    group_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return json.dumps({"groupList": sorted(set(self.group_list))}, separators=(",", ":"),
                          ensure_ascii=False).encode()

    @classmethod
    def decode(cls, body: bytes | None) -> GroupList:
        """Raises ValueError when ``body`` is not a GroupList."""
        groups = json_object(body, "GroupList").get("groupList")
        if groups is None:
            groups = []
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ValueError("GroupList body: groupList must be a list of names")
        return cls(list(groups))
