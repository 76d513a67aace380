"""Mixed clients on one `rmq standalone`: our producer → the C++ (PyPI rocketmq==0.4.4) and
ali-ons consumers, and their producers → our consumer.

The real clients and their driver scripts come from tests/interop (installed once per machine
into ~/.cache/rmq-interop by ``interop_support.ensure_clients``); an install failure fails the
test, as in tests/interop.
"""

import asyncio
import uuid

import interop_support as support
import pytest
from sdk_support import create_topic, wait_until

import rmq
from rmq._testing import StandaloneProcess

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def clients():
    try:
        return support.ensure_clients()
    except support.InstallError as exc:
        pytest.fail(f"installing the real RocketMQ clients failed:\n{exc}", pytrace=False)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    proc = StandaloneProcess(tmp_path_factory.mktemp("sdk-mixed") / "store")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def names():
    tag = uuid.uuid4().hex[:8]
    return type(
        "Names",
        (),
        {"marker": f"m{tag}:", "topic": f"Mixed_{tag}", "group": f"GID_mixed_{tag}", "pgroup": f"PID_mixed_{tag}"},
    )


def _messages(names, n):
    return [
        rmq.Message(
            names.topic,
            f"{names.marker}{i}:h\u00e9llo".encode(),
            tags="TagA" if i % 2 else "TagB",
            keys=[f"k{i}"],
            properties={"idx": str(i)},
        )
        for i in range(n)
    ]


async def _driver(drv):
    return await asyncio.to_thread(drv.result)


async def test_our_producer_to_cpp_and_ons_consumers(clients, standalone, names, tmp_path):
    await create_topic(standalone.broker_addr, names.topic, queues=4)
    msgs = _messages(names, 10)
    msgs.append(rmq.Message(names.topic, (names.marker + "big:" + "z" * 6000).encode(), tags="TagA"))  # compressed
    async with rmq.Producer(standalone.namesrv_addr, names.pgroup) as p:
        results = [await p.send(m) for m in msgs]
    by_body = {m.body.decode(): (m, r) for m, r in zip(msgs, results, strict=True)}

    cpp, ons = await asyncio.gather(
        _driver(
            support.cpp(
                clients,
                tmp_path / "cpp",
                "push",
                "--namesrv",
                standalone.namesrv_addr,
                "--group",
                names.group + "_cpp",
                "--topic",
                names.topic,
                "--expect",
                str(len(msgs)),
                "--marker",
                names.marker,
                "--props",
                "idx",
                "--timeout",
                "45",
                timeout=90,
            )
        ),
        _driver(
            support.ons(
                clients,
                tmp_path / "ons",
                "consume",
                "--namesrv",
                standalone.namesrv_addr,
                "--group",
                names.group + "_ons",
                "--topic",
                names.topic,
                "--expect",
                str(len(msgs)),
                "--marker",
                names.marker,
                "--from-first",
                "--timeout",
                "45",
                timeout=90,
            )
        ),
    )
    assert cpp.returncode == 0, cpp.describe()
    assert ons.returncode == 0, ons.describe()
    for who, res in (("cpp", cpp), ("ons", ons)):
        got = {e["body"]: e for e in res.of("recv") if (e["body"] or "").startswith(names.marker)}
        assert set(got) == set(by_body), who
        for body, e in got.items():
            m, r = by_body[body]
            assert e["tags"] == m.tags, (who, e)
            if who == "cpp":
                assert e["id"] == r.msg_id  # C++ shows UNIQ_KEY as the message id
                assert e["keys"] == " ".join(m.keys)
                if m.properties:
                    assert e["props"]["idx"] == m.properties["idx"]
            else:
                assert e["id"] == r.offset_msg_id  # ali-ons computes offsetMsgId from the record
                if m.properties:
                    assert e["props"]["idx"] == m.properties["idx"]
                    assert e["props"]["UNIQ_KEY"] == r.msg_id


async def test_cpp_and_ons_producers_to_our_consumer(clients, standalone, names, tmp_path):
    await create_topic(standalone.broker_addr, names.topic, queues=4)
    plan = [
        {
            "topic": names.topic,
            "body": f"{names.marker}{i}:from-{who}",
            "tags": "TagA",
            "keys": f"k{i}",
            "props": {"idx": str(i)},
            "send": "sync",
        }
        for who in ("cpp", "ons")
        for i in range(6)
    ]
    cpp_plan = [p for p in plan if p["body"].endswith("cpp")]
    ons_plan = [{k: v for k, v in p.items() if k != "send"} for p in plan if p["body"].endswith("ons")]
    got = {}

    async def handler(msg):
        got[msg.body.decode()] = msg

    c = rmq.PushConsumer(
        standalone.namesrv_addr,
        names.group,
        handler=handler,
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c.subscribe(names.topic, "TagA")
    async with c:
        cpp, ons = await asyncio.gather(
            _driver(
                support.cpp(
                    clients,
                    tmp_path / "cpp",
                    "produce",
                    "--namesrv",
                    standalone.namesrv_addr,
                    "--group",
                    names.pgroup + "_cpp",
                    "--plan",
                    support.write_plan(tmp_path / "cpp.json", cpp_plan),
                    timeout=60,
                )
            ),
            _driver(
                support.ons(
                    clients,
                    tmp_path / "ons",
                    "produce",
                    "--namesrv",
                    standalone.namesrv_addr,
                    "--group",
                    names.pgroup + "_ons",
                    "--plan",
                    support.write_plan(tmp_path / "ons.json", ons_plan),
                    timeout=60,
                )
            ),
        )
        assert cpp.returncode == 0, cpp.describe()
        assert ons.returncode == 0, ons.describe()
        await wait_until(lambda: len(got) == len(plan), timeout=30, what="12 messages from C++ and ali-ons")
    sent_ids = {("cpp", s["i"]): s["msg_id"] for s in cpp.of("sent")}
    for p in plan:
        m = got[p["body"]]
        assert m.tags == "TagA" and m.keys == (p["keys"],) and m.properties["idx"] == p["props"]["idx"]
    for (_, i), msg_id in sent_ids.items():
        assert got[cpp_plan[i]["body"]].msg_id == msg_id  # the C++ producer's UNIQ_KEY
    ons_sent = {s["i"]: s["msg_id"] for s in ons.of("sent")}
    for i, msg_id in ons_sent.items():
        assert got[ons_plan[i]["body"]].offset_msg_id == msg_id  # ali-ons reports offsetMsgId
