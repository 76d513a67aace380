"""``rmq console [-n host:port] [--host 127.0.0.1] [--port 8080] --users-file FILE | --admin-user U``,
and the console that ``rmq standalone`` starts beside its broker (property ``consolePort``).

Who may log in: the accounts of ``--users-file`` (``name=scrypt$...`` lines, see
:mod:`rmq.console.auth`; ``--hash-password NAME`` makes one) and ``--admin-user`` with a
password from ``--admin-password-file``, ``$RMQ_CONSOLE_PASSWORD`` or ``--admin-password``
(in that order; the flag shows in ``ps``). ``rmq standalone`` makes an ``admin`` account whose
password it generates once into ``<storePathRootDir>/console/admin-password`` (mode 0600).
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import secrets
import sys
from typing import TYPE_CHECKING, Any

import uvloop

if TYPE_CHECKING:
    from rmq.console import ConsoleServer

log = logging.getLogger("rmq")

#: ``rmq standalone``'s console port when the property ``consolePort`` is not given (0 = off).
DEFAULT_CONSOLE_PORT = 8080
#: The environment variable ``rmq console`` reads ``--admin-user``'s password from.
PASSWORD_ENV = "RMQ_CONSOLE_PASSWORD"
#: The account ``rmq standalone`` makes for its console.
STANDALONE_USER = "admin"


def console_missing() -> str | None:
    """Why the console cannot run here (its extra is not installed), or None."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return "the console needs aiohttp: pip install 'rmq[console]'"
    return None


def standalone_password(store_dir: str) -> tuple[str, str, bool]:
    """``rmq standalone``'s console password: read from ``<store_dir>/console/admin-password``,
    or generated there (mode 0600, created exclusively) on the first start. Returns
    ``(password, path, created)``; OSError when the file cannot be read or written."""
    d = os.path.join(store_dir, "console")
    path = os.path.join(d, "admin-password")
    try:
        with open(path, encoding="utf-8") as f:
            password = f.readline().strip()
        if password:
            return password, path, False
        os.unlink(path)  # empty (a crash while writing it): make a new one
    except FileNotFoundError:
        pass
    os.makedirs(d, mode=0o700, exist_ok=True)
    password = secrets.token_urlsafe(18)
    # O_EXCL: never follow a planted link; 0600 from the start (no window with wider rights)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(password + "\n")
    os.chmod(path, 0o600)
    return password, path, True


async def start_console(
    namesrv_addr: str,
    host: str,
    port: int,
    users: dict[str, str],
    *,
    host_names: tuple[str, ...] = (),
    access_key: str | None = None,
    secret_key: str | None = None,
    tls: Any = None,
) -> ConsoleServer | None:
    """Start a console beside a daemon (``users``: name → hash; ``host_names`` it also answers
    to; ``access_key``/``secret_key`` sign its requests; ``tls`` as ``rmq.Admin`` takes it); a
    missing aiohttp or a taken port is a warning and None (the daemon carries on without it)."""
    missing = console_missing()
    if missing is not None:
        log.warning("console not started: %s", missing)
        return None
    from rmq.console import ConsoleConfig, ConsoleServer

    server = ConsoleServer(
        ConsoleConfig(
            namesrv_addr,
            host=host,
            port=port,
            users=users,
            host_names=host_names,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
        )
    )
    try:
        await server.start()
    except OSError as e:
        log.warning(
            "console not started: cannot listen on %s:%s (%s); the broker carries on without it",
            host,
            port,
            e.strerror or e,
        )
        return None
    log.info("rmq console on %s", server.url)
    return server


async def stop_console(server: ConsoleServer | None) -> None:
    """Stop what :func:`start_console` started (None: nothing)."""
    if server is not None:
        await server.stop()


def hash_password_cli(name: str) -> int:
    """``rmq console --hash-password NAME``: a password from the terminal (asked twice) or one
    line of stdin; prints ``NAME=<hash>`` for a users file."""
    from rmq.console.auth import USER_NAME, hash_password

    if not USER_NAME.fullmatch(name):
        print(f"rmq console: bad user name {name!r} (letters, digits, '_', '.', '@', '-'; at most 64)", file=sys.stderr)
        return 2
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {name}: ")
        if getpass.getpass("again: ") != password:
            print("rmq console: the two passwords differ", file=sys.stderr)
            return 2
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if len(password) < 8:
        print("rmq console: a password needs 8 characters or more", file=sys.stderr)
        return 2
    print(f"{name}={hash_password(password)}")
    return 0


def _users(args: argparse.Namespace) -> tuple[dict[str, str], frozenset[str]]:
    """The accounts of ``--users-file`` and ``--admin-user``, and the read-only ones among them
    (ValueError saying what is wrong)."""
    from rmq.console.auth import USER_NAME, hash_password, load_users_file

    users, read_only = load_users_file(args.users_file) if args.users_file else ({}, frozenset[str]())
    if args.admin_user is not None:
        if not USER_NAME.fullmatch(args.admin_user):
            raise ValueError(f"bad --admin-user {args.admin_user!r} (letters, digits, '_', '.', '@', '-'; at most 64)")
        if args.admin_password_file:
            try:
                with open(args.admin_password_file, encoding="utf-8") as f:
                    password = f.readline().rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as e:
                raise ValueError(f"cannot read --admin-password-file: {e}") from None
        else:
            password = os.environ.get(PASSWORD_ENV) or args.admin_password or ""
        if not password:
            raise ValueError(
                f"--admin-user needs a password: --admin-password-file FILE, ${PASSWORD_ENV} or --admin-password"
            )
        users[args.admin_user] = hash_password(password)
        read_only = read_only - {args.admin_user}
    elif args.admin_password or args.admin_password_file:
        raise ValueError("--admin-password needs --admin-user")
    if not users:
        raise ValueError(
            "nobody could log in: give --users-file FILE (make its lines with --hash-password NAME) "
            f"or --admin-user NAME with --admin-password-file FILE or ${PASSWORD_ENV}"
        )
    return users, read_only


def run_console_cli(args: argparse.Namespace) -> int:
    """``rmq console`` from its parsed flags: exit 2 for a bad argument, 3 when the port is
    taken, 1 when aiohttp is missing."""
    from rmq.cli.connection import client_tls, credentials, namesrv_of
    from rmq.cli.process import EXIT_BAD_CONFIG, EXIT_FAILED, setup_logging
    from rmq.errors import RMQError

    if args.hash_password is not None:
        return hash_password_cli(args.hash_password)
    setup_logging()
    missing = console_missing()
    if missing is not None:
        print(f"rmq console: {missing}", file=sys.stderr)
        return EXIT_FAILED
    try:
        users, read_only = _users(args)
        namesrv = namesrv_of(args)
        access_key, secret_key = credentials(args)
        tls = client_tls(args)
    except (ValueError, RMQError) as e:
        print(f"rmq console: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    return run_console(
        namesrv,
        args.host,
        args.port,
        sample_interval=args.sample_interval,
        prometheus_url=args.prometheus_url,
        users=users,
        read_only_users=read_only,
        host_names=tuple(args.host_name),
        access_key=access_key,
        secret_key=secret_key,
        tls=tls,
    )


def run_console(
    namesrv_addr: str | None,
    host: str,
    port: int,
    *,
    sample_interval: float = 10.0,
    prometheus_url: str | None = None,
    users: dict[str, str],
    read_only_users: frozenset[str] = frozenset(),
    host_names: tuple[str, ...] = (),
    access_key: str | None = None,
    secret_key: str | None = None,
    tls: Any = None,
) -> int:
    """``rmq console``: serve until SIGINT/SIGTERM (arguments as :class:`ConsoleConfig`'s);
    exit 2 for a bad argument, 3 when the port is taken, 1 when aiohttp is missing."""
    from rmq.cli.process import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_PORT_TAKEN, setup_logging, stop_event

    setup_logging()
    missing = console_missing()
    if missing is not None:
        print(f"rmq console: {missing}", file=sys.stderr)
        return EXIT_FAILED
    if not 0 <= port <= 65535:
        print(f"rmq console: bad --port {port} (expected 0..65535)", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if not 0.1 <= sample_interval <= 3600:
        print(f"rmq console: bad --sample-interval {sample_interval} (expected 0.1..3600 s)", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from rmq.client.admin import resolve_namesrv_addr
    from rmq.console import ConsoleConfig, ConsoleServer

    try:
        addrs = resolve_namesrv_addr(namesrv_addr)
    except ValueError as e:
        print(f"rmq console: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG

    async def main() -> int:
        stop = stop_event()
        try:
            server = ConsoleServer(
                ConsoleConfig(
                    ";".join(addrs),
                    host=host,
                    port=port,
                    sample_interval=sample_interval,
                    prometheus_url=prometheus_url,
                    users=users,
                    read_only_users=read_only_users,
                    host_names=host_names,
                    access_key=access_key,
                    secret_key=secret_key,
                    tls=tls,
                )
            )
        except ValueError as e:
            print(f"rmq console: {e}", file=sys.stderr)
            return EXIT_BAD_CONFIG
        try:
            await server.start()
        except OSError as e:
            print(f"rmq console: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
            return EXIT_PORT_TAKEN
        log.info(
            "rmq console listening on %s (name server %s; users: %s)",
            server.url,
            ";".join(addrs),
            ", ".join(sorted(users)),
        )
        try:
            await stop.wait()
        finally:
            log.info("rmq console stopping")
            await server.stop()
        return 0

    return uvloop.run(main())
