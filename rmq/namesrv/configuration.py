"""The name server's configuration at runtime (Java ``Configuration`` over ``NamesrvConfig``
and ``NettyServerConfig``): GET_NAMESRV_CONFIG shows it, UPDATE_NAMESRV_CONFIG changes it.

An update is checked whole before anything changes, with the start-up rules (the ranges each
``NamesrvConfig`` field declares, :func:`rmq.config.check_config`), and only properties the
running name server can apply are accepted (:data:`RUNTIME_PROPERTIES`: expiry, scan interval,
table bounds, KV bounds). Java's name server takes any known key, ignores unknown ones and
may apply a value it cannot use; here an unknown key, a bad value or a property that needs a
restart (``listenPort``...) is refused with a remark naming it, and nothing changes. Keys of
Java's black list (``configBlackList``, ``configStorePath``, ``kvConfigPath``,
``rocketmqHome``) are refused as in Java (NO_PERMISSION, "Can not update config in black
list.").

An accepted update is persisted to ``configStorePath`` (Java ``Configuration.persist``; ``rmq
namesrv -c FILE`` sets it to FILE when not given), so a restart rereads it. Java rewrites the
whole file with every property; here the file keeps its other lines and comments, the updated
keys' lines are replaced and new keys appended (the write is off the event loop, atomic).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
from collections.abc import Callable

from rmq.common.files import atomic_write
from rmq.config import ConfigError, NamesrvConfig, apply_properties, check_config, describe, snake_to_camel

__all__ = ["BLACK_LIST", "ConfigUpdateRefused", "NamesrvConfiguration", "RUNTIME_PROPERTIES"]

log = logging.getLogger("rmq.namesrv")

#: Java DefaultRequestProcessor.initConfigBlackList (plus NamesrvConfig.configBlackList's default).
BLACK_LIST = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")

#: NamesrvConfig fields a running name server applies at once (the others need a restart).
RUNTIME_PROPERTIES = (
    "broker_channel_expired_seconds", "scan_not_active_broker_interval", "max_brokers", "max_topics_per_broker",
    "max_topics", "max_kv_namespaces", "max_kv_entries_per_namespace", "max_kv_key_chars", "max_kv_value_chars",
)

_KEY_LINE = re.compile(r"^\s*([^#!\s=:][^=:\s]*)\s*[=:\s]")


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


class ConfigUpdateRefused(ValueError):
    """An UPDATE_NAMESRV_CONFIG that changes nothing: ``black_list`` when it names a key of the
    black list (answered NO_PERMISSION), otherwise a bad key or value (SYSTEM_ERROR)."""

    def __init__(self, message: str, *, black_list: bool = False) -> None:
        super().__init__(message)
        self.black_list = black_list


class NamesrvConfiguration:
    """Reads and updates a running name server's ``NamesrvConfig``.

    Args:
        config: the live config object (updates are applied to it in place).
        on_change: called after an update is applied (the controller passes the new bounds on
            to the route tables).
    """

    def __init__(self, config: NamesrvConfig, on_change: Callable[[], None] | None = None) -> None:
        self.config = config
        self._on_change = on_change
        self._write_lock = asyncio.Lock()
        self._fields = {_norm(f.name): f.name for f in dataclasses.fields(NamesrvConfig)}

    def properties(self) -> dict[str, object]:
        """Every property, camelCase as in a config file (Java getAllConfigsFormatString)."""
        return {k: ("" if v is None else v) for k, v in describe(self.config).items()}

    def check_update(self, props: dict[str, str]) -> dict[str, object]:
        """``{field: new value}`` of an update, checked whole; :class:`ConfigUpdateRefused`
        naming the first problem."""
        black = [k for k in props if _norm(k) in {_norm(b) for b in BLACK_LIST}]
        if black:
            raise ConfigUpdateRefused("Can not update config in black list.", black_list=True)
        for key in props:
            name = self._fields.get(_norm(key))
            if name is not None and name not in RUNTIME_PROPERTIES:
                raise ConfigUpdateRefused(
                    f"{key} cannot be changed while the name server runs (set it in the config file and restart); "
                    f"runtime properties: {', '.join(snake_to_camel(n) for n in RUNTIME_PROPERTIES)}")
        candidate = dataclasses.replace(self.config)
        try:
            apply_properties(props, candidate, lenient=False)
            check_config(candidate)
        except ConfigError as e:
            raise ConfigUpdateRefused(str(e).replace(" (set lenientConfig=true or pass --lenient-config to only warn)",
                                                     "")) from None
        return {n: getattr(candidate, n) for n in RUNTIME_PROPERTIES
                if getattr(candidate, n) != getattr(self.config, n)}

    async def update(self, props: dict[str, str]) -> dict[str, object]:
        """Check, apply and persist an update; returns the changed fields. Raises
        :class:`ConfigUpdateRefused` (nothing changed) or ``OSError`` (applied, not persisted)."""
        changes = self.check_update(props)
        for name, value in changes.items():
            setattr(self.config, name, value)
        if changes:
            log.info("name server config updated: %s",
                     ", ".join(f"{snake_to_camel(n)}={v}" for n, v in changes.items()))
            if self._on_change is not None:
                self._on_change()
        if props:
            await self.persist({snake_to_camel(self._fields[_norm(k)]): v.strip() for k, v in props.items()})
        return changes

    async def persist(self, updated: dict[str, str]) -> None:
        """Write ``updated`` into ``configStorePath`` (no-op when there is none)."""
        path = os.path.expanduser(self.config.config_store_path) if self.config.config_store_path else ""
        if not path:
            return
        async with self._write_lock:
            await asyncio.get_running_loop().run_in_executor(None, _rewrite, path, updated)


def _rewrite(path: str, updated: dict[str, str]) -> None:
    """Replace the lines of ``updated``'s keys in the properties file at ``path`` (matching
    camelCase or snake_case spellings, as the loader does), append the missing ones."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    wanted = {_norm(k): (k, v) for k, v in updated.items()}
    done: set[str] = set()
    out: list[str] = []
    continued = skipping = False  # inside a backslash-continued value; dropping its lines
    for line in lines:
        ends_continued = line.endswith("\\") and not line.endswith("\\\\")
        if continued:
            continued = ends_continued
            if not skipping:
                out.append(line)
            continue
        m = _KEY_LINE.match(line)
        continued = ends_continued
        skipping = False
        if m is not None and _norm(m.group(1)) in wanted:
            n = _norm(m.group(1))
            skipping = True
            if n not in done:
                key, value = wanted[n]
                out.append(f"{key}={value}")
                done.add(n)
            continue
        out.append(line)
    for n, (key, value) in wanted.items():
        if n not in done:
            out.append(f"{key}={value}")
    atomic_write(path, ("\n".join(out) + "\n").encode())
