"""Typed headers of the name server: routes, topic and cluster lists, broker registration, KV config,
its configuration and broker write permissions (Java ``common/.../protocol/header``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's.
"""

from rmq.protocol.headers import Header, header, w

__all__ = [
    "AddWritePermOfBrokerResponseHeader",
    "GetKVConfigRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnRegisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
]


@header
class GetRouteInfoRequestHeader(Header):
    topic: str = w("topic")
    accept_standard_json_only: bool | None = w("acceptStandardJsonOnly", default=None)


@header
class RegisterBrokerRequestHeader(Header):
    broker_name: str = w("brokerName")
    broker_addr: str = w("brokerAddr")
    cluster_name: str = w("clusterName")
    ha_server_addr: str = w("haServerAddr", default="")
    broker_id: int = w("brokerId", int64=True)
    compressed: bool = w("compressed", default=False)


@header
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = w("haServerAddr", default=None)
    master_addr: str | None = w("masterAddr", default=None)


@header
class QueryDataVersionRequestHeader(Header):
    """QUERY_DATA_VERSION (322; Java ``BrokerOuterAPI.needRegister``); the body is the broker's
    dataVersion JSON."""

    broker_name: str = w("brokerName")
    broker_addr: str = w("brokerAddr")
    cluster_name: str = w("clusterName")
    broker_id: int = w("brokerId", int64=True)


@header
class QueryDataVersionResponseHeader(Header):
    """Whether the name server lacks the broker's topic table of that version; the body is the
    version it has (none when it has none)."""

    changed: bool | None = w("changed", default=None)


@header
class UnRegisterBrokerRequestHeader(Header):
    broker_name: str = w("brokerName")
    broker_addr: str = w("brokerAddr")
    cluster_name: str = w("clusterName")
    broker_id: int = w("brokerId", int64=True)


@header
class GetKVConfigRequestHeader(Header):
    """GET_KV_CONFIG (101) / GET_KV_CONFIG_BY_VALUE (217, sent by ali-ons)."""

    namespace: str = w("namespace")
    key: str = w("key")


# Admin headers: topics, clusters, sendMessage/consumeMessage/printMsg, allocateMQ.


@header
class GetTopicsByClusterRequestHeader(Header):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = w("cluster")


# Admin headers: name-server config, write perm, KV config, store maintenance
# (43, 45, 100-102, 205, 207, 306, 318, 319, 321, 327, 329).
# (the ops engineer adds here)


@header
class WipeWritePermOfBrokerRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327; Java
    ``AddWritePermOfBrokerRequestHeader``, the same single field), to a name server."""

    broker_name: str = w("brokerName")


@header
class WipeWritePermOfBrokerResponseHeader(Header):
    """The topics whose queue data of that broker lost write permission."""

    wipe_topic_count: int = w("wipeTopicCount", default=0)


@header
class AddWritePermOfBrokerResponseHeader(Header):
    """The topics whose queue data of that broker got read + write permission back."""

    add_topic_count: int = w("addTopicCount", default=0)


@header
class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (100)."""

    namespace: str = w("namespace")
    key: str = w("key")
    value: str = w("value")
