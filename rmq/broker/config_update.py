"""UPDATE_BROKER_CONFIG (25) and GET_BROKER_CONFIG (26): the broker's configuration read and
changed at runtime (Java ``Configuration.update`` / ``getAllConfigsFormatString`` and
``AdminBrokerProcessor.updateBrokerConfig``).

Java sets any field by reflection and persists every property to the ``-c`` file. We refuse
what could not take effect instead of pretending: a property is changed live only when the code
that uses it reads it at each use (:data:`LIVE_PROPERTIES`); the others are read once at
start-up (ports, paths, names, file sizes, thread and table sizes) and are refused with the
reason, as are unknown keys ("did you mean") and values outside the range start-up accepts
(the same :func:`rmq.config.apply_properties` / :func:`~rmq.config.check_config` checks). An
update is all or nothing: every property is checked before any is applied.

Persistence: the changed keys are written into the properties file the broker was started
from (``brokerConfigPath``: the ``-c`` file; else ``<storePathRootDir>/config/broker.properties``,
Java's default place) so a restart keeps them. Unlike Java, which rewrites the file with every
property, we replace the changed keys' lines in place and append new ones, keeping comments
and the rest of the file; the file is replaced atomically (temporary file, fsync, rename), off
the event loop.
"""
from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import os
import re
import tempfile

from rmq.broker.managers.topic_config import DataVersion
from rmq.common.log import clip
from rmq.config import (
    ConfigError,
    apply_properties,
    check_config,
    describe,
    format_properties,
    parse_properties,
    property_text,
    snake_to_camel,
)

log = logging.getLogger("rmq.broker")

#: Java AdminBrokerProcessor's configBlackList: never changed remotely.
BLACK_LIST = frozenset({"configBlackList", "brokerConfigPath"})

#: Properties whose users read them at every use, so a change takes effect at once.
LIVE_PROPERTIES = frozenset({
    # BrokerConfig
    "brokerPermission", "autoCreateTopicEnable", "autoCreateSubscriptionGroup", "longPollingEnable",
    "shortPollingTimeMills", "slaveReadEnable", "traceOn", "regionId", "notifyConsumerIdsChangedEnable",
    "transactionTimeOut", "transactionCheckInterval", "transactionCheckMax", "maxGroupsPerHeartbeat",
    "maxClientsPerConnection", "maxSubscriptionsPerConnection", "rebalanceLockMaxBatchSize",
    "maxStatsItems", "statsSampleIntervalMs",
    # StoreConfig (Java MessageStoreConfig)
    "maxMessageSize", "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "diskSpaceWarningLevelRatio",
    "diskSpaceCleanForciblyRatio", "cleanFileForciblyEnable", "cleanResourceInterval",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory", "maxTransferBytesOnMessageInDisk",
    "maxTransferCountOnMessageInDisk", "accessMessageInMemoryMaxRatio", "flushIntervalCommitLog",
    "flushCommitLogLeastPages", "flushIntervalConsumeQueue",
})

#: Why some start-up-only properties cannot change (the rest: "read once at start-up").
_WHY = {
    "listenPort": "the server socket is bound at start-up",
    "listenHost": "the server socket is bound at start-up",
    "storePathRootDir": "the store's files are opened from it at start-up",
    "storePathCommitLog": "the CommitLog files are opened from it at start-up",
    "brokerName": "it names the broker in every route and message id already given out",
    "brokerClusterName": "it names the broker's cluster in the name servers' routes",
    "brokerId": "the broker's role (master or slave) is fixed at start-up",
    "brokerRole": "the broker's role (master or slave) is fixed at start-up",
    "brokerIP1": "it is in every stored message's STOREHOST and message id",
    "flushDiskType": "the flush service is chosen at start-up",
    "mappedFileSizeCommitLog": "existing CommitLog files have their size",
    "mappedFileSizeConsumeQueue": "existing ConsumeQueue files have their size",
    "namesrvAddr": "the name-server client is built at start-up",
}

_LIVE_NORM = {k.lower(): k for k in LIVE_PROPERTIES}
_BLACK_NORM = {k.lower() for k in BLACK_LIST}


def _norm(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


class BrokerConfigRefused(ValueError):
    """An update that cannot be applied; ``black_list`` for Java's NO_PERMISSION case."""

    def __init__(self, message: str, black_list: bool = False) -> None:
        super().__init__(message)
        self.black_list = black_list


class BrokerConfiguration:
    """The broker's live configuration: the formatted dump, the data version, and updates.

    Args:
        controller: the ``BrokerController`` (its ``broker_config`` and ``store_config``).
    """

    def __init__(self, controller) -> None:
        self.controller = controller
        self.data_version = DataVersion()
        self._lock = asyncio.Lock()

    @property
    def path(self) -> str:
        c = self.controller
        return c.broker_config.broker_config_path or os.path.join(c.config_dir, "broker.properties")

    def all_configs(self) -> dict[str, object]:
        """Every property of the broker and its store, camelCase, in declaration order."""
        c = self.controller
        out = describe(c.broker_config)
        for k, v in describe(c.store_config).items():
            out.setdefault(k, v)
        return out

    def format(self) -> str:
        """GET_BROKER_CONFIG's body: ``key=value`` lines, Java's ``true``/``false``."""
        return format_properties({k: property_text(v) for k, v in self.all_configs().items()})

    def version_json(self) -> str:
        """Java ``Configuration.getDataVersionJson`` (fastjson's key order)."""
        v = self.data_version
        return json.dumps({"counter": v.counter, "timestamp": v.timestamp}, separators=(",", ":"))

    def check(self, props: dict[str, str]) -> None:
        """Raise :class:`BrokerConfigRefused` unless every property may change now to its value."""
        if not props:
            raise BrokerConfigRefused("no property given")
        for key in props:
            if _norm(key) in _BLACK_NORM:
                raise BrokerConfigRefused("Can not update config in black list.", black_list=True)
        c = self.controller
        trial_broker, trial_store = copy.copy(c.broker_config), copy.copy(c.store_config)
        try:
            apply_properties(props, trial_broker, trial_store, lenient=False)
            check_config(trial_broker, trial_store)
        except ConfigError as e:
            raise BrokerConfigRefused(str(e)) from None
        for key in props:
            if _norm(key) not in _LIVE_NORM:
                name = _camel_of(key, c)
                why = _WHY.get(name, "it is read once at start-up")
                raise BrokerConfigRefused(
                    f"{name} cannot be changed at runtime: {why}; put it in the broker's config file and "
                    f"restart. Properties that change live: {', '.join(sorted(LIVE_PROPERTIES))}")

    async def update(self, props: dict[str, str]) -> dict[str, str]:
        """Check, apply and persist ``props``; returns the applied ``{camelKey: value}``.
        Raises :class:`BrokerConfigRefused` (nothing applied) or ``OSError`` (applied, but the
        file could not be written)."""
        async with self._lock:
            self.check(props)
            c = self.controller
            before_norm = {_norm(k): v for k, v in self.all_configs().items()}
            apply_properties(props, c.broker_config, c.store_config, lenient=False)
            after = self.all_configs()
            after_norm = {_norm(k): v for k, v in after.items()}
            applied = {_LIVE_NORM[_norm(k)]: property_text(after_norm[_norm(k)]) for k in props}
            self.data_version.next_version()
            log.info("updateBrokerConfig: %s", clip(", ".join(
                f"{k} {before_norm.get(_norm(k))!r} -> {v}" for k, v in applied.items())))
            self._on_changed(applied)
            await asyncio.to_thread(_persist, self.path, applied)
            if "brokerPermission" in applied:
                # Java: the new permission reaches the name servers at once
                c.topic_config_manager.data_version.next_version()
                await c.register_broker_now()
            return applied

    def _on_changed(self, applied: dict[str, str]) -> None:
        c = self.controller
        if "statsSampleIntervalMs" in applied:
            c.stats.set_sample_interval(c.broker_config.stats_sample_interval_ms)
        if "maxStatsItems" in applied:
            c.stats.max_items = c.broker_config.max_stats_items


def _camel_of(key: str, controller) -> str:
    for obj in (controller.broker_config, controller.store_config):
        for f in dataclasses.fields(obj):
            if _norm(f.name) == _norm(key):
                return snake_to_camel(f.name)
    return key


_KEY_LINE = re.compile(r"^\s*([^#!\s][^=:\s]*)\s*[=:\s]")


def _persist(path: str, applied: dict[str, str]) -> None:
    """Write ``applied`` into the properties file at ``path`` (created if missing): a line
    whose key is one of them is replaced (its continuation lines dropped), the others appended."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    todo = {_norm(k): (k, v) for k, v in applied.items()}
    out: list[str] = []
    skipping = False
    for line in lines:
        if skipping:  # a continuation of a replaced line
            skipping = line.endswith("\\") and not line.endswith("\\\\")
            continue
        m = _KEY_LINE.match(line + " ")
        key_norm = None
        if m is not None:
            parsed = parse_properties(line if not line.endswith("\\") else line[:-1])
            key_norm = _norm(next(iter(parsed), "")) if parsed else None
        if key_norm is not None and key_norm in todo:
            k, v = todo.pop(key_norm)
            out.append(f"{k}={_escape(v)}")
            skipping = line.endswith("\\") and not line.endswith("\\\\")
            continue
        out.append(line)
    out.extend(f"{k}={_escape(v)}" for k, v in todo.values())
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".broker-config-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(out) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _escape(value: str) -> str:
    # java.util.Properties.store: backslashes, line breaks and a leading blank are escaped
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + out if out.startswith(" ") else out
