"""Typed headers of ACL 1.0 administration: accounts, global white addresses, the broker's ACL config
(Java ``common/.../protocol/header``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's.
"""

from rmq.protocol.headers import Header, header, w

__all__ = [
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
]


# ACL admin headers: UPDATE_AND_CREATE_ACL_CONFIG 50, DELETE_ACL_CONFIG 51,
# GET_BROKER_CLUSTER_ACL_INFO 52, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53.


@header
class CreateAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50): one account; the perm lists are comma-separated."""

    access_key: str = w("accessKey")
    secret_key: str | None = w("secretKey", default=None)
    white_remote_address: str | None = w("whiteRemoteAddress", default=None)
    admin: bool = w("admin", default=False)
    default_topic_perm: str | None = w("defaultTopicPerm", default=None)
    default_group_perm: str | None = w("defaultGroupPerm", default=None)
    topic_perms: str | None = w("topicPerms", default=None)
    group_perms: str | None = w("groupPerms", default=None)


@header
class DeleteAccessConfigRequestHeader(Header):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str = w("accessKey")


@header
class GetBrokerAclConfigResponseHeader(Header):
    """GET_BROKER_CLUSTER_ACL_INFO (52) reply: the data versions of the ACL files."""

    version: str = w("version")
    all_acl_file_version: str | None = w("allAclFileVersion", default=None)
    broker_name: str = w("brokerName")
    broker_addr: str = w("brokerAddr")
    cluster_name: str = w("clusterName")


@header
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): comma-separated addresses; an empty file path
    means the default plain_acl.yml."""

    global_white_addrs: str = w("globalWhiteAddrs")
    acl_file_full_path: str | None = w("aclFileFullPath", default=None)
