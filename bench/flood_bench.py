"""Another client's round trips while one client floods the broker or the name server.

Each flood is sent on one connection (pipelined, one write) while a NoisyNeighbour (a thread
with its own socket) sends one cheap request after another and records its round trips; the
bench prints the neighbour's p50, p99 and worst round trip during each flood, and how long the
flood took to be answered:

* ``pulls``     — N pipelined PULL_MESSAGE without suspension (finding 7: 100k on one connection)
* ``longpoll``  — N pipelined long-polling pulls at the end of a queue (held, then expiring)
* ``sql92``     — pipelined SQL92 pulls, each a new ~4000-character expression and subVersion
  (finding 4; the broker needs ``enablePropertyFilter=true``)
* ``metadata``  — pipelined UPDATE_AND_CREATE_TOPIC (finding 8)
* ``register``  — pipelined REGISTER_BROKER of a 301-topic table to the name server

    PYTHONPATH=$PWD python bench/flood_bench.py [--pulls N] [--sql92 N] [--metadata N] [--register N]
        [--broker HOST:PORT --namesrv HOST:PORT]   # default: starts `rmq standalone`

Only the public protocol is spoken, so ``--broker/--namesrv`` may point at Apache RocketMQ
(start it with enablePropertyFilter=true for the SQL92 flood).
"""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import threading
import time
import zlib
from collections.abc import Callable

from rmq._testing import NoisyNeighbour, StandaloneProcess
from rmq.common.constants import TopicValidator
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.remoting.codec import FrameDecoder, encode


class Wire:
    """One blocking connection speaking frames."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=120)
        self.decoder = FrameDecoder()

    def send(self, cmds: list[RemotingCommand]) -> None:
        self.sock.sendall(b"".join(bytes(p) for c in cmds for p in encode(c)))

    def read(self) -> RemotingCommand:
        while True:
            cmd = self.decoder.next_frame()
            if cmd is not None:
                return cmd
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("closed")
            self.decoder.feed(chunk)

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
        self.send([cmd])
        return self.read()

    def close(self) -> None:
        self.sock.close()


def _pull(
    topic: str,
    offset: int,
    *,
    suspend_ms: int | None = None,
    expression: str = "*",
    expression_type: str = "TAG",
    sub_version: int = 0,
) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "flood-group",
            "topic": topic,
            "queueId": "0",
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": str(4 | (2 if suspend_ms is not None else 0)),
            "commitOffset": "0",
            "suspendTimeoutMillis": str(suspend_ms or 0),
            "subscription": expression,
            "subVersion": str(sub_version),
            "expressionType": expression_type,
        },
    )


def _long_expression(i: int) -> str:
    terms = [f"(n > {k + i * 1000} OR s = 'x{k}')" for k in range(200)]
    return " AND ".join(terms)[:3990].rsplit(" AND ", 1)[0]


def _register(counter: int) -> RemotingCommand:
    table = {
        t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}
        for t in ["flood-broker", *(f"FloodReg{i}" for i in range(300))]
    }
    body = json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": table,
                "dataVersion": {"timestamp": 1, "counter": counter},
            },
            "filterServerList": [],
        }
    ).encode()
    ext = {
        "brokerAddr": "127.0.0.1:1",
        "brokerId": "0",
        "brokerName": "flood-broker",
        "clusterName": "FloodCluster",
        "haServerAddr": "",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


def flood(name: str, addr: str, requests: list[RemotingCommand], probe: Callable[[], NoisyNeighbour]) -> None:
    """Send ``requests`` on one connection, read every answer, report the neighbour."""
    wire = Wire(addr)
    codes: dict[int, int] = {}
    with probe() as neighbour:
        t0 = time.perf_counter()
        sender = threading.Thread(target=wire.send, args=(requests,), daemon=True)
        sender.start()
        for _ in requests:
            code = wire.read().code
            codes[code] = codes.get(code, 0) + 1
        took = time.perf_counter() - t0
        sender.join()
    wire.close()
    s = sorted(neighbour.samples)
    p50 = s[len(s) // 2] if s else 0.0
    p99 = s[min(len(s) - 1, int(len(s) * 0.99))] if s else 0.0
    print(
        f"{name:9s} {len(requests):7d} requests answered in {took:6.2f} s (codes {codes}); neighbour: "
        f"{len(s)} round trips, p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, "
        f"worst {neighbour.worst * 1e3:.1f} ms, {neighbour.failures} failures",
        flush=True,
    )


def run(broker: str, namesrv: str, args: argparse.Namespace) -> None:
    setup = Wire(broker)
    header = SendMessageRequestHeader(
        producer_group="flood-producer",
        topic="FloodT",
        queue_id=0,
        born_timestamp=int(time.time() * 1000),
        properties="",
    )
    assert setup.call(RemotingCommand.request(RequestCode.SEND_MESSAGE, header, b"only")).code == 0
    setup.close()

    def broker_probe() -> NoisyNeighbour:
        return NoisyNeighbour(broker)

    def namesrv_probe() -> NoisyNeighbour:
        return NoisyNeighbour(
            namesrv,
            code=RequestCode.GET_ROUTEINFO_BY_TOPIC,
            ext_fields={"topic": TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC},
        )

    if args.pulls:
        flood("pulls", broker, [_pull("FloodT", 1) for _ in range(args.pulls)], broker_probe)
    if args.longpoll:
        flood("longpoll", broker, [_pull("FloodT", 1, suspend_ms=1000) for _ in range(args.longpoll)], broker_probe)
    if args.sql92:
        flood(
            "sql92",
            broker,
            [
                _pull("FloodT", 0, expression=_long_expression(i), expression_type="SQL92", sub_version=i)
                for i in range(args.sql92)
            ],
            broker_probe,
        )
    if args.metadata:
        flood(
            "metadata",
            broker,
            [
                RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    CreateTopicRequestHeader(topic=f"FloodMeta{i}", read_queue_nums=4, write_queue_nums=4),
                )
                for i in range(args.metadata)
            ],
            broker_probe,
        )
    if args.register:
        flood("register", namesrv, [_register(i) for i in range(args.register)], namesrv_probe)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pulls", type=int, default=100_000)
    ap.add_argument("--longpoll", type=int, default=10_000)
    ap.add_argument("--sql92", type=int, default=50)
    ap.add_argument("--metadata", type=int, default=1000)
    ap.add_argument("--register", type=int, default=1000)
    ap.add_argument("--broker", help="HOST:PORT of a running broker (default: start rmq standalone)")
    ap.add_argument("--namesrv", help="HOST:PORT of its name server")
    args = ap.parse_args()
    if args.broker and args.namesrv:
        run(args.broker, args.namesrv, args)
        return
    with (
        tempfile.TemporaryDirectory(prefix="rmq-flood-bench-") as d,
        StandaloneProcess(d, ["--enablePropertyFilter=true"]) as proc,
    ):
        run(proc.broker_addr, proc.namesrv_addr, args)


if __name__ == "__main__":
    main()
