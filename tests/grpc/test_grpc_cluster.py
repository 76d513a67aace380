"""Two brokers behind one name server: a 5.x client given ONE broker's gRPC endpoint reaches the
queues of both (the route names each queue's own broker endpoint; docs/design.md, gRPC endpoint)."""

from __future__ import annotations

import asyncio
import sys
import uuid

import pytest
from grpc_support import DRIVERS, Driver, create_topic, start_grpc_broker

from rmq._testing import StandaloneProcess, free_broker_port, free_port, terminate, wait_until_sync
from rmq.common.route import TopicRouteData
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient


class _SecondBroker:
    """``python -m rmq broker`` registered with the first one's name server, gRPC on its own port."""

    def __init__(self, workdir, namesrv: str) -> None:
        import subprocess

        self.port = free_broker_port()
        self.grpc_port = free_port()
        self.log_path = workdir / "broker-b.log"
        args = [
            sys.executable,
            "-m",
            "rmq",
            "broker",
            f"--namesrvAddr={namesrv}",
            "--brokerName=broker-b",
            "--brokerIP1=127.0.0.1",
            "--listenHost=127.0.0.1",
            f"--listenPort={self.port}",
            f"--grpcServerPort={self.grpc_port}",
            f"--storePathRootDir={workdir / 'store-b'}",
            *StandaloneProcess.TEST_FILE_SIZES,
            "--metricsPort=0",
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def listening(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"broker-b exited:\n{self.log_text()[-3000:]}")
        return f"listening on 127.0.0.1:{self.grpc_port}" in self.log_text()


async def _route(namesrv: str, topic: str) -> TopicRouteData | None:
    rc = RemotingClient([namesrv])
    try:
        resp = await rc.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        return TopicRouteData.from_body(resp.body_bytes()) if resp.code == ResponseCode.SUCCESS else None
    finally:
        await rc.close()


async def _stored(addr: str, topic: str, queues: int) -> int:
    rc = RemotingClient()
    try:
        total = 0
        for qid in range(queues):
            cmd = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)})
            resp = await rc.invoke(addr, cmd)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            total += int(resp.ext_fields["offset"])
        return total
    finally:
        await rc.close()


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("rmq-grpc-cluster")
    proc, first = start_grpc_broker(workdir / "store-a", ["--brokerName=broker-a"])
    second = _SecondBroker(workdir, first.namesrv)
    try:
        wait_until_sync(second.listening, timeout=30, interval=0.1, what="broker-b's gRPC endpoint")
        yield first, second
    finally:
        terminate(second.proc)
        proc.stop()


def test_one_endpoint_reaches_every_queue_of_both_brokers(v5_python, two_brokers, workdir):
    first, second = two_brokers
    topic = f"V5K_{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(first.broker_addr, topic, 4))
    asyncio.run(create_topic(second.addr, topic, 4))

    def both_registered() -> bool:
        route = asyncio.run(_route(first.namesrv, topic))
        return route is not None and {q.broker_name for q in route.queue_datas} == {"broker-a", "broker-b"}

    wait_until_sync(
        both_registered, timeout=30, interval=0.2, what="the topic on both brokers in the name server's route"
    )
    bodies = [f"k{i}" for i in range(16)]
    plan = {"endpoints": first.endpoints, "topic": topic, "messages": [{"kind": "normal", "body": b} for b in bodies]}
    driver = Driver(v5_python, plan, workdir)
    try:
        events = driver.finish(120)
    finally:
        driver.kill()
    sent = [e for e in events if e["event"] == "sent"]
    assert len(sent) == len(bodies), f"{events}\n{driver.stderr_tail()}"
    # the client spread them over the queues of both brokers, each reached at its own endpoint
    on_a = asyncio.run(_stored(first.broker_addr, topic, 4))
    on_b = asyncio.run(_stored(second.addr, topic, 4))
    assert on_a + on_b == len(bodies) and on_a > 0 and on_b > 0, (on_a, on_b)
    plan = {
        "endpoints": first.endpoints,
        "topic": topic,
        "group": f"GID_{topic}",
        "expect": bodies,
        "invisible": 10,
        "deadline": 120,
    }
    consumer = Driver(v5_python, plan, workdir, script=DRIVERS / "v5_consumer.py")
    try:
        events = consumer.finish(150)
    finally:
        consumer.kill()
    done = [e for e in events if e["event"] in ("done", "error")]
    assert done and done[-1]["event"] == "done", f"{events}\n{consumer.stderr_tail()}\n{second.log_text()[-2000:]}"
    assert {e["body"] for e in events if e["event"] == "received"} == set(bodies)
