"""UPDATE_BROKER_CONFIG (25) and GET_BROKER_CONFIG (26): the broker's configuration read and
changed at runtime (Java ``Configuration`` and ``AdminBrokerProcessor.updateBrokerConfig``).

The checking, applying and persisting are :class:`rmq.config.Configuration`'s; this module
holds the broker's lists: a property is changed live only when the code that uses it reads it
at each use (:data:`LIVE_PROPERTIES`); the others are read once at start-up (ports, paths,
names, file sizes, thread and table sizes) and are refused with the reason (:data:`_WHY`).
Updates are persisted to the properties file the broker was started from
(``brokerConfigPath``: the ``-c`` file; else ``<storePathRootDir>/config/broker.properties``,
Java's default place) so a restart keeps them.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING

from rmq.broker.managers.topic_config import DataVersion
from rmq.common.log import clip
from rmq.config import Configuration

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext

__all__ = ["BLACK_LIST", "BrokerConfiguration", "LIVE_PROPERTIES"]

log = logging.getLogger("rmq.broker")

#: Java AdminBrokerProcessor's configBlackList: never changed remotely.
BLACK_LIST = frozenset({"configBlackList", "brokerConfigPath"})

#: Properties whose users read them at every use, so a change takes effect at once.
LIVE_PROPERTIES = frozenset(
    {
        # BrokerConfig
        "brokerPermission",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "longPollingEnable",
        "shortPollingTimeMills",
        "slaveReadEnable",
        "traceOn",
        "regionId",
        "notifyConsumerIdsChangedEnable",
        "transactionTimeOut",
        "transactionCheckInterval",
        "transactionCheckMax",
        "maxGroupsPerHeartbeat",
        "maxClientsPerConnection",
        "maxSubscriptionsPerConnection",
        "rebalanceLockMaxBatchSize",
        "maxStatsItems",
        "statsSampleIntervalMs",
        "metricsMaxQueueSeries",
        # typed topics: read per SEND (both paths) and per UPDATE_AND_CREATE_TOPIC
        "enableTopicMessageTypeCheck",
        "enableMixedMessageType",
        # RocketMQ 5 POP (rmq.broker.pop reads these at every request)
        "popRetryProbability",
        "reviveInterval",
        "popCkMaxNum",
        "popMinInvisibleTime",
        "popMaxInvisibleTime",
        "popMaxPollTime",
        "popMaxBatchAcks",
        # server-side assignment (rmq.broker.assignment reads these per QUERY_ASSIGNMENT)
        "defaultMessageRequestMode",
        "defaultPopShareQueueNum",
        "serverLoadBalancerEnable",
        "grpcMaxTelemetrySessionsPerClient",
        "grpcMaxClients",
        "grpcTelemetryQueueSize",
        # StoreConfig (Java MessageStoreConfig)
        "maxMessageSize",
        "fileReservedTime",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "diskSpaceWarningLevelRatio",
        "diskSpaceCleanForciblyRatio",
        "cleanFileForciblyEnable",
        "cleanResourceInterval",
        "maxTransferBytesOnMessageInMemory",
        "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInDisk",
        "maxTransferCountOnMessageInDisk",
        "accessMessageInMemoryMaxRatio",
        "flushIntervalCommitLog",
        "flushCommitLogLeastPages",
        "flushIntervalConsumeQueue",
        # timer messages (rmq.store.timer reads them at each use)
        "timerWheelEnable",
        "timerMaxDelaySec",
        "timerRollWindowSlot",
        "timerFlushIntervalMs",
        "timerCongestNumEachSlot",
        "timerStopDequeue",
    }
)

#: Why some start-up-only properties cannot change (the rest: "read once at start-up").
_WHY = {
    "listenPort": "the server socket is bound at start-up",
    "listenHost": "the server socket is bound at start-up",
    "metricsPort": "the metrics socket is bound at start-up",
    "grpcServerPort": "the gRPC socket is bound at start-up",
    "grpcServerHost": "the gRPC socket is bound at start-up",
    "storePathRootDir": "the store's files are opened from it at start-up",
    "storePathCommitLog": "the CommitLog files are opened from it at start-up",
    "brokerName": "it names the broker in every route and message id already given out",
    "brokerClusterName": "it names the broker's cluster in the name servers' routes",
    "brokerId": "the broker's role (master or slave) is fixed at start-up",
    "brokerRole": "the broker's role (master or slave) is fixed at start-up",
    "brokerIP1": "it is in every stored message's STOREHOST and message id",
    "flushDiskType": "the flush service is chosen at start-up",
    "mappedFileSizeCommitLog": "existing CommitLog files have their size",
    "mappedFileSizeConsumeQueue": "existing ConsumeQueue files have their size",
    "namesrvAddr": "the name-server client is built at start-up",
    "reviveQueueNum": "the POP revive topic and its progress are laid out at start-up",
    "timerPrecisionMs": "the timer wheel's slots and the parked timers' ticks are laid out by it",
    "mappedFileSizeTimerLog": "existing timer log files have their size",
}


class BrokerConfiguration(Configuration):
    """The broker's live configuration (its ``broker_config`` and ``store_config``): the
    formatted dump, the data version GET_BROKER_CONFIG reports, and updates.

    Args:
        controller: the broker (``rmq.broker.context.BrokerContext``).
    """

    live = LIVE_PROPERTIES
    black_list = BLACK_LIST

    def __init__(self, controller: BrokerContext) -> None:
        super().__init__(controller.broker_config, controller.store_config)
        self.controller = controller
        self.data_version = DataVersion()

    def path(self) -> str:
        c = self.controller
        return c.broker_config.broker_config_path or os.path.join(c.config_dir, "broker.properties")

    def format(self) -> str:
        """GET_BROKER_CONFIG's body: ``key=value`` lines, Java's ``true``/``false``."""
        return self.get_all_configs_format_string()

    def version_json(self) -> str:
        """Java ``Configuration.getDataVersionJson`` (fastjson's key order)."""
        v = self.data_version
        return json.dumps({"counter": v.counter, "timestamp": v.timestamp}, separators=(",", ":"))

    def refusal(self, key: str) -> str:
        why = _WHY.get(key, "it is read once at start-up")
        return (
            f"{key} cannot be changed at runtime: {why}; put it in the broker's config file and restart. "
            f"Properties that change live: {', '.join(sorted(LIVE_PROPERTIES))}"
        )

    async def changed(self, applied: dict[str, str]) -> None:
        c = self.controller
        self.data_version.next_version()
        log.info("updateBrokerConfig: %s", clip(", ".join(f"{k}={v}" for k, v in applied.items())))
        if "statsSampleIntervalMs" in applied:
            c.stats.set_sample_interval(c.broker_config.stats_sample_interval_ms)
        if "maxStatsItems" in applied:
            c.stats.max_items = c.broker_config.max_stats_items
        if "brokerPermission" in applied:
            # Java: the new permission reaches the name servers at once
            c.topic_config_manager.data_version.next_version()
            await c.register_broker_now()
