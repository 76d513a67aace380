"""KVConfigManager: the name server's namespaced key/value table (Java ``KVConfigManager``),
used by mqadmin's updateKvConfig/deleteKvConfig and by clients for ``ORDER_TOPIC_CONFIG``.

Bounded (``NamesrvConfig``: ``maxKvNamespaces`` namespaces of ``maxKvEntriesPerNamespace``
keys, keys of ``maxKvKeyChars`` and values of ``maxKvValueChars`` characters): past a bound
PUT_KV_CONFIG is refused with :class:`KVConfigRefused`, naming the bound.

Persisted, when ``kvConfigPath`` is set, as Java's ``kvConfig.json``
(``KVConfigSerializeWrapper``: ``{"configTable": {namespace: {key: value}}}``), so a Java name
server's file loads here and ours there. Java writes the file inline after every change; here
the write (fsync included) runs in a worker thread while the request waits for it, so the
answer still means "on disk" but the event loop never blocks on the disk. Writes are serialized
and each one takes the newest table, so a burst of changes costs a few writes, and an older
table never overwrites a newer one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

from rmq.common import fastjson
from rmq.common.files import atomic_write
from rmq.common.log import RateLimitedLog, clip
from rmq.config import NamesrvConfig

__all__ = ["KVConfigManager", "KVConfigRefused"]

log = logging.getLogger("rmq.namesrv")


class KVConfigRefused(ValueError):
    """A PUT_KV_CONFIG past a bound of the table (answered SYSTEM_ERROR with the message)."""


class KVConfigManager:
    """``{namespace: {key: value}}`` with bounds and an optional file.

    Args:
        config: the name server's ``NamesrvConfig`` (bounds are read at each call, so an
            UPDATE_NAMESRV_CONFIG takes effect at once; ``kv_config_path`` "" = not persisted).
    """

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.table: dict[str, dict[str, str]] = {}
        self._rate_log = RateLimitedLog(log)
        self._version = 0  # bumped by every change
        self._written = 0  # the version the file holds
        self._write_lock = asyncio.Lock()

    # -- file -----------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return os.path.expanduser(self.config.kv_config_path) if self.config.kv_config_path else ""

    def load(self) -> None:
        """Read ``kvConfigPath`` (Java ``KVConfigManager.load``). A missing file is an empty
        table; one that is not a KVConfigSerializeWrapper is kept aside as
        ``<file>.corrupt`` and the table starts empty, with an error in the log (so is one that
        cannot be read, which stays where it is)."""
        path = self.path
        if not path or not os.path.exists(path):
            return
        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError as e:
            # unreadable is not corrupt: leave it where it is for the operator
            log.error("KV config file %s cannot be read (%s): starting with an empty table", path, clip(e))
            return
        try:
            data = fastjson.loads(text)
            table = data.get("configTable") or {}
            if not isinstance(table, dict) or not all(isinstance(t, dict) for t in table.values()):
                raise ValueError("configTable is not an object of objects")
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items() if kv}
        except (ValueError, AttributeError, RecursionError) as e:
            aside = path + ".corrupt"
            log.error(
                "KV config file %s is unreadable (%s): kept aside as %s, starting with an empty table",
                path,
                clip(e),
                aside,
            )
            try:
                os.replace(path, aside)
            except OSError:
                pass
            self.table = {}
            return
        log.info("loaded KV config %s: %d namespaces", path, len(self.table))

    def encode(self) -> bytes:
        """Java ``KVConfigSerializeWrapper`` JSON."""
        return json.dumps({"configTable": self.table}, ensure_ascii=False, indent=1).encode()

    async def persist(self) -> None:
        """Write the newest table to ``kvConfigPath`` (no-op without one or when the file is
        current); ``OSError`` when the write fails."""
        path = self.path
        if not path:
            return
        async with self._write_lock:
            version = self._version
            if version == self._written:
                return
            data = self.encode()
            await asyncio.get_running_loop().run_in_executor(None, atomic_write, path, data)
            self._written = max(self._written, version)

    # -- table ----------------------------------------------------------------------------

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set one item; :class:`KVConfigRefused` past a bound (nothing changes then)."""
        cfg = self.config
        if not namespace or not key:
            raise KVConfigRefused("namespace or key is null")
        if len(namespace) > cfg.max_kv_key_chars or len(key) > cfg.max_kv_key_chars:
            raise KVConfigRefused(f"namespace and key are at most {cfg.max_kv_key_chars} characters (maxKvKeyChars)")
        if len(value) > cfg.max_kv_value_chars:
            raise KVConfigRefused(
                f"value of {len(value)} characters is longer than maxKvValueChars={cfg.max_kv_value_chars}"
            )
        kv = self.table.get(namespace)
        if kv is None:
            if len(self.table) >= cfg.max_kv_namespaces:
                raise KVConfigRefused(f"{len(self.table)} namespaces already (maxKvNamespaces={cfg.max_kv_namespaces})")
            kv = self.table[namespace] = {}
        if key not in kv and len(kv) >= cfg.max_kv_entries_per_namespace:
            raise KVConfigRefused(
                f"namespace {clip(namespace)} already has {len(kv)} keys "
                f"(maxKvEntriesPerNamespace={cfg.max_kv_entries_per_namespace})"
            )
        if kv.get(key) != value:
            kv[key] = value
            self._version += 1

    def get(self, namespace: str, key: str) -> str | None:
        kv = self.table.get(namespace)
        return None if kv is None else kv.get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove one item (a namespace left empty is dropped); whether it existed."""
        kv = self.table.get(namespace)
        if kv is None or kv.pop(key, None) is None:
            return False
        if not kv:
            del self.table[namespace]
        self._version += 1
        return True

    def namespace(self, namespace: str) -> dict[str, str] | None:
        kv = self.table.get(namespace)
        return dict(kv) if kv else None
