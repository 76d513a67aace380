"""Real third-party RocketMQ clients against a real ``rmq standalone``.

Clients (installed from the registries by the ``real_clients`` fixture):
* C++ core from PyPI ``rocketmq==0.4.4`` (driven by drivers/cpp_driver.py);
* pure-JS npm ``ali-ons@3.12.0`` (driven by drivers/ons_driver.js).

Every flow produces messages with one client and consumes them with a NEW consumer group, so a
pass also proves the new-group offset rule (wire-contract §8). Every message must come back
with exactly its body, tags, keys and user properties. On failure the assertion message holds
the driver's output, the C++ core's own log and the broker's log tail.
"""

import asyncio
import struct
import time

import interop_support as support
import pytest

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

BIG = 6000  # > 4 KiB: both clients deflate bodies over compressMsgBodyOverHowmuch (4096)


def big_body(marker: str, i: int) -> str:
    # deterministic and highly compressible text, no NUL (the C API passes C strings)
    line = f"{marker}{i}:big:" + "0123456789abcdef" * 4 + "\n"
    return (line * (BIG // len(line) + 1))[:BIG]


def failure_report(broker, *results) -> str:
    parts = [r.describe() for r in results]
    for r in results:
        if "cpp_driver" in " ".join(r.argv):
            parts.append("C++ client log:\n" + r.cpp_log())
    parts.append("rmq standalone log (tail):\n" + broker.log_tail(40))
    return "\n\n".join(parts)


def check_delivered(broker, plan, recv_events, marker, *results, prop_names=None, exact_props=False):
    """Every planned message arrived once with its body, tags, keys and user properties."""
    got = {}
    dups = []
    for e in recv_events:
        body = e.get("body") or ""
        if not body.startswith(marker):
            continue
        if body in got:
            dups.append(body[:40])
        got[body] = e
    want = {m["body"]: m for m in plan}
    missing = [b[:40] for b in want if b not in got]
    assert not missing, f"{len(missing)} of {len(want)} messages never arrived: {missing[:5]}\n" + failure_report(
        broker, *results
    )
    unexpected = [b[:40] for b in got if b not in want]
    assert not unexpected, f"bodies that were never sent arrived: {unexpected[:5]}"
    assert not dups, f"delivered twice to one consumer: {dups[:5]}"
    for body, m in want.items():
        e = got[body]
        assert e["topic"] == m["topic"], (e, m)
        assert (e["tags"] or None) == m.get("tags"), (e["tags"], m)
        assert (e["keys"] or None) == m.get("keys"), (e["keys"], m)
        for k, v in (m.get("props") or {}).items():
            if prop_names is None or k in prop_names:
                assert e["props"].get(k) == v, f"property {k}: got {e['props'].get(k)!r}, sent {v!r}"
    return got


def plan_messages(names, n, *, tags=("TagA", "TagB"), send="sync", start=0, big_every=0):
    plan = []
    for i in range(start, start + n):
        body = (
            big_body(names.marker, i)
            if big_every and i % big_every == big_every - 1
            else f"{names.marker}{i}:hello:\u6d88\u606f-{i}"
        )
        plan.append(
            {
                "topic": names.topic,
                "body": body,
                "tags": tags[i % len(tags)] if tags else None,
                "keys": f"k{i}-{names.marker[1:9]} order-{i}",
                "props": {"run": names.marker, "idx": str(i), "note": f"v\u00e9rifi\u00e9 {i}"},
                "send": send,
            }
        )
    return plan


async def _raw_pull_one(namesrv_addr, broker_addr, topic, queue_id, offset):
    """One non-suspended PULL_MESSAGE with rmq.remoting; returns the first record's raw bytes."""
    from rmq.protocol.codes import RequestCode
    from rmq.protocol.command import RemotingCommand
    from rmq.remoting.client import RemotingClient

    client = RemotingClient([namesrv_addr])
    try:
        resp = await client.invoke(
            broker_addr,
            RemotingCommand.request(
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "GID_interop_raw",
                    "topic": topic,
                    "queueId": str(queue_id),
                    "queueOffset": str(offset),
                    "maxMsgNums": "1",
                    "sysFlag": "4",
                    "commitOffset": "0",
                    "suspendTimeoutMillis": "0",
                    "subscription": "*",
                    "subVersion": "0",
                },
            ),
            timeout=5,
        )
    finally:
        await client.close()
    assert resp.code == 0, f"raw pull {topic}/{queue_id}@{offset}: code {resp.code} {resp.remark}"
    body = resp.body_bytes()
    size = struct.unpack_from(">i", body, 0)[0]
    return body[:size]


def stored_sys_flag_and_body_len(record: bytes) -> tuple[int, int]:
    # v1 record: SYSFLAG at 36; BODYLEN after the 84 fixed bytes (IPv4 born/store hosts)
    return struct.unpack_from(">i", record, 36)[0], struct.unpack_from(">i", record, 84)[0]


# ============================================================================ C++ client


def test_cpp_produce_then_push_consume_new_group(real_clients, broker, names, tmp_path):
    """Sync sends with tags, keys, user properties and a compressed 6000-byte body, plus oneway
    sends, to a topic nobody created (the C++ client falls back to TBW102), then a new push
    consumer group receives every one of them."""
    plan = plan_messages(names, 8, big_every=4)  # messages 3 and 7 are big
    plan += plan_messages(names, 3, send="oneway", start=100)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    sent = producer.of("sent")
    assert producer.returncode == 0 and len(sent) == 8 and len(producer.of("sent_oneway")) == 3, failure_report(
        broker, producer
    )
    assert all(s["status"] == "OK" for s in sent), sent
    broker.check_alive()

    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--props",
        "run,idx,note",
        "--timeout",
        "45",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    got = check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)

    # the C++ consumer's message id is the producer's UNIQ_KEY, which its send result reported
    for s in sent:
        assert got[plan[s["i"]]["body"]]["id"] == s["msg_id"]
    # the big bodies travelled deflated: the broker stored them with the compressed flag set
    for i in (3, 7):
        e = got[plan[i]["body"]]
        record = asyncio.run(
            _raw_pull_one(broker.namesrv, broker.broker_addr, names.topic, e["queue_id"], e["queue_offset"])
        )
        sys_flag, body_len = stored_sys_flag_and_body_len(record)
        assert sys_flag & 1, f"stored sysFlag {sys_flag:#x}: the C++ client did not compress?"
        assert body_len < BIG // 4, f"stored body of {body_len} bytes is not the deflated one"
    broker.check_alive()


def _orderly_plan(names):
    plan = []
    for seq in range(6):
        for key in range(4):
            plan.append(
                {
                    "topic": names.topic,
                    "body": f"{names.marker}{key}:{seq}",
                    "tags": "Ord",
                    "keys": f"ord-{key}",
                    "props": {"seq": str(seq)},
                    "send": "orderly",
                    "arg": key,
                }
            )
    return plan


def _check_queue_order(names, recv, by_consumption: bool):
    """Key k is on queue k % 4, and each queue holds (and, if asked, delivered) seq 0..5 in order."""
    per_queue: dict[int, list[tuple[int, int]]] = {}
    for e in recv:
        key, seq = map(int, e["body"][len(names.marker) :].split(":"))
        assert e["queue_id"] == key % 4, f"key {key} landed on queue {e['queue_id']}"
        per_queue.setdefault(e["queue_id"], []).append((seq, e["queue_offset"]))
    assert sorted(per_queue) == [0, 1, 2, 3]
    for qid, rows in per_queue.items():
        stored = [s for s, _ in sorted(rows, key=lambda r: r[1])]
        assert stored == list(range(6)), f"queue {qid} stored out of send order: {rows}"
        if by_consumption:
            assert [s for s, _ in rows] == list(range(6)), f"queue {qid} consumed out of order: {rows}"


def test_cpp_orderly_send_by_selector(real_clients, broker, names, tmp_path):
    """send_orderly with the client's hashing selector puts key k on queue k % 4, in send order
    (checked through the queue offsets a concurrent push consumer reports)."""
    broker.create_topic(names.topic, queues=4)
    plan = _orderly_plan(names)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0 and len(producer.of("sent")) == len(plan), failure_report(broker, producer)
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--props",
        "seq",
        "--timeout",
        "45",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)
    _check_queue_order(names, consumer.of("recv"), by_consumption=False)


def test_cpp_orderly_consumer_locks_and_consumes_in_order(real_clients, broker, names, tmp_path):
    """An orderly push consumer (LOCK_BATCH_MQ before pulling) sees each queue in send order."""
    broker.create_topic(names.topic, queues=4)
    plan = _orderly_plan(names)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--orderly",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--props",
        "seq",
        "--timeout",
        "45",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)
    _check_queue_order(names, consumer.of("recv"), by_consumption=True)


def test_cpp_pull_consumer(real_clients, broker, names, tmp_path):
    """The C++ PullConsumer (non-suspended pulls, sysFlag 4) fetches everything from offset 0."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 12, big_every=6)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "pull",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--props",
        "run,idx,note",
        "--timeout",
        "30",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)


# ============================================================================ ali-ons


def test_ons_produce_then_consume_clustering(real_clients, broker, names, tmp_path):
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 10, big_every=5)
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    sent = producer.of("sent")
    assert producer.returncode == 0 and len(sent) == len(plan), failure_report(broker, producer)
    assert {s["status"] for s in sent} == {"SEND_OK"}, sent
    assert len({s["queue_id"] for s in sent}) > 1, "ali-ons should spread sends over the queues"

    consumer = support.ons(
        real_clients,
        tmp_path / "c",
        "consume",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--timeout",
        "45",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    got = check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)
    # ali-ons reports the broker's offsetMsgId on both sides
    for s in sent:
        e = got[plan[s["i"]]["body"]]
        assert e["id"] == s["msg_id"] and e["queue_id"] == s["queue_id"] and e["queue_offset"] == s["offset"]


def test_ons_broadcasting_every_consumer_gets_every_message(real_clients, broker, names, tmp_path):
    """Two broadcasting consumers of one group each receive all messages (offsets kept locally)."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 8)
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    # a new broadcasting consumer starts at the queue end unless told otherwise (as in Java):
    # start from the first offset so the already produced messages are consumed
    drivers = [
        support.ons(
            real_clients,
            tmp_path / f"c{k}",
            "consume",
            "--broadcast",
            "--from-first",
            "--namesrv",
            broker.namesrv,
            "--group",
            names.group,
            "--topic",
            names.topic,
            "--expect",
            str(len(plan)),
            "--marker",
            names.marker,
            "--timeout",
            "45",
        )
        for k in range(2)
    ]
    results = [d.result() for d in drivers]
    for r in results:
        assert r.returncode == 0, failure_report(broker, producer, *results)
        check_delivered(broker, plan, r.of("recv"), names.marker, producer, r)


# ============================================================================ across clients


def test_cpp_producer_ons_consumer(real_clients, broker, names, tmp_path):
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 8, big_every=4)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    consumer = support.ons(
        real_clients,
        tmp_path / "c",
        "consume",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--timeout",
        "45",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    got = check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)
    # ali-ons sees the C++ producer's UNIQ_KEY as a property and inflated the big bodies itself
    for s in producer.of("sent"):
        e = got[plan[s["i"]]["body"]]
        assert e["props"].get("UNIQ_KEY") == s["msg_id"]
    assert any(e["sys_flag"] & 1 for e in got.values()), "no compressed record reached ali-ons"


def test_ons_producer_cpp_consumer(real_clients, broker, names, tmp_path):
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 8, big_every=4)
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--props",
        "run,idx,note",
        "--timeout",
        "45",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)


# ============================================================================ consumer groups and offsets


def test_cpp_push_tag_expression(real_clients, broker, names, tmp_path):
    """A push consumer subscribed with 'TagA || TagB' gets exactly the TagA and TagB messages."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 12, tags=("TagA", "TagB", "TagC"))
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    wanted = [m for m in plan if m["tags"] in ("TagA", "TagB")]
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expression",
        "TagA || TagB",
        "--expect",
        str(len(wanted)),
        "--marker",
        names.marker,
        "--props",
        "run,idx,note",
        "--timeout",
        "45",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    check_delivered(broker, wanted, consumer.of("recv"), names.marker, producer, consumer)


def test_cpp_consumer_resumes_from_committed_offsets(real_clients, broker, names, tmp_path):
    """A group that consumed and shut down (UPDATE_CONSUMER_OFFSET) restarts where it stopped:
    the second run gets only the messages produced after the first one."""
    broker.create_topic(names.topic, queues=4)
    first = plan_messages(names, 8)
    second = plan_messages(names, 8, start=100)
    runs = []
    for k, plan in enumerate((first, second)):
        producer = support.cpp(
            real_clients,
            tmp_path / f"p{k}",
            "produce",
            "--namesrv",
            broker.namesrv,
            "--group",
            names.producer_group,
            "--plan",
            support.write_plan(tmp_path / f"plan{k}.json", plan),
        ).result()
        assert producer.returncode == 0, failure_report(broker, producer)
        consumer = support.cpp(
            real_clients,
            tmp_path / f"c{k}",
            "push",
            "--namesrv",
            broker.namesrv,
            "--group",
            names.group,
            "--topic",
            names.topic,
            "--expect",
            str(len(plan)),
            "--marker",
            names.marker,
            "--props",
            "run,idx,note",
            "--timeout",
            "45",
        ).result()
        assert consumer.returncode == 0, failure_report(broker, producer, consumer)
        runs.append(consumer)
    check_delivered(broker, first, runs[0].of("recv"), names.marker, runs[0])
    again = [e["body"][:30] for e in runs[1].of("recv") if e["body"] in {m["body"] for m in first}]
    assert not again, f"the restarted group was given already consumed messages again: {again}\n" + failure_report(
        broker, runs[1]
    )
    check_delivered(broker, second, runs[1].of("recv"), names.marker, runs[1])


def test_cpp_two_consumers_of_one_group_share_the_queues(real_clients, broker, names, tmp_path):
    """Two members of a clustering group (GET_CONSUMER_LIST_BY_GROUP, NOTIFY_CONSUMER_IDS_CHANGED)
    split the queues: together they get every message, and no message goes to both."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 16)
    members = [
        support.cpp(
            real_clients,
            tmp_path / f"c{k}",
            "push",
            "--namesrv",
            broker.namesrv,
            "--group",
            names.group,
            "--topic",
            names.topic,
            "--expect",
            str(len(plan)),
            "--marker",
            names.marker,
            "--props",
            "run,idx,note",
            "--until-idle",
            "4",
            "--timeout",
            "40",
        )
        for k in range(2)
    ]
    broker.wait_for_members(names.group, 2)
    # Settle time, not a state wait: both members must have finished rebalancing (the C++ client
    # rebalances as soon as code 40 arrives), and nothing on the wire says a member is done (held
    # pulls already count 4 while the first member still polls all queues).
    time.sleep(2)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    results = [m.result() for m in members]
    for r in results:
        assert r.returncode == 0, "a member got no message at all:\n" + failure_report(broker, producer, *results)
    shares = [{e["body"] for e in r.of("recv") if e["body"].startswith(names.marker)} for r in results]
    assert not shares[0] & shares[1], f"delivered to both members: {sorted(shares[0] & shares[1])[:5]}"
    queues = [{e["queue_id"] for e in r.of("recv")} for r in results]
    assert not queues[0] & queues[1], f"a queue was consumed by both members: {queues}"
    check_delivered(broker, plan, results[0].of("recv") + results[1].of("recv"), names.marker, *results)


def test_ons_consumer_waiting_first_is_woken_by_new_messages(real_clients, broker, names, tmp_path):
    """An ali-ons consumer is already long-polling (suspended PULL) when the messages are sent:
    the broker must answer the held pulls as messages arrive, not when the 15 s hold expires."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 8)
    consumer = support.ons(
        real_clients,
        tmp_path / "c",
        "consume",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--timeout",
        "40",
    )
    broker.wait_pulls_held(4)  # ready, rebalanced and long-polling every queue
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    result = consumer.result()
    assert result.returncode == 0, failure_report(broker, producer, result)
    got = check_delivered(broker, plan, result.of("recv"), names.marker, producer, result)
    sent_at = {plan[s["i"]]["body"]: s["t"] for s in producer.of("sent")}
    delays = sorted(got[b]["t"] - t for b, t in sent_at.items())
    assert delays[-1] < 5000, f"messages waited up to {delays[-1]} ms for a held pull to be answered: {delays}"


def test_cpp_batch_send(real_clients, broker, names, tmp_path):
    """The C++ client's send_batch (SEND_MESSAGE with batch=1 and a §5.2 batch body) stores every
    item as its own message with its own properties."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 6, send="batch")
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    batches = producer.of("sent_batch")
    assert producer.returncode == 0 and len(batches) == 1 and batches[0]["status"] == "OK", failure_report(
        broker, producer
    )
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--props",
        "run,idx,note",
        "--timeout",
        "30",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    got = check_delivered(broker, plan, consumer.of("recv"), names.marker, producer, consumer)
    # one batch goes to one queue, at consecutive offsets in batch order
    rows = sorted((got[m["body"]]["queue_offset"], int(m["props"]["idx"])) for m in plan)
    assert len({got[m["body"]]["queue_id"] for m in plan}) == 1
    assert [o for o, _ in rows] == list(range(rows[0][0], rows[0][0] + len(plan)))
    assert [i for _, i in rows] == list(range(len(plan)))


def test_ons_consume_tag_expression(real_clients, broker, names, tmp_path):
    """ali-ons subscribed with 'TagA || TagC' (tagsSet and Java hash codes) gets exactly those."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 12, tags=("TagA", "TagB", "TagC"))
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    wanted = [m for m in plan if m["tags"] in ("TagA", "TagC")]
    consumer = support.ons(
        real_clients,
        tmp_path / "c",
        "consume",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expression",
        "TagA || TagC",
        "--expect",
        str(len(wanted)),
        "--marker",
        names.marker,
        "--timeout",
        "30",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    check_delivered(broker, wanted, consumer.of("recv"), names.marker, producer, consumer)


def test_ons_failed_delivery_comes_back_through_the_retry_topic(real_clients, broker, names, tmp_path):
    """A consumer that throws makes ali-ons send the message back (code 36); the broker stores a
    copy in %RETRY%<group> with reconsumeTimes 1, ORIGIN_MESSAGE_ID and a 10 s delay (level 3),
    and the same consumer gets it again (wire-contract §10)."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 4)
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    # ali-ons asks for the %RETRY% route before its first heartbeat (which makes the broker create
    # the topic) and then only on its 30 s route refresh; creating it up front, as an operator
    # would, keeps this test at the 10 s retry delay
    broker.create_topic(f"%RETRY%{names.group}", queues=1)
    consumer = support.ons(
        real_clients,
        tmp_path / "c",
        "consume",
        "--fail-first",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--timeout",
        "40",
    ).result()
    assert consumer.returncode == 0, failure_report(broker, producer, consumer)
    recv = consumer.of("recv")
    sent_ids = {plan[s["i"]]["body"]: s["msg_id"] for s in producer.of("sent")}
    retried = {e["body"]: e for e in recv if e["reconsume_times"] == 1}
    assert set(retried) == set(sent_ids), failure_report(broker, consumer)
    for body, e in retried.items():
        assert e["topic"] == names.topic  # ali-ons maps %RETRY%<group> back through RETRY_TOPIC
        assert e["origin_id"] == sent_ids[body], f"ORIGIN_MESSAGE_ID {e['origin_id']!r} != {sent_ids[body]!r}"
    first = {e["body"]: e["t"] for e in recv if e["reconsume_times"] == 0}
    delays = sorted(retried[b]["t"] - first[b] for b in retried)
    assert delays[0] >= 8000 and delays[-1] < 25000, f"retry delays (level 3 = 10 s): {delays}"
    # the retry above also works through ali-ons' own fallback; code 36 must have been served
    assert "code 36 not supported" not in consumer.stderr, "CONSUMER_SEND_MSG_BACK refused, ali-ons fell back"


def test_cpp_delayed_messages_wait_for_their_level(real_clients, broker, names, tmp_path):
    """Messages sent with delay level 2 (DELAY=2, 5 s) reach a consumer that is already waiting
    no sooner than 5 s after they were sent; undelayed ones arrive at once."""
    broker.create_topic(names.topic, queues=4)
    plan = plan_messages(names, 6)
    for m in plan[:3]:
        m["delay"] = 2
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(plan)),
        "--marker",
        names.marker,
        "--props",
        "run,idx,note",
        "--timeout",
        "40",
    )
    broker.wait_for_members(names.group, 1)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, failure_report(broker, producer)
    result = consumer.result()
    assert result.returncode == 0, failure_report(broker, producer, result)
    got = check_delivered(broker, plan, result.of("recv"), names.marker, producer, result)
    sent_at = {plan[s["i"]]["body"]: s["t"] for s in producer.of("sent")}
    waited = {i: got[m["body"]]["t"] - sent_at[m["body"]] for i, m in enumerate(plan)}
    assert all(4800 <= waited[i] < 15000 for i in range(3)), f"delayed messages waited (ms): {waited}"
    assert all(waited[i] < 3000 for i in range(3, 6)), f"undelayed messages waited (ms): {waited}"
    # the consumer sees the real topic again (the broker parked them in SCHEDULE_TOPIC_XXXX)
    assert {got[m["body"]]["topic"] for m in plan} == {names.topic}


def test_ons_large_messages_over_the_pull_transfer_limit(real_clients, broker, names, tmp_path):
    """600 KB messages (more than a pull's 256 KiB transfer limit, and incompressible) from
    ali-ons reach both an ali-ons and a C++ consumer whole: every pull still returns at least
    one message."""
    import base64
    import random

    broker.create_topic(names.topic, queues=2)
    rnd = random.Random(7)
    plan = [
        {
            "topic": names.topic,
            "tags": "Big",
            "keys": f"big-{i}",
            "props": {"idx": str(i)},
            "body": f"{names.marker}{i}:" + base64.b64encode(rnd.randbytes(450_000)).decode(),
        }
        for i in range(4)
    ]
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0 and len(producer.of("sent")) == 4, failure_report(broker, producer)
    consumers = [
        support.ons(
            real_clients,
            tmp_path / "c1",
            "consume",
            "--namesrv",
            broker.namesrv,
            "--group",
            names.group + "_ons",
            "--topic",
            names.topic,
            "--expect",
            "4",
            "--marker",
            names.marker,
            "--timeout",
            "30",
        ),
        support.cpp(
            real_clients,
            tmp_path / "c2",
            "push",
            "--namesrv",
            broker.namesrv,
            "--group",
            names.group + "_cpp",
            "--topic",
            names.topic,
            "--expect",
            "4",
            "--marker",
            names.marker,
            "--props",
            "idx",
            "--timeout",
            "30",
        ),
    ]
    for r in [c.result() for c in consumers]:
        assert r.returncode == 0, failure_report(broker, producer, r)
        check_delivered(broker, plan, r.of("recv"), names.marker, producer, r)


def test_ons_new_broadcasting_consumer_starts_at_the_queue_end(real_clients, broker, names, tmp_path):
    """A new broadcasting consumer (offsets kept locally, CONSUME_FROM_LAST_OFFSET) starts at
    GET_MAX_OFFSET: it skips what was sent before it started and gets what is sent after."""
    broker.create_topic(names.topic, queues=4)
    old = plan_messages(names, 4)
    new = plan_messages(names, 6, start=100)
    before = support.ons(
        real_clients,
        tmp_path / "p0",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "old.json", old),
    ).result()
    assert before.returncode == 0, failure_report(broker, before)
    consumer = support.ons(
        real_clients,
        tmp_path / "c",
        "consume",
        "--broadcast",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        str(len(new)),
        "--marker",
        names.marker,
        "--timeout",
        "30",
    )
    broker.wait_for_members(names.group, 1)
    broker.wait_pulls_held(4)  # its rebalance has read the max offsets and the pulls are held
    after = support.ons(
        real_clients,
        tmp_path / "p1",
        "produce",
        "--namesrv",
        broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "new.json", new),
    ).result()
    assert after.returncode == 0, failure_report(broker, after)
    result = consumer.result()
    assert result.returncode == 0, failure_report(broker, after, result)
    old_bodies = {m["body"] for m in old}
    assert not [e for e in result.of("recv") if e["body"] in old_bodies], "got messages sent before it started"
    check_delivered(broker, new, result.of("recv"), names.marker, after, result)
