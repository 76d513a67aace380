"""ConsumerOffsetManager: each group's committed offset per topic queue.

Keyed ``"topic@group" -> {queue_id: offset}`` like Java. Commits arrive by
UPDATE_CONSUMER_OFFSET and with pulls (commitOffset flag); they only touch memory, and the
controller persists the table every ``flushConsumerOffsetInterval`` (5 s) and at shutdown, so
a crash loses at most 5 s of commits (consumers then re-receive a few messages, which
at-least-once delivery allows).
"""
from __future__ import annotations

import logging

from rmq.broker.managers.config_store import ConfigManager

log = logging.getLogger("rmq.broker")

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(ConfigManager):
    file_name = "consumerOffset.msgpack"

    def __init__(self, config_dir: str):
        super().__init__(config_dir)
        self.offset_table: dict[str, dict[int, int]] = {}
        self.dirty = False

    def encode(self) -> object:
        return {"offsetTable": self.offset_table}

    def decode(self, obj) -> None:
        for key, queues in obj.get("offsetTable", {}).items():
            self.offset_table[key] = {int(q): int(o) for q, o in queues.items()}

    def persist(self) -> None:
        super().persist()
        self.dirty = False

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store a group's offset; negative offsets are ignored (ONS sends -1, §8)."""
        if offset < 0:
            return
        key = topic + TOPIC_GROUP_SEPARATOR + group
        queues = self.offset_table.get(key)
        if queues is None:
            queues = self.offset_table[key] = {}
        queues[queue_id] = offset
        self.dirty = True

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
