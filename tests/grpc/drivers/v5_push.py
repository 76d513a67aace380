"""Driver run by the unmodified PyPI ``rocketmq-python-client`` (5.x, gRPC): a PushConsumer.

    v5_push.py PLAN_JSON

The plan: ``endpoints``, ``topic``, ``group``, ``expect`` (bodies to consume), ``fail_once``
(bodies whose first delivery the listener fails: they must be delivered again), ``deadline``
(seconds). Prints one JSON line per event: ``consumed`` (body, attempt, result), ``done`` or
``error``.
"""

import json
import sys
import threading

from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener, PushConsumer

_out = threading.Lock()


def emit(**event):
    # the listener runs on several threads: one whole line at a time
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def main() -> int:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    expect = set(plan["expect"])
    fail_once = set(plan.get("fail_once", ()))
    lock = threading.Lock()
    succeeded: set[str] = set()
    failed: set[str] = set()
    all_done = threading.Event()

    class Listener(MessageListener):
        def consume(self, message):
            body = message.body.decode()
            with lock:
                fail = body in fail_once and body not in failed
                if fail:
                    failed.add(body)
                else:
                    succeeded.add(body)
                    if expect <= succeeded:
                        all_done.set()
            emit(event="consumed", body=body, attempt=message.delivery_attempt, result="failure" if fail else "success")
            return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS

    config = ClientConfiguration(plan["endpoints"], Credentials(), "", 10)
    consumer = PushConsumer(config, plan["group"], Listener(), {plan["topic"]: FilterExpression()})
    try:
        consumer.startup()
    except Exception as e:
        emit(event="error", stage="startup", error=f"{type(e).__name__}: {e}")
        return 2
    try:
        ok = all_done.wait(plan.get("deadline", 90))
        with lock:
            emit(event="done" if ok else "error", stage="consume", succeeded=sorted(succeeded))
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
