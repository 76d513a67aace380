"""1000 topics created one UPDATE_AND_CREATE_TOPIC at a time, each answered before the next.

With a name server, each creation is registered (incrementally: only the new topic, Java's
``registerIncrementBrokerData``) before it is answered; the bench prints the total and the mean,
p99 and worst per topic, and checks that the last topic is routable from the name server. Issue
23 measured 3000 creations at over 10 min before (a full registration per creation, >= 0.2 s
apart) and Java 4.9.8 at 9.7 s per 1000.

    PYTHONPATH=$PWD python bench/topic_create_bench.py [N]
        [--broker HOST:PORT --namesrv HOST:PORT]   # default: starts `rmq standalone`

Only the public protocol is spoken, so ``--broker/--namesrv`` may point at Apache RocketMQ.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import time

from rmq._testing import StandaloneProcess
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.remoting.codec import FrameDecoder, encode


def _call(sock: socket.socket, decoder: FrameDecoder, cmd: RemotingCommand) -> RemotingCommand:
    sock.sendall(b"".join(bytes(p) for p in encode(cmd)))
    while True:
        reply = decoder.next_frame()
        if reply is not None and reply.opaque == cmd.opaque:
            return reply
        if reply is None:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("closed")
            decoder.feed(chunk)


def _connect(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def run(broker: str, namesrv: str, n: int) -> None:
    sock, decoder = _connect(broker), FrameDecoder()
    prefix = f"CreateBench{int(time.time())}_"
    times = []
    t_start = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        resp = _call(
            sock,
            decoder,
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                CreateTopicRequestHeader(topic=f"{prefix}{i}", read_queue_nums=4, write_queue_nums=4),
            ),
        )
        assert resp.code == 0, resp.remark
        times.append(time.perf_counter() - t0)
    total = time.perf_counter() - t_start
    sock.close()
    ns = _connect(namesrv)
    route = _call(
        ns, FrameDecoder(), RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"{prefix}{n - 1}"})
    )
    ns.close()
    s = sorted(times)
    print(
        f"{n} topics created one at a time in {total:.2f} s: mean {total / n * 1e3:.2f} ms, "
        f"p99 {s[min(n - 1, int(n * 0.99))] * 1e3:.2f} ms, worst {s[-1] * 1e3:.2f} ms; "
        f"last topic routable from the name server: {route.code == 0}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", nargs="?", type=int, default=1000)
    ap.add_argument("--broker", help="HOST:PORT of a running broker (default: start rmq standalone)")
    ap.add_argument("--namesrv", help="HOST:PORT of its name server")
    args = ap.parse_args()
    if args.broker and args.namesrv:
        run(args.broker, args.namesrv, args.n)
        return
    with tempfile.TemporaryDirectory(prefix="rmq-topic-create-bench-") as d, StandaloneProcess(d) as proc:
        run(proc.broker_addr, proc.namesrv_addr, args.n)


if __name__ == "__main__":
    main()
