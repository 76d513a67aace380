"""RouteInfoManager: who serves which topic, as the name server knows it.

Brokers register every 30 s with their whole topic table; clients ask for the route of one
topic at a time. Four tables, as in Java's ``RouteInfoManager``::

    topic_queue_table   topic        -> {broker_name: QueueData}
    broker_addr_table   broker_name  -> BrokerData(cluster, broker_name, {broker_id: addr})
    cluster_addr_table  cluster      -> {broker_name, ...}
    broker_live_table   broker_addr  -> BrokerLiveInfo(last_update, data_version, conns, ha addr)

A broker that has not registered for ``broker_channel_expired_seconds`` (120 s) is removed
from all four (``scan_not_active_broker``); so is one whose every registering connection has
closed (``on_channel_destroy``). A connection that never registered an address cannot remove
it: closing it is a no-op for the routes.

A registration is checked whole before any table changes (:func:`parse_topic_config_table`
and the header checks in :meth:`RouteInfoManager.register_broker`), so a malformed one leaves
nothing behind. A registration of a ``brokerName`` + ``brokerId`` that a live broker holds from
another address, over another connection, is refused with :class:`RegistrationRefused`: two
masters named ``broker-a`` (a misconfiguration, or a spoof) must not take each other's routes.
The holder keeps them until it unregisters or expires. Java's name server lets the newcomer
replace the holder silently (``RouteInfoManager.registerBroker``).

Everything runs on the event loop, so there is no lock: each method is atomic between awaits.
Route JSON is built here in Java's field names.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from rmq.common.constants import PermName
from rmq.common.log import RateLimitedLog, clip
from rmq.common.route import MASTER_ID, BrokerData, QueueData
from rmq.errors import RemotingCommandError
from rmq.protocol.body.register import TopicEntry, decode_register_body

__all__ = [
    "MASTER_ID",
    "BrokerData",
    "BrokerLiveInfo",
    "QueueData",
    "RegisterBrokerResult",
    "RegistrationRefused",
    "RouteInfoManager",
    "RouteLimits",
    "parse_topic_config_table",
    "decode_register_body",
    "TopicEntry",
]

log = logging.getLogger("rmq.namesrv")

#: Java keeps brokerId in a long; names and addresses are short in any real deployment.
MAX_BROKER_ID = 2**63 - 1
MAX_NAME_CHARS = 255
#: queue counts a name server accepts in a registration. Java's broker caps a topic's queues
#: at 1024 for clients but its own retry topics may carry more; 65535 keeps route JSON sane.
MAX_QUEUE_NUMS = 65535
_INT32_MAX = 2**31 - 1
_ADDR = re.compile(r"[^\s:;,]+:\d{1,5}")
#: connections remembered per broker address (a broker uses one per name server; a restart or
#: a reconnect adds one until the old one's close is seen).
MAX_CONNS_PER_BROKER = 8


class RegistrationRefused(RemotingCommandError):
    """A REGISTER_BROKER the name server will not accept (answered SYSTEM_ERROR with the
    message as remark). Not retriable as such: the registration is refused until the other
    holder of the name unregisters or expires, or a bound is raised."""


@dataclass(slots=True)
class RouteLimits:
    """Bounds of the name server's tables (``NamesrvConfig`` carries the configured values).

    Attributes:
        max_brokers: broker addresses registered at once (default 2048).
        max_topics_per_broker: topics in one registration (default 100 000).
        max_topics: distinct topics over all brokers (default 500 000).
    """

    max_brokers: int = 2048
    max_topics_per_broker: int = 100_000
    max_topics: int = 500_000


@dataclass(slots=True)
class BrokerLiveInfo:
    """One registered broker address: when it last registered, its topic table's version, the
    connections it registered over, and its HA address."""

    last_update: float
    data_version: dict[str, Any]
    conns: list[object] = field(default_factory=list)
    ha_server_addr: str = ""

    @property
    def conn(self) -> object | None:
        """The most recent registering connection (``None`` for in-process registrations)."""
        return self.conns[-1] if self.conns else None


@dataclass(slots=True)
class RegisterBrokerResult:
    """What a registering broker is told: where its master and HA peer are."""

    ha_server_addr: str = ""
    master_addr: str = ""


def _int_field(tc: dict[str, Any], key: str, default: int, lo: int, hi: int, topic: str) -> int:
    v = tc.get(key, default)
    if type(v) is int and lo <= v <= hi:  # the usual case, first
        return v
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise RemotingCommandError(f"topicConfigTable[{clip(topic)}].{key} is not an integer: {clip(v)}")
    try:
        n = int(v)
    except ValueError:
        raise RemotingCommandError(f"topicConfigTable[{clip(topic)}].{key} is not an integer: {clip(v)}") from None
    if not lo <= n <= hi:
        raise RemotingCommandError(f"topicConfigTable[{clip(topic)}].{key}={n} is out of range {lo}..{hi}")
    return n


def parse_topic_config_table(broker_name: str, table: object, max_topics: int) -> dict[str, QueueData]:
    """Check a RegisterBrokerBody's ``topicConfigTable`` and turn it into queue data (every
    topic's; :meth:`RouteInfoManager.register_broker` builds only the changed ones').

    Every topic name must be 1..255 printable characters (looser than ``TopicValidator``: a Java
    broker named after its host, ``broker.example.com``, registers a topic of that name), every
    entry an object whose
    ``readQueueNums`` / ``writeQueueNums`` are 0..65535, ``perm`` made of ``PermName`` bits
    (0..15, default read + write) and ``topicSysFlag`` a non-negative int32. Raises
    :class:`RemotingCommandError` naming the first bad entry, or
    :class:`RegistrationRefused` past ``max_topics`` entries.
    """
    _, changed = _check_topic_config_table(broker_name, table, max_topics, None)
    return {
        t: QueueData(broker_name, e.readQueueNums, e.writeQueueNums, e.perm, e.topicSysFlag) for t, e in changed.items()
    }


def _check_topic_config_table(
    broker_name: str, table: object, max_topics: int, held: dict[str, TopicEntry] | None
) -> tuple[dict[str, TopicEntry], dict[str, TopicEntry]]:
    """``(entries, changed)`` of a registered ``table``: every entry as a checked
    :class:`TopicEntry`, and those that differ from ``held`` (what the routes hold for this
    broker: :attr:`RouteInfoManager._broker_topics`). An entry equal to its held one was
    checked when it was stored, so only the changed ones are checked (the rules in
    :func:`parse_topic_config_table`): a 10,000-topic broker registering a new table version
    with one topic changed costs about a dict comparison, not 10,000 checks (Java
    ``RouteInfoManager.registerBroker`` rebuilds every ``QueueData`` each time)."""
    if not isinstance(table, dict):
        raise RemotingCommandError("topicConfigTable is not an object")
    if len(table) > max_topics:
        raise RegistrationRefused(
            f"broker {clip(broker_name)} registers {len(table)} topics, more than this name server's "
            f"maxTopicsPerBroker={max_topics}"
        )
    if held:
        if table == held:  # in C: the steady state of a broker whose table did not change
            return table, {}
        get = held.get
        todo = [(t, e) for t, e in table.items() if get(t) != e]
    else:
        todo = list(table.items())
    changed: dict[str, TopicEntry] = {}
    rebuilt: dict[str, TopicEntry] = {}  # entries of a general decode (dicts), as TopicEntry
    for topic, tc in todo:
        if (
            type(topic) is not str
            or not topic
            or len(topic) > MAX_NAME_CHARS
            or not topic.isprintable()
            or not topic.strip()
        ):
            raise RemotingCommandError(
                f"topicConfigTable has an illegal topic name {clip(topic)!r}: expected 1 to "
                f"{MAX_NAME_CHARS} printable characters"
            )
        if type(tc) is TopicEntry:
            if (
                0 <= tc.readQueueNums <= MAX_QUEUE_NUMS
                and 0 <= tc.writeQueueNums <= MAX_QUEUE_NUMS
                and 0 <= tc.perm <= PermName.ALL
                and 0 <= tc.topicSysFlag <= _INT32_MAX
            ):
                changed[topic] = tc
                continue
            tc = {
                "readQueueNums": tc.readQueueNums,
                "writeQueueNums": tc.writeQueueNums,
                "perm": tc.perm,
                "topicSysFlag": tc.topicSysFlag,
            }
        elif not isinstance(tc, dict):
            raise RemotingCommandError(f"topicConfigTable[{clip(topic)}] is not an object")
        entry = rebuilt[topic] = TopicEntry(
            _int_field(tc, "readQueueNums", 0, 0, MAX_QUEUE_NUMS, topic),
            _int_field(tc, "writeQueueNums", 0, 0, MAX_QUEUE_NUMS, topic),
            _int_field(tc, "perm", PermName.READ_WRITE, 0, PermName.ALL, topic),
            _int_field(tc, "topicSysFlag", 0, 0, _INT32_MAX, topic),
        )
        if held is None or held.get(topic) != entry:
            changed[topic] = entry
    if not rebuilt:
        return table, changed
    entries = dict(table)
    entries.update(rebuilt)
    return entries, changed


def _check_name(what: str, value: str, required: bool = True) -> None:
    if required and not value:
        raise RemotingCommandError(f"RegisterBrokerRequestHeader.{what} is empty")
    if len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise RemotingCommandError(
            f"RegisterBrokerRequestHeader.{what} {clip(value)!r} is not a printable name of at most "
            f"{MAX_NAME_CHARS} characters"
        )


def _state_version(data_version: dict[str, Any] | None) -> int:
    """A registration's ``dataVersion.stateVersion`` (0 when absent or not a number)."""
    v = (data_version or {}).get("stateVersion", 0)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


class RouteInfoManager:
    """The name server's routing tables (see module docstring).

    Args:
        broker_channel_expired_seconds: expiry of a silent broker (default 120 s, Java
            ``BROKER_CHANNEL_EXPIRED_TIME``).
        limits: table bounds (:class:`RouteLimits` defaults).
    """

    def __init__(self, broker_channel_expired_seconds: float = 120.0, limits: RouteLimits | None = None):
        self.broker_channel_expired_seconds = broker_channel_expired_seconds
        self.limits = limits or RouteLimits()
        self._rate_log = RateLimitedLog(log)  # per name server: one peer's repeats never hide another's
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        # broker name -> topic -> the entry its queue data in topic_queue_table was built from,
        # kept equal to it (a wipe of the write perm updates both): the topics of a broker
        # without a walk of every topic, and what a registration compares its table with.
        self._broker_topics: dict[str, dict[str, TopicEntry]] = {}

    # -- registration ---------------------------------------------------------------------

    def _is_live(self, live: BrokerLiveInfo | None, now: float) -> bool:
        """Registered within the expiry over a connection that is still open (or in-process)."""
        if live is None or now - live.last_update > self.broker_channel_expired_seconds:
            return False
        return not live.conns or any(not getattr(c, "closed", False) for c in live.conns)

    def _check_holder(
        self,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        conn: object | None,
        now: float,
        data_version: dict[str, Any] | None = None,
    ) -> None:
        """Refuse taking ``broker_name``/``broker_id`` (or ``broker_addr`` under another id) from a
        live broker that registered over another connection, unless the newcomer's
        ``dataVersion.stateVersion`` is higher: in controller mode that is the master epoch, and
        a master the controller elected takes the id over from the one it replaced, which may
        still be alive (stopped, or cut off from the controller), as Java 5's
        ``RouteInfoManager.registerBroker`` arbitrates."""
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            return
        held = broker_data.broker_addrs.get(broker_id)
        if held is not None and held != broker_addr:
            live = self.broker_live_table.get(held)
            newer = live is not None and _state_version(data_version) > _state_version(live.data_version)
            if newer:
                log.warning(
                    "%s id=%d taken over by %s from %s: its stateVersion (master epoch) %d is newer than %d",
                    clip(broker_name),
                    broker_id,
                    clip(broker_addr),
                    clip(held),
                    _state_version(data_version),
                    _state_version(live.data_version if live is not None else None),
                )
            elif self._is_live(live, now) and (conn is None or live is None or conn not in live.conns):
                self._rate_log.warning(
                    f"dup-broker:{clip(broker_name)}:{broker_id}",
                    "refused registration of %s id=%d from %s: %s holds that name and id over a live connection",
                    clip(broker_name),
                    broker_id,
                    clip(broker_addr),
                    clip(held),
                )
                raise RegistrationRefused(
                    f"broker {clip(broker_name)} id {broker_id} is already registered from {clip(held)}, which is "
                    f"alive; registration from {clip(broker_addr)} refused (two brokers with the same brokerName "
                    f"and brokerId?) until it unregisters or expires after "
                    f"{self.broker_channel_expired_seconds:g} s"
                )
        for bid, addr in broker_data.broker_addrs.items():
            if addr == broker_addr and bid != broker_id:
                live = self.broker_live_table.get(addr)
                if self._is_live(live, now) and live is not None and live.conns and conn not in live.conns:
                    raise RegistrationRefused(
                        f"{clip(broker_addr)} is registered as {clip(broker_name)} id {bid} over another live "
                        f"connection; registration as id {broker_id} refused"
                    )

    def _topics_changed(self, broker_name: str, broker_id: int, broker_addr: str, data_version: object) -> bool:
        """Whether a master's registration must (re)apply its topic table: a first registration
        of this name/id/address, or a new table version (Java ``isBrokerTopicConfigChanged``).
        The steady state, the same version every 30 s, skips both checking and applying."""
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or broker_data.broker_addrs.get(broker_id) != broker_addr:
            return True
        prev = self.broker_live_table.get(broker_addr)
        return prev is None or prev.data_version != (data_version or {})

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_table: dict[str, Any] | None,
        data_version: dict[str, Any] | None,
        conn: object | None = None,
    ) -> RegisterBrokerResult:
        """Record (or refresh) one broker and, for a master, its topic table.

        ``topic_config_table`` maps topic → Java ``TopicConfig`` JSON (``readQueueNums``,
        ``writeQueueNums``, ``perm``, ``topicSysFlag``). When a master sends its full table,
        topics it no longer lists lose this broker's queues, so a deleted topic disappears
        from routes on the next registration. A table without the broker's own
        ``brokerName`` topic, which every broker lists (Java ``TopicConfigManager``), is an
        increment (Java ``BrokerController.registerIncrementBrokerData``: the topics just
        created): merged into the routes as Java 4.9.8's ``RouteInfoManager.registerBroker``
        does, removing nothing; its version is recorded, so a full table of the same version
        is skipped as Java skips it (a deletion makes a new version).

        Everything is checked before anything changes. Raises :class:`RemotingCommandError`
        for a malformed header value or table entry, :class:`RegistrationRefused` when a live
        broker on another connection holds the name and id, or a table bound would be passed.
        """
        _check_name("clusterName", cluster_name)
        _check_name("brokerName", broker_name)
        _check_name("brokerAddr", broker_addr)
        _check_name("haServerAddr", ha_server_addr, required=False)
        if not _ADDR.fullmatch(broker_addr):
            raise RemotingCommandError(f"RegisterBrokerRequestHeader.brokerAddr {clip(broker_addr)!r} is not host:port")
        if not 0 <= broker_id <= MAX_BROKER_ID:
            raise RemotingCommandError(
                f"RegisterBrokerRequestHeader.brokerId {broker_id} is out of range 0..{MAX_BROKER_ID}"
            )
        if data_version is not None and not isinstance(data_version, dict):
            raise RemotingCommandError("dataVersion is not an object")
        checked = None
        increment = topic_config_table is not None and broker_name not in topic_config_table
        if (
            topic_config_table is not None
            and broker_id == MASTER_ID
            and (increment or self._topics_changed(broker_name, broker_id, broker_addr, data_version))
        ):
            checked = _check_topic_config_table(
                broker_name,
                topic_config_table,
                self.limits.max_topics_per_broker,
                self._broker_topics.get(broker_name),
            )
        now = time.monotonic()
        self._check_holder(broker_name, broker_id, broker_addr, conn, now, data_version)
        if broker_addr not in self.broker_live_table and len(self.broker_live_table) >= self.limits.max_brokers:
            self._rate_log.warning(
                "broker-table-full",
                "refused registration of %s from %s: %d brokers registered (maxBrokers)",
                clip(broker_name),
                clip(broker_addr),
                len(self.broker_live_table),
            )
            raise RegistrationRefused(
                f"this name server already has {len(self.broker_live_table)} brokers "
                f"(maxBrokers={self.limits.max_brokers}); registration refused"
            )
        if checked is not None:
            # an unchanged entry's topic is in the table already: only the changed can be new
            new_topics = sum(1 for t in checked[1] if t not in self.topic_queue_table)
            if new_topics and len(self.topic_queue_table) + new_topics > self.limits.max_topics:
                self._rate_log.warning(
                    "topic-table-full",
                    "refused registration of %s from %s: %d new topics past maxTopics",
                    clip(broker_name),
                    clip(broker_addr),
                    new_topics,
                )
                raise RegistrationRefused(
                    f"registering {new_topics} new topics would pass this name server's maxTopics="
                    f"{self.limits.max_topics} ({len(self.topic_queue_table)} known); registration refused"
                )

        # From here on nothing raises: the tables change together.
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        first_register = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name)
            self.broker_addr_table[broker_name] = broker_data
        # One address per id: a broker that moved to another id (slave promoted) must not
        # stay listed twice (Java removes the old id with the same address).
        for bid, addr in list(broker_data.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del broker_data.broker_addrs[bid]
        old_addr = broker_data.broker_addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            self.broker_live_table.pop(old_addr, None)
        broker_data.broker_addrs[broker_id] = broker_addr
        first_register = first_register or old_addr is None

        prev = self.broker_live_table.get(broker_addr)
        if checked is not None:
            self._update_topics_of_broker(broker_name, *checked, full=not increment)

        conns = [c for c in prev.conns if not getattr(c, "closed", False)] if prev is not None else []
        if conn is not None and conn not in conns:
            conns.append(conn)
            del conns[:-MAX_CONNS_PER_BROKER]
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, dict(data_version or {}), conns, ha_server_addr)
        if first_register:
            log.info(
                "new broker registered: %s %s id=%d cluster=%s",
                clip(broker_name),
                clip(broker_addr),
                broker_id,
                clip(cluster_name),
            )

        result = RegisterBrokerResult()
        if broker_id != MASTER_ID:
            master_addr = broker_data.broker_addrs.get(MASTER_ID)
            if master_addr:
                master_live = self.broker_live_table.get(master_addr)
                result.master_addr = master_addr
                result.ha_server_addr = master_live.ha_server_addr if master_live else ""
        return result

    def _update_topics_of_broker(
        self, broker_name: str, entries: dict[str, TopicEntry], changed: dict[str, TopicEntry], full: bool
    ) -> None:
        """Apply a checked table: queue data for the ``changed`` entries (a new ``QueueData``,
        so a route built earlier keeps its own), and for a ``full`` table (not an increment)
        drop the broker from the topics ``entries`` no longer lists."""
        table = self.topic_queue_table
        for topic, e in changed.items():
            queues = table.get(topic)
            if queues is None:
                queues = table[topic] = {}
            if broker_name not in queues:
                log.debug("new topic registered: %s on %s", topic, broker_name)
            queues[broker_name] = QueueData(broker_name, e.readQueueNums, e.writeQueueNums, e.perm, e.topicSysFlag)
        held = self._broker_topics.get(broker_name)
        if full:
            # The table lists every held topic when it is as long and adds none (the usual new
            # version: a topic updated); only otherwise is there a difference to walk.
            if held and (len(entries) != len(held) or any(t not in held for t in changed)):
                for topic in held.keys() - entries.keys():
                    self._remove_topic_of_broker(topic, broker_name)
            # a copy: ``entries`` may be the caller's table
            self._broker_topics[broker_name] = dict(entries)
        elif held is None:
            self._broker_topics[broker_name] = dict(changed)
        else:
            held.update(changed)

    def _remove_topic_of_broker(self, topic: str, broker_name: str) -> None:
        held = self._broker_topics.get(broker_name)
        if held is not None:
            held.pop(topic, None)
        queues = self.topic_queue_table.get(topic)
        if queues and queues.pop(broker_name, None) is not None:
            log.debug("topic %s removed from broker %s", topic, broker_name)
            if not queues:
                del self.topic_queue_table[topic]

    def check_unregister(self, broker_name: str, broker_addr: str, conn: object | None) -> None:
        """Refuse an UNREGISTER_BROKER for an address that a live broker registered over other
        connections (a broker unregisters over the connection it registers over; Java accepts
        it from anyone, which lets any client take a broker's routes away)."""
        live = self.broker_live_table.get(broker_addr)
        if live is not None and live.conns and conn not in live.conns and self._is_live(live, time.monotonic()):
            self._rate_log.warning(
                f"unregister-refused:{clip(broker_addr)}",
                "refused UNREGISTER_BROKER of %s %s from a connection it did not register over",
                clip(broker_name),
                clip(broker_addr),
            )
            raise RegistrationRefused(
                f"broker {clip(broker_name)} at {clip(broker_addr)} is registered over another "
                f"live connection; UNREGISTER_BROKER from this one refused"
            )

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """Forget one broker address (UNREGISTER_BROKER, or expiry)."""
        self.broker_live_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            if broker_data.broker_addrs.get(broker_id) == broker_addr:
                del broker_data.broker_addrs[broker_id]
            else:
                for bid, addr in list(broker_data.broker_addrs.items()):
                    if addr == broker_addr:
                        del broker_data.broker_addrs[bid]
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                names = self.cluster_addr_table.get(cluster_name)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster_name]
                for topic in list(self._broker_topics.pop(broker_name, ())):
                    self._remove_topic_of_broker(topic, broker_name)
        log.info("broker unregistered: %s %s id=%d", clip(broker_name), clip(broker_addr), broker_id)

    def _remove_by_addr(self, broker_addr: str, why: str) -> None:
        for broker_data in list(self.broker_addr_table.values()):
            for bid, addr in list(broker_data.broker_addrs.items()):
                if addr == broker_addr:
                    log.warning(
                        "broker %s (%s id=%d) removed: %s", clip(broker_addr), clip(broker_data.broker_name), bid, why
                    )
                    self.unregister_broker(broker_data.cluster, broker_addr, broker_data.broker_name, bid)
                    return
        self.broker_live_table.pop(broker_addr, None)

    def scan_not_active_broker(self, now: float | None = None) -> list[str]:
        """Drop brokers silent for longer than the expiry; return their addresses."""
        now = time.monotonic() if now is None else now
        expired = [
            addr
            for addr, live in self.broker_live_table.items()
            if now - live.last_update > self.broker_channel_expired_seconds
        ]
        for addr in expired:
            live = self.broker_live_table.get(addr)
            self._remove_by_addr(addr, f"no registration for {self.broker_channel_expired_seconds:g} s")
            # Java closes the expired broker's channel too (RouteInfoManager.scanNotActiveBroker).
            for c in live.conns if live is not None else ():
                close = getattr(c, "close", None)
                if close is not None:
                    close()
        return expired

    def on_channel_destroy(self, conn: object) -> None:
        """A connection closed: forget it; drop a broker only when the last connection it
        registered over closed (Java ``onChannelDestroy`` drops whatever broker the channel
        named; here a connection that did not register an address cannot remove it)."""
        for addr, live in list(self.broker_live_table.items()):
            if conn in live.conns:
                live.conns.remove(conn)
                if not live.conns:
                    self._remove_by_addr(addr, "its connection closed")

    def delete_topic(self, topic: str) -> None:
        for broker_name in self.topic_queue_table.pop(topic, None) or ():
            held = self._broker_topics.get(broker_name)
            if held is not None:
                held.pop(topic, None)

    # -- write permission (Java RouteInfoManager.operateWritePermOfBroker) ------------------

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear the write bit of ``broker_name``'s queue data in every topic route, so
        producers stop sending to it (a broker being drained); returns how many topics.

        It lasts until the broker's next registration that carries a changed topic table
        (a topic created, updated or deleted there): the name server then takes the broker's
        own perms again, as Java's (``registerBroker`` rebuilds the queue data only when the
        table's dataVersion changed; the periodic registration with the same version keeps the
        wiped perm). ADD_WRITE_PERM_OF_BROKER undoes it.
        """
        return self._operate_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Set ``broker_name``'s queue data in every topic route to read + write (Java sets
        ``PERM_READ | PERM_WRITE``, dropping any other bit); returns how many topics."""
        return self._operate_write_perm(broker_name, wipe=False)

    def _operate_write_perm(self, broker_name: str, *, wipe: bool) -> int:
        # Java RouteInfoManager.operateWritePermOfBroker: one walk for both request codes
        held = self._broker_topics.get(broker_name) or {}
        for topic in held:
            qd = self.topic_queue_table[topic][broker_name]
            qd.perm = qd.perm & ~PermName.PERM_WRITE if wipe else PermName.READ_WRITE
            # what the routes hold, so a registration carrying the broker's own perm differs
            held[topic] = TopicEntry(qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag)
        return len(held)

    # -- queries --------------------------------------------------------------------------

    def pick_topic_route_data(self, topic: str) -> dict[str, Any] | None:
        """The route JSON of ``topic`` (Java ``TopicRouteData``), or ``None`` when nobody serves it."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas = []
        for name in sorted(queues):
            bd = self.broker_addr_table.get(name)
            if bd is not None and bd.broker_addrs:
                broker_datas.append(bd.to_json())
        if not broker_datas:
            return None
        return {
            "queueDatas": [queues[name].to_json() for name in sorted(queues)],
            "brokerDatas": broker_datas,
            "filterServerTable": {},
        }

    def get_all_cluster_info(self) -> dict[str, Any]:
        """Java ``ClusterInfo``: brokerAddrTable and clusterAddrTable."""
        return {
            "brokerAddrTable": {name: bd.to_json() for name, bd in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())},
        }

    def get_all_topic_list(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, queues in self.topic_queue_table.items() if names & queues.keys())

    def query_data_version(self, broker_addr: str) -> dict[str, Any] | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live else None

    def check_data_version(
        self, broker_addr: str, data_version: dict[str, Any], conn: object | None = None
    ) -> tuple[bool, dict[str, Any] | None]:
        """QUERY_DATA_VERSION (Java ``DefaultRequestProcessor.queryBrokerTopicConfig``):
        ``(changed, the version held)``. Unchanged — the broker is registered with this very
        table version — refreshes its registration time as a registration would (Java
        ``updateBrokerInfoUpdateTimestamp``), so a broker that only asks stays routed. Asked
        over a connection the broker did not register over (a restarted name server's new
        one, or another peer), the answer is "changed" and nothing is refreshed: the broker then
        registers in full over it, and nobody else can keep a dead broker alive."""
        live = self.broker_live_table.get(broker_addr)
        if live is None:
            return True, None
        changed = live.data_version != data_version or (conn is not None and conn not in live.conns)
        if not changed:
            live.last_update = time.monotonic()
        return changed, live.data_version
