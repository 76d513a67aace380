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
import functools
import tempfile
import time
from collections.abc import Callable

from rmq._testing import NoisyNeighbour, StandaloneProcess
from rmq._testing.floods import Wire, flood, pull, register_broker_body, register_broker_cmd, send_message
from rmq.common.constants import TopicValidator
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.topic import CreateTopicRequestHeader

_pull = functools.partial(pull, group="flood-group")


def _long_expression(i: int) -> str:
    terms = [f"(n > {k + i * 1000} OR s = 'x{k}')" for k in range(200)]
    return " AND ".join(terms)[:3990].rsplit(" AND ", 1)[0]


def _register(counter: int) -> RemotingCommand:
    """A new version (``counter``) of a 301-topic table."""
    body = register_broker_body(["flood-broker", *(f"FloodReg{i}" for i in range(300))], counter)
    return register_broker_cmd(body, name="flood-broker", cluster="FloodCluster")


def run_flood(name: str, addr: str, requests: list[RemotingCommand], probe: Callable[[], NoisyNeighbour]) -> None:
    """Send ``requests`` on one connection, read every answer, report the neighbour."""
    wire = Wire(addr, timeout=120)
    with probe() as neighbour:
        t0 = time.perf_counter()
        reader = flood(wire, requests)
        reader.join()
        took = time.perf_counter() - t0
    wire.close()
    s = sorted(neighbour.samples)
    p50 = s[len(s) // 2] if s else 0.0
    p99 = s[min(len(s) - 1, int(len(s) * 0.99))] if s else 0.0
    print(
        f"{name:9s} {len(requests):7d} requests answered in {took:6.2f} s (codes {reader.codes}); neighbour: "
        f"{len(s)} round trips, p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, "
        f"worst {neighbour.worst * 1e3:.1f} ms, {neighbour.failures} failures",
        flush=True,
    )


def run(broker: str, namesrv: str, args: argparse.Namespace) -> None:
    setup = Wire(broker)
    assert send_message(setup, "FloodT", b"only", group="flood-producer").code == 0
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
        run_flood("pulls", broker, [_pull("FloodT", 1) for _ in range(args.pulls)], broker_probe)
    if args.longpoll:
        run_flood(
            "longpoll", broker, [_pull("FloodT", 1, suspend_millis=1000) for _ in range(args.longpoll)], broker_probe
        )
    if args.sql92:
        run_flood(
            "sql92",
            broker,
            [
                _pull("FloodT", 0, expression=_long_expression(i), expression_type="SQL92", sub_version=i)
                for i in range(args.sql92)
            ],
            broker_probe,
        )
    if args.metadata:
        run_flood(
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
        run_flood("register", namesrv, [_register(i) for i in range(args.register)], namesrv_probe)


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
