"""Checks of the SDK's constructor arguments and Java's client namespaces.

A bad argument fails when the producer or consumer is built, with a
:class:`rmq.errors.ConfigError` (a ``ClientError`` and a ``ValueError``) naming the argument and
the values it allows, never later in a background task.

Namespaces (Java ``ClientConfig.namespace`` with ``NamespaceUtil``): a client built with
``namespace="ns"`` talks to the broker about ``ns%Topic`` and ``ns%Group`` (and
``%RETRY%ns%Group``, ``%DLQ%ns%Group``) while the application only ever sees ``Topic`` and
``Group``. System topics and groups are never wrapped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rmq.common.constants import MixAll, TopicValidator
from rmq.errors import ConfigError
from rmq.types import MessageQueue

__all__ = ["check_range", "check_positive", "check_namesrv_addr", "check_namespace", "Namespace"]

#: ``host:port`` (a name, IPv4 or bracketed IPv6 host), as Java's ``NetworkUtil`` accepts.
_ADDR = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")
NAMESPACE_SEPARATOR = "%"


def check_range(name: str, value: float, lo: float, hi: float) -> None:
    """ConfigError unless ``value`` is a number and ``lo <= value <= hi``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(name, f"must be a number, got {value!r}", f"[{lo}, {hi}]")
    if not lo <= value <= hi:
        raise ConfigError(name, f"out of range: {value}", f"[{lo}, {hi}]")


def check_positive(name: str, value: float) -> None:
    """ConfigError unless ``value`` is a number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(name, f"must be a number > 0, got {value!r}", "> 0")


def check_namesrv_addr(namesrv_addr: object) -> list[str]:
    """The name server addresses of ``"h:p"``, ``"h1:p1;h2:p2"`` or a list of ``"h:p"``;
    ConfigError for an empty value or an address that is not ``host:port`` (port 1..65535)."""
    if isinstance(namesrv_addr, str):
        addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
    elif isinstance(namesrv_addr, (list, tuple)) and all(isinstance(a, str) for a in namesrv_addr):
        addrs = [a.strip() for a in namesrv_addr if a.strip()]
    else:
        raise ConfigError(
            "namesrv_addr",
            f"must be a string or a list of strings, got {type(namesrv_addr).__name__}",
            "'host:port', 'h1:p1;h2:p2' or ['h1:p1', ...]",
        )
    if not addrs:
        raise ConfigError("namesrv_addr", "is empty", "'host:port', 'h1:p1;h2:p2' or ['h1:p1', ...]")
    for a in addrs:
        m = _ADDR.match(a)
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise ConfigError("namesrv_addr", f"{a[:80]!r} is not host:port", "'host:port' with a port in 1..65535")
    return addrs


def check_namespace(namespace: str | None) -> str | None:
    """None or ``""`` (no namespace), else a name of ``[a-zA-Z0-9_-]`` (Java
    ``Validators.checkTopic`` characters without ``%`` and ``|``, which would make wrapped names
    ambiguous), at most 64 characters."""
    if namespace is None or namespace == "":
        return None
    if not isinstance(namespace, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", namespace):
        raise ConfigError(
            "namespace",
            f"{str(namespace)[:80]!r} is not a valid namespace",
            "1..64 characters of [a-zA-Z0-9_-], or None",
        )
    return namespace


def _is_system(resource: str) -> bool:
    return TopicValidator.is_system_topic(resource) or MixAll.is_sys_consumer_group(resource)


def _strip_retry_dlq(resource: str) -> tuple[str, str]:
    for prefix in (MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix) :]
    return "", resource


class Namespace:
    """Wraps and unwraps topic and group names (Java ``NamespaceUtil.wrapNamespace`` /
    ``withoutNamespace(resource, namespace)``). With ``name=None`` both are the identity."""

    __slots__ = ("name", "_prefix")

    def __init__(self, name: str | None) -> None:
        self.name = check_namespace(name)
        self._prefix = (self.name + NAMESPACE_SEPARATOR) if self.name else ""

    def __bool__(self) -> bool:
        return self.name is not None

    def wrap(self, resource: str) -> str:
        """``T`` → ``ns%T``; ``%RETRY%G`` → ``%RETRY%ns%G``; system names and names already
        wrapped stay as they are."""
        if not self._prefix or not resource or _is_system(resource):
            return resource
        prefix, rest = _strip_retry_dlq(resource)
        if rest.startswith(self._prefix):
            return resource
        return prefix + self._prefix + rest

    def unwrap(self, resource: str) -> str:
        """The inverse of :meth:`wrap`; names of another namespace stay as they are."""
        if not self._prefix or not resource:
            return resource
        prefix, rest = _strip_retry_dlq(resource)
        if rest.startswith(self._prefix):
            return prefix + rest[len(self._prefix) :]
        return resource

    def wrap_mq(self, mq: MessageQueue) -> MessageQueue:
        if not self._prefix:
            return mq
        return MessageQueue(self.wrap(mq.topic), mq.broker_name, mq.queue_id)

    def unwrap_mq(self, mq: MessageQueue) -> MessageQueue:
        if not self._prefix:
            return mq
        return MessageQueue(self.unwrap(mq.topic), mq.broker_name, mq.queue_id)

    def unwrap_mqs(self, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        return {self.unwrap_mq(mq) for mq in mqs}
