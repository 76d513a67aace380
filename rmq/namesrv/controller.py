"""NamesrvController: the name server's server, route tables and expiry task.

``start()`` loads the KV config file (``kvConfigPath``, rmq.namesrv.kv_config), binds the
server (raises ``OSError`` when the port is taken) and starts the
``scan-not-active-broker`` task (every 10 s, drops brokers silent for 120 s); ``shutdown()``
cancels it and closes the server. Brokers that disconnect are dropped at once through the
connection listener (Java ``BrokerHousekeepingService``). ``configuration``
(rmq.namesrv.configuration) serves GET/UPDATE_NAMESRV_CONFIG; an accepted update reaches the
route tables through ``_config_changed``.
"""

from __future__ import annotations

import asyncio
import logging

from rmq.config import NamesrvConfig
from rmq.namesrv.acl import NamesrvAcl
from rmq.namesrv.configuration import NamesrvConfiguration
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.processor import NamesrvProcessor
from rmq.namesrv.route_manager import RouteInfoManager, RouteLimits
from rmq.remoting.connection import Connection, ConnectionEvent
from rmq.remoting.dispatcher import ProcessorPool
from rmq.remoting.plain_acl import acl_guard, acl_home
from rmq.remoting.server import RemotingServer
from rmq.remoting.tls import TlsServerOptions

log = logging.getLogger("rmq.namesrv")


class _Guarded:
    """The processor behind the ACL check (as the broker registers its validator as a hook)."""

    def __init__(self, acl: NamesrvAcl, processor: NamesrvProcessor) -> None:
        self.process_request = acl_guard(acl, processor.process_request)


class NamesrvController:
    """One name server.

    Args:
        config: ``NamesrvConfig`` (``listen_port=0`` binds an ephemeral port).
        tls: the server side of TLS (``rmq.remoting.tls.TlsServerOptions``: mode, context,
            handshake timeout); default None = plain TCP, TLS refused.
    """

    def __init__(self, config: NamesrvConfig | None = None, tls: TlsServerOptions | None = None) -> None:
        self.config = config or NamesrvConfig()
        c = self.config
        self.route_info_manager = RouteInfoManager(
            c.broker_channel_expired_seconds, RouteLimits(c.max_brokers, c.max_topics_per_broker, c.max_topics)
        )
        self.server = RemotingServer(
            self.config.listen_host,
            self.config.listen_port,
            idle_timeout=self.config.idle_timeout,
            name="namesrv",
            tls=tls,
        )
        self.kv_config_manager = KVConfigManager(c)
        self.configuration = NamesrvConfiguration(c, self._config_changed)
        self.processor = NamesrvProcessor(self)
        # aclEnable (not in Java): the write codes need an admin account (rmq.namesrv.acl).
        self.acl: NamesrvAcl | None = None
        if c.acl_enable:
            self.acl = NamesrvAcl(acl_home(c.rocketmq_home), c.acl_watch_interval_ms / 1000.0)
            self.server.register_default_processor(
                _Guarded(self.acl, self.processor), ProcessorPool("namesrv", max_in_flight=64)
            )
        else:
            self.server.register_default_processor(self.processor, ProcessorPool("namesrv", max_in_flight=64))
        self.server.add_connection_listener(self._on_connection_event)
        self._scan_task: asyncio.Task[None] | None = None
        self._acl_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return self.server.address

    def _config_changed(self) -> None:
        """UPDATE_NAMESRV_CONFIG applied: the route tables take the new expiry and bounds."""
        c = self.config
        self.route_info_manager.broker_channel_expired_seconds = c.broker_channel_expired_seconds
        self.route_info_manager.limits = RouteLimits(c.max_brokers, c.max_topics_per_broker, c.max_topics)

    async def start(self) -> None:
        """Raises ``OSError`` (port taken) or ``ConfigError`` (with ``aclEnable``, accounts
        that cannot be read)."""
        if self.acl is not None:
            await asyncio.to_thread(self.acl.load)
        self.kv_config_manager.load()
        await self.server.start()
        if self.acl is not None:
            self._acl_task = asyncio.get_running_loop().create_task(self.acl.watch(), name="namesrv-acl-watch")
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="namesrv-scan-brokers")
        log.info("name server listening on %s", self.server.address)

    async def shutdown(self) -> None:
        if self._acl_task is not None:
            self._acl_task.cancel()
            try:
                await self._acl_task
            except asyncio.CancelledError:
                pass
            self._acl_task = None
        if self._scan_task is not None:
            self._scan_task.cancel()
            try:
                await self._scan_task
            except asyncio.CancelledError:
                pass
            self._scan_task = None
        await self.server.close()
        log.info("name server on %s stopped", self.server.address)

    async def __aenter__(self) -> NamesrvController:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def _scan_loop(self) -> None:
        """Drop brokers that stopped registering (Java ``scanNotActiveBroker``, every 10 s)."""
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval)
            try:
                self.route_info_manager.scan_not_active_broker()
            except Exception:
                log.exception("scanning inactive brokers failed")

    def _on_connection_event(self, event: ConnectionEvent, conn: Connection, exc: BaseException | None = None) -> None:
        if event in (ConnectionEvent.CLOSE, ConnectionEvent.EXCEPTION, ConnectionEvent.IDLE):
            self.route_info_manager.on_channel_destroy(conn)
