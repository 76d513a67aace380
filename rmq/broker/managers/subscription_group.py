"""SubscriptionGroupManager: consumer-group settings (persisted, auto-created on first use)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from rmq.broker.managers.config_store import ConfigManager
from rmq.broker.managers.topic_config import DataVersion
from rmq.common.constants import MixAll, TopicValidator
from rmq.common.log import RateLimitedLog, clip

log = logging.getLogger("rmq.broker")
_rl = RateLimitedLog(log)


def check_group_name(group: object) -> str | None:
    """None for a legal consumer group name, else the reason: groups follow the topic rule
    (Java ``TopicValidator.isTopicOrGroupIllegal``) and their ``%RETRY%`` topic must be legal."""
    if not isinstance(group, str) or not group:
        return "The specified group is blank."
    if TopicValidator.is_topic_or_group_illegal(group):
        return f"The specified group[{clip(group)}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(MixAll.get_retry_topic(group)) > TopicValidator.TOPIC_MAX_LENGTH:
        return f"The specified group[{clip(group)}] is longer than {TopicValidator.TOPIC_MAX_LENGTH - 7} characters."
    return None


# Java seeds these so its own tools work without creating groups first.
SYSTEM_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    MixAll.CID_SYS_RMQ_TRANS,
)


_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)
# Java's field types: a value its parser would refuse is refused here too.
_INT_RANGE = {"retryQueueNums": _I32, "retryMaxTimes": _I32, "brokerId": _I64, "whichBrokerWhenConsumeSlowly": _I64}


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """One consumer group's settings (Java ``SubscriptionGroupConfig``, JSON names on the wire).

    ``retry_queue_nums`` sizes ``%RETRY%<group>``; ``retry_max_times`` is the DLQ threshold;
    ``which_broker_when_consume_slowly`` is suggested to a consumer that reads from disk
    (Java PullMessageProcessor.processRequest).
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    # Java 5 SubscriptionGroupConfig.consumeMessageOrderly: the group consumes FIFO topics in
    # message-group order (mqadmin updateSubGroup -o); carried for 5.x clients and tools
    consume_message_orderly: bool = False

    _JSON = (
        ("groupName", "group_name", str),
        ("consumeEnable", "consume_enable", bool),
        ("consumeFromMinEnable", "consume_from_min_enable", bool),
        ("consumeBroadcastEnable", "consume_broadcast_enable", bool),
        ("retryQueueNums", "retry_queue_nums", int),
        ("retryMaxTimes", "retry_max_times", int),
        ("brokerId", "broker_id", int),
        ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly", int),
        ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable", bool),
        ("consumeMessageOrderly", "consume_message_orderly", bool),
    )

    def to_json(self) -> dict[str, Any]:
        """Java's JSON shape. ``consumeMessageOrderly`` (a Java 5 field) only when set, so an
        ordinary group reads byte for byte as Java 4.9.8 writes it (a 4.9.8 slave's
        SlaveSynchronize and mqadmin see the fields they know; Java 5 reads a missing one as
        false)."""
        out = {wire: getattr(self, attr) for wire, attr, _ in self._JSON}
        if not self.consume_message_orderly:
            del out["consumeMessageOrderly"]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        """Build from Java JSON; raises ``ValueError`` on a missing name or a bad value."""
        if not isinstance(d, dict) or not d.get("groupName"):
            raise ValueError("subscription group config needs a groupName")
        kwargs: dict[str, Any] = {}  # field name -> value, typed per _JSON
        for wire, attr, tp in cls._JSON:
            if wire in d and d[wire] is not None:
                v = d[wire]
                if tp is bool:
                    if isinstance(v, str):
                        v = v.lower() in ("true", "1")
                    kwargs[attr] = bool(v)
                elif tp is int:
                    n = int(v)
                    lo, hi = _INT_RANGE[wire]
                    if not lo <= n <= hi:
                        raise ValueError(f"{wire} {n} is out of range {lo}..{hi}")
                    kwargs[attr] = n
                else:
                    kwargs[attr] = tp(v)
        return cls(**kwargs)


class SubscriptionGroupManager(ConfigManager):
    """Consumer groups known to this broker (every change marks the table dirty for the
    broker's ConfigPersister).

    Args:
        config_dir: where ``subscriptionGroup.msgpack`` lives.
        broker_config: ``auto_create_subscription_group`` decides whether an unknown group is
            created on first use (heartbeat, pull) or answered SUBSCRIPTION_GROUP_NOT_EXIST.
    """

    file_name = "subscriptionGroup.msgpack"

    def __init__(self, config_dir: str, broker_config: Any) -> None:
        super().__init__(config_dir)
        self.broker_config = broker_config
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        for g in SYSTEM_GROUPS:
            self.subscription_group_table[g] = SubscriptionGroupConfig(g)

    def encode(self) -> object:
        return {
            "subscriptionGroupTable": {g: c.to_json() for g, c in self.subscription_group_table.items()},
            "dataVersion": self.data_version.to_json(),
        }

    def decode(self, obj: Any) -> None:
        for g, d in obj.get("subscriptionGroupTable", {}).items():
            self.subscription_group_table[g] = SubscriptionGroupConfig.from_json(d)
        dv = obj.get("dataVersion") or {}
        self.data_version = DataVersion(int(dv.get("timestamp", 0)), int(dv.get("counter", 0)))

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created on first use when auto-create is on, the name is legal
        (:func:`check_group_name`) and the table holds fewer than ``maxSubscriptionGroupNums``
        groups; None otherwise."""
        cfg = self.subscription_group_table.get(group)
        if cfg is None and self.broker_config.auto_create_subscription_group and check_group_name(group) is None:
            limit = int(getattr(self.broker_config, "max_subscription_group_nums", 100_000))
            if len(self.subscription_group_table) >= limit:
                _rl.warning(
                    "group-table-full",
                    "subscription group table full (%d groups, maxSubscriptionGroupNums): group %s not auto-created",
                    len(self.subscription_group_table),
                    clip(group),
                )
                return None
            cfg = SubscriptionGroupConfig(group)
            self.subscription_group_table[group] = cfg
            _rl.info("group-auto-created", "auto-created subscription group %s", clip(group))
            self.data_version.next_version()
            self.mark_dirty()
        return cfg

    def contains(self, group: str) -> bool:
        return group in self.subscription_group_table

    def update_subscription_group_config(self, cfg: SubscriptionGroupConfig) -> None:
        old = self.subscription_group_table.get(cfg.group_name)
        self.subscription_group_table[cfg.group_name] = cfg
        _rl.info("group-config", "%s subscription group %s", "updated" if old else "created", clip(cfg.to_json()))
        self.data_version.next_version()
        self.mark_dirty()

    def delete_subscription_group_config(self, group: str) -> bool:
        if self.subscription_group_table.pop(group, None) is None:
            return False
        self.data_version.next_version()
        self.mark_dirty()
        return True
