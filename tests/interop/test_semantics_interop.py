"""Message semantics (issue 5) with the real clients: ali-ons retries into the dead-letter
queue, and the C++ orderly consumer's queue locks with two members in one group.

The broker here is its own ``rmq standalone`` with short delay levels (levels 3 and 4, the
first two retries, are 2 s instead of 10 s and 30 s), so the whole retry → DLQ path takes
seconds. The first-retry flow with Java's real 10 s level is in test_interop_clients.py
(``test_ons_failed_delivery_comes_back_through_the_retry_topic``).
"""

import asyncio
import json
import time
import uuid

import interop_support as support
import pytest

from rmq._testing import StandaloneProcess, wait_until_sync
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(150)]

LEVELS = "1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s"


class ShortDelayBroker:
    """A running ``rmq standalone`` with ``messageDelayLevel=LEVELS``."""

    def __init__(self, proc: StandaloneProcess):
        self.proc = proc
        self.namesrv = proc.namesrv_addr
        self.broker_addr = proc.broker_addr

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.proc.log_text().splitlines()[-lines:])

    def call(self, code, ext=None, body=None, to=None):
        async def go():
            client = RemotingClient([self.namesrv])
            try:
                return await client.invoke(
                    to or self.broker_addr, RemotingCommand.request(code, ext, body), timeout=5.0
                )
            finally:
                await client.close()

        return asyncio.run(go())

    def create_topic(self, topic: str, queues: int = 4) -> None:
        resp = self.call(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": topic,
                "defaultTopic": "TBW102",
                "readQueueNums": queues,
                "writeQueueNums": queues,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": "false",
            },
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        self.wait_routed(topic)

    def wait_routed(self, topic: str, timeout: float = 10.0) -> None:
        def routed():
            resp = self.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, to=self.namesrv)
            return resp.code == ResponseCode.SUCCESS

        try:
            wait_until_sync(routed, timeout=timeout, interval=0.1, what=f"{topic} routed")
        except AssertionError:
            pytest.fail(f"{topic} not routed after {timeout:.0f}s:\n{self.log_tail()}", pytrace=False)

    def members(self, group: str) -> list[str]:
        resp = self.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            return []
        return json.loads(resp.body_bytes()).get("consumerIdList") or []


@pytest.fixture(scope="module")
def short_broker(tmp_path_factory):
    proc = StandaloneProcess(tmp_path_factory.mktemp("rmq-semantics") / "store", [f"--messageDelayLevel={LEVELS}"])
    try:
        proc.start()
    except RuntimeError as exc:
        pytest.fail(f"rmq standalone did not start: {exc}", pytrace=False)
    try:
        b = ShortDelayBroker(proc)
        b.wait_routed("TBW102", timeout=20)
        yield b
    finally:
        print(f"rmq standalone stopped with exit code {proc.stop()}")


@pytest.fixture
def ids():
    tag = uuid.uuid4().hex[:8]
    return tag, f"m{tag}:", f"Sem_{tag}", f"GID_sem_{tag}", f"PID_sem_{tag}"


def _report(broker, *results) -> str:
    parts = [r.describe() for r in results]
    for r in results:
        if "cpp_driver" in " ".join(r.argv):
            parts.append("C++ client log:\n" + r.cpp_log())
    parts.append("rmq standalone log (tail):\n" + broker.log_tail())
    return "\n\n".join(parts)


def _ons_fail(clients, home, *args, timeout=60):
    home.mkdir(parents=True, exist_ok=True)
    argv = [clients.node, str(support.DRIVERS / "ons_semantics_driver.js"), "consume-fail", *args]
    return support.Driver(argv, support._env(home, {"NODE_PATH": str(clients.node_path)}), home, timeout)


def test_ons_always_failing_consumer_puts_messages_in_the_dlq(real_clients, short_broker, tmp_path, ids):
    """maxReconsumeTimes 2: deliveries with reconsumeTimes 0, 1, 2 (the retries from %RETRY%
    carry ORIGIN_MESSAGE_ID = the original msgId), then the send-back lands in %DLQ%<group>,
    where an ali-ons consumer of that topic finds every message."""
    b = short_broker
    tag, marker, topic, group, pgroup = ids
    b.create_topic(topic, queues=4)
    # ali-ons looks %RETRY% routes up before its first heartbeat creates them, then only every
    # 30 s: create them first, as an operator would
    b.create_topic(f"%RETRY%{group}", queues=1)
    plan = [{"topic": topic, "body": f"{marker}{i}", "tags": "TagA", "props": {"idx": str(i)}} for i in range(3)]
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        b.namesrv,
        "--group",
        pgroup,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, _report(b, producer)
    sent = {plan[s["i"]]["body"]: s["msg_id"] for s in producer.of("sent")}

    failing = _ons_fail(
        real_clients,
        tmp_path / "c",
        "--namesrv",
        b.namesrv,
        "--group",
        group,
        "--topic",
        topic,
        "--expect",
        "3",
        "--marker",
        marker,
        "--max-reconsume",
        "2",
        "--timeout",
        "50",
    ).result()
    assert failing.returncode == 0, _report(b, failing)
    deliveries: dict[str, list[int]] = {}
    for e in failing.of("recv"):
        if e["body"].startswith(marker):
            deliveries.setdefault(e["body"], []).append(e["reconsume_times"])
            assert e["topic"] == topic, e  # ali-ons maps %RETRY%<group> back through RETRY_TOPIC
            if e["reconsume_times"] > 0:
                assert e["origin_id"] == sent[e["body"]], e
                assert e["props"]["RETRY_TOPIC"] == topic
    assert {body: sorted(set(times)) for body, times in deliveries.items()} == {body: [0, 1, 2] for body in sent}, (
        _report(b, failing)
    )

    dlq = f"%DLQ%{group}"
    b.wait_routed(dlq)
    reader_group = f"GID_dlqreader_{tag}"
    b.create_topic(f"%RETRY%{reader_group}", queues=1)
    reader = support.ons(
        real_clients,
        tmp_path / "r",
        "consume",
        "--from-first",
        "--namesrv",
        b.namesrv,
        "--group",
        reader_group,
        "--topic",
        dlq,
        "--expect",
        "3",
        "--marker",
        marker,
        "--timeout",
        "40",
    ).result()
    assert reader.returncode == 0, _report(b, failing, reader)
    dead = {e["body"]: e for e in reader.of("recv") if e["body"].startswith(marker)}
    assert set(dead) == set(sent)
    for body, e in dead.items():
        assert e["topic"] == dlq and e["reconsume_times"] == 3, e
        assert e["props"]["ORIGIN_MESSAGE_ID"] == sent[body]
        assert e["props"]["RETRY_TOPIC"] == topic and e["props"]["idx"] == body[len(marker) :]


def _orderly_plan(topic, marker, keys=4, per_key=8):
    return [
        {
            "topic": topic,
            "body": f"{marker}{k}:{s}",
            "tags": "Ord",
            "props": {"seq": str(s)},
            "send": "orderly",
            "arg": k,
        }
        for s in range(per_key)
        for k in range(keys)
    ]


def test_cpp_two_orderly_consumers_never_share_a_queue(real_clients, short_broker, tmp_path, ids):
    """Two C++ orderly push consumers in one group: each queue is consumed by one member only
    (its lock holder), in send order, and together they consume everything. A third client id
    asking for the locks meanwhile gets none of the queues in use."""
    b = short_broker
    tag, marker, topic, group, pgroup = ids
    b.create_topic(topic, queues=4)
    plan = _orderly_plan(topic, marker)
    members = [
        support.cpp(
            real_clients,
            tmp_path / f"c{k}",
            "push",
            "--orderly",
            "--instance",
            f"ord{k}",
            "--namesrv",
            b.namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--expect",
            str(len(plan)),
            "--marker",
            marker,
            "--props",
            "seq",
            "--until-idle",
            "8",
            "--timeout",
            "60",
        )
        for k in range(2)
    ]
    wait_until_sync(lambda: len(b.members(group)) >= 2, interval=0.2, what="both orderly members in the group")
    assert len(b.members(group)) == 2, "both orderly members joined the group\n" + b.log_tail()
    # Settle time, not a state wait: both rebalance at once on NOTIFY_CONSUMER_IDS_CHANGED and
    # lock their queues; nothing on the wire says a C++ member has finished.
    time.sleep(2)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        b.namesrv,
        "--group",
        pgroup,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0, _report(b, producer)

    # an outsider's LOCK_BATCH_MQ on the queues that have been consumed from gets nothing
    time.sleep(1.0)  # settle time: the members' lock renewals after consuming (not observable)
    probed_at = int(time.time() * 1000)
    probe = b.call(
        RequestCode.LOCK_BATCH_MQ,
        None,
        json.dumps(
            {
                "consumerGroup": group,
                "clientId": f"outsider-{tag}",
                "mqSet": [{"topic": topic, "brokerName": "broker-a", "queueId": q} for q in range(4)],
            }
        ).encode(),
    )
    stolen = json.loads(probe.body_bytes())["lockOKMQSet"]
    if stolen:  # give back what was free (a queue between two owners), so members can take it
        b.call(
            RequestCode.UNLOCK_BATCH_MQ,
            None,
            json.dumps({"consumerGroup": group, "clientId": f"outsider-{tag}", "mqSet": stolen}).encode(),
        )

    results = [m.result() for m in members]
    recv = [[e for e in r.of("recv") if (e["body"] or "").startswith(marker)] for r in results]
    queues = [{e["queue_id"] for e in r} for r in recv]
    assert not queues[0] & queues[1], f"a queue was consumed by both members: {queues}\n" + _report(b, *results)
    got = {e["body"] for r in recv for e in r}
    assert got == {m["body"] for m in plan}, f"{len(got)} of {len(plan)} delivered\n" + _report(b, producer, *results)
    for r in recv:
        per_queue: dict[int, list[int]] = {}
        for e in r:
            per_queue.setdefault(e["queue_id"], []).append(int(e["props"]["seq"]))
        for q, seqs in per_queue.items():
            assert seqs == sorted(seqs) and len(seqs) == 8, f"queue {q} consumed out of order: {seqs}"
    # a queue the outsider could lock was free then: no member may have consumed it before
    for d in stolen:
        early = [e["body"] for r in recv for e in r if e["queue_id"] == d["queueId"] and e["t"] < probed_at]
        assert not early, f"an outsider got the lock of queue {d['queueId']} while it was in use: {early[:3]}"
