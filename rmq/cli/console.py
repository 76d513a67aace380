"""``rmq console --namesrv host:port [--host 127.0.0.1] [--port 8080]``, and the console that
``rmq standalone`` starts beside its broker (property ``consolePort``)."""
from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import uvloop

if TYPE_CHECKING:
    from rmq.console import ConsoleServer

log = logging.getLogger("rmq")

#: ``rmq standalone``'s console port when the property ``consolePort`` is not given (0 = off).
DEFAULT_CONSOLE_PORT = 8080


def console_missing() -> str | None:
    """Why the console cannot run here (its extra is not installed), or None."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return "the console needs aiohttp: pip install 'rmq[console]'"
    return None


async def start_console(namesrv_addr: str, host: str, port: int) -> ConsoleServer | None:
    """Start a console beside a daemon; a missing aiohttp or a taken port is a warning and
    None (the daemon carries on without it)."""
    missing = console_missing()
    if missing is not None:
        log.warning("console not started: %s", missing)
        return None
    from rmq.console import ConsoleConfig, ConsoleServer

    server = ConsoleServer(ConsoleConfig(namesrv_addr, host=host, port=port))
    try:
        await server.start()
    except OSError as e:
        log.warning("console not started: cannot listen on %s:%s (%s); the broker carries on without it",
                    host, port, e.strerror or e)
        return None
    log.info("rmq console on %s", server.url)
    return server


async def stop_console(server: ConsoleServer | None) -> None:
    """Stop what :func:`start_console` started (None: nothing)."""
    if server is not None:
        await server.stop()


def run_console(namesrv_addr: str | None, host: str, port: int, *, sample_interval: float = 10.0) -> int:
    """``rmq console``: serve until SIGINT/SIGTERM; exit 2 for a bad argument, 3 when the port
    is taken, 1 when aiohttp is missing."""
    from rmq.cli.daemons import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_PORT_TAKEN, _stop_event, setup_logging

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
        stop = _stop_event()
        server = ConsoleServer(ConsoleConfig(";".join(addrs), host=host, port=port,
                                             sample_interval=sample_interval))
        try:
            await server.start()
        except OSError as e:
            print(f"rmq console: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
            return EXIT_PORT_TAKEN
        log.info("rmq console listening on %s (name server %s)", server.url, ";".join(addrs))
        try:
            await stop.wait()
        finally:
            log.info("rmq console stopping")
            await server.stop()
        return 0

    return uvloop.run(main())
