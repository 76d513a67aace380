"""The official 5.x Python client's side of ``grpc_bench.py --v5-python``: run by the Python of
a virtualenv holding PyPI ``rocketmq-python-client`` (its package is also named ``rocketmq``,
hence its own venv; it imports nothing from rmq).

    grpc_v5_driver.py send    ENDPOINT TOPIC MESSAGES THREADS SIZE
    grpc_v5_driver.py receive ENDPOINT TOPIC MESSAGES THREADS GROUP

``send``: a Producer, THREADS threads each calling the synchronous ``send`` until MESSAGES were
sent. ``receive``: a SimpleConsumer, THREADS threads each receiving up to 32 messages (30 s
invisible) and acking each one, until MESSAGES were acked. Prints one JSON line: ``ok``,
``seconds`` of the phase and ``cpu_seconds`` of this process in it (every thread: the client
is thread based), so the harness can name the side that set the pace.
"""

import json
import sys
import threading
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def main() -> int:
    command, endpoint, topic, messages, threads = sys.argv[1:6]
    messages, threads = int(messages), int(threads)
    config = ClientConfiguration(endpoint, Credentials(), "", 30)
    lock = threading.Lock()
    done = 0
    failed = 0
    if command == "send":
        body = b"x" * int(sys.argv[6])
        client = Producer(config, (topic,))
    else:
        client = SimpleConsumer(config, sys.argv[6], {topic: FilterExpression()}, await_duration=5)
    client.startup()

    def take(n: int) -> int:
        nonlocal done
        with lock:
            n = min(n, messages - done)
            done += n
            return n

    def sender() -> None:
        nonlocal failed
        while take(1):
            m = Message()
            m.topic, m.body = topic, body
            try:
                client.send(m)
            except Exception:  # counted, not fatal: the harness reports failures
                with lock:
                    failed += 1

    acked = 0

    def receiver() -> None:
        nonlocal acked, failed
        while True:
            with lock:
                if acked >= messages:
                    return
            try:
                batch = client.receive(32, 30) or []
            except Exception:
                with lock:
                    failed += 1
                continue
            for m in batch:
                try:
                    client.ack(m)
                    with lock:
                        acked += 1
                except Exception:
                    with lock:
                        failed += 1

    work = sender if command == "send" else receiver
    cpu0, t0 = time.process_time(), time.perf_counter()
    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ok = (done - failed) if command == "send" else acked
    print(json.dumps({"ok": ok, "failed": failed, "seconds": seconds, "cpu_seconds": cpu}), flush=True)
    client.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
