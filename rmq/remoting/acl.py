"""ACL 1.0 request signing, as Apache RocketMQ 4.9.8's plain ACL does it.

One implementation of the signature, used by both sides:

* clients sign every request with :class:`AclClientRPCHook` (Java ``AclClientRPCHook``): they
  add ``AccessKey`` (and ``SecurityToken`` when they have one) to the extFields, then
  ``Signature`` = base64(HMAC-SHA1(secretKey, content));
* the broker recomputes it from the request as received (Java ``PlainAccessValidator.parse``
  builds the content, ``PlainPermissionManager.validate`` compares).

The content (Java ``AclUtils.combineRequestContent``) is every extFields value, ordered by key,
without ``Signature`` (and, on the broker, without ``_UNIQUE_KEY_QUERY``), concatenated as
UTF-8, followed by the body bytes. The C++ core of PyPI ``rocketmq`` and npm ``ali-ons`` sign
the same way over their wire fields (they add ``OnsChannel``, which is then part of the
content like any other field), so one verification accepts all three.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rmq.common.constants import MixAll
from rmq.common.message import java_str
from rmq.protocol.command import Body, RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECRET_KEY",
    "SIGNATURE",
    "SECURITY_TOKEN",
    "SessionCredentials",
    "AclClientRPCHook",
    "combine_request_content",
    "Signer",
    "cal_signature",
    "request_signature",
    "sign_request",
]

# Java SessionCredentials: the extFields names.
ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"

_EXCLUDED = frozenset((SIGNATURE, MixAll.UNIQUE_MSG_QUERY_FLAG))


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An access key pair (Java ``SessionCredentials``); the secret never appears in its repr.

    Args:
        access_key: the account's accessKey (as in the broker's plain_acl.yml).
        secret_key: its secretKey.
        security_token: optional ``SecurityToken`` sent with each request (default None).
    """

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.access_key, str) or not self.access_key:
            raise ValueError("access_key must be a non-empty string")
        if not isinstance(self.secret_key, str) or not self.secret_key:
            raise ValueError("secret_key must be a non-empty string")

    @staticmethod
    def of(
        access_key: str | None, secret_key: str | None, security_token: str | None = None
    ) -> SessionCredentials | None:
        """Credentials from optional keyword arguments: None when both keys are None.

        Raises:
            ValueError: only one of the two keys is given, or one is empty.
        """
        if access_key is None and secret_key is None:
            if security_token is not None:
                raise ValueError("security_token needs access_key and secret_key")
            return None
        if access_key is None or secret_key is None:
            raise ValueError("access_key and secret_key go together: give both or neither")
        return SessionCredentials(access_key, secret_key, security_token)


def combine_request_content(ext_fields: Mapping[str, Any], *, skip_none: bool = False) -> bytes:
    """The signed header part: extFields values ordered by key (without ``Signature`` and
    ``_UNIQUE_KEY_QUERY``), concatenated, UTF-8 (Java ``AclUtils.combineRequestContent``).

    ``skip_none`` drops None values, which the encoder does not send (the signing side).
    The body follows this on the wire of the signature, see :func:`cal_signature`.
    """
    values = [ext_fields[k] for k in sorted(ext_fields) if k not in _EXCLUDED]
    try:
        text = "".join(values)  # the usual case: every value a str (binary headers, Java's JSON)
    except TypeError:  # JSON numbers/booleans/null as a peer sent them, or our fields before encoding
        # (as the codec writes a value, Java makeCustomHeaderToNet, and fastjson reads one back)
        text = "".join([java_str(v) for v in values if not (skip_none and v is None)])
    return text.encode("utf-8", "surrogatepass")


class Signer:
    """HMAC-SHA1 keyed once with a secret; :meth:`sign` copies the keyed state per request
    (cheaper than keying again). Java ``AclSigner.calSignature``."""

    __slots__ = ("_mac",)

    def __init__(self, secret_key: str | bytes) -> None:
        key = secret_key.encode("utf-8") if isinstance(secret_key, str) else secret_key
        self._mac = hmac.new(key, digestmod=hashlib.sha1)

    def sign(self, content: bytes, body: Body | None) -> str:
        """base64(HMAC-SHA1(content + body)); the body parts are fed one by one, never joined
        (copying the keyed state measured faster than a one-shot ``hmac.digest`` by name)."""
        mac = self._mac.copy()
        mac.update(content)
        if body is not None:
            for part in body if isinstance(body, list) else (body,):
                mac.update(part)
        return base64.b64encode(mac.digest()).decode("ascii")

    def __repr__(self) -> str:
        return "Signer(<secret>)"


def cal_signature(content: bytes, body: Body | None, secret_key: str | bytes) -> str:
    """base64(HMAC-SHA1(secret_key, content + body)) (Java ``AclUtils.calSignature``)."""
    return Signer(secret_key).sign(content, body)


def request_signature(cmd: RemotingCommand, secret_key: str | bytes) -> str:
    """The signature the broker expects for ``cmd`` as received (every field counted)."""
    return cal_signature(combine_request_content(cmd.ext_fields), cmd.body, secret_key)


def sign_request(cmd: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add ``AccessKey``, ``SecurityToken`` (if any) and ``Signature`` to ``cmd``'s extFields
    (Java ``AclClientRPCHook.doBeforeRequest``). Signing twice gives the same fields."""
    ext = cmd.ext_fields
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    content = combine_request_content(ext, skip_none=True)
    ext[SIGNATURE] = cal_signature(content, cmd.body, credentials.secret_key)


class AclClientRPCHook:
    """A ``RemotingClient`` hook that signs every request with ``credentials``.

    ``client.add_rpc_hook(AclClientRPCHook(SessionCredentials("ak", "sk")))``.
    """

    __slots__ = ("credentials",)

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    def before(self, addr: str, cmd: RemotingCommand) -> None:
        sign_request(cmd, self.credentials)

    def after(self, addr: str, cmd: RemotingCommand, response: RemotingCommand) -> None:
        return None

    def __repr__(self) -> str:
        return f"AclClientRPCHook(access_key={self.credentials.access_key!r})"
