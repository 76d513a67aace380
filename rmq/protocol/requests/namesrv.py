"""Request builders and reply parsers of the name server: routes, topic and cluster lists, broker
registration, KV config, its configuration and broker write permissions.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

from collections.abc import Mapping

from rmq.common.route import ClusterInfo, TopicRouteData
from rmq.errors import RemotingCommandError
from rmq.protocol.body import ops as _ops_body
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.namesrv import (
    AddWritePermOfBrokerResponseHeader,
    GetKVConfigRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rmq.protocol.headers.topic import DeleteTopicRequestHeader
from rmq.protocol.requests import _json_body, _request, check_success, parse_body

__all__ = [
    "add_write_perm_of_broker",
    "delete_kv_config",
    "delete_topic_in_namesrv",
    "get_all_topic_list",
    "get_broker_cluster_info",
    "get_kv_config",
    "get_kv_list_by_namespace",
    "get_namesrv_config",
    "get_route_info",
    "get_topics_by_cluster",
    "parse_add_write_perm",
    "parse_cluster_info",
    "parse_kv_config",
    "parse_kv_list",
    "parse_namesrv_config",
    "parse_topic_list",
    "parse_topic_route",
    "parse_wipe_write_perm",
    "put_kv_config",
    "update_namesrv_config",
    "wipe_write_perm_of_broker",
]


def get_route_info(topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC (105)."""
    return _request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic))


def parse_topic_route(resp: RemotingCommand) -> TopicRouteData | None:
    """The route, or None when the name server has none (TOPIC_NOT_EXIST, or an empty body)."""
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    check_success(resp)
    if not resp.body_bytes():
        return None
    return parse_body(resp, "route", TopicRouteData.from_body)


def get_all_topic_list() -> RemotingCommand:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
    return _request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)


def parse_topic_list(resp: RemotingCommand) -> list[str]:
    """Every topic the name server knows, sorted (Java ``TopicList.topicList``)."""
    topics = _json_body(resp, "topic list").get("topicList") or ()
    if not isinstance(topics, (list, tuple)):
        raise RemotingCommandError(f"malformed topic list: {type(topics).__name__}")
    return sorted(str(t) for t in topics)


def get_broker_cluster_info() -> RemotingCommand:
    """GET_BROKER_CLUSTER_INFO (106)."""
    return _request(RequestCode.GET_BROKER_CLUSTER_INFO)


def parse_cluster_info(resp: RemotingCommand) -> ClusterInfo:
    return parse_body(resp, "cluster info", ClusterInfo.from_body)


def delete_topic_in_namesrv(topic: str) -> RemotingCommand:
    """DELETE_TOPIC_IN_NAMESRV (216; Java ``DeleteTopicFromNamesrvRequestHeader``, the same
    single field); answered by SUCCESS."""
    return _request(RequestCode.DELETE_TOPIC_IN_NAMESRV, DeleteTopicRequestHeader(topic=topic))


def get_topics_by_cluster(cluster: str) -> RemotingCommand:
    """GET_TOPICS_BY_CLUSTER (224) to the name server. Parse with :func:`parse_topic_list`."""
    return _request(RequestCode.GET_TOPICS_BY_CLUSTER, GetTopicsByClusterRequestHeader(cluster=cluster))


def get_namesrv_config() -> RemotingCommand:
    """GET_NAMESRV_CONFIG (319) to one name server."""
    return _request(RequestCode.GET_NAMESRV_CONFIG)


def parse_namesrv_config(resp: RemotingCommand) -> dict[str, str]:
    """The name server's configuration as ``{key: value}`` (Java properties text)."""
    from rmq.config import parse_properties

    return parse_body(resp, "name server config", parse_properties)


def update_namesrv_config(props: Mapping[str, str]) -> RemotingCommand:
    """UPDATE_NAMESRV_CONFIG (318) with ``props`` as properties text; answered by SUCCESS."""
    from rmq.config import format_properties

    return _request(RequestCode.UPDATE_NAMESRV_CONFIG, None, format_properties(props).encode())


def wipe_write_perm_of_broker(broker_name: str) -> RemotingCommand:
    """WIPE_WRITE_PERM_OF_BROKER (205) to one name server."""
    return _request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, WipeWritePermOfBrokerRequestHeader(broker_name=broker_name))


def parse_wipe_write_perm(resp: RemotingCommand) -> int:
    """``wipeTopicCount``: the topics of that broker that lost write permission."""
    check_success(resp)
    return WipeWritePermOfBrokerResponseHeader.from_ext_fields(resp.ext_fields).wipe_topic_count


def add_write_perm_of_broker(broker_name: str) -> RemotingCommand:
    """ADD_WRITE_PERM_OF_BROKER (327) to one name server."""
    return _request(RequestCode.ADD_WRITE_PERM_OF_BROKER, WipeWritePermOfBrokerRequestHeader(broker_name=broker_name))


def parse_add_write_perm(resp: RemotingCommand) -> int:
    """``addTopicCount``: the topics of that broker made read + write again."""
    check_success(resp)
    return AddWritePermOfBrokerResponseHeader.from_ext_fields(resp.ext_fields).add_topic_count


def put_kv_config(namespace: str, key: str, value: str) -> RemotingCommand:
    """PUT_KV_CONFIG (100); answered by SUCCESS."""
    return _request(RequestCode.PUT_KV_CONFIG, PutKVConfigRequestHeader(namespace=namespace, key=key, value=value))


def get_kv_config(namespace: str, key: str) -> RemotingCommand:
    """GET_KV_CONFIG (101)."""
    return _request(RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace=namespace, key=key))


def parse_kv_config(resp: RemotingCommand) -> str | None:
    """The value, or None when the name server has no such item (QUERY_NOT_FOUND)."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    check_success(resp)
    value = resp.ext_fields.get("value")
    return None if value is None else str(value)


def delete_kv_config(namespace: str, key: str) -> RemotingCommand:
    """DELETE_KV_CONFIG (102; Java ``DeleteKVConfigRequestHeader``, namespace and key);
    answered by SUCCESS whether or not the item existed."""
    return _request(RequestCode.DELETE_KV_CONFIG, GetKVConfigRequestHeader(namespace=namespace, key=key))


def get_kv_list_by_namespace(namespace: str) -> RemotingCommand:
    """GET_KVLIST_BY_NAMESPACE (219; the header's only field is ``namespace``)."""
    cmd = _request(RequestCode.GET_KVLIST_BY_NAMESPACE)
    cmd.ext_fields = {"namespace": namespace}
    return cmd


def parse_kv_list(resp: RemotingCommand) -> dict[str, str]:
    """The namespace's ``{key: value}``; empty when the name server has none (QUERY_NOT_FOUND)."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return {}
    return parse_body(resp, "KVTable", _ops_body.KVTable.decode).table
