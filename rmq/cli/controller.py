"""``rmq controller``: one controller of RocketMQ 5's controller mode on etcd
(:class:`rmq.controller.manager.ControllerManager`; Java ``ControllerStartup``).

Properties from ``-c FILE`` (Java's ``controller.conf`` names where they apply), then the
flags (``--etcd``, ``--listen-port``, ``--host``, ``--cluster-name``), then ``--key=value``.
``tls.*`` properties give the controller port TLS as the name server's; ``aclEnable=true``
guards the writing codes with ``<rocketmqHome>/conf/plain_acl.yml``. Exit statuses as the
other daemons: 2 bad configuration, 3 port taken.
"""

from __future__ import annotations

import errno
import logging
import sys

import uvloop

from rmq.cli.process import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, EXIT_PORT_TAKEN, setup_logging, stop_event
from rmq.config import ConfigError, apply_properties, check_config, load_properties, parse_overrides
from rmq.remoting.tls import TlsSettings, split_tls_properties

__all__ = ["run_controller"]

log = logging.getLogger("rmq")


class _Startup(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def run_controller(
    config_file: str | None,
    overrides: list[str],
    *,
    etcd: str | None = None,
    host: str | None = None,
    port: int | None = None,
    cluster_name: str | None = None,
) -> int:
    setup_logging()
    from rmq.controller.config import ControllerConfig

    try:
        props = load_properties(config_file) if config_file else {}
        for key, value in (("etcd", etcd), ("listenHost", host), ("listenPort", port), ("clusterName", cluster_name)):
            if value is not None:
                props[key] = str(value)
        props.update(parse_overrides(overrides))
        rest, tls_props = split_tls_properties(props)
        tls = TlsSettings.from_properties(tls_props).server_options()
        config = ControllerConfig()
        warnings = apply_properties(rest, config)
        check_config(config)
        if not config.etcd:
            raise ConfigError("etcd is required: --etcd http://host:port[,http://host:port...] (the etcd client URLs)")
    except ConfigError as e:
        print(f"rmq controller: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    for w in warnings:
        log.warning("%s", w)

    async def main() -> None:
        from rmq.controller.manager import ControllerManager

        stop = stop_event()
        acl = None
        if config.acl_enable:
            from rmq.controller.processor import ControllerAcl
            from rmq.remoting.plain_acl import acl_home

            try:
                acl = ControllerAcl(acl_home(config.rocketmq_home), config.acl_watch_interval_ms / 1000.0)
                acl.load()
            except ConfigError as e:
                raise _Startup(str(e), EXIT_BAD_CONFIG) from None
        mgr = ControllerManager(config, tls=tls, acl=acl)
        try:
            await mgr.start()
        except OSError as e:
            where = f"{config.listen_host}:{config.listen_port}"
            if e.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
                raise _Startup(f"cannot listen on {where} (listenPort): {e.strerror}", EXIT_PORT_TAKEN) from None
            raise _Startup(f"controller failed to start: {e}", EXIT_FAILED) from None
        log.info("rmq controller listening on %s", mgr.address)
        try:
            await stop.wait()
        finally:
            log.info("rmq controller stopping")
            try:
                await mgr.shutdown()
            except Exception:  # shutdown must complete whatever went wrong
                log.exception("controller shutdown failed")

    try:
        uvloop.run(main())
    except _Startup as e:
        print(f"rmq controller: {e}", file=sys.stderr, flush=True)
        return e.status
    return EXIT_OK
