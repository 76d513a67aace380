"""Name-server configuration, broker write permission, KV config and store maintenance (Java
``DefaultMQAdminExt`` getNameServerConfig, updateNameServerConfig, wipeWritePermOfBroker,
addWritePermOfBroker, createAndUpdateKvConfig, deleteKvConfig, deleteSubscriptionGroup,
cleanExpiredConsumerQueue, cleanUnusedTopic, deleteExpiredCommitLog, queryConsumeQueue; the metadata
dumps a slave syncs, GET_ALL_CONSUMER_OFFSET / GET_ALL_DELAY_OFFSET; and what mqadmin
exportMetadata writes, getUserTopicConfig / getUserSubscriptionGroup)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from rmq.common.constants import MixAll
from rmq.protocol.body.ops import ConsumeQueueData, QueryConsumeQueueResponseBody
from rmq.protocol.body.sync import SubscriptionGroupWrapper, TopicConfigWrapper
from rmq.protocol.requests import check_success
from rmq.protocol.requests.broker import (
    clean_expired_consume_queue,
    delete_expired_commit_log,
    get_all_consumer_offset,
    get_all_delay_offset,
    get_all_subscription_group_config,
    get_all_topic_config,
    parse_all_consumer_offset,
    parse_all_delay_offset,
    parse_all_subscription_group_config,
    parse_all_topic_config,
    parse_query_consume_queue,
    query_consume_queue,
)
from rmq.protocol.requests.consumer import delete_subscription_group
from rmq.protocol.requests.namesrv import (
    add_write_perm_of_broker,
    delete_kv_config,
    get_kv_config,
    get_kv_list_by_namespace,
    get_namesrv_config,
    parse_add_write_perm,
    parse_kv_config,
    parse_kv_list,
    parse_namesrv_config,
    parse_topic_list,
    parse_wipe_write_perm,
    put_kv_config,
    update_namesrv_config,
    wipe_write_perm_of_broker,
)
from rmq.protocol.requests.topic import clean_unused_topic, get_system_topic_list_from_broker

from ._base import AdminBase, AdminError

__all__ = [
    "ConsumeQueueData",
    "OpsAdmin",
    "QueryConsumeQueueResponseBody",
    "SubscriptionGroupWrapper",
    "TopicConfigWrapper",
]

#: The groups Java's admin leaves out of getUserSubscriptionGroup
#: (DefaultMQAdminExtImpl.SYSTEM_GROUP_SET).
SYSTEM_GROUPS = frozenset(
    {
        MixAll.DEFAULT_CONSUMER_GROUP,
        MixAll.DEFAULT_PRODUCER_GROUP,
        MixAll.TOOLS_CONSUMER_GROUP,
        MixAll.FILTERSRV_CONSUMER_GROUP,
        MixAll.MONITOR_CONSUMER_GROUP,
        MixAll.CLIENT_INNER_PRODUCER_GROUP,
        MixAll.SELF_TEST_PRODUCER_GROUP,
        MixAll.SELF_TEST_CONSUMER_GROUP,
        "CID_ONS-HTTP-PROXY",  # Java MixAll.ONS_HTTP_PROXY_GROUP
        MixAll.CID_ONSAPI_PERMISSION_GROUP,
        MixAll.CID_ONSAPI_OWNER_GROUP,
        MixAll.CID_ONSAPI_PULL_GROUP,
        MixAll.CID_SYS_RMQ_TRANS,
    }
)


class OpsAdmin(AdminBase):
    """Operations of :class:`rmq.client.admin.Admin` on name servers and brokers' stores."""

    def _namesrvs(self, namesrv_addrs: Sequence[str] | None) -> list[str]:
        return list(namesrv_addrs) if namesrv_addrs else list(self.namesrv_addrs)

    # -- name servers ---------------------------------------------------------------------

    async def get_name_server_config(self, namesrv_addrs: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG from each name server (default: every one the admin knows):
        ``{namesrv_addr: {key: value}}``."""
        return {
            a: await self._call(a, get_namesrv_config(), parse_namesrv_config) for a in self._namesrvs(namesrv_addrs)
        }

    async def update_name_server_config(
        self, properties: Mapping[str, str], namesrv_addrs: Sequence[str] | None = None
    ) -> None:
        """UPDATE_NAMESRV_CONFIG to each name server (default: every one); the first refusal
        raises AdminError (an rmq name server refuses unknown keys, bad values and properties
        that need a restart, and changes nothing then)."""
        if not properties:
            raise ValueError("no property to update")
        for a in self._namesrvs(namesrv_addrs):
            await self._call_ok(a, update_namesrv_config(properties))

    async def wipe_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER on one name server: producers stop routing to
        ``broker_name``; returns how many topics were changed."""
        return await self._call(namesrv_addr, wipe_write_perm_of_broker(broker_name), parse_wipe_write_perm)

    async def add_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER on one name server (undoes a wipe); returns how many topics."""
        return await self._call(namesrv_addr, add_write_perm_of_broker(broker_name), parse_add_write_perm)

    # -- KV config ------------------------------------------------------------------------

    async def create_and_update_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG to every name server (as Java's admin)."""
        await self._call_each_namesrv(lambda: put_kv_config(namespace, key, value), check_success)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG on every name server (succeeds whether or not the item exists)."""
        await self._call_each_namesrv(lambda: delete_kv_config(namespace, key), check_success)

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG from the first name server that answers; None when it has no such item."""
        return await self._call_namesrv(get_kv_config(namespace, key), parse_kv_config)

    async def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str]:
        """GET_KVLIST_BY_NAMESPACE: the namespace's items (empty when there are none)."""
        return await self._call_namesrv(get_kv_list_by_namespace(namespace), parse_kv_list)

    # -- brokers --------------------------------------------------------------------------

    async def delete_subscription_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        """DELETE_SUBSCRIPTIONGROUP on one broker; ``remove_offset`` (default False) also drops
        the group's committed offsets there."""
        await self._call_ok(addr, delete_subscription_group(group, remove_offset))

    async def _all_addrs(self, cluster: str | None) -> list[str]:
        """Every broker address (masters and slaves) of ``cluster``, or of every cluster (Java
        ``ClusterInfo.retrieveAllAddrByCluster``)."""
        info = await self.examine_broker_cluster_info()
        if cluster and cluster not in info.cluster_addr_table:
            raise AdminError(f"cluster [{cluster}] is not known to the name server")
        clusters = [cluster] if cluster else list(info.cluster_addr_table)
        out: list[str] = []
        for c in clusters:
            for name in info.cluster_addr_table.get(c, ()):
                bd = info.broker_addr_table.get(name)
                if bd is not None:
                    out += [a for _, a in sorted(bd.broker_addrs.items()) if a not in out]
        if not out:
            raise AdminError("no broker is registered with the name server")
        return out

    async def clean_expired_consumer_queue_by_addr(self, addr: str) -> bool:
        """CLEAN_EXPIRED_CONSUMEQUEUE on one broker: destroys the consume queues whose messages
        all aged out of the CommitLog. True when the broker answered SUCCESS."""
        await self._call_ok(addr, clean_expired_consume_queue())
        return True

    async def clean_expired_consumer_queue(self, cluster: str | None = None) -> bool:
        """CLEAN_EXPIRED_CONSUMEQUEUE on every broker of ``cluster`` (default: of every cluster)."""
        return await self._on_all_brokers(cluster, self.clean_expired_consumer_queue_by_addr)

    async def delete_expired_commit_log_by_addr(self, addr: str) -> bool:
        """DELETE_EXPIRED_COMMITLOG on one broker: its next clean runs delete CommitLog files
        older than ``fileReservedTime`` whatever ``deleteWhen`` says. True on SUCCESS."""
        await self._call_ok(addr, delete_expired_commit_log())
        return True

    async def delete_expired_commit_log(self, cluster: str | None = None) -> bool:
        """DELETE_EXPIRED_COMMITLOG on every broker of ``cluster`` (default: of every cluster)."""
        return await self._on_all_brokers(cluster, self.delete_expired_commit_log_by_addr)

    async def clean_unused_topic_by_addr(self, addr: str) -> bool:
        """CLEAN_UNUSED_TOPIC on one broker: it destroys the consume queues of topics it has no
        topic config for (deleted elsewhere, or left by an old store). True on SUCCESS."""
        await self._call_ok(addr, clean_unused_topic())
        return True

    async def clean_unused_topic(self, cluster: str | None = None) -> bool:
        """CLEAN_UNUSED_TOPIC on every broker of ``cluster`` (default: of every cluster)."""
        return await self._on_all_brokers(cluster, self.clean_unused_topic_by_addr)

    async def get_system_topic_list_from_broker(self, addr: str) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the broker's own system topics (TBW102, its
        cluster and broker names, SCHEDULE_TOPIC_XXXX, ...), sorted."""
        return await self._call(addr, get_system_topic_list_from_broker(), parse_topic_list)

    async def get_user_topic_config(self, addr: str, special_topic: bool = False) -> TopicConfigWrapper:
        """The broker's topic table without its system topics (Java getUserTopicConfig) and,
        unless ``special_topic`` (default False), without ``%RETRY%`` / ``%DLQ%`` topics."""
        wrapper = await self._call(addr, get_all_topic_config(), parse_all_topic_config)
        system = set(await self.get_system_topic_list_from_broker(addr))
        table = {
            t: c
            for t, c in wrapper.topic_config_table.items()
            if t not in system
            and (
                special_topic
                or not (t.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX) or t.startswith(MixAll.DLQ_GROUP_TOPIC_PREFIX))
            )
        }
        return TopicConfigWrapper(table, wrapper.data_version)

    async def get_user_subscription_group(self, addr: str) -> SubscriptionGroupWrapper:
        """The broker's subscription groups without the system ones (Java
        getUserSubscriptionGroup: ``CID_RMQ_SYS_*`` and :data:`SYSTEM_GROUPS`)."""
        wrapper = await self._call(addr, get_all_subscription_group_config(), parse_all_subscription_group_config)
        table = {
            g: c
            for g, c in wrapper.subscription_group_table.items()
            if not MixAll.is_sys_consumer_group(g) and g not in SYSTEM_GROUPS
        }
        return SubscriptionGroupWrapper(table, wrapper.data_version)

    async def _on_all_brokers(self, cluster: str | None, by_addr: Callable[[str], Awaitable[bool]]) -> bool:
        # Java DefaultMQAdminExtImpl cleanExpiredConsumerQueue / deleteExpiredCommitLog: each
        # broker of the cluster(s) in turn; the first refusal raises
        for addr in await self._all_addrs(cluster):
            await by_addr(addr)
        return True

    async def query_consume_queue(
        self,
        broker_addr: str,
        topic: str,
        queue_id: int,
        index: int,
        count: int = 10,
        consumer_group: str | None = None,
    ) -> QueryConsumeQueueResponseBody:
        """QUERY_CONSUME_QUEUE: ``count`` (default 10, as mqadmin) units of one queue from
        ``index``, the queue's index range and, with ``consumer_group``, its subscription."""
        return await self._call(
            broker_addr, query_consume_queue(topic, queue_id, index, count, consumer_group), parse_query_consume_queue
        )

    async def get_all_consumer_offset(self, broker_addr: str) -> dict[str, dict[int, int]]:
        """GET_ALL_CONSUMER_OFFSET: the broker's committed offsets, ``{"topic@group": {queue_id:
        offset}}``."""
        return await self._call(broker_addr, get_all_consumer_offset(), parse_all_consumer_offset)

    async def get_all_delay_offset(self, broker_addr: str) -> dict[int, int]:
        """GET_ALL_DELAY_OFFSET: the schedule service's progress, ``{delay_level: offset}``."""
        return await self._call(broker_addr, get_all_delay_offset(), parse_all_delay_offset)
