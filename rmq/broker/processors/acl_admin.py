"""The ACL admin codes (Java ``AdminBrokerProcessor``'s ACL part, 4.9.8; code 54 as 4.9.3).

* UPDATE_AND_CREATE_ACL_CONFIG (50) → ``PlainPermissionManager.update_access_config``;
  failure: UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209) with Java's text.
* DELETE_ACL_CONFIG (51) → ``delete_access_config``; DELETE_ACL_CONFIG_FAILED (210).
* GET_BROKER_CLUSTER_ACL_INFO (52) → the files' data versions in the reply header.
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) → ``update_global_white_addrs``;
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211).
* GET_BROKER_CLUSTER_ACL_CONFIG (54) → every account and global white address as JSON.

File writes run in a worker thread, one update at a time. With ``aclEnable=false`` every code
is answered with its failure code (Java would fail on a missing validator) and says so.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from rmq.broker.acl import AclConfigError
from rmq.common.log import clip
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)

if TYPE_CHECKING:
    from rmq.broker.context import AclAdminContext
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker.acl")

_FAILED: dict[int, int] = {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    RequestCode.DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ResponseCode.SYSTEM_ERROR,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ResponseCode.SYSTEM_ERROR,
}


def _split(text: str | None) -> list[str] | None:
    # Java UtilAll.split(str, ","): null stays null; String.split drops trailing empty items.
    if text is None:
        return None
    items = text.split(",")
    while items and items[-1] == "" and len(items) > 1:
        items.pop()
    return items


class AclAdminProcessor:
    """Codes 50-54 (async: the yml is written off the loop)."""

    codes: tuple[RequestCode, ...] = tuple(RequestCode(c) for c in _FAILED)

    def __init__(self, controller: AclAdminContext) -> None:
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        acl = self.controller.acl
        if acl is None:
            return cmd.response(_FAILED[cmd.code], "ACL is not enabled on this broker (aclEnable=false)")
        try:
            if cmd.code == RequestCode.UPDATE_AND_CREATE_ACL_CONFIG:
                h = cmd.decode_header(CreateAccessConfigRequestHeader)
                ok = await acl.run_update(
                    acl.update_access_config,
                    {
                        "accessKey": h.access_key,
                        "secretKey": h.secret_key,
                        "whiteRemoteAddress": h.white_remote_address,
                        "admin": h.admin,
                        "defaultTopicPerm": h.default_topic_perm,
                        "defaultGroupPerm": h.default_group_perm,
                        "topicPerms": _split(h.topic_perms),
                        "groupPerms": _split(h.group_perms),
                    },
                )
                log.info("ACL: account %s created or updated by %s", clip(h.access_key), conn.remote_addr)
                failed = f"The accesskey[{h.access_key}] corresponding to accessConfig has been updated failed."
            elif cmd.code == RequestCode.DELETE_ACL_CONFIG:
                d = cmd.decode_header(DeleteAccessConfigRequestHeader)
                log.info("ACL: DeleteAccessConfig of %s called by %s", clip(d.access_key), conn.remote_addr)
                ok = await acl.run_update(acl.delete_access_config, d.access_key)
                failed = f"The accesskey[{d.access_key}] corresponding to accessConfig has been deleted failed."
            elif cmd.code == RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG:
                g = cmd.decode_header(UpdateGlobalWhiteAddrsConfigRequestHeader)
                ok = await acl.run_update(
                    acl.update_global_white_addrs, _split(g.global_white_addrs), g.acl_file_full_path
                )
                failed = f"The globalWhiteAddresses[{g.global_white_addrs}] has been updated failed."
            elif cmd.code == RequestCode.GET_BROKER_CLUSTER_ACL_INFO:
                bc = self.controller.broker_config
                return cmd.response(
                    ResponseCode.SUCCESS,
                    ext_fields=GetBrokerAclConfigResponseHeader(
                        version=acl.config_version(),
                        all_acl_file_version=acl.all_config_versions(),
                        broker_name=bc.broker_name,
                        broker_addr=self.controller.broker_addr,
                        cluster_name=bc.broker_cluster_name,
                    ),
                )
            else:  # GET_BROKER_CLUSTER_ACL_CONFIG
                body = json.dumps(acl.all_config(), separators=(",", ":")).encode()
                return cmd.response(ResponseCode.SUCCESS, body=body)
        except RemotingCommandError as e:
            return cmd.response(_FAILED[cmd.code], clip(e))
        except (AclConfigError, OSError) as e:
            # The text may quote a secret key (Java's key-length message): it goes back to the
            # admin who sent it, and only the code reaches the log.
            log.warning("ACL: admin code %s from %s refused (%s)", cmd.code, conn.remote_addr, type(e).__name__)
            return cmd.response(_FAILED[cmd.code], str(e))
        if not ok:
            log.warning("ACL: admin code %s from %s failed", cmd.code, conn.remote_addr)
            return cmd.response(_FAILED[cmd.code], failed)
        return cmd.response(ResponseCode.SUCCESS)
