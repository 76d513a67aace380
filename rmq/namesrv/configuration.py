"""The name server's configuration at runtime (Java ``Configuration`` over ``NamesrvConfig``
and ``NettyServerConfig``): GET_NAMESRV_CONFIG shows it, UPDATE_NAMESRV_CONFIG changes it.

The checking, applying and persisting are :class:`rmq.config.Configuration`'s; this module
holds the name server's lists. Only properties the running name server can apply are accepted
(:data:`RUNTIME_PROPERTIES`: expiry, scan interval, table bounds, KV bounds,
``orderMessageEnable``); Java's name server
takes any known key, ignores unknown ones and may apply a value it cannot use. Keys of Java's
black list (:data:`BLACK_LIST`) are refused as in Java (NO_PERMISSION, "Can not update config
in black list."). An accepted update is persisted to ``configStorePath`` (``rmq namesrv -c
FILE`` sets it to FILE when not given), so a restart rereads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rmq.config import Configuration, NamesrvConfig, snake_to_camel

__all__ = ["BLACK_LIST", "NamesrvConfiguration", "RUNTIME_PROPERTIES"]

log = logging.getLogger("rmq.namesrv")

#: Java DefaultRequestProcessor.initConfigBlackList (plus NamesrvConfig.configBlackList's default).
BLACK_LIST = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")

#: NamesrvConfig fields a running name server applies at once (the others need a restart).
RUNTIME_PROPERTIES = (
    "broker_channel_expired_seconds",
    "scan_not_active_broker_interval",
    "max_brokers",
    "max_topics_per_broker",
    "max_topics",
    "max_kv_namespaces",
    "max_kv_entries_per_namespace",
    "max_kv_key_chars",
    "max_kv_value_chars",
    "order_message_enable",
)


class NamesrvConfiguration(Configuration):
    """Reads and updates a running name server's ``NamesrvConfig``.

    Args:
        config: the live config object (updates are applied to it in place).
        on_change: called after an update is applied (the controller passes the new bounds on
            to the route tables).
    """

    live = frozenset(snake_to_camel(n) for n in RUNTIME_PROPERTIES)
    black_list = frozenset(BLACK_LIST)

    def __init__(self, config: NamesrvConfig, on_change: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.config = config
        self._on_change = on_change

    def path(self) -> str | None:
        return self.config.config_store_path or None

    def properties(self) -> dict[str, object]:
        """Every property, camelCase as in a config file (Java getAllConfigsFormatString)."""
        return {k: ("" if v is None else v) for k, v in self.all_configs().items()}

    def refusal(self, key: str) -> str:
        return (
            f"{key} cannot be changed while the name server runs (set it in the config file and restart); "
            f"runtime properties: {', '.join(snake_to_camel(n) for n in RUNTIME_PROPERTIES)}"
        )

    async def changed(self, applied: dict[str, str]) -> None:
        log.info("name server config updated: %s", ", ".join(f"{k}={v}" for k, v in applied.items()))
        if self._on_change is not None:
            self._on_change()
