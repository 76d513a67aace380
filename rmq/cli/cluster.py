"""``rmq standalone --brokers N``: N broker processes behind the embedded name server.

One broker process uses about one core (its event loop); RocketMQ's answer to scale is more
brokers (broker names) in one cluster, and a cluster on one machine is still a cluster: a
topic's queues spread over every master that lists it (Java's producer and ours create an
unknown topic from TBW102's route, which every broker registers), and every client sends to
and pulls from all of them without change. The standalone process keeps the name server and
the console on its loop and supervises the brokers, each ``python -m rmq broker`` with its
own store (``<store>/broker-<i>``), broker name and ports:

* broker ``i`` (from 0) listens on ``--broker-port + 10 * i`` (its VIP channel on that port
  - 2 and its HA listener on + 1 stay free for it, as Java's defaults), or an ephemeral port
  when ``--broker-port 0``; ``grpcServerPort`` and ``metricsPort`` likewise become ``base + i``
  (0 stays off);
* broker names are Java's ``broker-a``, ``broker-b`` ... unless ``brokerName`` is given, then
  ``<brokerName>-<i>``.

A broker process that dies is restarted after 1, 2, 4 … 30 s with one ERROR line per exit;
one that exits again before it registers with the name server more than
:data:`MAX_FAILED_RESTARTS` times in a row, or that fails at the first start, stops the
standalone with a non-zero status naming it (its own one-line reason is just above, on the
shared stderr). SIGTERM stops every broker cleanly (each unregisters and flushes), then the
name server.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
import typing
from dataclasses import dataclass, field

from rmq.cli.process import EXIT_FAILED
from rmq.config import ConfigError

if typing.TYPE_CHECKING:
    from rmq.namesrv.controller import NamesrvController

log = logging.getLogger("rmq")

#: Port distance between two brokers of ``rmq standalone --brokers N``: each keeps its VIP
#: channel (``listenPort - 2``) and HA listener (``listenPort + 1``) to itself.
BROKER_PORT_STEP = 10

#: The most brokers ``--brokers`` starts (a broker per core of a large machine).
MAX_BROKERS = 64

#: A broker that exits this many times in a row without registering stops the standalone.
MAX_FAILED_RESTARTS = 5

#: Restart backoff after a broker process exits: this, doubling, at most MAX_RESTART_BACKOFF.
FIRST_RESTART_BACKOFF = 1.0
MAX_RESTART_BACKOFF = 30.0

#: Seconds a broker has to stop after SIGTERM (it flushes its store) before it is killed.
STOP_TIMEOUT = 60.0

#: Seconds a broker has to register at (re)start.
START_TIMEOUT = 120.0


class BrokerExited(Exception):
    """A supervised broker failed for good: the message names it, ``status`` is the exit status
    the standalone reports."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def broker_names(base: str | None, count: int) -> list[str]:
    """The broker names of ``--brokers count``: ``broker-a``, ``broker-b`` … (``broker-<i>``
    past z) without a ``brokerName``, else ``<base>-<i>``."""
    if base is None:
        return [f"broker-{chr(ord('a') + i)}" if i < 26 else f"broker-{i}" for i in range(count)]
    return [f"{base}-{i}" for i in range(count)]


def _shifted(props: dict[str, str], key: str, default: int, i: int) -> str:
    """``key``'s port for broker ``i``: base + i, 0 stays 0 (off / ephemeral)."""
    text = props.get(key, str(default)).strip()
    try:
        base = int(text)
    except ValueError:
        raise ConfigError(f"bad value for {key}: {text!r} (expected 0..65535)") from None
    port = base + i if base else 0
    if not 0 <= port <= 65535:
        raise ConfigError(f"bad value for {key}: {base} + {i} brokers passes 65535 (expected 0..{65535 - i})")
    return str(port)


def broker_properties(
    props: dict[str, str], count: int, broker_port: int, store_dir: str, namesrv_addr: str
) -> list[dict[str, str]]:
    """Each broker's properties for ``--brokers count``: the standalone's broker properties
    ``props`` with its own ``listenPort``, ``storePathRootDir``, ``brokerName``,
    ``grpcServerPort`` and ``metricsPort`` (see the module's docstring), and the embedded name
    server unless ``namesrvAddr`` is given. ConfigError when a port would pass 65535."""
    if not 1 <= count <= MAX_BROKERS:
        raise ConfigError(f"bad value for --brokers: {count} (expected 1..{MAX_BROKERS})")
    last_port = broker_port + BROKER_PORT_STEP * (count - 1)
    if broker_port and last_port + 1 > 65535:
        raise ConfigError(
            f"bad --broker-port {broker_port} for {count} brokers: the last would listen on {last_port} "
            f"(its HA port above 65535); ports are --broker-port + {BROKER_PORT_STEP} * i"
        )
    names = broker_names(props.get("brokerName"), count)
    out = []
    for i, name in enumerate(names):
        p = dict(props)
        p["brokerName"] = name
        p["listenPort"] = str(broker_port + BROKER_PORT_STEP * i if broker_port else 0)
        p["storePathRootDir"] = os.path.join(store_dir, f"broker-{i}")
        p["grpcServerPort"] = _shifted(props, "grpcServerPort", 0, i)
        p["metricsPort"] = _shifted(props, "metricsPort", 5557, i)
        if not p.get("namesrvAddr"):
            p["namesrvAddr"] = namesrv_addr
        out.append(p)
    return out


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the standalone dies (Linux
    ``PR_SET_PDEATHSIG``), so a ``kill -9`` of the standalone leaves no orphan broker
    holding its store and ports. Elsewhere a no-op."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


@dataclass
class BrokerSlot:
    """One supervised broker: its name, properties and current process."""

    index: int
    name: str
    props: dict[str, str]
    proc: asyncio.subprocess.Process | None = None
    starts: int = 0
    registered: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def store_dir(self) -> str:
        return self.props["storePathRootDir"]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None


class BrokerSupervisor:
    """Starts, watches and stops the broker processes of ``rmq standalone --brokers N``.

    Args:
        slots: one :class:`BrokerSlot` per broker.
        namesrv: the embedded name server, whose route table says when a broker registered.
        log_args: ``--log-*`` options each broker gets (a ``--log-file`` gets the broker's name
            appended); default none (stderr, shared with the standalone).
        python: the interpreter to run ``-m rmq broker`` with (default this one).
    """

    def __init__(
        self,
        slots: list[BrokerSlot],
        namesrv: NamesrvController,
        log_args: typing.Sequence[str] = (),
        python: str = sys.executable,
    ) -> None:
        self.slots = slots
        self.namesrv = namesrv
        self.log_args = list(log_args)
        self.python = python
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    def command(self, slot: BrokerSlot) -> list[str]:
        """``python -m rmq broker`` with ``slot``'s properties as ``--key=value`` (those the
        standalone itself was given: nothing more is shown in ``ps`` than was already)."""
        args = [self.python, "-m", "rmq", "broker"]
        for a in self.log_args:
            # each broker its own log file beside the standalone's: <file>.<brokerName>
            args.append(f"{a}.{slot.name}" if a.startswith("--log-file=") else a)
        args += [f"--{k}={v}" for k, v in slot.props.items()]
        return args

    def _is_registered(self, slot: BrokerSlot, since: float) -> bool:
        """The name server has a registration of ``slot``'s master made after ``since``
        (``time.monotonic``, the route table's clock)."""
        route = self.namesrv.route_info_manager
        data = route.broker_addr_table.get(slot.name)
        addr = data.broker_addrs.get(0) if data is not None else None
        live = route.broker_live_table.get(addr) if addr else None
        return live is not None and live.last_update >= since

    async def _spawn(self, slot: BrokerSlot) -> asyncio.subprocess.Process:
        os.makedirs(slot.store_dir, exist_ok=True)
        slot.starts += 1
        proc = await asyncio.create_subprocess_exec(
            *self.command(slot),
            stdin=asyncio.subprocess.DEVNULL,
            # Its own session: a terminal's Ctrl-C reaches the standalone only, which stops the
            # brokers itself (a broker stopping on its own would be taken for a crash).
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        slot.proc = proc
        return proc

    async def _wait_registered(self, slot: BrokerSlot, proc: asyncio.subprocess.Process, since: float) -> bool:
        """True once ``slot`` registered, False when its process exits first or it did not
        register within :data:`START_TIMEOUT` (then it is killed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        exited = asyncio.ensure_future(proc.wait())
        try:
            while not self._is_registered(slot, since):
                if loop.time() > deadline:
                    log.error(
                        "broker %s (pid %d) did not register within %.0f s; killing it",
                        slot.name,
                        proc.pid,
                        START_TIMEOUT,
                    )
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    return False
                done, _ = await asyncio.wait({exited}, timeout=0.1)
                if done:
                    return False
            return True
        finally:
            if not exited.done():
                exited.cancel()

    async def start(self) -> None:
        """Start every broker and return once each registered with the name server.
        :class:`BrokerExited` naming the first one that exits (or does not register) first."""

        since = time.monotonic()
        procs = [await self._spawn(s) for s in self.slots]
        results = await asyncio.gather(
            *(self._wait_registered(s, p, since) for s, p in zip(self.slots, procs, strict=True))
        )
        for slot, proc, ok in zip(self.slots, procs, results, strict=True):
            if not ok:
                status = await proc.wait()
                raise BrokerExited(
                    f"broker {slot.name} (store {slot.store_dir}) exited with status {status} at start",
                    status if status > 0 else EXIT_FAILED,
                )
            slot.registered.set()
        self._tasks = [asyncio.ensure_future(self._keep(s)) for s in self.slots]

    async def wait_failed(self) -> BrokerExited:
        """Return the :class:`BrokerExited` of the first broker given up on (never returns
        while every broker keeps running or restarting)."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            e = t.exception()
            if isinstance(e, BrokerExited):
                return e
            if e is not None:
                return BrokerExited(f"supervising the brokers failed: {e!r}", EXIT_FAILED)
        return BrokerExited("the brokers' supervision ended", EXIT_FAILED)  # (only while stopping)

    async def _keep(self, slot: BrokerSlot) -> None:
        """Restart ``slot``'s process whenever it exits while the standalone runs."""

        backoff = FIRST_RESTART_BACKOFF
        failed = 0
        while True:
            assert slot.proc is not None
            status = await slot.proc.wait()
            if self._stopping:
                return
            if failed >= MAX_FAILED_RESTARTS:
                raise BrokerExited(
                    f"broker {slot.name} (store {slot.store_dir}) exited with status {status}: its last "
                    f"{failed} restarts all exited before registering; giving up",
                    EXIT_FAILED,
                )
            log.error(
                "broker %s (pid %s, store %s) exited with status %s; restarting it in %g s",
                slot.name,
                slot.pid,
                slot.store_dir,
                status,
                backoff,
            )
            slot.registered.clear()
            await asyncio.sleep(backoff)
            if self._stopping:
                return
            since = time.monotonic()
            proc = await self._spawn(slot)
            if await self._wait_registered(slot, proc, since):
                log.info("broker %s restarted (pid %d)", slot.name, proc.pid)
                slot.registered.set()
                backoff, failed = FIRST_RESTART_BACKOFF, 0
            else:
                backoff = min(backoff * 2, MAX_RESTART_BACKOFF)
                failed += 1

    async def shutdown(self) -> None:
        """SIGTERM every broker, wait for each to stop (SIGKILL after :data:`STOP_TIMEOUT`)."""
        self._stopping = True
        for t in self._tasks:
            t.cancel()
        procs = [s.proc for s in self.slots if s.proc is not None and s.proc.returncode is None]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)

        async def reap(p: asyncio.subprocess.Process) -> None:
            try:
                await asyncio.wait_for(p.wait(), STOP_TIMEOUT)
            except TimeoutError:
                log.error("broker pid %d did not stop within %.0f s; killing it", p.pid, STOP_TIMEOUT)
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                await p.wait()

        await asyncio.gather(*(reap(p) for p in procs))
        await asyncio.gather(*self._tasks, return_exceptions=True)
