"""Helpers of the gRPC endpoint tests: topic creation over the remoting port, a raw gRPC client
built from rmq's own schema (for the hostile-input tests), and the 5.x client's driver."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import threading
from pathlib import Path

import grpc
import pytest

from rmq._testing import StandaloneProcess, free_port, wait_until, wait_until_sync
from rmq._testing.processes import BrokerProcess
from rmq.broker.grpc.schema import RPCS, SERVICE, pb
from rmq.common.route import TopicRouteData
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests.topic import create_topic as create_topic_request
from rmq.remoting import RemotingClient

DRIVERS = Path(__file__).resolve().parent / "drivers"
DRIVER = DRIVERS / "v5_producer.py"


async def create_topic(
    broker_addr: str,
    topic: str,
    queues: int = 4,
    perm: int = 6,
    rc: RemotingClient | None = None,
    attributes: str | None = None,
) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker."""
    own = rc is None
    client = rc or RemotingClient()
    try:
        header = CreateTopicRequestHeader(
            topic=topic,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=perm,
            topic_sys_flag=0,
            attributes=attributes or None,
        )
        resp = await client.invoke(broker_addr, create_topic_request(header), timeout=5.0)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        if own:
            await client.close()


class Stub:
    """``MessagingService`` calls on a gRPC channel (blocking or ``grpc.aio``), typed by rmq's schema table."""

    def __init__(self, channel: grpc.Channel, client_id: str = "test-client") -> None:
        self.channel = channel
        self.metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))
        for rpc, (req, resp, cs, ss) in RPCS.items():
            path = f"/{SERVICE}/{rpc}"
            ser = getattr(pb, req).SerializeToString
            de = getattr(pb, resp).FromString
            if cs and ss:
                call = channel.stream_stream(path, request_serializer=ser, response_deserializer=de)
            elif ss:
                call = channel.unary_stream(path, request_serializer=ser, response_deserializer=de)
            else:
                call = channel.unary_unary(path, request_serializer=ser, response_deserializer=de)
            setattr(self, rpc, call)


def send_request(topic: str, body: bytes, message_id: str, **system: object) -> object:
    req = pb.SendMessageRequest()
    m = req.messages.add()
    m.topic.name = topic
    m.body = body
    m.system_properties.message_id = message_id
    m.system_properties.message_type = system.pop("message_type", pb.MessageType.NORMAL)
    for k, v in system.items():
        setattr(m.system_properties, k, v)
    return req


class Driver:
    """A driver of ``tests/grpc/drivers`` (default the producer's) run by the 5.x client's Python; JSON events on
    stdout (collected by :meth:`events`), stdin kept open until :meth:`finish`."""

    def __init__(
        self, python: Path, plan: dict, workdir: Path, env: dict[str, str] | None = None, script: Path = DRIVER
    ) -> None:
        path = workdir / f"plan-{os.getpid()}-{id(self):x}.json"
        path.write_text(json.dumps(plan))
        full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        full_env.update(env or {})
        self.stderr_path = workdir / f"driver-{os.getpid()}-{id(self):x}.err"
        with open(self.stderr_path, "w") as err:  # a file, not a pipe that could fill up
            self.proc = subprocess.Popen(
                [str(python), str(script), str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=full_env,
            )
        self.lines: list[dict] = []
        # A thread reads the lines: select() on the pipe cannot see lines already in the text
        # reader's buffer, so events that arrived in one chunk (the checks and "waiting") would
        # wait there for output that never comes.
        self._out: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_lines, name="v5-driver-stdout", daemon=True).start()

    def _read_lines(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._out.put(line)
        self._out.put("")  # end of output

    def next_event(self, timeout: float = 60.0) -> dict | None:
        """The next JSON event (None at end of output)."""
        while True:
            try:
                line = self._out.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"the 5.x client printed nothing for {timeout}s; events so far {self.lines}"
                ) from None
            if not line:
                self._out.put("")  # later calls see the end too
                return None
            if line.startswith("{"):
                event = json.loads(line)
                self.lines.append(event)
                return event

    def until(self, kind: str, timeout: float = 60.0) -> dict:
        while True:
            event = self.next_event(timeout)
            if event is None:
                raise AssertionError(f"the 5.x client ended before {kind!r}: {self.lines}\n{self.stderr_tail()}")
            if event["event"] == kind:
                return event

    def finish(self, timeout: float = 60.0) -> list[dict]:
        """Close stdin, read the rest, wait for the exit; every event."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        while self.next_event(timeout) is not None:
            pass
        self.proc.wait(timeout)
        return self.lines

    def stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class GrpcBroker:
    """A running ``rmq standalone`` with its gRPC endpoint; with :meth:`add_peer`, a cluster:
    more brokers (``rmq broker``, each its own ``brokerName`` and ``grpcServerPort``) registered
    with the standalone's name server. Clients are given the first broker's endpoint only
    (``endpoints``); topics and groups are made on every broker."""

    def __init__(self, proc: StandaloneProcess, grpc_port: int, name: str = "broker-a") -> None:
        self.proc = proc
        self.grpc_port = grpc_port
        self.endpoints = f"127.0.0.1:{grpc_port}"
        self.namesrv = proc.namesrv_addr
        self.broker_addr = proc.broker_addr
        #: broker name -> remoting address, the first broker's first
        self.brokers: dict[str, str] = {name: proc.broker_addr}
        #: broker name -> its gRPC port
        self.grpc_ports: dict[str, int] = {name: grpc_port}
        self.peers: list[BrokerProcess] = []

    def add_peer(self, directory: Path, name: str) -> BrokerProcess:
        """Start ``rmq broker`` ``name`` on this name server, serving gRPC on its own port,
        with the transaction check timing of :func:`start_grpc_broker`; returns once its
        gRPC endpoint listens."""
        grpc_port = free_port()
        peer = BrokerProcess(
            directory,
            self.namesrv,
            brokerName=name,
            listenHost="127.0.0.1",
            grpcServerPort=grpc_port,
            metricsPort=0,
            transactionTimeOut=1000,
            transactionCheckInterval=500,
        )
        self.peers.append(peer)
        try:
            peer.start()
            wait_until_sync(
                lambda: f"listening on 127.0.0.1:{grpc_port}" in peer.log_text(),
                timeout=30,
                interval=0.1,
                what=f"{name}'s gRPC endpoint",
            )
        except (RuntimeError, AssertionError) as exc:
            pytest.fail(f"{name} did not start: {exc}\n{peer.log_text()[-3000:]}", pytrace=False)
        self.brokers[name] = peer.addr
        self.grpc_ports[name] = grpc_port
        return peer

    def stop(self) -> int | None:
        for peer in self.peers:
            peer.stop()
        return self.proc.stop()

    def log_tail(self, lines: int = 60) -> str:
        tails = ["\n".join(self.proc.log_text().splitlines()[-lines:])]
        for peer in self.peers:
            tails.append(f"--- {peer.log_path} ---\n" + "\n".join(peer.log_text().splitlines()[-lines:]))
        return "\n".join(tails)

    def create_topic(self, topic: str, queues: int = 4, rc=None, attributes: str | None = None) -> None:
        """The topic on every broker (``queues`` each), once the name server routes it to all."""

        async def go() -> None:
            for addr in self.brokers.values():
                await create_topic(addr, topic, queues, rc=rc, attributes=attributes)
            client = RemotingClient([self.namesrv])
            try:

                async def routed() -> bool:
                    resp = await client.invoke_namesrv(
                        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                    )
                    if resp.code != ResponseCode.SUCCESS:
                        return False
                    route = TopicRouteData.from_body(resp.body_bytes())
                    return {q.broker_name for q in route.queue_datas} == set(self.brokers)

                await wait_until(routed, 30, 0.1, what=f"{topic} routed to {sorted(self.brokers)}")
            finally:
                await client.close()

        asyncio.run(go())

    def orderly_group(self, group: str) -> None:
        """The subscription group with ``consumeMessageOrderly`` on every broker."""

        async def go() -> None:
            rc = RemotingClient()
            try:
                body = json.dumps({"groupName": group, "consumeMessageOrderly": True}).encode()
                for addr in self.brokers.values():
                    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
                    resp = await rc.invoke(addr, cmd)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
            finally:
                await rc.close()

        asyncio.run(go())

    def stored(self, topic: str) -> dict[str, int]:
        """Messages stored in ``topic`` per broker name (the sum of its queues' max offsets,
        the queues being those the name server's route gives each broker)."""

        async def go() -> dict[str, int]:
            rc = RemotingClient([self.namesrv])
            try:
                resp = await rc.invoke_namesrv(
                    RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                )
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                route = TopicRouteData.from_body(resp.body_bytes())
                out = dict.fromkeys(self.brokers, 0)
                for qd in route.queue_datas:
                    for qid in range(qd.read_queue_nums):
                        cmd = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)})
                        reply = await rc.invoke(self.brokers[qd.broker_name], cmd)
                        assert reply.code == ResponseCode.SUCCESS, reply.remark
                        out[qd.broker_name] += int(reply.ext_fields["offset"])
                return out
            finally:
                await rc.close()

        return asyncio.run(go())

    def assert_on_every_broker(self, topic: str) -> None:
        """Every broker holds messages of ``topic`` (so a test that reads all of them through
        the first endpoint reached each broker)."""
        stored = self.stored(topic)
        assert all(stored.values()), f"{topic} stored per broker: {stored}"


def start_grpc_broker(
    store: Path, extra: list[str] = (), name: str = "broker-a"
) -> tuple[StandaloneProcess, GrpcBroker]:
    proc = StandaloneProcess(
        store,
        grpc=True,
        extra_args=[
            # the recovery check comes 1 s after an unresolved half message, not 6 s / 60 s
            "--transactionTimeOut=1000",
            "--transactionCheckInterval=500",
            f"--brokerName={name}",
            *extra,
        ],
    )
    try:
        proc.start()  # (waits for the gRPC endpoint's "listening" line too)
    except RuntimeError as exc:
        pytest.fail(f"rmq standalone did not start: {exc}", pytrace=False)
    return proc, GrpcBroker(proc, proc.grpc_port, name)
