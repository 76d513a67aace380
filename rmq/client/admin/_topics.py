"""Topics, subscription groups and clusters (Java ``DefaultMQAdminExt`` createAndUpdateTopicConfig,
deleteTopic…, createAndUpdateSubscriptionGroupConfig, fetchAllTopicList, examineTopicRouteInfo)."""
from __future__ import annotations

from typing import Any

from rmq.common.constants import MixAll
from rmq.remoting import requests as rq
from rmq.remoting.headers import CreateTopicRequestHeader

from ._base import AdminBase


class TopicAdmin(AdminBase):
    """Topic, subscription-group and cluster operations of :class:`rmq.client.admin.Admin`."""

    async def fetch_all_topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name server knows (it lists
        cluster and broker names among them, as Java's does)."""
        return await self._call_namesrv(rq.get_all_topic_list(), rq.parse_topic_list)

    async def create_and_update_topic_config(
            self, addr: str, topic: str, *, read_queue_nums: int = 8, write_queue_nums: int = 8,
            perm: int = 6, order: bool = False) -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker at ``addr`` (defaults as mqadmin updateTopic:
        8 read and 8 write queues, perm 6 = read + write, not orderly)."""
        header = CreateTopicRequestHeader(topic=topic, read_queue_nums=read_queue_nums,
                                          write_queue_nums=write_queue_nums, perm=perm, order=order)
        await self._call_ok(addr, rq.create_topic(header))

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER on the broker at ``addr``."""
        await self._call_ok(addr, rq.delete_topic_in_broker(topic))

    async def delete_topic_in_namesrv(self, topic: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV on every name server."""
        await self._call_each_namesrv(lambda: rq.delete_topic_in_namesrv(topic), rq.check_success)

    async def create_and_update_subscription_group_config(
            self, addr: str, group: str, *, consume_enable: bool = True, consume_broadcast_enable: bool = True,
            retry_max_times: int = 16, **extra: Any) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on the broker at ``addr`` with Java's
        SubscriptionGroupConfig fields (mqadmin updateSubGroup's defaults: consume enabled,
        broadcast enabled, 16 retries, 1 retry queue); ``extra`` adds or overrides wire fields
        by their camelCase names."""
        config: dict[str, Any] = {
            "groupName": group, "consumeEnable": consume_enable, "consumeFromMinEnable": True,
            "consumeBroadcastEnable": consume_broadcast_enable, "retryQueueNums": 1,
            "retryMaxTimes": retry_max_times, "brokerId": MixAll.MASTER_ID,
            "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True,
        }
        config.update(extra)
        await self._call_ok(addr, rq.create_subscription_group(config))
