"""Plain ACL 1.0 on the broker, as Apache RocketMQ 4.9.8 does it (``acl`` module).

The accounts, their files, the signature check and the admin updates are
:class:`rmq.remoting.plain_acl.PlainAccounts` (shared with the name server); this module adds
what only the broker knows:

* :func:`request_resources` (Java ``PlainAccessValidator.parse``): the topics and groups a
  request code touches;
* :meth:`PlainPermissionManager.check` (Java ``PlainAccessValidator.validate``), run before
  every client request is dispatched: the resources, then
  :meth:`~rmq.remoting.plain_acl.PlainAccounts.authenticate`, then the permissions (topics,
  groups as their ``%RETRY%`` topic, admin-only codes). A refusal carries Java's remark.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

from rmq.common.constants import MixAll, TopicValidator
from rmq.common.log import clip
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import SEND_V2_CODES, send_wire_names
from rmq.remoting.plain_acl import (
    _VALIDATE,
    OFF_LOOP_BODY_BYTES,
    AclConfigError,
    AclError,
    Permission,
    PlainAccounts,
    _Account,
    acl_guard,
    acl_home,
    refuse_acl,
    remote_address_strategy,
)

__all__ = [
    "AclError",
    "AclConfigError",
    "OFF_LOOP_BODY_BYTES",
    "Permission",
    "PlainPermissionManager",
    "acl_guard",
    "acl_home",
    "refuse_acl",
    "remote_address_strategy",
    "request_resources",
]

log = logging.getLogger("rmq.broker.acl")

# Java RemotingHelper.exceptionSimpleDesc(e): the first stack frame of each refusal.
_CHECK_PERM = "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:{})"
_PARSE = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"


# ============================================================================ request resources


def _need(ext: dict[str, Any], name: str) -> str:
    v = ext.get(name)
    if v is None:
        # Java RemotingCommand.decodeCommandCustomHeader on a @CFNotNull field.
        raise AclError(f"the custom field <{name}> is null", _PARSE)
    return str(v)


def _retry(group: Any) -> str | None:
    return None if group is None else MixAll.RETRY_GROUP_TOPIC_PREFIX + str(group)


_SEND_CODES = frozenset(
    {
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE_V2,
    }
)
# A SEND to a %RETRY% topic is a consumer's resend and needs SUB on its group (Java); a reply
# to a %RETRY% topic is still a reply and needs PUB on that topic.
_RETRY_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})


def request_resources(cmd: RemotingCommand) -> dict[str, int] | None:
    """Resource → permission the request needs (Java ``PlainAccessValidator.parse``); None when
    the code touches no topic or group. Raises ``AclError`` when the request cannot be read."""
    code = cmd.code
    ext = cmd.ext_fields
    res: dict[str, int] = {}

    def add(resource: Any, perm: int) -> None:
        if resource is not None:
            res[str(resource)] = perm

    if code in _SEND_CODES:
        # the field names by request code, exactly as the SEND and reply processors read them
        # (rmq.protocol.headers.message.send_wire_names; Java PlainAccessValidator.parse reads "b"/"a"
        # for 310 and "topic"/"group" for 10): a 310 with long names names no topic here and
        # none to the processor either, which refuses it as Java's parseRequestHeader does.
        # 320 (absent from Java 4.9.8's parse, so unchecked there) and the replies 324/325
        # (also unchecked in Java: a reply could be stored into any topic) are checked as PUB
        # on their topic; see docs/design.md "ACL".
        names = send_wire_names(code)
        topic = ext.get(names["topic"])
        if topic is not None and str(topic).startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX) and code in _RETRY_CODES:
            # Java checks SUB on the group the request names ("a" in V2, "group" in V1 although
            # no V1 header has that field), not on the %RETRY% topic it writes: that topic is
            # checked too (its group's SUB, which its consumers hold), so naming one group and
            # writing another's retry topic is refused.
            add(_retry(ext.get(names["producer_group"] if code in SEND_V2_CODES else "group")), Permission.SUB)
            add(topic, Permission.SUB)
        else:
            add(topic, Permission.PUB)
    elif code == RequestCode.PULL_MESSAGE:
        add(ext.get("topic"), Permission.SUB)
        add(_retry(ext.get("consumerGroup")), Permission.SUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(_retry(ext.get("group")), Permission.SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), Permission.SUB)
    elif code == RequestCode.HEART_BEAT:
        try:
            data = json.loads(cmd.body_bytes() or b"null")
            for consumer in (data or {}).get("consumerDataSet") or ():
                add(_retry(consumer.get("groupName")), Permission.SUB)
                for sub in consumer.get("subscriptionDataSet") or ():
                    add(sub.get("topic"), Permission.SUB)
        except (ValueError, TypeError, AttributeError) as e:
            raise AclError(f"heartbeat body cannot be read: {clip(e)}", _PARSE) from None
    elif code == RequestCode.UNREGISTER_CLIENT:
        _need(ext, "clientID")
        add(_retry(ext.get("consumerGroup")), Permission.SUB)
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        add(_retry(_need(ext, "consumerGroup")), Permission.SUB)
    # RocketMQ 5 POP too (Java 5.3.3's @RocketMQAction on its headers: SUB on group and topic)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET or code in _POP_CODES:
        add(_retry(_need(ext, "consumerGroup")), Permission.SUB)
        add(_need(ext, "topic"), Permission.SUB)
    elif code == RequestCode.BATCH_ACK_MESSAGE:
        try:
            data = json.loads(cmd.body_bytes() or b"null")
            for a in (data or {}).get("acks") or ():
                add(_retry(a.get("c") or a.get("consumerGroup")), Permission.SUB)
                add(a.get("t") or a.get("topic"), Permission.SUB)
        except (ValueError, TypeError, AttributeError) as e:
            raise AclError(f"batch ack body cannot be read: {clip(e)}", _PARSE) from None
    return res or None


_POP_CODES = frozenset(
    (
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        RequestCode.NOTIFICATION,
        RequestCode.POLLING_INFO,
    )
)


# ============================================================================ the manager


class PlainPermissionManager(PlainAccounts):
    """The plain ACL of one broker: :class:`~rmq.remoting.plain_acl.PlainAccounts` plus the
    per-request check (see the module docstring).

    Args:
        home: ``rocketmqHome``; the accounts are in ``<home>/conf/plain_acl.yml`` (created empty
            when missing, as Java does) and ``<home>/conf/acl/**.yml``.
        watch_interval: seconds between two looks at the files (default 0.5).
    """

    def check(self, cmd: RemotingCommand, remote_host: str) -> AclError | None:
        """None when ``cmd`` from ``remote_host`` may be processed, else the refusal (Java
        ``PlainAccessValidator.parse`` then ``PlainPermissionManager.validate``)."""
        if self._state is None:
            return AclError("ACL configuration is not loaded", _VALIDATE.format(664))
        try:
            resources = request_resources(cmd)
        except AclError as e:
            return e
        account = self.authenticate(cmd, remote_host)
        if account is None or isinstance(account, AclError):
            return account
        # Java skips the check for the message-trace topic sent with PUB, so every account may
        # write it. Kept as the default (the Java and C++ clients' tracing sends there with the
        # application's account), but an account that lists RMQ_SYS_TRACE_TOPIC in its
        # topicPerms gets exactly that permission (e.g. RMQ_SYS_TRACE_TOPIC=DENY).
        if (
            resources is not None
            and resources.get(TopicValidator.RMQ_SYS_TRACE_TOPIC) == Permission.PUB
            and TopicValidator.RMQ_SYS_TRACE_TOPIC not in account.perms
        ):
            return None
        return self._check_perm(cmd.code, resources, account)

    def may_read(self, cmd: RemotingCommand, remote_host: str, topic: str) -> AclError | None:
        """None when the sender of ``cmd`` (already let through by :meth:`check`) may SUB
        ``topic``, else the refusal. For the answers whose topic is only known once the message
        is read (VIEW_MESSAGE_BY_ID; QUERY_MESSAGE's records): Java checks nothing there and
        hands any topic's bodies to any account (see docs/design.md "ACL")."""
        account = self.authenticate(cmd, remote_host)
        if account is None or isinstance(account, AclError):
            return account
        return self._check_perm(cmd.code, {topic: Permission.SUB}, account)

    def check_v2(
        self, authorization: str | None, date_time: str | None, remote_host: str, resources: dict[str, int] | None
    ) -> AclError | None:
        """The gRPC endpoint's check (Java 5's proxy with ACL 1.0 accounts): None when the
        request may proceed, else the refusal. ``authorization`` is the 5.x clients' metadata
        ``MQv2-HMAC-SHA1 Credential=<accessKey>[/...], SignedHeaders=x-mq-date-time,
        Signature=<hex>``, the signature being the hex HMAC-SHA1 of ``date_time`` (the
        ``x-mq-date-time`` metadata) keyed with the account's secret; ``resources`` maps topics
        and ``%RETRY%<group>`` names to the permission bits needed (None: none)."""
        state = self._state
        if state is None:
            return AclError("ACL configuration is not loaded", _VALIDATE.format(664))
        if any(white(remote_host) for white in state.global_white):
            return None
        fields = _authorization_fields(authorization)
        access_key = fields.get("Credential", "").split("/", 1)[0]
        if not access_key:
            return AclError("No accessKey is configured", _VALIDATE.format(664))
        account = state.accounts.get(access_key)
        if account is None:
            return AclError(f"No acl config for {clip(access_key)}", _VALIDATE.format(668))
        if not account.white(remote_host):
            mac = hmac.new(account.secret_key.encode("utf-8"), (date_time or "").encode("utf-8"), hashlib.sha1)
            signature = fields.get("Signature", "")
            if not signature.isascii() or not hmac.compare_digest(mac.hexdigest(), signature.lower()):
                return AclError(f"Check signature failed for accessKey={clip(access_key)}", _VALIDATE.format(684))
        return self._check_perm(0, resources, account)

    @staticmethod
    def _check_perm(code: int, needed: dict[str, int] | None, owned: _Account) -> AclError | None:
        """Java ``PlainPermissionManager.checkPerm``."""
        if code in Permission.ADMIN_CODE and not owned.admin:
            return AclError(
                f"Need admin permission for request code={code}, but accessKey={owned.access_key} is not",
                _CHECK_PERM.format(581),
            )
        if needed is None:
            return None
        perms = owned.perms
        if not perms and owned.admin:
            return None
        for resource, perm in needed.items():
            is_group = resource.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
            have = perms.get(resource)
            if have is None:
                have = owned.default_group_perm if is_group else owned.default_topic_perm
                line = 606
            else:
                line = 611
            if not Permission.check(perm, have):
                what = f"group:{resource[len(MixAll.RETRY_GROUP_TOPIC_PREFIX) :]}" if is_group else f"topic:{resource}"
                return AclError(f"No default permission for {what}", _CHECK_PERM.format(line))
        return None

    # ------------------------------------------------------------------ admin (blocking parts)


def _authorization_fields(authorization: str | None) -> dict[str, str]:
    """``MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=hex`` as a dict
    of its ``name=value`` parts (empty when absent or of another scheme)."""
    if not authorization:
        return {}
    scheme, _, rest = authorization.strip().partition(" ")
    if scheme != "MQv2-HMAC-SHA1":
        return {}
    out: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if sep:
            out[name.strip()] = value.strip()
    return out
