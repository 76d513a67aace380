"""ConsumerManager and ProducerManager: who is connected, in which group, subscribed to what.

Membership comes from heartbeats (HEART_BEAT every 30 s per client) and leaves by
UNREGISTER_CLIENT, by the connection closing, or after ``channel_expired_seconds`` (120 s)
without a heartbeat. Clients rebalance on the member list GET_CONSUMER_LIST_BY_GROUP returns,
so whenever a group's membership changes the remaining members get
NOTIFY_CONSUMER_IDS_CHANGED (code 40, oneway) and rebalance at once (Java ``ConsumerManager.registerConsumer``).

Heartbeats arrive in two dialects: C++ writes enum ordinals (``"consumeType":1``), Java and
ali-ons write enum names (``"CONSUME_PASSIVELY"``). Both parse into the IntEnums below,
whose values are Java's ordinals.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

from rmq.common.log import RateLimitedLog, clip

if TYPE_CHECKING:
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker")
# Per-group and per-client lines: one heartbeat may name thousands of groups.
_rl = RateLimitedLog(log)


class ConsumeType(IntEnum):
    CONSUME_ACTIVELY = 0  # pull
    CONSUME_PASSIVELY = 1  # push


class MessageModel(IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


_E = TypeVar("_E", bound=IntEnum)


def parse_enum(enum_cls: type[_E], value: Any, default: _E) -> _E:
    """An enum from an ordinal (C++), a name (Java/ONS) or a numeric string; else ``default``."""
    if value is None:
        return default
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        try:
            return enum_cls(value)
        except ValueError:
            return default
    s = str(value).strip()
    if s.lstrip("-").isdigit():
        return parse_enum(enum_cls, int(s), default)
    try:
        return enum_cls[s]
    except KeyError:
        return default


@dataclass(slots=True)
class SubscriptionData:
    """One topic subscription of a group (Java ``SubscriptionData``).

    ``tags_set`` is what we match on; the heartbeat's ``codeSet`` is never trusted because the
    C++ client fills it with ``atoi(tag)``.
    """

    topic: str
    sub_string: str = "*"
    tags_set: tuple[str, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SubscriptionData:
        tags = d.get("tagsSet")
        if not isinstance(tags, (list, tuple)):
            tags = ()
        try:
            sub_version = int(d.get("subVersion") or 0)
        except (TypeError, ValueError):
            sub_version = 0
        return cls(
            topic=str(d.get("topic", "")),
            sub_string=str(d.get("subString") or "*"),
            tags_set=tuple(str(t) for t in tags),
            sub_version=sub_version,
            expression_type=str(d.get("expressionType") or "TAG"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": list(self.tags_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }


@dataclass(slots=True)
class ClientChannelInfo:
    """One client connection as a group member."""

    conn: Connection
    client_id: str
    language: str = "JAVA"
    version: int = 0
    last_update: float = field(default_factory=time.monotonic)

    @property
    def remote_addr(self) -> str:
        return getattr(self.conn, "remote_addr", "?")


@dataclass(slots=True)
class ConsumerGroupInfo:
    """A consumer group's live members and merged subscriptions."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    channels: dict[Connection, ClientChannelInfo] = field(default_factory=dict)  # conn -> info
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update: float = field(default_factory=time.monotonic)

    def all_client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})

    def find_subscription_data(self, topic: str) -> SubscriptionData | None:
        return self.subscriptions.get(topic)


NotifyFn = Callable[[str, list[Any]], None]  # (group, [conn, ...]) -> None


class ClientIndex:
    """Client id -> connection, one id per connection (its latest heartbeat's), for the reply
    processor to find a requester (Java ``ProducerManager.findChannel``). The managers add a
    connection while it has a group and forget it with its last group, so the index is bounded
    by the connections that are members somewhere."""

    def __init__(self) -> None:
        self._by_client: dict[str, Connection] = {}
        self._client_of: dict[Connection, str] = {}

    def __len__(self) -> int:
        return len(self._by_client)

    def ids(self) -> list[str]:
        """The indexed client ids."""
        return list(self._by_client)

    def index(self, conn: Connection, client_id: str) -> None:
        """``conn`` speaks for ``client_id`` now (a changed id replaces its previous one)."""
        if self._client_of.get(conn) != client_id:
            self.forget(conn)
            self._client_of[conn] = client_id
        self._by_client[client_id] = conn

    def forget(self, conn: Connection) -> None:
        client_id = self._client_of.pop(conn, None)
        if client_id is not None and self._by_client.get(client_id) is conn:
            del self._by_client[client_id]

    def find(self, client_id: str) -> Connection | None:
        return self._by_client.get(client_id)


class ConsumerManager:
    """Consumer groups and their member connections.

    Args:
        notify: called with ``(group, conns)`` when a group's membership changed and the
            remaining members should rebalance (the controller sends them code 40).
        channel_expired_seconds: heartbeat expiry (120 s).
    """

    def __init__(self, notify: NotifyFn | None = None, channel_expired_seconds: float = 120.0):
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.notify = notify
        self.channel_expired_seconds = channel_expired_seconds
        # conn -> {group: subscriptions it declared in its last heartbeat}: what one connection
        # holds here, for the per-connection bounds the heartbeat checks.
        self._by_conn: dict[Connection, dict[str, int]] = {}
        # client id -> its connection, while the connection is a member of some group (the
        # reply processor finds a requester that is only a consumer here)
        self.clients = ClientIndex()

    def memberships(self, conn: Connection) -> dict[str, int]:
        """The groups ``conn`` is a member of, each with the number of subscriptions it
        declared (read-only; empty when none)."""
        return self._by_conn.get(conn) or {}

    def _forget(self, conn: Connection, group: str) -> None:
        groups = self._by_conn.get(conn)
        if groups is not None:
            groups.pop(group, None)
            if not groups:
                del self._by_conn[conn]
                self.clients.forget(conn)

    def find_channel(self, client_id: str) -> Connection | None:
        """The connection of the consumer client ``client_id``, if it is a member of a group."""
        return self.clients.find(client_id)

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumer_table.get(group)
        return info.find_subscription_data(topic) if info else None

    def _notify(self, group: str, notify_enabled: bool) -> None:
        info = self.consumer_table.get(group)
        if not notify_enabled or self.notify is None or info is None or not info.channels:
            return
        self.notify(group, list(info.channels))

    def register_consumer(
        self,
        group: str,
        channel: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: list[SubscriptionData],
        notify_enabled: bool = True,
    ) -> bool:
        """Add or refresh one member; True (and a notification) when membership or
        subscriptions changed."""
        info = self.consumer_table.get(group)
        if info is None:
            info = self.consumer_table[group] = ConsumerGroupInfo(group)
        info.consume_type, info.message_model, info.consume_from_where = consume_type, message_model, consume_from_where
        info.last_update = time.monotonic()
        self._by_conn.setdefault(channel.conn, {})[group] = len(subscriptions)
        self.clients.index(channel.conn, channel.client_id)
        changed = False
        old = info.channels.get(channel.conn)
        if old is None:
            info.channels[channel.conn] = channel
            _rl.info(
                "consumer-connected",
                "new consumer connected, group %s %s %s",
                clip(group),
                clip(channel.client_id),
                channel.remote_addr,
            )
            changed = True
        else:
            if old.client_id != channel.client_id:
                changed = True
            old.client_id, old.language, old.version = channel.client_id, channel.language, channel.version
            old.last_update = time.monotonic()
        # Java keeps subscriptions of all members merged; a newer subVersion wins.
        new_topics = {s.topic for s in subscriptions}
        for sub in subscriptions:
            cur = info.subscriptions.get(sub.topic)
            if cur is None:
                info.subscriptions[sub.topic] = sub
                changed = True
                _rl.info(
                    "subscription-added",
                    "subscription changed, group %s add %s %s",
                    clip(group),
                    clip(sub.topic),
                    clip(sub.sub_string),
                )
            elif sub.sub_version > cur.sub_version:
                if sub.sub_string != cur.sub_string:
                    changed = True
                info.subscriptions[sub.topic] = sub
        # Drop topics nobody subscribes to anymore (only this member's view is known here;
        # Java does the same).
        if subscriptions:
            for topic in list(info.subscriptions):
                if topic not in new_topics:
                    del info.subscriptions[topic]
                    changed = True
                    _rl.info(
                        "subscription-removed", "subscription changed, group %s remove %s", clip(group), clip(topic)
                    )
        if changed:
            self._notify(group, notify_enabled)
        return changed

    def unregister_consumer(self, group: str, conn: Connection, notify_enabled: bool = True) -> bool:
        """Remove one member (UNREGISTER_CLIENT); True when it was there."""
        info = self.consumer_table.get(group)
        if info is None:
            return False
        removed = info.channels.pop(conn, None)
        if removed is None:
            return False
        self._forget(conn, group)
        _rl.info("consumer-unregistered", "unregister consumer ok, group %s %s", clip(group), clip(removed.client_id))
        if not info.channels:
            del self.consumer_table[group]
            _rl.info("consumer-group-empty", "consumer group %s has no member left, removed", clip(group))
        else:
            self._notify(group, notify_enabled)
        return True

    def do_channel_close_event(self, conn: Connection, why: str = "closed") -> list[str]:
        """A connection went away: remove it from every group and notify the rest."""
        groups = []
        self.clients.forget(conn)
        for group in self._by_conn.pop(conn, {}):  # only the groups it is in, not every group
            info = self.consumer_table.get(group)
            if info is None:
                continue
            removed = info.channels.pop(conn, None)
            if removed is None:
                continue
            groups.append(group)
            _rl.info(
                "consumer-removed",
                "consumer %s of group %s removed: connection %s (%s)",
                clip(removed.client_id),
                clip(group),
                removed.remote_addr,
                why,
            )
            if not info.channels:
                del self.consumer_table[group]
            else:
                self._notify(group, True)
        return groups

    def scan_not_active_channel(self, now: float | None = None) -> list[Connection]:
        """Members silent for longer than the expiry: removed; their conns returned to close."""
        now = time.monotonic() if now is None else now
        stale = []
        for info in list(self.consumer_table.values()):
            for conn, ch in list(info.channels.items()):
                if now - ch.last_update > self.channel_expired_seconds:
                    stale.append(conn)
        for conn in stale:
            self.do_channel_close_event(conn, f"no heartbeat for {self.channel_expired_seconds:.0f} s")
        return stale


class ProducerManager:
    """Producer groups and their connections (Java ``ProducerManager``): fed by heartbeats, read
    by GET_PRODUCER_CONNECTION_LIST and the transaction check-back.

    Args:
        channel_expired_seconds: heartbeat expiry (120 s, Java ``CHANNEL_EXPIRED_TIMEOUT``).
        max_groups: producer groups held at most (10 000); a heartbeat naming one more group is
            not recorded for it (one rate-limited warning). Java has no bound.
        max_per_group: connections one group holds at most (1000); past it the connection silent
            for longest is evicted to make room (one rate-limited warning).
    """

    def __init__(self, channel_expired_seconds: float = 120.0, max_groups: int = 10_000, max_per_group: int = 1_000):
        self.group_channel_table: dict[str, dict[Connection, ClientChannelInfo]] = {}
        self.channel_expired_seconds = channel_expired_seconds
        self.max_groups = max_groups
        self.max_per_group = max_per_group
        self._by_conn: dict[Connection, set[str]] = {}  # conn -> its producer groups
        # client id -> its connection (Java ProducerManager.clientChannelTable): the reply
        # processor finds a requester here, kept while the connection has a group
        self.clients = ClientIndex()
        #: bumped when a connection joins or leaves a group or changes its client id, language
        #: or version (not when a heartbeat only refreshes it): GET_ALL_PRODUCER_INFO reuses
        #: its answer while this stays the same.
        self.table_version = 0

    def groups_of(self, conn: Connection) -> set[str]:
        """The producer groups ``conn`` registered (read-only; empty when none)."""
        return self._by_conn.get(conn) or set()

    def register_producer(self, group: str, channel: ClientChannelInfo) -> bool:
        """Add or refresh one producer connection; False when the table is full and ``group``
        is a new group (nothing recorded)."""
        chans = self.group_channel_table.get(group)
        if chans is None:
            if len(self.group_channel_table) >= self.max_groups:
                _rl.warning(
                    "producer-groups-full",
                    "producer group %s of %s not recorded: the producer table holds %d groups (maxProducerGroups)",
                    clip(group),
                    clip(channel.client_id),
                    self.max_groups,
                )
                return False
            chans = self.group_channel_table[group] = {}
        old = chans.get(channel.conn)
        if old is None:
            if len(chans) >= self.max_per_group:
                oldest = min(chans.values(), key=lambda c: c.last_update)
                _rl.warning(
                    "producer-group-full",
                    "producer group %s holds %d connections (maxProducersPerGroup): evicting %s (%s) for %s",
                    clip(group),
                    self.max_per_group,
                    clip(oldest.client_id),
                    oldest.remote_addr,
                    clip(channel.client_id),
                )
                self.unregister_producer(group, oldest.conn)
                chans = self.group_channel_table.setdefault(group, {})
            chans[channel.conn] = channel
            self._by_conn.setdefault(channel.conn, set()).add(group)
            self.clients.index(channel.conn, channel.client_id)
            self.table_version += 1
            _rl.info(
                "producer-connected",
                "new producer connected, group %s %s %s",
                clip(group),
                clip(channel.client_id),
                channel.remote_addr,
            )
        else:
            self.clients.index(channel.conn, channel.client_id)
            if (old.client_id, old.language, old.version) != (channel.client_id, channel.language, channel.version):
                old.client_id, old.language, old.version = channel.client_id, channel.language, channel.version
                self.table_version += 1
            old.last_update = time.monotonic()
        return True

    def unregister_producer(self, group: str, conn: Connection) -> bool:
        chans = self.group_channel_table.get(group)
        removed = chans.pop(conn, None) if chans else None
        if removed is None:
            return False
        self.table_version += 1
        groups = self._by_conn.get(conn)
        if groups is not None:
            groups.discard(group)
            if not groups:
                del self._by_conn[conn]
                self.clients.forget(conn)
        if not chans:
            del self.group_channel_table[group]
        return True

    def do_channel_close_event(self, conn: Connection) -> None:
        for group in list(self._by_conn.get(conn, ())):
            self.unregister_producer(group, conn)

    def scan_not_active_channel(self, now: float | None = None) -> list[Connection]:
        now = time.monotonic() if now is None else now
        stale = [
            conn
            for chans in self.group_channel_table.values()
            for conn, ch in chans.items()
            if now - ch.last_update > self.channel_expired_seconds
        ]
        for conn in stale:
            self.do_channel_close_event(conn)
        return stale

    def find_channel(self, client_id: str) -> Connection | None:
        """The connection of the producer client ``client_id`` (Java ``findChannel``)."""
        return self.clients.find(client_id)

    def get_available_channel(self, group: str) -> Connection | None:
        chans = self.group_channel_table.get(group)
        if not chans:
            return None
        for conn in chans:
            if not getattr(conn, "closed", False):
                return conn
        return None
