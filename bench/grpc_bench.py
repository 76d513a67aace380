#!/usr/bin/env python3
"""SendMessage round trips over the RocketMQ 5 gRPC endpoint, and the gRPC libraries compared.

    .venv/bin/python bench/grpc_bench.py                         # own `rmq standalone`, grpcio client
    .venv/bin/python bench/grpc_bench.py --messages 200000 --concurrency 64 --size 128 [--json]
    .venv/bin/python bench/grpc_bench.py --mode libs             # grpcio (grpc.aio) vs grpclib servers

``--mode broker`` (default): a fresh ``rmq standalone`` with ``grpcServerPort``; ``--concurrency``
coroutines on one ``grpc.aio`` channel send ``--messages`` NORMAL messages of ``--size`` bytes
with SendMessage and wait for each answer. Prints messages/s, the broker's CPU seconds per 1M
messages (from /proc), and the client's, which may set the pace (it is named in the output).

``--mode libs``: the same requests against a minimal SendMessage server (parse the request,
answer OK; no broker) built on grpcio's ``grpc.aio`` and on grpclib (pure asyncio over h2),
each on uvloop in its own process: server CPU seconds per 1M calls and calls/s. This is how
the endpoint's library was chosen (docs/design.md "gRPC endpoint"); grpclib is not a
dependency of rmq: the mode needs ``pip install grpclib``.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _common as c


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="grpc_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("broker", "libs"), default="broker")
    ap.add_argument("--messages", type=int, default=50_000, help="messages sent (default 50 000)")
    ap.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    ap.add_argument("--size", type=int, default=128, help="body bytes (default 128)")
    ap.add_argument("--topic", default="BenchGrpc", help="topic (default BenchGrpc)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--serve", choices=("grpcio", "grpclib"), help=argparse.SUPPRESS)  # (libs mode's server)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    c.positive("--messages", args.messages)
    c.positive("--concurrency", args.concurrency)
    return args


def _request(pb, topic: str, body: bytes, seq: int):
    req = pb.SendMessageRequest()
    m = req.messages.add()
    m.topic.name = topic
    m.body = body
    m.system_properties.message_id = f"BENCH{seq:027d}"
    m.system_properties.message_type = pb.MessageType.NORMAL
    m.system_properties.born_timestamp.seconds = int(time.time())
    return req


async def drive(endpoint: str, topic: str, messages: int, concurrency: int, size: int) -> tuple[int, int, float]:
    """``(sent OK, failed, seconds)`` of ``messages`` SendMessage calls, ``concurrency`` at a time."""
    import grpc

    from rmq.broker.grpc.schema import SERVICE, pb

    body = b"x" * size
    ok = failed = 0
    next_seq = 0
    async with grpc.aio.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(
            f"/{SERVICE}/SendMessage",
            request_serializer=pb.SendMessageRequest.SerializeToString,
            response_deserializer=pb.SendMessageResponse.FromString,
        )
        md = (("x-mq-client-id", "grpc-bench"),)

        async def worker() -> None:
            nonlocal ok, failed, next_seq
            while next_seq < messages:
                seq = next_seq
                next_seq += 1
                try:
                    resp = await call(_request(pb, topic, body, seq), metadata=md, timeout=30)
                    if resp.status.code == pb.Code.OK:
                        ok += 1
                    else:
                        failed += 1
                except grpc.RpcError:
                    failed += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return ok, failed, time.perf_counter() - t0


async def _broker_run(
    args: argparse.Namespace, daemon: c.Standalone, port: int
) -> tuple[int, int, float, float, c.CpuMeter]:
    await daemon.start()
    rc = c.RemotingClient([daemon.namesrv_addr])
    try:
        await c.ensure_topic(rc, args.topic, 8)
    finally:
        await rc.close()
    broker = c.CpuMeter(daemon.pid)
    client_t0 = time.process_time()
    broker.start()
    ok, failed, seconds = await drive(f"127.0.0.1:{port}", args.topic, args.messages, args.concurrency, args.size)
    broker.stop()
    return ok, failed, seconds, time.process_time() - client_t0, broker


def bench_broker(args: argparse.Namespace) -> dict:
    port = c.free_port()
    daemon = c.Standalone(extra_args=[f"--grpcServerPort={port}"])
    try:
        ok, failed, seconds, client_cpu, broker = c.run(_broker_run(args, daemon, port))
    finally:
        daemon.cleanup()
    return {
        "mode": "broker",
        "messages": ok,
        "failed": failed,
        "concurrency": args.concurrency,
        "size": args.size,
        "msgs_per_s": round(ok / seconds, 1) if seconds else None,
        "broker_cpu_s_per_1m": round(broker.per_million(ok) or 0, 1),
        "client_cpu_s_per_1m": round(client_cpu * 1_000_000 / ok, 1) if ok else None,
        "paced_by": "client" if client_cpu > (broker.seconds or 0) else "broker",
    }


# -- libs mode: the two servers ------------------------------------------------------------


async def _serve_grpcio(port: int) -> None:
    import grpc

    from rmq.broker.grpc.schema import SERVICE, pb

    ok = pb.SendMessageResponse(status=pb.Status(code=pb.Code.OK, message="OK"))

    async def send(request, context):
        ok.entries.clear()
        ok.entries.add(message_id=request.messages[0].system_properties.message_id)
        return ok

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(
        send,
        request_deserializer=pb.SendMessageRequest.FromString,
        response_serializer=pb.SendMessageResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"SendMessage": handler})])
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


async def _serve_grpclib(port: int) -> None:
    from grpclib.const import Cardinality, Handler
    from grpclib.server import Server

    from rmq.broker.grpc.schema import SERVICE, pb

    class Service:
        async def send(self, stream) -> None:
            request = await stream.recv_message()
            resp = pb.SendMessageResponse(status=pb.Status(code=pb.Code.OK, message="OK"))
            resp.entries.add(message_id=request.messages[0].system_properties.message_id)
            await stream.send_message(resp)

        def __mapping__(self):
            return {
                f"/{SERVICE}/SendMessage": Handler(
                    self.send, Cardinality.UNARY_UNARY, pb.SendMessageRequest, pb.SendMessageResponse
                )
            }

    server = Server([Service()])
    await server.start("127.0.0.1", port)
    print("ready", flush=True)
    await server.wait_closed()


def bench_libs(args: argparse.Namespace) -> dict:
    out: dict = {"mode": "libs", "messages": args.messages, "concurrency": args.concurrency, "size": args.size}
    for lib in ("grpcio", "grpclib"):
        port = c.free_port()
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", lib, "--port", str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            if line.strip() != "ready":
                out[lib] = {"error": f"the {lib} server did not start (pip install {lib}?)"}
                continue
            meter = c.CpuMeter(proc.pid)
            meter.start()
            ok, failed, seconds = c.run(
                drive(f"127.0.0.1:{port}", args.topic, args.messages, args.concurrency, args.size)
            )
            meter.stop()
            out[lib] = {
                "calls_per_s": round(ok / seconds, 1) if seconds else None,
                "server_cpu_s_per_1m": round(meter.per_million(ok) or 0, 1),
                "failed": failed,
            }
        finally:
            proc.terminate()
            proc.wait(10)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        import uvloop

        uvloop.run(_serve_grpcio(args.port) if args.serve == "grpcio" else _serve_grpclib(args.port))
        return 0
    figures = bench_broker(args) if args.mode == "broker" else bench_libs(args)
    if args.json:
        c.print_json(figures)
    else:
        for k, v in figures.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
