"""ACL accounts and white lists on brokers (Java ``DefaultMQAdminExt`` createAndUpdatePlainAccessConfig,
deletePlainAccessConfig, updateGlobalWhiteAddrConfig, examineBrokerClusterAclVersionInfo,
examineBrokerClusterAclConfig)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rmq.protocol.requests.acl import (
    PlainAccessConfig,
    delete_acl_config,
    get_broker_acl_config,
    get_broker_acl_info,
    parse_broker_acl_config,
    parse_broker_acl_info,
    update_acl_config,
    update_global_white_addrs,
)

from ._base import AdminBase


class AclAdmin(AdminBase):
    """ACL operations of :class:`rmq.client.admin.Admin` (brokers with ``aclEnable=true``;
    the signing account must be ``admin: true`` for the writes)."""

    async def create_and_update_plain_access_config(self, addr: str, config: PlainAccessConfig) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create or update one account in the broker's
        plain_acl.yml (Java ``createAndUpdatePlainAccessConfig``; fields left None stay as
        they are, see :class:`~rmq.protocol.requests.acl.PlainAccessConfig`)."""
        await self._call_ok(addr, update_acl_config(config))

    async def delete_plain_access_config(self, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG: remove one account (AdminError when the broker has none)."""
        await self._call_ok(addr, delete_acl_config(access_key))

    async def update_global_white_addr_config(
        self, addr: str, addrs: Iterable[str], acl_file_full_path: str | None = None
    ) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replace the global white list (of the default
        plain_acl.yml, or of ``acl_file_full_path`` under the broker's home)."""
        await self._call_ok(addr, update_global_white_addrs(addrs, acl_file_full_path))

    async def examine_broker_cluster_acl_version_info(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_ACL_INFO: ``{version, allAclFileVersion, brokerName, brokerAddr,
        clusterName}``."""
        return await self._call(addr, get_broker_acl_info(), parse_broker_acl_info)

    async def examine_broker_cluster_acl_config(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_ACL_CONFIG: ``{globalWhiteAddrs, plainAccessConfigs}`` (secrets
        included: rmq brokers answer admin accounts only)."""
        return await self._call(addr, get_broker_acl_config(), parse_broker_acl_config)
