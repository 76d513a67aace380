"""The plain pull answered straight from its frame bytes (``PullFastPath`` behind the connection's
``FrameDecoder.frame_hook``, rmq/broker/processors/_pullpath.pyx) against the Python processor:
the same frames to the same broker, once with the native path bound and once unbound, must give
byte-identical replies, the same statistics and the same committed offsets; the golden Java,
C++ and ali-ons pulls, generated headers and hypothesis-mutated ones alike."""

import asyncio
import base64
import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq._testing import broker_env
from rmq.broker.stats import GROUP_GET_NUMS, GROUP_GET_SIZE
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.codec import encode

GOLDEN = Path("/work/shared/golden")
TOPIC = "TopicTest"
SUB_VERSION = 9_999_999_999_999  # newer than the golden pulls' subVersion (a time in ms)
GROUPS = ("please_rename_unique_group_name_4", "GID_alions", "GID_cpp_test", "NG")


def golden_pulls() -> list[bytes]:
    """Every PULL_MESSAGE request of the golden captures, as frames: Java 4.9.8's (JSON and
    ROCKETMQ headers, as captured) and the C++ and ali-ons clients' (their headers encoded as
    they wrote them: numbers as JSON numbers)."""
    frames = []
    for name in ("quickstart-frames.jsonl", "rocketmq-serialize-frames.jsonl"):
        for line in (GOLDEN / "rocketmq-4.9.8" / name).read_text().splitlines():
            d = json.loads(line)
            if d.get("code") == 11 and not d.get("flag") and d["stream"] == "client->broker":
                frames.append(base64.b64decode(d["frame_b64"]))
    for name in ("alions-3.12.0-requests.jsonl", "cpp1-rocketmq-0.4.4-requests.jsonl"):
        for line in (GOLDEN / "clients" / name).read_text().splitlines():
            d = json.loads(line)
            if d["header"].get("code") == 11:
                header = json.dumps(d["header"], separators=(",", ":")).encode()
                frames.append(struct.pack(">ii", 4 + len(header), len(header)) + header)
    return frames


def pull_frame(ext: dict, ser: int, opaque: int, flag: int = 0) -> bytes:
    cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext, serialize_type=ser, opaque=opaque, flag=flag)
    return b"".join(bytes(p) for p in encode(cmd))


def pull_ext(**kw) -> dict:
    ext = {
        "consumerGroup": "NG",
        "topic": TOPIC,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    for k, v in kw.items():
        if v is None:
            ext.pop(k, None)
        else:
            ext[k] = v
    return ext


def _heartbeat(group: str, expression: str = "*") -> dict:
    subs = [
        {
            "topic": t,
            "subString": expression,
            "tagsSet": [],
            "codeSet": [],
            "subVersion": SUB_VERSION,
            "expressionType": "TAG",
        }
        for t in (TOPIC, f"%RETRY%{group}")
    ]
    return {
        "clientID": f"client-{group}",
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": subs,
                "unitMode": False,
            }
        ],
        "producerDataSet": [],
    }


async def read_frame(reader) -> bytes:
    head = await asyncio.wait_for(reader.readexactly(4), 20)
    return head + await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), 20)


def opaque_of(reply: bytes) -> int:
    if reply[4] == 1:  # ROCKETMQ: opaque at header offset 5
        return struct.unpack(">i", reply[13:17])[0]
    return json.loads(reply[8 : 8 + (struct.unpack(">i", reply[4:8])[0] & 0xFFFFFF)])["opaque"]


PROBE_OPAQUE = 777_777


async def exchange(env, frames: list[bytes]) -> tuple[list[bytes], bool]:
    """``frames`` in one write on a new connection, then a known-good pull as a probe: the
    replies up to the probe's and whether the broker closed the connection instead."""
    reader, writer = await asyncio.open_connection("127.0.0.1", env.broker.server.port)
    host, port = writer.get_extra_info("sockname")[:2]
    local = f"{host}:{port}".encode()  # (in some remarks; ephemeral ports are all 5 digits)
    probe = pull_frame(pull_ext(queueId="1"), 0, PROBE_OPAQUE)
    writer.write(b"".join(frames) + probe)
    replies, closed = [], False
    while True:
        try:
            r = await read_frame(reader)
        except asyncio.IncompleteReadError:
            closed = True
            break
        replies.append(r.replace(local, b"<CONSUMER>"))
        if opaque_of(r) == PROBE_OPAQUE:
            break
    writer.close()
    return replies, closed


def effects(env) -> tuple:
    """What a pull may change that a reply does not show: the store's read counts, the folded
    pull statistics of the group, the committed offsets."""
    stats = env.broker.stats
    stats.fold()
    counts = dict(env.store.get_counts)
    groups = tuple(
        (g, getattr(stats.get_stats_item(GROUP_GET_NUMS, f"{TOPIC}@{g}"), "value", None)) for g in GROUPS
    ) + tuple((g, getattr(stats.get_stats_item(GROUP_GET_SIZE, f"{TOPIC}@{g}"), "value", None)) for g in GROUPS)
    offsets = {k: dict(v) for k, v in env.broker.consumer_offset_manager.offset_table.items()}
    return counts, groups, offsets


async def both_ways(env, frames: list[bytes]):
    """The same frames answered by the native path and then by the Python processor (the
    native path unbound): (replies, closed) and the change of ``effects`` of each."""
    fast = env.broker.pull_message_processor.fast
    out = []
    for bound in (True, False):
        fast.bind(env.store if bound else None)
        try:
            before = effects(env)
            got = await exchange(env, frames)
            after = effects(env)
        finally:
            fast.bind(env.store)
        out.append((got, _delta(before, after)))
    return out


def _delta(before, after):
    (c0, g0, _), (c1, g1, o1) = before, after
    return (
        {k: c1[k] - c0[k] for k in c1},
        tuple((a[0], (a[1] or 0) - (b[1] or 0)) for a, b in zip(g1, g0, strict=True)),
        o1,  # (the Python run commits what the native one committed: the same table after each)
    )


@pytest.fixture
async def loaded(tmp_path):
    """A broker with TopicTest (4 queues, 40 messages each, tags TagA/TagB), the heartbeats of
    the golden groups, and each expression the tests use parsed once."""
    async with broker_env(tmp_path / "store") as env:
        await env.create_topic(TOPIC, 4)
        for q in range(4):
            for i in range(40):
                await env.send(
                    TOPIC, b"m-%d-%d" % (q, i) + b"x" * (i * 7), queue_id=q, tags="TagA" if i % 3 else "TagB"
                )
        for g in GROUPS:
            resp = await env.call(RequestCode.HEART_BEAT, {}, json.dumps(_heartbeat(g)).encode())
            assert resp.code == ResponseCode.SUCCESS
        for expr in ("*", "TagA", "TagA || TagB", "TagB"):
            assert (await env.pull(TOPIC, queue_id=3, subscription=expr)).code == ResponseCode.SUCCESS
        yield env


def generated_pulls() -> list[bytes]:
    """Header shapes of every client: subscription from the pull or the heartbeats, TAG
    expressions, commit and suspend bits, offsets inside and outside the queue, both
    serializations, fields missing, extra fields, odd numbers."""
    shapes = [
        pull_ext(),
        pull_ext(subscription="TagA"),
        pull_ext(subscription="TagA || TagB", expressionType="TAG"),
        pull_ext(subscription="TagB", expressionType="tag", queueId="2", maxMsgNums="5"),
        pull_ext(sysFlag="0", consumerGroup="please_rename_unique_group_name_4", subscription=None),
        pull_ext(sysFlag="2", consumerGroup="GID_alions", suspendTimeoutMillis="15000", subVersion="1"),
        pull_ext(sysFlag="0", consumerGroup="GID_alions", subVersion=str(SUB_VERSION)),
        pull_ext(sysFlag="3", consumerGroup="GID_cpp_test", commitOffset="3", queueOffset="7"),
        pull_ext(sysFlag="5", commitOffset="9", queueOffset="9", queueId="1"),
        pull_ext(sysFlag="0", consumerGroup="GID_alions", subVersion=str(SUB_VERSION + 1)),  # newer than the heartbeat
        pull_ext(queueOffset="40"),  # at the end: PULL_NOT_FOUND (no suspend bit)
        pull_ext(queueOffset="400"),  # beyond: PULL_OFFSET_MOVED
        pull_ext(queueOffset="-1"),
        pull_ext(queueId="4"),  # out of range
        pull_ext(topic="NoSuchTopic"),
        pull_ext(consumerGroup="NewGroupAutoCreated"),
        pull_ext(subscription="TagZ"),  # nothing matches: PULL_RETRY_IMMEDIATELY
        pull_ext(subscription="TagC || TagD"),  # not parsed yet
        pull_ext(expressionType="SQL92", subscription="a > 1"),
        pull_ext(sysFlag="12"),  # class filter bit
        pull_ext(maxMsgNums="1"),
        pull_ext(maxMsgNums="0"),
        pull_ext(maxMsgNums="-3"),
        pull_ext(maxMsgNums="2147483648"),
        pull_ext(queueOffset="007"),
        pull_ext(queueOffset=" 7"),
        pull_ext(queueId=None),
        pull_ext(commitOffset=None, suspendTimeoutMillis=None, subVersion=None),
        pull_ext(bname="broker-a", lo="0", maxMsgBytes="1048576"),
        pull_ext(topic="TopicTést"),
        pull_ext(subscription="TagA||TagB"),
    ]
    frames = []
    for i, ext in enumerate(shapes):
        for ser in (0, 1):
            frames.append(pull_frame(ext, ser, 1000 + 2 * i + ser))
    return frames


async def test_golden_pulls_answer_alike(loaded):
    env = loaded
    frames = golden_pulls()
    assert len(frames) >= 5
    (native, n_effects), (python, p_effects) = await both_ways(env, frames)
    assert native == python
    assert n_effects == p_effects
    # (a pull of an empty queue with the suspend bit is held: the probe's answer comes first)
    assert not native[1] and len(frames) - 3 <= len(native[0]) <= len(frames) + 1
    # Java's JSON and ROCKETMQ pulls are taken (the C++ and ali-ons JSON numbers are not: the
    # general decoder's)
    fast = env.broker.pull_message_processor.fast
    taken = fast.taken
    await exchange(env, frames)
    assert fast.taken - taken >= 3


async def test_generated_pulls_answer_alike(loaded):
    env = loaded
    frames = generated_pulls()
    fast = env.broker.pull_message_processor.fast
    taken, declined = fast.taken, fast.declined
    (native, n_effects), (python, p_effects) = await both_ways(env, frames)
    for i, (a, b) in enumerate(zip(native[0], python[0], strict=True)):
        assert a == b, (i, a[:300], b[:300])
    assert native == python and n_effects == p_effects
    assert fast.taken - taken >= 10 and fast.declined - declined >= 10


async def test_pipelined_native_pulls_keep_their_order_among_other_requests(loaded):
    env = loaded
    frames = []
    for i in range(60):
        if i % 7 == 3:  # another request code in between
            cmd = RemotingCommand(
                RequestCode.QUERY_CONSUMER_OFFSET,
                ext_fields={"consumerGroup": "NG", "topic": TOPIC, "queueId": "0"},
                opaque=5000 + i,
                serialize_type=i % 2,
            )
            frames.append(b"".join(bytes(p) for p in encode(cmd)))
        else:
            frames.append(pull_frame(pull_ext(queueId=str(i % 4), queueOffset=str(i % 40)), i % 2, 5000 + i))
    (native, _), (python, _) = await both_ways(env, frames)
    assert native == python
    assert [opaque_of(r) for r in native[0]] == [5000 + i for i in range(60)] + [PROBE_OPAQUE]


async def test_native_pull_commits_the_carried_offset(loaded):
    env = loaded
    fast = env.broker.pull_message_processor.fast
    taken = fast.taken
    _, closed = await exchange(
        env, [pull_frame(pull_ext(sysFlag="5", consumerGroup="GID_alions", commitOffset="17", queueId="2"), 1, 1)]
    )
    assert not closed and fast.taken - taken == 2  # the pull and the probe
    query = {"consumerGroup": "GID_alions", "topic": TOPIC, "queueId": 2}
    resp = await env.call(RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "17"


_KEYS = [
    "consumerGroup",
    "topic",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "subVersion",
    "expressionType",
    "extra",
]
_VALUES = st.one_of(
    st.sampled_from(
        [
            "0",
            "1",
            "2",
            "3",
            "4",
            "5",
            "6",
            "39",
            "40",
            "-1",
            "",
            "NG",
            TOPIC,
            "*",
            "TagA",
            "TAG",
            "SQL92",
            "9223372036854775807",
            "99999999999999999999",
            "GID_alions",
            "TagA || TagB",
        ]
    ),
    st.text(max_size=6),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(
        st.tuples(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=5), st.sampled_from([0, 1])),
        min_size=1,
        max_size=4,
    )
)
async def test_mutated_pulls_answer_alike(loaded, data):
    env = loaded
    frames = []
    for i, (changes, ser) in enumerate(data):
        ext = pull_ext(sysFlag="4", suspendTimeoutMillis="0")
        ext.update(changes)
        # a held pull would wait for a message: no suspend bit (long polling has its own tests)
        sys_flag = ext.get("sysFlag", "")
        if sys_flag.lstrip("-").isdigit() and len(sys_flag) < 12 and int(sys_flag) & 2:
            ext["sysFlag"] = str(int(sys_flag) & ~2)
        frames.append(pull_frame(ext, ser, 100 + i))
    (native, n_effects), (python, p_effects) = await both_ways(env, frames)
    assert native == python and n_effects == p_effects


async def test_pull_fast_path_off_sets_no_pull_hook(tmp_path):
    async with broker_env(tmp_path / "store", pull_fast_path=False) as env:
        assert env.broker.pull_message_processor.fast is None
        await env.create_topic("Off", 1)
        await env.send("Off", b"x")
        resp = await env.pull("Off")
        assert resp.code == ResponseCode.SUCCESS and b"\x00\x00\x00\x01x\x03Off" in resp.body_bytes()
        # the SEND hook alone on the connections (no native pull in front of it)
        hooks = [c._decoder.frame_hook for c in env.broker.server.connections]
        assert hooks and all(type(h).__name__ == "SendFrameHook" for h in hooks)
