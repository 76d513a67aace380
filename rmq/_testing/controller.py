"""``rmq controller`` as a separate process for the controller tests: started the way an operator
starts it, so a test can ``kill -9`` it, stop it with SIGSTOP and wake it with SIGCONT."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmq._testing import free_port, read_log, terminate, wait_for_port, wait_until_sync

if TYPE_CHECKING:
    from rmq.protocol.command import RemotingCommand

__all__ = ["ControllerProcess"]


class ControllerProcess:
    """``python -m rmq controller --etcd <endpoint> --listen-port <port> --key=value...``; the log
    in ``<directory>/controller.log``. The port is fixed at construction (a restart comes back
    at the same address).

    Args:
        directory: for the log (created).
        etcd: etcd client URL(s).
        props: more properties (``scanNotActiveBrokerInterval=200``, ``etcdLeaseTtlSeconds=2``...).
    """

    def __init__(self, directory: Path, etcd: str, **props: object) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.etcd = etcd
        self.port = free_port()
        self.props = props
        self.log_path = self.dir / "controller.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0
        # Where start() waits for the port and addr points (a node's address in the fault tests).
        self.host = "127.0.0.1"

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "rmq",
            "controller",
            "--etcd",
            self.etcd,
            "--listen-port",
            str(self.port),
            *(f"--{k}={v}" for k, v in self.props.items()),
        ]

    def log_text(self, start: int = 0) -> str:
        return read_log(self.log_path, start)

    def start(self, timeout: float = 30.0) -> ControllerProcess:
        """Start; return once this run logged that it listens and the port accepts."""
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(os.environ)
            )
        proc = self.proc

        def listening() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"rmq controller exited with {proc.returncode}:\n{self.log_text()[-3000:]}")
            return "rmq controller listening" in self.log_text(self._log_start) and wait_for_port(
                self.host, self.port, 0.5
            )

        try:
            wait_until_sync(listening, timeout, interval=0.05, what="rmq controller listening")
        except AssertionError:
            self.kill()
            raise RuntimeError(f"rmq controller did not start within {timeout}s:\n{self.log_text()[-3000:]}") from None
        return self

    def run_log(self) -> str:
        """The log of this run only."""
        return self.log_text(self._log_start)

    def pause(self) -> None:
        """SIGSTOP: the process stops, its sockets stay open (a zombie leader)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """``kill -9``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (the controller resigns) and wait; SIGKILL after ``timeout``."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        return terminate(self.proc, timeout)

    def __enter__(self) -> ControllerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ControllerDriver:
    """Talks to a controller group over TCP the way a broker does (Java ``BrokerOuterAPI``):
    finds the leader with CONTROLLER_GET_METADATA_INFO, sends each request there, and when a
    controller answers CONTROLLER_NOT_LEADER or cannot be reached, finds the leader again.

    Args:
        controllers: every controller's ``host:port``.
        timeout: seconds per request (default 3).
    """

    def __init__(self, controllers: list[str], timeout: float = 3.0) -> None:
        from rmq.remoting.client import RemotingClient

        self.controllers = list(controllers)
        self.timeout = timeout
        self.client = RemotingClient(name="controller-driver")
        self.leader: str | None = None

    async def close(self) -> None:
        await self.client.close()

    async def metadata(self, addr: str) -> Any:
        from rmq.protocol.requests.controller import get_controller_metadata, parse_controller_metadata

        return parse_controller_metadata(await self.client.invoke(addr, get_controller_metadata(), self.timeout))

    async def find_leader(self) -> str | None:
        """The controller that says it leads, or None now."""
        for addr in self.controllers:
            try:
                meta = await self.metadata(addr)
            except Exception:  # noqa: BLE001 - a controller down: ask the next
                continue
            if meta.is_leader:
                self.leader = addr
                return addr
        return None

    async def invoke(self, make: Callable[[], RemotingCommand], *, within: float = 20.0) -> RemotingCommand:
        """``make()`` sent to the leader, again to the leader of the moment until one answers
        other than CONTROLLER_NOT_LEADER (AssertionError after ``within`` seconds)."""
        from rmq._testing import wait_until
        from rmq.protocol.codes import ResponseCode

        async def attempt() -> RemotingCommand | None:
            leader = self.leader or await self.find_leader()
            if leader is None:
                return None
            try:
                resp: RemotingCommand = await self.client.invoke(leader, make(), self.timeout)
            except Exception:  # noqa: BLE001 - the leader went away: look again
                self.leader = None
                return None
            if resp.code == ResponseCode.CONTROLLER_NOT_LEADER:
                self.leader = None
                return None
            return resp

        result = await wait_until(attempt, within, interval=0.05, what="a controller leader's answer")
        assert result is not None
        return result


class BrokerReplica:
    """One replica of a broker name as a controller sees it: a real ``RemotingServer`` on an
    ephemeral port (its address is the replica's; it records the NOTIFY_BROKER_ROLE_CHANGED
    notices it receives), the registration Java's ``ReplicasManager`` does
    (GET_NEXT_BROKER_ID, APPLY_BROKER_ID, REGISTER_BROKER, ELECT_MASTER) and a task sending
    BROKER_HEARTBEAT to every controller every ``interval`` seconds, as a broker does.
    """

    def __init__(
        self,
        driver: ControllerDriver,
        broker_name: str,
        *,
        cluster: str = "DefaultCluster",
        timeout_ms: int = 1000,
        interval: float = 0.1,
    ) -> None:
        self.driver = driver
        self.broker_name = broker_name
        self.cluster = cluster
        self.timeout_ms = timeout_ms
        self.interval = interval
        self.broker_id: int | None = None
        self.epoch = 0
        self.max_offset = 0
        self.notices: list[Any] = []
        self._server: Any = None
        self._beat: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.port}"

    async def start(self) -> BrokerReplica:
        from rmq.protocol.codes import RequestCode, ResponseCode
        from rmq.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader
        from rmq.remoting.server import RemotingServer

        replica = self

        class _Notices:
            def process_request(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
                if cmd.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED:
                    replica.notices.append(cmd.decode_header(NotifyBrokerRoleChangedRequestHeader))
                if cmd.code == RequestCode.GET_BROKER_EPOCH_CACHE:
                    return cmd.response(ResponseCode.SUCCESS, None, None, replica.epoch_cache().encode())
                return cmd.response(ResponseCode.SUCCESS, None)

        self._server = RemotingServer("127.0.0.1", 0, name=f"replica-{self.broker_name}")
        self._server.register_default_processor(_Notices())
        await self._server.start()
        return self

    def epoch_cache(self) -> Any:
        """What GET_BROKER_EPOCH_CACHE answers: one epoch entry per notice received (the
        epochs this replica was told of), open at ``max_offset``."""
        from rmq.protocol.body.controller import EpochEntry, EpochEntryCache

        epochs = sorted({n.master_epoch for n in self.notices if n.master_epoch is not None})
        entries = tuple(EpochEntry(e, i * 100) for i, e in enumerate(epochs))
        return EpochEntryCache(self.cluster, self.broker_name, self.broker_id or 0, entries, self.max_offset)

    async def register(self) -> Any:
        """The registration; returns REGISTER_BROKER's (header, SyncStateSet)."""
        from rmq.protocol.requests import controller as w

        r = await self.driver.invoke(lambda: w.get_next_broker_id(self.cluster, self.broker_name))
        bid = self.broker_id = w.parse_next_broker_id(r)
        code = f"{self.address};{bid}"
        r = await self.driver.invoke(lambda: w.apply_broker_id(self.cluster, self.broker_name, bid, code))
        w.parse_apply_broker_id(r)
        self.start_heartbeats()
        r = await self.driver.invoke(
            lambda: w.register_broker_to_controller(self.cluster, self.broker_name, bid, self.address)
        )
        return w.parse_register_broker_to_controller(r)

    async def elect_self(self) -> Any:
        """ELECT_MASTER for itself (Java ``brokerElect``): (header, body, elected)."""
        from rmq.protocol.requests import controller as w

        assert self.broker_id is not None
        bid = self.broker_id
        r = await self.driver.invoke(lambda: w.elect_master(self.broker_name, bid, cluster_name=self.cluster))
        return w.parse_elect_master(r)

    def heartbeat_command(self) -> RemotingCommand:
        from rmq.protocol.headers.controller import BrokerHeartbeatRequestHeader
        from rmq.protocol.requests.controller import broker_heartbeat

        h = BrokerHeartbeatRequestHeader(
            cluster_name=self.cluster,
            broker_addr=self.address,
            broker_name=self.broker_name,
            broker_id=self.broker_id,
            epoch=self.epoch,
            max_offset=self.max_offset,
            confirm_offset=self.max_offset,
            heartbeat_timeout_mills=self.timeout_ms,
        )
        return broker_heartbeat(h, oneway=True)

    def start_heartbeats(self) -> None:
        if self._beat is None:
            self._beat = asyncio.get_running_loop().create_task(self._beats())

    async def _beats(self) -> None:
        while True:
            for addr in self.driver.controllers:
                with contextlib.suppress(Exception):  # a controller down: the others still hear it
                    await self.driver.client.invoke_oneway(addr, self.heartbeat_command())
            await asyncio.sleep(self.interval)

    async def stop_heartbeats(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
            self._beat = None

    async def close(self) -> None:
        await self.stop_heartbeats()
        if self._server is not None:
            await self._server.close()


__all__ += ["BrokerReplica", "ControllerDriver"]
