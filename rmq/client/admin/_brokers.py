"""Broker configuration and statistics (Java ``DefaultMQAdminExt`` getBrokerConfig,
updateBrokerConfig, fetchBrokerRuntimeStats, viewBrokerStatsData, fetchConsumeStatsInBroker)."""

from __future__ import annotations

from collections.abc import Mapping

from rmq.protocol.body.stats import BrokerStatsData, ConsumeStatsList
from rmq.protocol.requests.broker import (
    get_broker_config,
    get_broker_consume_stats,
    get_broker_runtime_info,
    get_timer_check_point,
    get_timer_metrics,
    parse_broker_config,
    parse_broker_stats_data,
    parse_consume_stats_list,
    parse_kv_table,
    parse_timer_check_point,
    parse_timer_metrics,
    update_broker_config,
    view_broker_stats_data,
)

from ._base import AdminBase

__all__ = ["BrokerAdmin", "BrokerStatsData", "ConsumeStatsList"]

#: Java ``org.apache.rocketmq.common.stats.Stats`` names VIEW_BROKER_STATS_DATA knows.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"


class BrokerAdmin(AdminBase):
    """Broker configuration and statistics of :class:`rmq.client.admin.Admin`."""

    async def fetch_broker_runtime_stats(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's runtime figures as Java's KVTable
        (``putTps``, ``msgPutTotalTodayNow``, ``commitLogDiskRatio``, ...), all strings."""
        return await self._call(addr, get_broker_runtime_info(), parse_kv_table)

    async def get_timer_check_point(self, addr: str) -> dict[str, int]:
        """GET_TIMER_CHECK_POINT (Java 5): the timer store's last checkpoint,
        ``{lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset, masterTimerQueueOffset,
        stateVersion, timestamp, counter}``."""
        return await self._call(addr, get_timer_check_point(), parse_timer_check_point)

    async def get_timer_metrics(self, addr: str) -> dict[str, tuple[int, int]]:
        """GET_TIMER_METRICS (Java 5): pending timers per real topic, ``{topic: (count, last
        change ms)}``."""
        return await self._call(addr, get_timer_metrics(), parse_timer_metrics)

    async def get_broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every property of the broker (and its store), as text values in
        the broker's order (booleans ``true``/``false``)."""
        return await self._call(addr, get_broker_config(), parse_broker_config)

    async def update_broker_config(self, addr: str, properties: Mapping[str, object]) -> None:
        """UPDATE_BROKER_CONFIG: change properties of the broker at ``addr`` (booleans may be
        given as Python bools). rmq applies only properties that change live and persists them
        to the broker's config file; anything else raises AdminError with the broker's reason."""
        if not properties:
            raise ValueError("no property to update")
        await self._call_ok(addr, update_broker_config(properties))

    async def view_broker_stats_data(self, addr: str, stats_name: str, stats_key: str) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA: one stats item's minute, hour and day windows (``stats_name``
        such as ``TOPIC_PUT_NUMS`` with a topic, ``GROUP_GET_NUMS`` with ``topic@group``);
        AdminError when the broker has no such item."""
        return await self._call(addr, view_broker_stats_data(stats_name, stats_key), parse_broker_stats_data)

    async def fetch_consume_stats_in_broker(self, addr: str, is_order: bool = False) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS: every subscription group's ConsumeStats on the broker
        (``is_order``: only orderly topics; default False)."""
        return await self._call(addr, get_broker_consume_stats(is_order), parse_consume_stats_list)
