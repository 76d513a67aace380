"""Driver run by the unmodified PyPI ``rocketmq-python-client`` (5.x, gRPC): a SimpleConsumer.

    v5_consumer.py PLAN_JSON

The plan: ``endpoints``, ``topic``, ``group``, ``expect`` (bodies to receive), ``leave`` (bodies
received but not acked the first time: they must come back, then are acked), ``extend`` (bodies
whose invisible duration is changed before the ack), ``invisible`` (seconds, default 10),
``batch`` (messages per receive, default 16), ``deadline`` (seconds for the whole run).
Prints one JSON line per event: ``received`` (body,
attempt, message_id), ``acked``, ``changed``, ``done`` or ``error``.
"""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer


def emit(**event):
    print(json.dumps(event), flush=True)


def main() -> int:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    config = ClientConfiguration(plan["endpoints"], Credentials(), "", 10)
    consumer = SimpleConsumer(config, plan["group"], {plan["topic"]: FilterExpression()}, await_duration=5)
    try:
        consumer.startup()
    except Exception as e:
        emit(event="error", stage="startup", error=f"{type(e).__name__}: {e}")
        return 2
    expect = set(plan["expect"])
    leave = set(plan.get("leave", ()))
    extend = set(plan.get("extend", ()))
    acked: set[str] = set()
    left_once: set[str] = set()
    deadline = time.monotonic() + plan.get("deadline", 90)
    try:
        while acked != expect and time.monotonic() < deadline:
            try:
                messages = consumer.receive(plan.get("batch", 16), plan.get("invisible", 10))
            except Exception as e:
                emit(event="receive-error", error=f"{type(e).__name__}: {e}")
                continue
            for m in messages or ():
                body = m.body.decode()
                emit(
                    event="received",
                    body=body,
                    attempt=m.delivery_attempt,
                    message_id=m.message_id,
                    tag=m.tag,
                    keys=sorted(m.keys or ()),
                    properties=dict(m.properties or {}),
                )
                if body in leave and body not in left_once:
                    left_once.add(body)
                    continue
                if body in extend:
                    consumer.change_invisible_duration(m, 20)
                    emit(event="changed", body=body)
                consumer.ack(m)
                acked.add(body)
                emit(event="acked", body=body)
        emit(event="done" if acked == expect else "error", acked=sorted(acked), stage="receive")
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
