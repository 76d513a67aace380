"""Drive the real RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) for the interop tests.

Runs under the interpreter of the client's own virtualenv (never rmq's), so it imports nothing
from rmq. Every event is one JSON line on stdout; the test reads them and judges. Commands:

  produce --namesrv A --group G --plan PLAN.json
      PLAN is a list of {"topic", "body", "tags"?, "keys"?, "props"?: {k: v}, "delay"?: level,
      "send": "sync" | "oneway" | "orderly" | "batch", "arg"?: int}. "orderly" sends through
      the client's hashing queue selector (queue = arg % queue count); consecutive "batch"
      items go out together with send_batch (one SEND_MESSAGE flagged batch=1).
      Prints {"event": "sent", "i", "status", "msg_id", "offset"} per sync/orderly send.

  push --namesrv A --group G --topic T --expect N --marker M [--expression E]
       [--orderly] [--broadcast] [--props k1,k2] [--timeout S]
  pull --namesrv A --group G --topic T --expect N --marker M [--expression E] [--props ...]

  stream --namesrv A --group G --topic T --marker M --stop-file F
      SYNC sends of bodies M000000, M000001, ... one after another until the file F exists;
      a failed send is reported and the next body goes out (a failover test's producer).
      Prints {"event": "sent", "i", "body", ...} or {"event": "send_error", "i", "body", ...}.
  push ... --stop-file F: run until F exists (instead of until N bodies arrived).

Every command takes [--access-key AK --secret-key SK [--channel C]]: ACL credentials.
      Print {"event": "recv", ...} for every delivered message and stop once N distinct
      bodies starting with M have arrived (or at the timeout), then {"event": "done"}.

The C API hands bodies over as C strings, so bodies must not contain NUL bytes. The process
ends with ``os._exit``: the ctypes wrappers' destructors shut the clients down a second time
and can crash the interpreter at exit.
"""

import argparse
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, SendStatus
from rocketmq.ffi import MessageModel

_out_lock = threading.Lock()


def emit(event, **fields):
    line = json.dumps(dict(event=event, t=int(time.time() * 1000), **fields), sort_keys=True)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _text(value):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def credentials(client, args):
    """ACL: the C API's SetXxxSessionCredentials (the core then signs every request)."""
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key, args.channel)


def _unless_not_ready(send):
    """``send()``, once more after half a second when the client had not got its broker
    connection ready. rocketmq-cpp 0.4.4 can race its first send with the heartbeat thread that
    creates the same connection ("GetTransport of <broker> get timed_mutex timeout"), then spend
    its own retries within a millisecond and fail with "No route info of this topic"; nothing
    left the client, so the send is repeated (event ``send_retry``). Any other error stands."""
    try:
        return send()
    except Exception as exc:
        if "No route info" not in str(exc):
            raise
        emit("send_retry", error=f"{type(exc).__name__}: {exc}")
        time.sleep(0.5)
        return send()


def produce(args):
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    producer = Producer(args.group)
    credentials(producer, args)
    producer.set_namesrv_addr(args.namesrv)
    producer.set_timeout(args.send_timeout_ms)
    producer.start()
    failures = 0
    batch = []  # consecutive "batch" items leave together through send_batch

    def flush_batch():
        nonlocal failures
        if not batch:
            return
        idx = [i for i, _ in batch]
        try:
            result = _unless_not_ready(lambda: producer.send_batch([m for _, m in batch]))
            emit("sent_batch", i=idx, status=SendStatus(result.status).name, msg_id=result.msg_id, offset=result.offset)
        except Exception as exc:
            failures += 1
            emit("send_error", i=idx, error=f"{type(exc).__name__}: {exc}")
        batch.clear()

    try:
        for i, item in enumerate(plan):
            msg = Message(item["topic"])
            if item.get("tags"):
                msg.set_tags(item["tags"])
            if item.get("keys"):
                msg.set_keys(item["keys"])
            for key, value in (item.get("props") or {}).items():
                msg.set_property(key, value)
            msg.set_body(item["body"].encode("utf-8"))
            if item.get("delay"):
                msg.set_delay_time_level(int(item["delay"]))  # DELAY property: 1 = 1 s, 2 = 5 s, ...
            mode = item.get("send", "sync")
            if mode == "batch":
                batch.append((i, msg))
                continue
            flush_batch()
            try:
                if mode == "oneway":
                    producer.send_oneway(msg)
                    emit("sent_oneway", i=i)
                    continue
                if mode == "orderly":
                    result = _unless_not_ready(lambda m=msg, a=int(item["arg"]): producer.send_orderly(m, a))
                else:
                    result = _unless_not_ready(lambda m=msg: producer.send_sync(m))
            except Exception as exc:  # report and go on: the test decides what a failure means
                failures += 1
                emit("send_error", i=i, error=f"{type(exc).__name__}: {exc}")
                continue
            emit("sent", i=i, status=SendStatus(result.status).name, msg_id=result.msg_id, offset=result.offset)
        flush_batch()
    finally:
        # Oneway sends are queued in the client; give them a moment to leave before shutdown.
        if any(item.get("send") == "oneway" for item in plan):
            time.sleep(1.0)
        producer.shutdown()
    emit("done", failures=failures)
    return 1 if failures else 0


def stream(args):
    producer = Producer(args.group)
    credentials(producer, args)
    producer.set_namesrv_addr(args.namesrv)
    producer.set_timeout(args.send_timeout_ms)
    producer.start()
    failures = i = 0
    try:
        while not os.path.exists(args.stop_file):
            body = f"{args.marker}{i:06d}"
            msg = Message(args.topic)
            msg.set_body(body.encode("utf-8"))
            try:
                result = producer.send_sync(msg)
            except Exception as exc:  # the master is gone: report, go on with the next body
                failures += 1
                emit("send_error", i=i, body=body, error=f"{type(exc).__name__}: {exc}")
                # the core fails at once while its route names no live broker: a paced loop,
                # not a wait for anything
                time.sleep(0.05)
            else:
                emit(
                    "sent",
                    i=i,
                    body=body,
                    status=SendStatus(result.status).name,
                    msg_id=result.msg_id,
                    offset=result.offset,
                )
            i += 1
    finally:
        producer.shutdown()
    emit("done", failures=failures, sends=i)
    return 0


def _record(msg, prop_names):
    return dict(
        topic=_text(msg.topic),
        tags=_text(msg.tags),
        keys=_text(msg.keys),
        body=_text(msg.body),
        id=_text(msg.id),
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        reconsume_times=msg.reconsume_times,
        commit_log_offset=msg.commit_log_offset,
        born_timestamp=msg.born_timestamp,
        store_timestamp=msg.store_timestamp,
        props={name: _text(msg.get_property(name)) for name in prop_names},
        thread=threading.get_ident(),
    )


class _Collector:
    """Counts distinct marker-prefixed bodies; sets ``done`` once ``expect`` have arrived.

    With ``quiet`` (backlog measurements) nothing is printed per message and every delivery
    counts, whatever its body.
    """

    def __init__(self, expect, marker, prop_names, quiet=False):
        self.expect, self.marker, self.prop_names, self.quiet = expect, marker, prop_names, quiet
        self.seen = set()
        self.count = 0
        self.first_at = None
        self.last_at = None
        self.done = threading.Event()
        self.lock = threading.Lock()

    @property
    def received(self):
        return self.count if self.quiet else len(self.seen)

    def __call__(self, msg):
        if self.quiet:
            with self.lock:
                if self.first_at is None:
                    self.first_at = time.monotonic()
                self.count += 1
                if self.count >= self.expect:
                    self.done.set()
            return
        rec = _record(msg, self.prop_names)
        emit("recv", **rec)
        body = rec["body"] or ""
        if body.startswith(self.marker):
            with self.lock:
                self.last_at = time.monotonic()
                self.seen.add(body)
                if len(self.seen) >= self.expect:
                    self.done.set()


def push(args):
    collector = _Collector(args.expect, args.marker, args.prop_names, quiet=args.quiet)
    model = MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    credentials(consumer, args)
    consumer.set_namesrv_addr(args.namesrv)
    if args.instance:
        consumer.set_instance_name(args.instance)
    if args.threads:
        consumer.set_thread_count(args.threads)
    consumer.subscribe(args.topic, collector, args.expression)
    started = time.monotonic()
    consumer.start()
    emit("started")
    if args.stop_file:
        # a failover test's consumer: it runs until the test has seen every acknowledged body
        while not os.path.exists(args.stop_file):
            time.sleep(0.2)  # polling for the file
    elif args.until_idle:
        # a member of a shared group gets only a share: stop once that share stops growing
        deadline = started + args.timeout
        while not collector.done.wait(0.2) and time.monotonic() < deadline:
            last = collector.last_at
            if last is not None and time.monotonic() - last > args.until_idle:
                break
    else:
        collector.done.wait(args.timeout)
    finished = time.monotonic()
    emit(
        "done",
        received=collector.received,
        seconds=round(finished - started, 3),
        first_message_after=None if collector.first_at is None else round(collector.first_at - started, 3),
    )
    # shutdown persists offsets (UPDATE_CONSUMER_OFFSET) and unregisters (UNREGISTER_CLIENT)
    consumer.shutdown()
    emit("stopped")
    if args.until_idle or args.stop_file:
        return 0 if collector.received else 1
    return 0 if collector.received >= args.expect else 1


def pull(args):
    collector = _Collector(args.expect, args.marker, args.prop_names)
    consumer = PullConsumer(args.group)
    credentials(consumer, args)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.start()
    emit("started")
    started = time.monotonic()
    deadline = started + args.timeout
    rounds = 0
    while time.monotonic() < deadline and not collector.done.is_set():
        rounds += 1
        for msg in consumer.pull(args.topic, args.expression):
            collector(msg)
        if not collector.done.is_set():
            time.sleep(0.2)  # the pull loop's poll interval (a lite pull consumer), not a wait
    emit("done", received=len(collector.seen), rounds=rounds, seconds=round(time.monotonic() - started, 3))
    consumer.shutdown()
    return 0 if len(collector.seen) >= args.expect else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["produce", "push", "pull", "stream"])
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--plan")
    ap.add_argument("--topic")
    ap.add_argument("--expression", default="*")
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("--marker", default="")
    ap.add_argument("--props", default="", help="comma-separated property names to read back")
    ap.add_argument("--orderly", action="store_true")
    ap.add_argument("--broadcast", action="store_true")
    ap.add_argument("--instance", default="")
    ap.add_argument(
        "--until-idle",
        type=float,
        default=0.0,
        help="push: also stop once no message came for this many seconds (after the first)",
    )
    ap.add_argument("--quiet", action="store_true", help="push: count deliveries, print no per-message events")
    ap.add_argument("--threads", type=int, default=0, help="push: consume thread count (client default if 0)")
    ap.add_argument("--stop-file", default="", help="stream, push: stop once this file exists")
    ap.add_argument("--timeout", type=float, default=45.0)
    ap.add_argument("--send-timeout-ms", type=int, default=3000)
    ap.add_argument("--access-key", default="", help="ACL: sign with these credentials")
    ap.add_argument("--secret-key", default="")
    ap.add_argument("--channel", default="ALIYUN", help="ACL: the OnsChannel the core sends (default ALIYUN)")
    args = ap.parse_args()
    args.prop_names = [p for p in args.props.split(",") if p]
    rc = {"produce": produce, "push": push, "pull": pull, "stream": stream}[args.command](args)
    sys.stdout.flush()
    os._exit(rc)


if __name__ == "__main__":
    main()
