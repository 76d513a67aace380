"""Driver run by the unmodified PyPI ``rocketmq-python-client`` (5.x, gRPC) in its own venv.

    v5_producer.py PLAN_JSON

The plan: ``endpoints``, ``topic``, ``ak``/``sk`` (optional), ``namespace``, ``tls``,
``messages`` (each ``kind`` normal|fifo|delay|transaction, ``body``, ``tag``, ``keys``,
``properties``, ``group`` for fifo, ``deliver_at_seconds`` for delay, ``resolution`` for
transaction: commit|rollback|unknown — unknown leaves it to the recovery check; once every
unknown one was checked the driver prints ``waiting`` and stays up until a line (or EOF) on
stdin), and
``checker``: what the transaction checker answers (commit|rollback). Prints one JSON line per
event on stdout: ``{"event": "sent", ...}``, ``{"event": "error", ...}``, ``{"event": "checked", ...}``.
"""

import json
import sys
import threading

from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)


def emit(**event):
    print(json.dumps(event), flush=True)


def main() -> int:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    checked = threading.Event()
    unknown = {s["body"] for s in plan["messages"] if s.get("resolution") == "unknown"}
    seen: set[str] = set()
    lock = threading.Lock()

    class Checker(TransactionChecker):
        def check(self, message):
            body = message.body.decode()
            emit(event="checked", message_id=message.message_id, body=body, topic=message.topic)
            with lock:
                seen.add(body)
                if unknown <= seen:
                    checked.set()
            return TransactionResolution.COMMIT if plan.get("checker") == "commit" else TransactionResolution.ROLLBACK

    config = ClientConfiguration(
        plan["endpoints"], Credentials(plan.get("ak", ""), plan.get("sk", "")), plan.get("namespace", ""), 10
    )
    producer = Producer(config, (plan["topic"],), Checker(), tls_enable=bool(plan.get("tls")))
    try:
        producer.startup()
    except Exception as e:
        emit(event="error", stage="startup", error=f"{type(e).__name__}: {e}")
        return 2
    leave_unknown = False
    try:
        for spec in plan["messages"]:
            msg = Message()
            msg.topic = plan["topic"]
            msg.body = spec["body"].encode()
            if spec.get("tag"):
                msg.tag = spec["tag"]
            for key in spec.get("keys") or ():
                msg.keys = key  # (the setter adds one key per assignment)
            for k, v in (spec.get("properties") or {}).items():
                msg.add_property(k, v)
            kind = spec.get("kind", "normal")
            if kind == "fifo":
                msg.message_group = spec["group"]
            if kind == "delay":
                msg.delivery_timestamp = spec["deliver_at_seconds"]
            try:
                if kind == "transaction":
                    tx = producer.begin_transaction()
                    receipt = producer.send(msg, tx)
                    resolution = spec.get("resolution", "commit")
                    if resolution == "commit":
                        tx.commit()
                    elif resolution == "rollback":
                        tx.rollback()
                    else:
                        leave_unknown = True
                else:
                    receipt = producer.send(msg)
                emit(event="sent", body=spec["body"], message_id=receipt.message_id, kind=kind)
            except Exception as e:
                emit(event="error", stage="send", body=spec["body"], error=f"{type(e).__name__}: {e}")
        if leave_unknown:
            # the broker's check comes over Telemetry after transactionTimeOut
            if not checked.wait(plan.get("check_wait", 60)):
                emit(event="error", stage="check", error=f"recovery checks arrived for {sorted(seen)} only")
            else:
                # the checker's EndTransaction is in flight: the test says when it saw its effect
                emit(event="waiting")
                sys.stdin.readline()
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
