"""TopicConfigManager: the broker's topics, their queue counts and permissions (persisted).

Java's ``TopicConfigManager`` seeds a handful of system topics, of which ``TBW102`` matters to
clients: it is the template for topics created on first send (``autoCreateTopicEnable``), and
the C++ producer falls back to its route when its own topic has none.
Every change bumps ``data_version``; the name-server registration carries it so name servers
can skip unchanged tables.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rmq.broker.managers.config_store import ConfigManager
from rmq.common.constants import PermName, TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.common.topic_attributes import TopicMessageType, message_type_of_attributes, type_code

log = logging.getLogger("rmq.broker")
_rl = RateLimitedLog(log)


AUTO_CREATE_TOPIC_KEY_TOPIC = TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
SCHEDULE_TOPIC_QUEUE_NUM = 18  # one queue per delay level (1s … 2h)
#: queues of one topic at most (Java has no cap; one topic's queue count sizes replies such as
#: GET_TOPIC_STATS_INFO and the name server's routes). BrokerConfig ``maxTopicQueueNums``.
DEFAULT_MAX_TOPIC_QUEUE_NUMS = 1024


@dataclass(slots=True)
class TopicConfig:
    """One topic on this broker (Java ``TopicConfig``; JSON names on the wire).

    ``attributes`` are Java 5's topic attributes (``{"message.type": "FIFO"}``,
    rmq.common.topic_attributes); change them only by building a new TopicConfig or through
    :meth:`set_attributes`, which keeps ``type_code`` (the byte the SEND fast path reads: 0
    for a topic without ``message.type``) in step.
    """

    #: read at their slot offsets by the SEND fast path at every SEND
    #: (SendGate, rmq/broker/processors/_sendpath.pyx; rmq/common/slots.pxd)
    __native_slots__ = ("perm", "write_queue_nums", "read_queue_nums", "type_code")

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    type_code: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.type_code = type_code(message_type_of_attributes(self.attributes))

    def set_attributes(self, attributes: dict[str, str]) -> None:
        """Replace the attributes (and the fast path's type byte)."""
        self.attributes = attributes
        self.type_code = type_code(message_type_of_attributes(attributes))

    @property
    def message_type(self) -> TopicMessageType:
        """The topic's message type (Java 5 ``TopicConfig.getTopicMessageType``: NORMAL when
        ``message.type`` is not set)."""
        return message_type_of_attributes(self.attributes) or TopicMessageType.NORMAL

    @property
    def declared_message_type(self) -> TopicMessageType | None:
        """The ``message.type`` attribute, None when the topic has none (sends to such a topic
        are not type-checked)."""
        return message_type_of_attributes(self.attributes)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }
        # Java 5 writes "attributes" with every topic; an untyped topic leaves it out here so
        # that 4.9.8's bytes stay as they were (Java 5's reader defaults it to an empty map).
        if self.attributes:
            d["attributes"] = dict(self.attributes)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicConfig:
        raw = d.get("attributes") or {}
        if not isinstance(raw, dict):
            raise ValueError(f"topic {d.get('topicName')!r}: attributes is not an object")
        return cls(
            topic_name=str(d["topicName"]),
            read_queue_nums=int(d.get("readQueueNums", 16)),
            write_queue_nums=int(d.get("writeQueueNums", 16)),
            perm=int(d.get("perm", 6)),
            topic_filter_type=str(d.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(d.get("topicSysFlag", 0)),
            order=bool(d.get("order", False)),
            attributes={str(k): str(v) for k, v in raw.items()},
        )


@dataclass(slots=True)
class DataVersion:
    """Java ``DataVersion``: a timestamp and a counter bumped on every change, and (Java 5) a
    ``stateVersion``: in controller mode the master epoch (Java ``ReplicasManager`` calls
    ``nextVersion(newMasterEpoch)``), which name servers compare when two brokers claim one
    broker id (rmq.namesrv.route_manager). Written only when set, as a 4.x broker's has none."""

    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    counter: int = 0
    state_version: int = 0

    def next_version(self, state_version: int | None = None) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1
        if state_version is not None:
            self.state_version = state_version

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"timestamp": self.timestamp, "counter": self.counter}
        if self.state_version:
            d["stateVersion"] = self.state_version
        return d


class TopicConfigManager(ConfigManager):
    """The topic table, seeded with the system topics; every change marks it dirty for the
    broker's ConfigPersister (never written inline).

    Args:
        config_dir: where ``topics.msgpack`` lives (``<storePathRootDir>/config``).
        broker_config: the ``BrokerConfig`` (cluster and broker names, TBW102 queue count,
            auto-create switches).
    """

    file_name = "topics.msgpack"

    def __init__(self, config_dir: str, broker_config: Any) -> None:
        super().__init__(config_dir)
        self.broker_config = broker_config
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics: set[str] = set()
        self._seed_system_topics()

    def _system(self, name: str, read: int = 16, write: int = 16, perm: int = 6) -> None:
        self.topic_config_table[name] = TopicConfig(name, read, write, perm)
        self.system_topics.add(name)

    def _seed_system_topics(self) -> None:
        bc = self.broker_config
        rw = PermName.PERM_READ | PermName.PERM_WRITE
        tv = TopicValidator
        self._system(tv.RMQ_SYS_SELF_TEST_TOPIC, 1, 1)
        if bc.auto_create_topic_enable:
            n = bc.default_topic_queue_nums
            self._system(AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PermName.PERM_INHERIT | rw)
        self._system(tv.RMQ_SYS_BENCHMARK_TOPIC, 1024, 1024)
        self._system(bc.broker_cluster_name, 16, 16, PermName.PERM_INHERIT | (rw if bc.cluster_topic_enable else 0))
        self._system(bc.broker_name, 1, 1, PermName.PERM_INHERIT | (rw if bc.broker_topic_enable else 0))
        self._system(tv.RMQ_SYS_OFFSET_MOVED_EVENT, 1, 1)
        self._system(tv.RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM, SCHEDULE_TOPIC_QUEUE_NUM)
        if bc.trace_topic_enable:
            self._system(bc.msg_trace_topic_name, 1, 1)
        self._system(f"{bc.broker_cluster_name}_REPLY_TOPIC", 1, 1)

    # -- persistence ----------------------------------------------------------------------

    def encode(self) -> object:
        return {
            "topicConfigTable": {name: tc.to_json() for name, tc in self.topic_config_table.items()},
            "dataVersion": self.data_version.to_json(),
        }

    def decode(self, obj: Any) -> None:
        for name, d in obj.get("topicConfigTable", {}).items():
            self.topic_config_table[name] = TopicConfig.from_json(d)
        dv = obj.get("dataVersion") or {}
        self.data_version = DataVersion(
            int(dv.get("timestamp", 0)), int(dv.get("counter", 0)), int(dv.get("stateVersion", 0))
        )
        # A broker restarted with a different TBW102 size must advertise the new one.
        if self.broker_config.auto_create_topic_enable:
            n = self.broker_config.default_topic_queue_nums
            tbw = self.topic_config_table.get(AUTO_CREATE_TOPIC_KEY_TOPIC)
            if tbw is not None:
                tbw.read_queue_nums = tbw.write_queue_nums = n

    def _changed(self) -> None:
        self.data_version.next_version()
        self.mark_dirty()

    def next_state_version(self, epoch: int) -> None:
        """Controller mode: a role change under master ``epoch`` (Java
        ``getDataVersion().nextVersion(newMasterEpoch)``); the next registration carries it."""
        self.data_version.next_version(epoch)
        self.mark_dirty()

    # -- queries and changes --------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        """A topic this broker seeded itself or one of Java's system topics."""
        return topic in self.system_topics or TopicValidator.is_system_topic(topic)

    @property
    def max_queue_nums(self) -> int:
        return int(getattr(self.broker_config, "max_topic_queue_nums", DEFAULT_MAX_TOPIC_QUEUE_NUMS))

    def update_topic_config(self, tc: TopicConfig) -> None:
        old = self.topic_config_table.get(tc.topic_name)
        self.topic_config_table[tc.topic_name] = tc
        _rl.info("topic-config", "%s topic config %s", "updated" if old else "created", clip(tc.to_json()))
        self._changed()

    def delete_topic_config(self, topic: str) -> TopicConfig | None:
        old = self.topic_config_table.pop(topic, None)
        if old is not None:
            log.info("deleted topic config %s", clip(topic))
            self._changed()
        return old

    def create_topic_in_send_message_method(
        self,
        topic: str,
        default_topic: str,
        remote_addr: str,
        client_default_topic_queue_nums: int,
        topic_sys_flag: int,
    ) -> tuple[TopicConfig | None, bool]:
        """Create ``topic`` from the template ``default_topic`` (TBW102) on first send.

        Returns ``(config, created)``; config is None when the template is missing or does not
        carry the inherit permission (auto-create disabled).
        """
        tc = self.topic_config_table.get(topic)
        if tc is not None:
            return tc, False
        default = self.topic_config_table.get(default_topic)
        if default is None:
            _rl.warning(
                "create-topic-no-default",
                "create topic %s failed: default topic %s does not exist (producer %s)",
                clip(topic),
                clip(default_topic),
                remote_addr,
            )
            return None, False
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker_config.auto_create_topic_enable:
            return None, False
        if not PermName.is_inherited(default.perm):
            _rl.warning(
                "create-topic-no-inherit",
                "create topic %s failed: default topic %s has no inherit perm (producer %s)",
                clip(topic),
                clip(default_topic),
                remote_addr,
            )
            return None, False
        queue_nums = max(0, min(int(client_default_topic_queue_nums), default.write_queue_nums))
        tc = TopicConfig(
            topic,
            queue_nums,
            queue_nums,
            default.perm & ~PermName.PERM_INHERIT,
            default.topic_filter_type,
            topic_sys_flag,
        )
        _rl.info(
            "topic-auto-created",
            "auto-created topic %s from %s for %s: %d queues",
            clip(topic),
            clip(default_topic),
            remote_addr,
            queue_nums,
        )
        self.topic_config_table[topic] = tc
        self._changed()
        return tc, True

    def create_topic_in_send_message_back_method(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int
    ) -> tuple[TopicConfig, bool]:
        """The ``%RETRY%<group>`` (and ``%DLQ%``, transaction) topics, created on heartbeat and
        send-back. ``queue_nums`` (a group's ``retryQueueNums``) is capped at
        ``maxTopicQueueNums`` like every other topic."""
        tc = self.topic_config_table.get(topic)
        if tc is not None:
            return tc, False
        cap = self.max_queue_nums
        if queue_nums > cap:
            _rl.warning(
                "retry-queue-cap",
                "topic %s: %d queues asked, capped at maxTopicQueueNums %d",
                clip(topic),
                queue_nums,
                cap,
            )
            queue_nums = cap
        queue_nums = max(0, queue_nums)
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        _rl.info("topic-created", "created topic %s (%d queues)", clip(topic), queue_nums)
        self.topic_config_table[topic] = tc
        self._changed()
        return tc, True

    def serialize_wrapper(self) -> dict[str, Any]:
        """Java ``TopicConfigSerializeWrapper`` JSON (GET_ALL_TOPIC_CONFIG, registration)."""
        return {
            "topicConfigTable": {name: tc.to_json() for name, tc in sorted(self.topic_config_table.items())},
            "dataVersion": self.data_version.to_json(),
        }
