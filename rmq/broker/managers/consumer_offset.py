"""ConsumerOffsetManager: each group's committed offset per topic queue.

Keyed ``"topic@group" -> {queue_id: offset}`` like Java. Commits arrive by
UPDATE_CONSUMER_OFFSET and with pulls (commitOffset flag); they only touch memory, and the
broker's ConfigPersister writes the table every ``flushConsumerOffsetInterval`` (5 s) when it
changed and at shutdown, so a crash loses at most 5 s of commits (consumers then re-receive a
few messages, which at-least-once delivery allows).

The processors only commit for an existing topic, a queue id within its queue count and a
known group (Java ConsumerManageProcessor.updateConsumerOffset), and the table holds at most
``max_keys`` topic@group pairs (BrokerConfig ``maxConsumerOffsetKeys``): no client can grow
it, or its file, without limit.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq.broker.managers.config_store import ConfigManager
from rmq.common.log import RateLimitedLog

log = logging.getLogger("rmq.broker")
_rl = RateLimitedLog(log)

TOPIC_GROUP_SEPARATOR = "@"
#: topic@group pairs kept at most (BrokerConfig ``maxConsumerOffsetKeys``).
DEFAULT_MAX_KEYS = 100_000
_INT64_MAX = (1 << 63) - 1


class ConsumerOffsetManager(ConfigManager):
    """``"topic@group" -> {queue_id: offset}``, persisted.

    Args:
        config_dir: where ``consumerOffset.msgpack`` lives.
        max_keys: topic@group pairs kept at most; a commit that would add one more is
            refused (100 000).
    """

    file_name = "consumerOffset.msgpack"

    def __init__(self, config_dir: str, max_keys: int = DEFAULT_MAX_KEYS):
        super().__init__(config_dir)
        self.offset_table: dict[str, dict[int, int]] = {}
        self.max_keys = max_keys

    def encode(self) -> object:
        return {"offsetTable": self.offset_table}

    def decode(self, obj: Any) -> None:
        for key, queues in obj.get("offsetTable", {}).items():
            self.offset_table[key] = {int(q): int(o) for q, o in queues.items()}

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Store a group's offset. Negative offsets are ignored (ONS commits -1 for a queue
        it never consumed) and so is anything outside int64; False when the table is full
        (``max_keys``) and the pair is new."""
        if offset < 0 or offset > _INT64_MAX or queue_id < 0:
            return True
        key = topic + TOPIC_GROUP_SEPARATOR + group
        queues = self.offset_table.get(key)
        if queues is None:
            if len(self.offset_table) >= self.max_keys:
                _rl.warning(
                    "offset-table-full",
                    "consumer offset table full (%d topic@group pairs, maxConsumerOffsetKeys): commit from %s refused",
                    len(self.offset_table),
                    client_host,
                )
                return False
            queues = self.offset_table[key] = {}
        queues[queue_id] = offset
        self.dirty = True
        return True

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group has none for this queue."""
        queues = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}))

    def which_topic_by_consumer(self, group: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            topic, _, g = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if g == group:
                out.add(topic)
        return out

    def which_group_by_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            t, _, g = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if t == topic:
                out.add(g)
        return out

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.offset_table if k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self.offset_table[key]
            self.dirty = True

    def remove_offset(self, group: str) -> int:
        """Drop every ``topic@group`` entry of ``group`` (Java ``removeOffset``, used by
        DELETE_SUBSCRIPTIONGROUP with removeOffset); returns how many topics it had."""
        keys = [k for k in self.offset_table if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]
        for key in keys:
            del self.offset_table[key]
        if keys:
            self.dirty = True
            _rl.info("offsets-removed", "removed the offsets of group %s (%d topics)", group, len(keys))
        return len(keys)
