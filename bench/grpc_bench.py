#!/usr/bin/env python3
"""SendMessage and ReceiveMessage + AckMessage over the RocketMQ 5 gRPC endpoint, and the gRPC
libraries compared.

    .venv/bin/python bench/grpc_bench.py                         # own `rmq standalone`, grpcio client
    .venv/bin/python bench/grpc_bench.py --messages 200000 --concurrency 64 --size 128 [--json]
    .venv/bin/python bench/grpc_bench.py --v5-python ~/.cache/rmq-interop/v5-venv/bin/python
    .venv/bin/python bench/grpc_bench.py --mode libs             # grpcio (grpc.aio) vs grpclib servers

``--mode broker`` (default): a fresh ``rmq standalone`` with ``grpcServerPort``. Send:
``--concurrency`` coroutines on one ``grpc.aio`` channel send ``--messages`` NORMAL messages of
``--size`` bytes with SendMessage, each waiting for its answer. Receive: ``--receivers``
coroutines receive them (ReceiveMessage of ``--batch``, as a SimpleConsumer; POP underneath)
and ack each with its own AckMessage, as the 5.x clients do. For each phase: messages/s, the
broker's CPU seconds per 1M messages (from /proc) and the client's; the side that used more
CPU is named as the one that set the pace.

``--v5-python``: the same two phases once more with the official 5.x Python client (PyPI
``rocketmq-python-client``; synchronous and thread based) in that venv, through
``bench/grpc_v5_driver.py`` on ``--v5-threads`` threads, with its own CPU per 1M.

``--endpoint HOST:PORT --namesrv ADDR --broker-pid PID``: the same phases against a running
endpoint, e.g. Apache RocketMQ 5's proxy in local mode (the pid is the process whose CPU counts).

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
    ap.add_argument("--receivers", type=int, default=4, help="receiving coroutines (default 4)")
    ap.add_argument("--batch", type=int, default=32, help="messages per ReceiveMessage (default 32)")
    ap.add_argument("--v5-python", help="the Python of a venv with rocketmq-python-client: measure it too")
    ap.add_argument("--v5-threads", type=int, default=16, help="the 5.x client's threads (default 16)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument(
        "--endpoint",
        help="an existing gRPC endpoint host:port (e.g. Apache RocketMQ's proxy) instead of a fresh rmq standalone;"
        " needs --namesrv (topics are created through it) and --broker-pid (whose CPU is measured)",
    )
    ap.add_argument("--namesrv", help="with --endpoint: the name server address")
    ap.add_argument("--broker-pid", type=int, help="with --endpoint: the pid of the process serving it")
    ap.add_argument("--serve", choices=("grpcio", "grpclib"), help=argparse.SUPPRESS)  # (libs mode's server)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    c.positive("--messages", args.messages)
    c.positive("--concurrency", args.concurrency)
    c.positive("--receivers", args.receivers)
    c.positive("--batch", args.batch)
    c.positive("--v5-threads", args.v5_threads)
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


async def drive(
    endpoint: str, topic: str, messages: int, concurrency: int, size: int, why: dict[str, int] | None = None
) -> tuple[int, int, float]:
    """``(sent OK, failed, seconds)`` of ``messages`` SendMessage calls, ``concurrency`` at a time;
    ``why`` (when given) counts each failure's reason (the status or the RPC error, a few kinds)."""
    import grpc

    from rmq.broker.grpc.schema import SERVICE, pb

    body = b"x" * size
    ok = failed = 0
    reasons: dict[str, int] = why if why is not None else {}

    def failure(reason: str) -> None:
        nonlocal failed
        failed += 1
        if reason in reasons or len(reasons) < 8:
            reasons[reason] = reasons.get(reason, 0) + 1

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
                        failure(f"status {pb.Code.name(resp.status.code)}: {resp.status.message[:200]}")
                except grpc.RpcError as e:
                    failure(f"{e.code()}: {str(e.details())[:200]}")  # type: ignore[attr-defined]

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return ok, failed, time.perf_counter() - t0


async def drain(endpoint: str, topic: str, group: str, messages: int, receivers: int, batch: int) -> tuple[int, float]:
    """``(acked, seconds)``: ``receivers`` coroutines receive ``topic`` in ``group`` (ReceiveMessage
    of ``batch``, 30 s invisible, 5 s long polls) and ack each message with its own AckMessage,
    until ``messages`` were acked."""
    import grpc

    from rmq.broker.grpc.schema import SERVICE, pb

    acked = 0
    finished = asyncio.Event()
    async with grpc.aio.insecure_channel(endpoint) as channel:
        receive = channel.unary_stream(
            f"/{SERVICE}/ReceiveMessage",
            request_serializer=pb.ReceiveMessageRequest.SerializeToString,
            response_deserializer=pb.ReceiveMessageResponse.FromString,
        )
        ack = channel.unary_unary(
            f"/{SERVICE}/AckMessage",
            request_serializer=pb.AckMessageRequest.SerializeToString,
            response_deserializer=pb.AckMessageResponse.FromString,
        )
        md = (("x-mq-client-id", "grpc-bench-consumer"),)
        req = pb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=batch)
        req.message_queue.topic.name = topic
        req.message_queue.id = -1
        req.invisible_duration.seconds = 30
        req.long_polling_timeout.seconds = 5

        async def receiver() -> None:
            nonlocal acked
            while acked < messages:
                async for r in receive(req, metadata=md, timeout=20):
                    if not r.HasField("message"):
                        continue
                    sp = r.message.system_properties
                    resp = await ack(
                        pb.AckMessageRequest(
                            group=req.group,
                            topic=req.message_queue.topic,
                            entries=[pb.AckMessageEntry(message_id=sp.message_id, receipt_handle=sp.receipt_handle)],
                        ),
                        metadata=md,
                        timeout=30,
                    )
                    if resp.status.code == pb.Code.OK:
                        acked += 1
                        if acked >= messages:
                            finished.set()

        t0 = time.perf_counter()
        tasks = [asyncio.ensure_future(receiver()) for _ in range(receivers)]
        waiter = asyncio.ensure_future(finished.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if not finished.is_set():
            await asyncio.gather(*tasks)  # (a receiver failed: its error ends the bench)
        seconds = time.perf_counter() - t0
        for t in (waiter, *tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return acked, seconds


def _phase(ok: int, seconds: float, broker_cpu: float | None, client_cpu: float, client: str) -> dict:
    broker = (broker_cpu or 0.0) * 1_000_000 / ok if ok else None
    mine = client_cpu * 1_000_000 / ok if ok else None
    return {
        "messages": ok,
        "msgs_per_s": round(ok / seconds, 1) if seconds else None,
        "broker_cpu_s_per_1m": round(broker, 1) if broker is not None else None,
        "client_cpu_s_per_1m": round(mine, 1) if mine is not None else None,
        "paced_by": f"client ({client})" if client_cpu > (broker_cpu or 0.0) else "broker",
    }


async def _broker_run(args: argparse.Namespace, namesrv: str, endpoint: str, pid: int) -> dict:
    rc = c.RemotingClient([namesrv])
    try:
        await c.ensure_topic(rc, args.topic, 8)
        if args.v5_python:
            await c.ensure_topic(rc, args.topic + "V5", 8)
    finally:
        await rc.close()
    broker = c.CpuMeter(pid)
    out: dict = {"mode": "broker", "concurrency": args.concurrency, "receivers": args.receivers, "size": args.size}

    client_t0 = time.process_time()
    broker.start()
    why: dict[str, int] = {}
    ok, failed, seconds = await drive(endpoint, args.topic, args.messages, args.concurrency, args.size, why)
    broker.stop()
    out["send"] = {
        **_phase(ok, seconds, broker.seconds, time.process_time() - client_t0, "grpcio aio"),
        "failed": failed,
        **({"failures": why} if why else {}),
    }

    client_t0 = time.process_time()
    broker.start()
    acked, seconds = await drain(endpoint, args.topic, "BenchGrpcGroup", ok, args.receivers, args.batch)
    broker.stop()
    out["receive_ack"] = _phase(acked, seconds, broker.seconds, time.process_time() - client_t0, "grpcio aio")

    if args.v5_python:
        topic = args.topic + "V5"
        for phase, extra in (("send", str(args.size)), ("receive", "BenchGrpcV5Group")):
            broker.start()
            figures = await asyncio.to_thread(
                _run_v5, args.v5_python, phase, endpoint, topic, args.messages, args.v5_threads, extra
            )
            broker.stop()
            key = "v5_send" if phase == "send" else "v5_receive_ack"
            out[key] = {
                **_phase(figures["ok"], figures["seconds"], broker.seconds, figures["cpu_seconds"], "5.x Python"),
                "failed": figures["failed"],
            }
    return out


def _run_v5(python: str, *argv: object) -> dict:
    """One phase of bench/grpc_v5_driver.py with the 5.x client's Python; its JSON line."""
    import json

    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpc_v5_driver.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([python, driver, *map(str, argv)], capture_output=True, text=True, env=env, timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            return dict(json.loads(line))
    raise c.BenchError(f"the 5.x client driver exited with {proc.returncode}:\n{proc.stderr[-3000:]}")


def bench_broker(args: argparse.Namespace) -> dict:
    if args.endpoint:
        if not (args.namesrv and args.broker_pid):
            raise SystemExit("grpc_bench.py: --endpoint needs --namesrv and --broker-pid")
        return dict(c.run(_broker_run(args, args.namesrv, args.endpoint, args.broker_pid)))
    daemon = c.Standalone(grpc=True)

    async def run() -> dict:
        await daemon.start()
        return await _broker_run(args, daemon.namesrv_addr, f"127.0.0.1:{daemon.grpc_port}", daemon.pid)

    try:
        return dict(c.run(run()))
    finally:
        daemon.cleanup()


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
