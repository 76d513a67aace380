"""The daemon entry points behind ``rmq namesrv|broker|standalone``.

Each builds its controllers, runs them on one uvloop until SIGINT/SIGTERM, then shuts them
down in reverse order. Start-up failures the user can fix (port taken, store locked, bad
configuration) become one clear line on stderr and an exit status, not a traceback. Once
started, SIGTERM always runs the full shutdown (each controller's, whatever another one or a
background task raised: the error is logged) and the process exits 0.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sys
import typing

import uvloop

from rmq.broker.controller import BrokerController
from rmq.cli.console import (
    DEFAULT_CONSOLE_PORT,
    STANDALONE_USER,
    console_missing,
    standalone_password,
    start_console,
    stop_console,
)
from rmq.cli.process import (
    EXIT_BAD_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PORT_TAKEN,
    EXIT_STORE_LOCKED,
    setup_logging,
    stop_event,
)
from rmq.config import (
    BrokerConfig,
    ConfigError,
    NamesrvConfig,
    apply_properties,
    check_config,
    check_controller_mode,
    load_properties,
    parse_overrides,
)
from rmq.errors import StoreError
from rmq.namesrv.controller import NamesrvController
from rmq.remoting.tls import TlsServerOptions, TlsSettings, split_tls_properties
from rmq.store import StoreConfig

log = logging.getLogger("rmq")


class StartupError(Exception):
    """A start-up failure with the message and exit status to report."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _fail(prog: str, message: str, status: int) -> int:
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return status


def _translate_start_error(e: BaseException, what: str, addr: str, store_dir: str | None = None) -> StartupError:
    if isinstance(e, OSError) and e.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
        reason = {
            errno.EADDRINUSE: "address already in use",
            errno.EACCES: "permission denied",
            errno.EADDRNOTAVAIL: "address not available",
        }[e.errno]
        where = e.filename if isinstance(e.filename, str) and e.filename else addr  # (the HA port names itself)
        return StartupError(
            f"cannot listen on {where} for the {what}: {reason} (is another broker or name server running?)",
            EXIT_PORT_TAKEN,
        )
    if isinstance(e, StoreError):
        return StartupError(f"cannot open the store at {store_dir}: {e}", EXIT_STORE_LOCKED)
    if isinstance(e, OSError):
        return StartupError(f"{what} failed to start: {e}", EXIT_FAILED)
    raise e


async def _shut_down(what: str, shutdown: typing.Callable[[], typing.Awaitable[None]]) -> None:
    """Run one controller's shutdown; an error is logged, never raised, so the next
    controller is still shut down and the process still exits 0."""
    try:
        await shutdown()
    except Exception:  # shutdown must complete whatever went wrong
        log.exception("%s shutdown failed", what)


def build_tls_settings(props: dict[str, str]) -> tuple[dict[str, str], TlsSettings]:
    """Take the ``tls.*`` properties out of ``props`` and check them: the files they name are
    loaded now, so a missing certificate stops start-up naming its property
    (:class:`ConfigError`). Returns the other properties and the settings."""
    rest, tls_props = split_tls_properties(props)
    settings = TlsSettings.from_properties(tls_props)
    settings.server_options()
    if settings.client_enabled:
        settings.client_context()
    return rest, settings


def build_broker_configs(
    props: dict[str, str], base_dir_default: str | None = None
) -> tuple[BrokerConfig, StoreConfig, list[str]]:
    broker_config = BrokerConfig()
    store_config = StoreConfig()
    if base_dir_default is not None:
        store_config.store_path_root_dir = base_dir_default
    warnings = apply_properties(props, broker_config, store_config)
    check_config(broker_config, store_config)  # defaults and flags too, against each field's range
    if not 0 <= broker_config.listen_port <= 65535:
        raise ConfigError(f"bad value for listenPort: {broker_config.listen_port} (expected 0..65535)")
    check_controller_mode(broker_config, store_config.broker_role)
    if (
        broker_config.broker_id != 0
        and store_config.broker_role != "SLAVE"
        and not broker_config.enable_controller_mode
    ):
        store_config.broker_role = "SLAVE"
    store_config.store_path_root_dir = os.path.abspath(os.path.expanduser(store_config.store_path_root_dir))
    return broker_config, store_config, warnings


# -- rmq namesrv ------------------------------------------------------------------------------


def build_namesrv_config(props: dict[str, str]) -> tuple[NamesrvConfig, list[str]]:
    """A checked NamesrvConfig from properties, and the warnings to log (unknown keys when
    lenient). :class:`ConfigError` for a bad value or, unless lenient, an unknown key."""
    config = NamesrvConfig()
    warnings = apply_properties(props, config)
    check_config(config)
    return config, warnings


def run_namesrv(
    config_file: str | None = None,
    overrides: typing.Sequence[str] = (),
    *,
    host: str | None = None,
    port: int | None = None,
) -> int:
    """``rmq namesrv``: properties from ``config_file``, then ``--host``/``--port``, then the
    ``--key=value`` ``overrides`` (each later source wins)."""
    setup_logging()
    try:
        props = load_properties(config_file) if config_file else {}
        if host is not None:
            props["listenHost"] = host
        if port is not None:
            props["listenPort"] = str(port)
        props.update(parse_overrides(overrides))
        props, tls = build_tls_settings(props)
        config, warnings = build_namesrv_config(props)
        tls_options = tls.server_options()
    except ConfigError as e:
        return _fail("rmq namesrv", str(e), EXIT_BAD_CONFIG)
    if config_file and not config.config_store_path:
        # Java persists UPDATE_NAMESRV_CONFIG to configStorePath; the -c file is where an
        # operator looks for (and a restart rereads) the name server's settings.
        config.config_store_path = os.path.abspath(config_file)
    for w in warnings:
        log.warning("%s", w)

    async def main() -> None:
        stop = stop_event()
        try:
            ctl = NamesrvController(config, tls=tls_options)
            await ctl.start()
        except ConfigError as e:  # a bad plain_acl.yml (aclEnable)
            raise StartupError(str(e), EXIT_BAD_CONFIG) from None
        except OSError as e:
            raise _translate_start_error(e, "name server", f"{config.listen_host}:{config.listen_port}") from None
        log.info("rmq namesrv listening on %s", ctl.address)
        try:
            await stop.wait()
        finally:
            log.info("rmq namesrv stopping")
            await _shut_down("name server", ctl.shutdown)

    try:
        uvloop.run(main())
    except StartupError as e:
        return _fail("rmq namesrv", str(e), e.status)
    return EXIT_OK


# -- rmq broker -------------------------------------------------------------------------------


def run_broker(config_file: str | None, overrides: list[str]) -> int:
    setup_logging()
    try:
        props = load_properties(config_file) if config_file else {}
        props.update(parse_overrides(overrides))
        props, tls = build_tls_settings(props)
        broker_config, store_config, warnings = build_broker_configs(props)
        if config_file and not broker_config.broker_config_path:
            # Java BrokerStartup: updateBrokerConfig persists to the -c file
            broker_config.broker_config_path = os.path.abspath(config_file)
    except ConfigError as e:
        return _fail("rmq broker", str(e), EXIT_BAD_CONFIG)
    for w in warnings:
        log.warning("%s", w)

    async def main() -> None:
        stop = stop_event()
        try:
            broker = BrokerController(broker_config, store_config, tls=tls)
            await broker.start()
        except ConfigError as e:  # a bad plain_acl.yml (aclEnable)
            raise StartupError(str(e), EXIT_BAD_CONFIG) from None
        except (OSError, StoreError) as e:
            raise _translate_start_error(
                e,
                "broker",
                f"{broker_config.listen_host}:{broker_config.listen_port}",
                store_config.store_path_root_dir,
            ) from None
        log.info(
            "rmq broker %s listening on %s (store %s)",
            broker_config.broker_name,
            broker.server.address,
            store_config.store_path_root_dir,
        )
        try:
            await stop.wait()
        finally:
            log.info("rmq broker stopping")
            await _shut_down("broker", broker.shutdown)

    try:
        uvloop.run(main())
    except StartupError as e:
        return _fail("rmq broker", str(e), e.status)
    return EXIT_OK


# -- rmq standalone ---------------------------------------------------------------------------


def _console_port(props: dict[str, str]) -> int:
    """Take ``consolePort`` (a standalone property: the web console's port on 127.0.0.1,
    default 8080, 0 = no console) out of ``props``; ConfigError when it is not a port."""
    text = props.pop("consolePort", str(DEFAULT_CONSOLE_PORT)).strip()
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(f"bad value for consolePort: {text!r} (expected 0..65535; 0 = no console)")
    return port


#: ``rmq standalone``'s gRPC port (Java's proxy ``grpcServerPort`` default) unless given.
DEFAULT_GRPC_PORT = 8081

#: Standalone properties for its name server rather than its broker (Java NamesrvConfig).
STANDALONE_NAMESRV_PROPERTIES = ("orderMessageEnable",)


def _standalone_namesrv_config(props: dict[str, str], host: str, port: int) -> NamesrvConfig:
    """The standalone name server's config: ``host``/``port`` plus the name-server properties
    of :data:`STANDALONE_NAMESRV_PROPERTIES` taken out of ``props`` before the broker sees them
    (e.g. ``--orderMessageEnable=true``); ConfigError for a bad value, naming the property."""
    config = NamesrvConfig(listen_host=host, listen_port=port)
    mine = {k: props.pop(k) for k in STANDALONE_NAMESRV_PROPERTIES if k in props}
    apply_properties(mine, config, lenient=False)
    return config


def _console_host_names(props: dict[str, str]) -> tuple[str, ...]:
    """Take ``consoleHostNames`` (a standalone property: comma-separated host names the console
    answers to besides loopback ones, e.g. behind a proxy) out of ``props``; ConfigError for a
    name that is not a host name (unchecked without aiohttp: there will be no console)."""
    names = tuple(n.strip() for n in props.pop("consoleHostNames", "").split(",") if n.strip())
    if not names or console_missing() is not None:
        return names
    from rmq.console.server import check_host_names

    try:
        check_host_names(names)
    except ValueError as e:
        raise ConfigError(f"bad value for consoleHostNames: {e}") from None
    return names


def _console_keys(props: dict[str, str]) -> tuple[str | None, str | None]:
    """Take ``consoleAccessKey`` / ``consoleSecretKey`` (standalone properties: the ACL account
    the embedded console signs with) out of ``props``; ConfigError when only one is given."""
    ak = props.pop("consoleAccessKey", "").strip() or None
    sk = props.pop("consoleSecretKey", "").strip() or None
    if (ak is None) != (sk is None):
        raise ConfigError("consoleAccessKey and consoleSecretKey go together (the ACL account the console signs with)")
    return ak, sk


def _acl_admin_account(broker: BrokerController | None) -> tuple[str | None, str | None]:
    """With ``aclEnable`` and no console keys: the first ``admin: true`` account of the
    broker's own plain_acl.yml (by accessKey), else (None, None) and a warning. The embedded
    console is the operator's tool in the broker's own process, which already holds those
    secrets; its writes (topic, group, offsets) are admin codes, so a plain account would not do.
    ``broker`` None (``--brokers N``: the brokers run in their own processes): (None, None)."""
    if broker is None or broker.acl is None:
        return None, None
    admins = sorted((a.access_key, a.secret_key) for a in broker.acl.state.accounts.values() if a.admin)
    if not admins:
        log.warning(
            "console: aclEnable=true and plain_acl.yml has no admin account; the console's requests will "
            "be refused (set consoleAccessKey and consoleSecretKey)"
        )
        return None, None
    log.info(
        "console: signing with the ACL admin account %s of plain_acl.yml (consoleAccessKey picks another)", admins[0][0]
    )
    return admins[0]


async def _standalone_console(
    namesrv_addr: str,
    port: int,
    store_dir: str,
    keys: tuple[str | None, str | None],
    host_names: tuple[str, ...],
    broker: BrokerController | None,
    tls: TlsSettings,
) -> typing.Any:
    """The console beside ``rmq standalone``: one ``admin`` account whose password is generated
    once under the store (printed on that first start, its file named on every start)."""
    missing = console_missing()
    if missing is not None:
        log.warning("console not started: %s", missing)
        return None
    from rmq.console.auth import hash_password

    try:
        password, path, created = await asyncio.to_thread(standalone_password, store_dir)
    except OSError as e:
        log.warning("console not started: cannot keep its password under %s: %s", store_dir, e)
        return None
    ak, sk = keys if keys[0] is not None else _acl_admin_account(broker)
    users = {STANDALONE_USER: await asyncio.to_thread(hash_password, password)}
    console = await start_console(
        namesrv_addr,
        "127.0.0.1",
        port,
        users,
        host_names=host_names,
        access_key=ak,
        secret_key=sk,
        tls=tls.client_context() if tls.client_enabled else None,
    )
    if console is not None:
        if created:
            # once, on the start that made it: stderr, not the log level a user may have raised
            print(
                f"rmq console: log in at {console.url} as {STANDALONE_USER} with password {password} "
                f"(kept in {path}; delete the file for a new one)",
                file=sys.stderr,
                flush=True,
            )
        else:
            log.info("console: log in at %s as %s, password in %s", console.url, STANDALONE_USER, path)
    return console


def _standalone_properties(
    host: str, broker_port: int, store_dir: str, overrides: list[str]
) -> tuple[dict[str, str], int, tuple[str | None, str | None], tuple[str, ...]]:
    """The standalone's broker properties (``--key=value`` over the defaults) with the console
    ones taken out: (properties, consolePort, console keys, consoleHostNames); ConfigError
    naming a bad property. The same for one broker on the loop and for ``--brokers N``."""
    # The gRPC endpoint for the 5.x clients on Java's proxy port (grpcServerPort=0: off).
    props = {
        "listenHost": host,
        "listenPort": str(broker_port),
        "storePathRootDir": store_dir,
        "grpcServerPort": str(DEFAULT_GRPC_PORT),
    }
    props.update(parse_overrides(overrides))
    console_port = _console_port(props)
    console_keys = _console_keys(props)
    console_host_names = _console_host_names(props)
    return props, console_port, console_keys, console_host_names


async def _start_standalone_namesrv(
    config: NamesrvConfig, tls_options: TlsServerOptions, host: str, port: int
) -> tuple[NamesrvController, str]:
    """Start the standalone's name server; return it and the host its brokers reach it at
    (loopback when it listens on every address). StartupError when it cannot listen."""
    namesrv = NamesrvController(config, tls=tls_options)
    try:
        await namesrv.start()
    except OSError as e:
        raise _translate_start_error(e, "name server", f"{host}:{port}") from None
    return namesrv, "127.0.0.1" if host in ("0.0.0.0", "") else host


def _run_standalone_loop(
    namesrv_port: int, main: typing.Callable[[], typing.Coroutine[typing.Any, typing.Any, None]]
) -> int:
    """Check ``--namesrv-port`` and run ``main`` on uvloop; the exit status (a StartupError's)."""
    if not 0 <= namesrv_port <= 65535:
        return _fail("rmq standalone", f"bad --namesrv-port {namesrv_port} (expected 0..65535)", EXIT_BAD_CONFIG)
    try:
        uvloop.run(main())
    except StartupError as e:
        return _fail("rmq standalone", str(e), e.status)
    return EXIT_OK


def run_standalone(
    host: str,
    namesrv_port: int,
    broker_port: int,
    store_dir: str,
    overrides: list[str],
    brokers: int = 1,
    log_args: typing.Sequence[str] = (),
) -> int:
    """Name server and broker on one loop: the embedded default (``make run``). With
    ``brokers`` > 1 (default 1), the name server and console stay here and that many broker
    processes run beside them (:mod:`rmq.cli.cluster`; ``log_args``: their ``--log-*`` options)."""
    setup_logging()
    if brokers != 1:
        return _run_standalone_cluster(host, namesrv_port, broker_port, store_dir, overrides, brokers, log_args)
    try:
        props, console_port, console_keys, console_host_names = _standalone_properties(
            host, broker_port, store_dir, overrides
        )
        props, tls = build_tls_settings(props)
        namesrv_config = _standalone_namesrv_config(props, host, namesrv_port)
        broker_config, store_config, warnings = build_broker_configs(props)
        # The KV config (mqadmin updateKvConfig) lives with the store, as Java's under ~/namesrv.
        namesrv_config.kv_config_path = os.path.join(store_config.store_path_root_dir, "namesrv", "kvConfig.json")
        tls_options = tls.server_options()
    except ConfigError as e:
        return _fail("rmq standalone", str(e), EXIT_BAD_CONFIG)
    for w in warnings:
        log.warning("%s", w)

    async def main() -> None:
        stop = stop_event()
        namesrv, ns_host = await _start_standalone_namesrv(namesrv_config, tls_options, host, namesrv_port)
        try:
            if not broker_config.namesrv_addr:
                broker_config.namesrv_addr = f"{ns_host}:{namesrv.port}"
            try:
                broker = BrokerController(broker_config, store_config, tls=tls)
                await broker.start()
            except ConfigError as e:  # a bad plain_acl.yml (aclEnable)
                raise StartupError(str(e), EXIT_BAD_CONFIG) from None
            except (OSError, StoreError) as e:
                raise _translate_start_error(
                    e, "broker", f"{host}:{broker_port}", store_config.store_path_root_dir
                ) from None
            log.info(
                "rmq standalone listening: name server on %s, broker %s on %s, store %s",
                namesrv.address,
                broker_config.broker_name,
                broker.server.address,
                store_config.store_path_root_dir,
            )
            console = (
                await _standalone_console(
                    broker_config.namesrv_addr,
                    console_port,
                    store_config.store_path_root_dir,
                    console_keys,
                    console_host_names,
                    broker,
                    tls,
                )
                if console_port
                else None
            )
            try:
                await stop.wait()
            finally:
                log.info("rmq standalone stopping")
                await _shut_down("console", lambda: stop_console(console))
                await _shut_down("broker", broker.shutdown)
        finally:
            await _shut_down("name server", namesrv.shutdown)

    return _run_standalone_loop(namesrv_port, main)


def _run_standalone_cluster(
    host: str,
    namesrv_port: int,
    broker_port: int,
    store_dir: str,
    overrides: list[str],
    brokers: int,
    log_args: typing.Sequence[str],
) -> int:
    """``rmq standalone --brokers N``: the name server and console on this loop, N supervised
    broker processes (:class:`rmq.cli.cluster.BrokerSupervisor`) registered with it."""
    from rmq.cli.cluster import BrokerExited, BrokerSlot, BrokerSupervisor, broker_properties

    try:
        props, console_port, console_keys, console_host_names = _standalone_properties(
            host, broker_port, store_dir, overrides
        )
        namesrv_config = _standalone_namesrv_config(props, host, namesrv_port)
        root = os.path.abspath(os.path.expanduser(props["storePathRootDir"]))
        base_port = props.pop("listenPort")
        try:
            first_port = int(base_port)
        except ValueError:
            raise ConfigError(f"bad value for listenPort: {base_port!r} (expected 0..65535)") from None
        # Checked here, whole, so a bad property stops the standalone (exit 2) before any
        # broker starts; each broker checks its own properties again.
        for p in broker_properties(props, brokers, first_port, root, "127.0.0.1:9876"):
            checked, tls = build_tls_settings(dict(p))
            build_broker_configs(checked)
        _, tls = build_tls_settings(dict(props))
        namesrv_config.kv_config_path = os.path.join(root, "namesrv", "kvConfig.json")
        tls_options = tls.server_options()
    except ConfigError as e:
        return _fail("rmq standalone", str(e), EXIT_BAD_CONFIG)

    async def main() -> None:
        stop = stop_event()
        namesrv, ns_host = await _start_standalone_namesrv(namesrv_config, tls_options, host, namesrv_port)
        try:
            namesrv_addr = props.get("namesrvAddr") or f"{ns_host}:{namesrv.port}"
            slots = [
                BrokerSlot(i, p["brokerName"], p)
                for i, p in enumerate(broker_properties(props, brokers, first_port, root, namesrv_addr))
            ]
            supervisor = BrokerSupervisor(slots, namesrv, log_args)
            try:
                await supervisor.start()
            except BrokerExited as e:
                await _shut_down("brokers", supervisor.shutdown)
                raise StartupError(str(e), e.status) from None
            log.info(
                "rmq standalone listening: name server on %s, %d brokers (%s) in cluster %s, stores under %s",
                namesrv.address,
                brokers,
                ", ".join(f"{s.name} pid {s.pid}" for s in slots),
                slots[0].props.get("brokerClusterName", "DefaultCluster"),
                root,
            )
            console = (
                await _standalone_console(namesrv_addr, console_port, root, console_keys, console_host_names, None, tls)
                if console_port
                else None
            )
            failed = asyncio.ensure_future(supervisor.wait_failed())
            stopped = asyncio.ensure_future(stop.wait())
            lost: BrokerExited | None = None
            try:
                await asyncio.wait({failed, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if failed.done() and not stop.is_set():
                    lost = failed.result()
                    log.error("rmq standalone: %s", lost)
            finally:
                log.info("rmq standalone stopping")
                failed.cancel()
                stopped.cancel()
                await _shut_down("console", lambda: stop_console(console))
                await _shut_down("brokers", supervisor.shutdown)
            if lost is not None:
                raise StartupError(str(lost), lost.status)
        finally:
            await _shut_down("name server", namesrv.shutdown)

    return _run_standalone_loop(namesrv_port, main)
