"""Request builders and reply parsers of ACL 1.0 administration: accounts, global white addresses, the
broker's ACL config.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from rmq.protocol.requests import _json_body, _request, check_success

__all__ = [
    "PlainAccessConfig",
    "delete_acl_config",
    "get_broker_acl_config",
    "get_broker_acl_info",
    "parse_broker_acl_config",
    "parse_broker_acl_info",
    "update_acl_config",
    "update_global_white_addrs",
]


# ACL admin builders and parsers: 50-54 (Java MQClientAPIImpl.createPlainAccessConfig,
# deletePlainAccessConfig, getBrokerClusterAclInfo, updateGlobalWhiteAddrsConfig,
# getBrokerClusterConfig).


@dataclass(frozen=True)
class PlainAccessConfig:
    """One account of a broker's plain_acl.yml (Java ``PlainAccessConfig``), as
    UPDATE_AND_CREATE_ACL_CONFIG carries it.

    Args:
        access_key: the account's accessKey (longer than 6 characters).
        secret_key: its secretKey (longer than 6 characters).
        white_remote_address: the account's white address; default None = leave it as it is.
        admin: an admin account; default False.
        default_topic_perm: ``PUB``, ``SUB``, ``PUB|SUB`` or ``DENY``; default None = as it is.
        default_group_perm: the same for groups; default None = as it is.
        topic_perms: items ``Topic=PERM``; default None = as they are.
        group_perms: items ``Group=PERM``; default None = as they are.
    """

    access_key: str
    secret_key: str
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: Sequence[str] | None = None
    group_perms: Sequence[str] | None = None


def update_acl_config(config: PlainAccessConfig) -> RemotingCommand:
    """UPDATE_AND_CREATE_ACL_CONFIG (50): create or update one account."""
    return _request(
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        CreateAccessConfigRequestHeader(
            access_key=config.access_key,
            secret_key=config.secret_key,
            white_remote_address=config.white_remote_address,
            admin=config.admin,
            default_topic_perm=config.default_topic_perm,
            default_group_perm=config.default_group_perm,
            topic_perms=None if config.topic_perms is None else ",".join(config.topic_perms),
            group_perms=None if config.group_perms is None else ",".join(config.group_perms),
        ),
    )


def delete_acl_config(access_key: str) -> RemotingCommand:
    """DELETE_ACL_CONFIG (51)."""
    return _request(RequestCode.DELETE_ACL_CONFIG, DeleteAccessConfigRequestHeader(access_key=access_key))


def get_broker_acl_info() -> RemotingCommand:
    """GET_BROKER_CLUSTER_ACL_INFO (52); parse with :func:`parse_broker_acl_info`."""
    return _request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)


def parse_broker_acl_info(resp: RemotingCommand) -> dict[str, Any]:
    """``{"version": {...}, "allAclFileVersion": {file: {...}}, "brokerName", "brokerAddr",
    "clusterName"}`` from a GET_BROKER_CLUSTER_ACL_INFO reply."""
    check_success(resp)
    h = resp.decode_header(GetBrokerAclConfigResponseHeader)
    try:
        return {
            "version": json.loads(h.version),
            "allAclFileVersion": json.loads(h.all_acl_file_version or "{}"),
            "brokerName": h.broker_name,
            "brokerAddr": h.broker_addr,
            "clusterName": h.cluster_name,
        }
    except ValueError as e:
        raise RemotingCommandError(f"malformed GET_BROKER_CLUSTER_ACL_INFO reply: {e}") from e


def update_global_white_addrs(addrs: Iterable[str], acl_file_full_path: str | None = None) -> RemotingCommand:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace the global white list of one ACL file
    (the broker's default plain_acl.yml when None)."""
    return _request(
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        UpdateGlobalWhiteAddrsConfigRequestHeader(
            global_white_addrs=",".join(addrs), acl_file_full_path=acl_file_full_path
        ),
    )


def get_broker_acl_config() -> RemotingCommand:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54); parse with :func:`parse_broker_acl_config`."""
    return _request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)


def parse_broker_acl_config(resp: RemotingCommand) -> dict[str, Any]:
    """``{"globalWhiteAddrs": [...], "plainAccessConfigs": [{accessKey, secretKey, ...}]}``."""
    check_success(resp)
    return _json_body(resp, "GET_BROKER_CLUSTER_ACL_CONFIG")
