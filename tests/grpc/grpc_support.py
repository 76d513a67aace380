"""Helpers of the gRPC endpoint tests: topic creation over the remoting port, a raw gRPC client
built from rmq's own schema (for the hostile-input tests), and the 5.x client's driver."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import grpc
import pytest

from rmq._testing import StandaloneProcess, free_port
from rmq.broker.grpc.schema import RPCS, SERVICE, pb
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
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
        resp = await client.invoke(
            broker_addr,
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {
                    "topic": topic,
                    "defaultTopic": "TBW102",
                    "readQueueNums": str(queues),
                    "writeQueueNums": str(queues),
                    "perm": str(perm),
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0",
                    "order": "false",
                    **({"attributes": attributes} if attributes else {}),
                },
            ),
            timeout=5.0,
        )
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

    def next_event(self, timeout: float = 60.0) -> dict | None:
        """The next JSON event (None at end of output)."""
        import select

        assert self.proc.stdout is not None
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                raise AssertionError(f"the 5.x client printed nothing for {timeout}s; events so far {self.lines}")
            line = self.proc.stdout.readline()
            if not line:
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
    """A running ``rmq standalone`` with its gRPC endpoint."""

    def __init__(self, proc: StandaloneProcess, grpc_port: int) -> None:
        self.proc = proc
        self.grpc_port = grpc_port
        self.endpoints = f"127.0.0.1:{grpc_port}"
        self.namesrv = proc.namesrv_addr
        self.broker_addr = proc.broker_addr

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.proc.log_text().splitlines()[-lines:])

    def create_topic(self, topic: str, queues: int = 4, rc=None, attributes: str | None = None) -> None:
        asyncio.run(create_topic(self.broker_addr, topic, queues, rc=rc, attributes=attributes))


def start_grpc_broker(store: Path, extra: list[str] = ()) -> tuple[StandaloneProcess, GrpcBroker]:
    port = free_port()
    proc = StandaloneProcess(
        store,
        extra_args=[
            f"--grpcServerPort={port}",
            # the recovery check comes 1 s after an unresolved half message, not 6 s / 60 s
            "--transactionTimeOut=1000",
            "--transactionCheckInterval=500",
            *extra,
        ],
    )
    try:
        proc.start()
    except RuntimeError as exc:
        pytest.fail(f"rmq standalone did not start: {exc}", pytrace=False)
    if f"listening on 127.0.0.1:{port}" not in proc.log_text():
        proc.stop()
        pytest.fail(f"the gRPC endpoint did not start on {port}:\n{proc.log_text()[-3000:]}", pytrace=False)
    return proc, GrpcBroker(proc, port)
