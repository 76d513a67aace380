"""The ``rmq`` command: ``rmq namesrv``, ``rmq broker -c broker.conf``, ``rmq standalone``,
``rmq console [-n host:port] --users-file F`` (the web console, :mod:`rmq.console`), ``rmq exporter`` (a
cluster's Prometheus metrics, :mod:`rmq.cli.exporter`) and ``rmq admin
<mqadmin command>`` (see :mod:`rmq.cli.admin`).

Every daemon listens on 127.0.0.1 unless told otherwise, logs one line saying where it
listens, and stops cleanly on SIGINT/SIGTERM (held pulls answered, offsets and configs
persisted, store flushed, no abort marker left). It refuses to start, with a one-line
message on stderr and a non-zero exit status, when a port is taken (exit 3), the store
directory is locked by another broker (exit 4) or the configuration is bad (exit 2).

Broker and name server properties use RocketMQ's names, in a properties file (``-c``) and/or
as ``--key=value`` overrides (``--flushDiskType=SYNC_FLUSH``, ``--listenPort=9877``). Every value is checked against the
range its field declares (exit 2 naming the property and the allowed values); an unknown key
stops the start with a "did you mean" suggestion, unless ``--lenient-config`` (or the property
``lenientConfig=true``) is given, which turns that into a warning.
"""

from __future__ import annotations

import argparse
import sys


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``rmq`` parser. Given the command line, ``rmq admin <command>`` gets only that
    command's flags, so a run imports only its area module (docs/design.md "Start-up time");
    without it, every command's."""
    parser = argparse.ArgumentParser(
        prog="rmq", description="RocketMQ-compatible name server and broker.", allow_abbrev=False
    )
    from rmq import __version__
    from rmq.cli import admin

    parser.add_argument("--version", action="version", version=f"rmq {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{namesrv,broker,standalone,controller,console,exporter,admin}")
    if argv is not None and argv[:1] == ["admin"]:
        # `rmq admin ...` runs: the daemons' parsers (and rmq.cli.logs' imports) would only
        # cost start-up time
        admin.add_parser(sub, argv[1] if len(argv) > 1 else "")
        return parser
    from rmq.cli.logs import add_log_arguments

    p = sub.add_parser(
        "namesrv",
        help="run a name server",
        allow_abbrev=False,
        epilog="Any name server property may follow as --key=value (e.g. --maxBrokers=4096).",
    )
    p.add_argument("-c", "--config", dest="config_file", default=None, help="namesrv.conf (Java properties format)")
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1; same as --listenHost)")
    p.add_argument("--port", type=int, default=None, help="port to bind (default 9876; same as --listenPort)")
    _lenient(p)
    add_log_arguments(p)

    p = sub.add_parser(
        "broker",
        help="run a broker from a RocketMQ-style properties file",
        allow_abbrev=False,
        epilog="Any broker or store property may follow as --key=value (e.g. --listenPort=10911). "
        "Prometheus metrics: http://<listenHost>:<metricsPort>/metrics (--metricsPort, default 5557; 0 = off). "
        "RocketMQ 5 clients (gRPC): --grpcServerPort=8081 (default 0 = off).",
    )
    p.add_argument("-c", "--config", dest="config_file", default=None, help="broker.conf (Java properties format)")
    _lenient(p)
    add_log_arguments(p)

    p = sub.add_parser(
        "standalone",
        help="run a name server and a broker in one process (what `make run` starts)",
        allow_abbrev=False,
        epilog="Any broker or store property may follow as --key=value (e.g. --flushDiskType=SYNC_FLUSH). "
        "--orderMessageEnable=true is the name server's (routes carry updateOrderConf's order confs). "
        "--consolePort=N serves the web console on 127.0.0.1:N (default 8080; 0 = no console). "
        "RocketMQ 5 clients (gRPC): <host>:<grpcServerPort> (--grpcServerPort, default 8081; 0 = off). "
        "Prometheus metrics: http://<host>:<metricsPort>/metrics (--metricsPort, default 5557; 0 = off).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address both servers bind (default 127.0.0.1)")
    p.add_argument("--namesrv-port", type=int, default=9876, help="name server port (default 9876)")
    p.add_argument("--broker-port", type=int, default=10911, help="broker port (default 10911)")
    p.add_argument("--store-dir", default="./rmq-data", help="store root directory (default ./rmq-data)")
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        metavar="N",
        help="broker processes in the cluster (default 1: one process); N > 1: broker-a, broker-b ... each with "
        "its store in <store-dir>/broker-<i>, port --broker-port + 10*i, gRPC and metrics ports base + i",
    )
    _lenient(p)
    add_log_arguments(p)

    p = sub.add_parser(
        "controller",
        help="run a controller of RocketMQ 5's controller mode on etcd (automatic failover)",
        allow_abbrev=False,
        epilog="Any controller property may follow as --key=value (e.g. --scanNotActiveBrokerInterval=2000, "
        "--enableElectUncleanMaster=false, --metricsPort=5558). Start several on one etcd: one leads.",
    )
    p.add_argument("-c", "--config", dest="config_file", default=None, help="controller.conf (Java properties format)")
    p.add_argument("--etcd", default=None, help="etcd client URLs, http://host:port[,http://host:port...] (required)")
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1; same as --listenHost)")
    p.add_argument(
        "--listen-port", dest="listen_port", type=int, default=None, help="port to bind (default 9878; --listenPort)"
    )
    p.add_argument(
        "--cluster-name", dest="cluster_name", default=None, help="the controller group (default DefaultCluster)"
    )
    _lenient(p)
    add_log_arguments(p)

    p = sub.add_parser(
        "console",
        help="run the web console for a cluster (needs aiohttp: the console extra)",
        allow_abbrev=False,
        epilog="Log in with an account of --users-file (lines name=scrypt$..., made by --hash-password NAME) "
        "or --admin-user with --admin-password-file, $RMQ_CONSOLE_PASSWORD or --admin-password "
        "(the last shows in ps). The console answers only to loopback names and addresses, the "
        "--host address and each --host-name.",
    )
    from rmq.cli.connection import add_cluster_flags

    add_cluster_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    p.add_argument(
        "--sample-interval", type=float, default=10.0, help="seconds between the dashboard's TPS samples (default 10)"
    )
    p.add_argument(
        "--prometheus-url",
        default=None,
        metavar="URL",
        help="a Prometheus scraping rmq exporter: the dashboard draws its history from there, up to 30 days "
        "(default: the console's own last hour)",
    )
    p.add_argument(
        "--users-file",
        default=None,
        metavar="FILE",
        help="who may log in: name=scrypt$...[,0] lines, ,0 = read-only (default: none)",
    )
    p.add_argument("--admin-user", default=None, metavar="NAME", help="one account besides --users-file")
    p.add_argument(
        "--admin-password",
        default=None,
        metavar="PASSWORD",
        help="its password (visible in ps: prefer --admin-password-file or $RMQ_CONSOLE_PASSWORD)",
    )
    p.add_argument(
        "--admin-password-file", default=None, metavar="FILE", help="a file whose first line is --admin-user's password"
    )
    p.add_argument(
        "--host-name",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name (or address) the console may be reached by besides loopback ones, "
        "e.g. behind a proxy or a DNS name; repeatable",
    )
    p.add_argument(
        "--hash-password",
        default=None,
        metavar="NAME",
        help="read a password (prompt, or a line on stdin), print NAME=<hash> for --users-file, exit",
    )
    add_log_arguments(p)

    p = sub.add_parser(
        "exporter",
        help="serve a whole cluster's metrics for Prometheus, as rocketmq-exporter (rmq or Apache brokers)",
        allow_abbrev=False,
    )
    add_cluster_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address to serve /metrics on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=5557, help="port to serve /metrics on (default 5557)")
    p.add_argument("--interval", type=_positive, default=30.0, help="seconds between refreshes (default 30)")
    p.add_argument("--timeout", type=_positive, default=5.0, help="seconds per remote call (default 5)")
    p.add_argument(
        "--max-lag-lookups", type=int, default=1000, help="message reads for lag latency per refresh (default 1000)"
    )
    p.add_argument(
        "--max-clients",
        type=int,
        default=100,
        help="consumers asked for their running info (rocketmq_client_*) per refresh (default 100)",
    )
    p.add_argument(
        "--client-timeout", type=_positive, default=3.0, help="seconds one consumer may take to answer (default 3)"
    )
    add_log_arguments(p)

    if argv is None:
        admin.add_parser(sub)
    else:  # another command runs: admin's 60 sub-parsers would only cost start-up time
        sub.add_parser("admin", help=admin.HELP, allow_abbrev=False)
    return parser


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r} (expected 0..65535)") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port: {value} (expected 0..65535)")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"{value} is out of range (expected more than 0, less than a day)")
    return value


def _lenient(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lenient-config",
        action="store_true",
        help="only warn about unknown property names (same as --lenientConfig=true)",
    )


def _check_namesrv_flags(host: str | None, port: int | None) -> str | None:
    from rmq.config import ConfigError, NamesrvConfig, check_config

    cfg = NamesrvConfig()
    cfg.listen_host = cfg.listen_host if host is None else host
    cfg.listen_port = cfg.listen_port if port is None else port
    try:
        check_config(cfg)
    except ConfigError as e:
        return str(e).replace("listenPort", "--port")
    return None


def _setup_logging(args: argparse.Namespace) -> str | None:
    """Configure a daemon's logging from its ``--log-*`` options (:mod:`rmq.cli.logs`) before it
    starts; the problem to report when an option or RMQ_LOG_LEVEL is bad."""
    from rmq.cli.logs import options_from_args, setup_logging
    from rmq.config import ConfigError

    try:
        setup_logging(options_from_args(args))
    except ConfigError as e:
        return str(e)
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rmq`` console script; returns the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    parser = _parser(argv)
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command != "admin":
        problem = _setup_logging(args)
        if problem is not None:
            print(f"rmq {args.command}: {problem}", file=sys.stderr)
            return 2  # EXIT_BAD_CONFIG (rmq.cli.daemons, not imported for the console and exporter)
    if args.command == "admin":
        from rmq.cli.admin import run as run_admin

        if extra:
            print(f"rmq admin: unexpected arguments: {' '.join(extra)}", file=sys.stderr)
            return 2
        return run_admin(args)
    if args.command == "console":
        from rmq.cli.console import run_console_cli

        if extra:
            print(f"rmq console: unexpected arguments: {' '.join(extra)}", file=sys.stderr)
            return 2
        return run_console_cli(args)
    if args.command == "exporter":
        from rmq.cli.connection import client_tls, credentials, namesrv_of
        from rmq.cli.exporter import run_exporter
        from rmq.errors import RMQError

        if extra:
            print(f"rmq exporter: unexpected arguments: {' '.join(extra)}", file=sys.stderr)
            return 2
        if args.max_lag_lookups < 0:
            print("rmq exporter: --max-lag-lookups is 0 or more", file=sys.stderr)
            return 2
        if args.max_clients < 0:
            print("rmq exporter: --max-clients is 0 or more", file=sys.stderr)
            return 2
        try:
            namesrv = namesrv_of(args)
            access_key, secret_key = credentials(args)
            tls = client_tls(args)
        except (ValueError, RMQError) as e:
            print(f"rmq exporter: {e}", file=sys.stderr)
            return 2
        return run_exporter(
            namesrv,
            args.host,
            args.port,
            args.interval,
            args.timeout,
            args.max_lag_lookups,
            max_clients=args.max_clients,
            client_timeout=args.client_timeout,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
        )
    if args.command == "controller":
        from rmq.cli.controller import run_controller

        if args.lenient_config:
            extra = [*extra, "--lenientConfig=true"]
        return run_controller(
            args.config_file,
            extra,
            etcd=args.etcd,
            host=args.host,
            port=args.listen_port,
            cluster_name=args.cluster_name,
        )
    # Imported here so `rmq --help` works without loading the broker and the store.
    from rmq.cli.daemons import run_broker, run_namesrv, run_standalone
    from rmq.cli.process import EXIT_BAD_CONFIG

    if args.lenient_config:
        extra = [*extra, "--lenientConfig=true"]
    if args.command == "namesrv":
        problem = _check_namesrv_flags(args.host, args.port)
        if problem is not None:
            print(f"rmq namesrv: {problem}", file=sys.stderr)
            return EXIT_BAD_CONFIG
        return run_namesrv(args.config_file, extra, host=args.host, port=args.port)
    if args.command == "broker":
        return run_broker(args.config_file, extra)
    log_args = [] if args.log_level is None else [f"--log-level={args.log_level}"]
    if args.log_file is not None:
        log_args += [
            f"--log-file={args.log_file}",
            f"--log-max-bytes={args.log_max_bytes}",
            f"--log-backups={args.log_backups}",
        ]
    return run_standalone(args.host, args.namesrv_port, args.broker_port, args.store_dir, extra, args.brokers, log_args)
