"""The SEND read straight from the frame bytes (``SendFastPath.send_frame`` behind the
connection's ``FrameDecoder.frame_hook``) against the broker with ``send_fast_path`` off:
the same frames, pipelined or one by one, well-formed or mutated, must give the same reply
frames, the same stored records (up to the broker's and the producer's names and the store
timestamp), the same statistics and the same connection outcome."""

import asyncio
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_broker_send_fast import _BORN_TO_STORE_HOST, frame, golden_sends, records

from rmq._testing import run_broker
from rmq.broker.stats import TOPIC_PUT_NUMS
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand

TOPICS = ("FrameT", "FrameU")


async def read_frame(reader) -> bytes | None:
    """One whole frame, or None at EOF."""
    try:
        head = await asyncio.wait_for(reader.readexactly(4), 20)
        return head + await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), 20)
    except asyncio.IncompleteReadError:
        return None


def opaque_of(reply: bytes) -> int:
    if reply[4] == 1:  # ROCKETMQ: opaque at header offset 5
        return struct.unpack(">i", reply[13:17])[0]
    return json.loads(reply[8 : 8 + (struct.unpack(">i", reply[4:8])[0] & 0xFFFFFF)])["opaque"]


def code_of(reply: bytes) -> int:
    if reply[4] == 1:
        return struct.unpack(">h", reply[8:10])[0]
    return json.loads(reply[8 : 8 + (struct.unpack(">i", reply[4:8])[0] & 0xFFFFFF)])["code"]


def normalize(broker, local: str, reply: bytes) -> bytes:
    prefix = broker.message_store.commit_log._id_prefix.encode()
    return reply.replace(prefix, b"<STORE>").replace(local.encode(), b"<PRODUCER>")


def warm_frames() -> list[bytes]:
    """A first SEND to every queue used below (a new queue always takes the Python path)."""
    return [
        frame(310, {"a": "pg", "b": t, "c": "TBW102", "d": "4", "e": str(q), "f": "0", "g": "0", "h": "0"}, b"w", 0, 1)
        for t in TOPICS
        for q in range(4)
    ]


async def exchange(broker, frames: list[bytes], probe_opaque: int = 424242) -> tuple[list[bytes], bool]:
    """Write ``frames`` in one write on a new connection, then a known-good SEND with
    ``probe_opaque``; the normalized replies up to the probe's and whether the broker closed
    the connection instead."""
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.server.port)
    host, port = writer.get_extra_info("sockname")[:2]
    local = f"{host}:{port}"
    probe = frame(310, {"a": "pg", "b": "FrameT", "e": "0"}, b"probe", 1, probe_opaque)
    writer.write(b"".join(frames) + probe)
    replies = []
    closed = False
    while True:
        r = await read_frame(reader)
        if r is None:
            closed = True
            break
        replies.append(normalize(broker, local, r))
        if opaque_of(r) == probe_opaque:
            break
    writer.close()
    return replies, closed


def stats_of(broker) -> tuple:
    st = broker.stats
    st.fold()  # the fast path's C counters (PutCounters) into the Python statistics
    items = tuple((t, getattr(st.get_stats_item(TOPIC_PUT_NUMS, t), "value", None)) for t in TOPICS)
    return (st.store.put_nums, st.store.put_size, st.store.put_failed, items, sum(st.send_latency.counts))


@pytest.fixture
async def pair(tmp_path):
    async with (
        # (the native pull path off in both: this compares the SEND paths and their hook alone)
        run_broker(tmp_path / "fast", send_fast_path=True, pull_fast_path=False) as fast,
        run_broker(tmp_path / "slow", send_fast_path=False, pull_fast_path=False) as slow,
    ):
        for b in (fast, slow):
            replies, closed = await exchange(b, warm_frames())
            assert not closed and len(replies) == 9
        yield fast, slow


async def both(pair, frames: list[bytes]):
    """The same exchange with both brokers: ((replies, closed), records, stats) of each."""
    out = []
    for b in pair:
        start = b.message_store.commit_log.max_offset
        result = await exchange(b, frames)
        out.append((result, records(b, start), stats_of(b)))
    return out


async def test_hook_is_set_only_with_the_fast_path(pair):
    from rmq._testing import wait_until

    fast, slow = pair
    assert fast.server.dispatcher.frame_hooks is not None
    assert slow.server.dispatcher.frame_hooks is None
    # one hook per producer connection, on its decoder
    hooks = []
    for b in pair:
        _, writer = await asyncio.open_connection("127.0.0.1", b.server.port)
        await wait_until(lambda server=b.server: len(server.connections) == 1, 20, what="the connection accepted")
        hooks.append(next(iter(b.server.connections))._decoder.frame_hook)
        writer.close()
    assert type(hooks[0]).__name__ == "SendFrameHook" and hooks[1] is None


@pytest.mark.parametrize("ser", [0, 1])
async def test_pipelined_sends_answer_in_order_as_the_command_path(pair, ser):
    fast = pair[0]
    frames = []
    for i in range(40):
        ext = {
            "a": "pg",
            "b": TOPICS[i % 2],
            "e": str(i % 4),
            "g": str(1700000000000 + i),
            "i": "TAGS\x01t\x02KEYS\x01k" + str(i),
        }
        if i % 7 == 3:
            ext["i"] = "DELAY\x011"  # declined: the Python path, in between
        if i % 11 == 5:  # another request code, in between
            frames.append(
                frame(
                    RequestCode.QUERY_CONSUMER_OFFSET,
                    {"consumerGroup": "cg", "topic": "FrameT", "queueId": "0"},
                    b"",
                    ser,
                    500 + i,
                )
            )
            continue
        frames.append(
            frame(
                310 if i % 3 else 10,
                ext
                if i % 3
                else {
                    k: v
                    for k, v in zip(
                        ["producerGroup", "topic", "queueId", "bornTimestamp", "properties"], ext.values(), strict=False
                    )
                },
                bytes([i]) * (100 + i),
                ser,
                1000 + i,
                oneway=(i % 13 == 4),
            )
        )
    frames_before = fast.send_processor.fast.frames
    scanned_before = fast.send_processor.fast.scanned
    batched_before = fast.send_processor.fast.batched
    (f_res, f_rec, f_stats), (s_res, s_rec, s_stats) = await both(pair, frames)
    assert f_res == s_res and not f_res[1]
    # runs of SENDs were taken by one call each (SendFrameHook.take_frames), the declined
    # ones and the other requests in between by the frame-by-frame loop
    assert fast.send_processor.fast.batched - batched_before >= 10
    # JSON headers are read by the scan (json_header_scan), never by the dict reader here
    assert (fast.send_processor.fast.scanned - scanned_before >= 20) == (ser == 0)
    # every request but the oneway SENDs answered (all inline), in the order sent
    expected = [500 + i if i % 11 == 5 else 1000 + i for i in range(40) if i % 13 != 4 or i % 11 == 5]
    assert [opaque_of(r) for r in f_res[0]] == [*expected, 424242]
    assert f_rec == s_rec and len(f_rec) >= 30
    assert f_stats == s_stats
    assert fast.send_processor.fast.frames - frames_before >= 20


async def test_golden_sends_take_the_frame_path_and_match(pair):
    fast = pair[0]
    sends = golden_sends()
    before = fast.send_processor.fast.frames
    scanned_before = fast.send_processor.fast.scanned
    # twice: the first SEND of a golden queue is a new queue (the Python path)
    (f_res, f_rec, f_stats), (s_res, s_rec, s_stats) = await both(pair, sends + sends)
    assert f_res == s_res and f_rec == s_rec and f_stats == s_stats
    assert not f_res[1]
    assert fast.send_processor.fast.frames - before >= len(sends)
    # every golden JSON SEND stored from the frame was read by the scan, none by the dict reader
    json_sends = [f for f in sends if struct.unpack_from(">i", f, 4)[0] >> 24 == 0]
    assert fast.send_processor.fast.scanned - scanned_before >= len(json_sends) > 0
    assert {bytes(r[_BORN_TO_STORE_HOST]) for r in f_rec} == {bytes(24)}


async def test_not_ready_and_full_pool_answer_system_busy_as_before(pair):
    good = frame(310, {"a": "pg", "b": "FrameT", "e": "1"}, b"x", 1, 7)
    for b in pair:
        b.ready = False
    try:
        (f_res, f_rec, _), (s_res, s_rec, _) = await both(pair, [good])
    finally:
        for b in pair:
            b.ready = True
    assert f_res == s_res and f_rec == s_rec == []
    assert code_of(f_res[0][0]) == ResponseCode.SYSTEM_BUSY
    pools = [b.server.dispatcher.processor_for(310)[1] for b in pair]
    for p in pools:
        p._admitted += p.max_in_flight + p.max_queue
    try:
        (f_res, f_rec, _), (s_res, s_rec, _) = await both(pair, [good])
    finally:
        for p in pools:
            p._admitted -= p.max_in_flight + p.max_queue
    assert f_res == s_res and f_rec == s_rec == []
    assert b"[OVERLOAD]" in f_res[0][0]


def _bin_header(code: int, opaque: int, flag: int, entries: list[tuple[bytes, bytes]], remark: bytes = b"") -> bytes:
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in entries)
    return struct.pack(">hbhiii", code, 0, 409, opaque, flag, len(remark)) + remark + struct.pack(">i", len(ext)) + ext


def _frame_of(ser: int, header: bytes, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (ser << 24) | len(header)) + header + body


PLAIN = [(b"a", b"pg"), (b"b", b"FrameT"), (b"e", b"2"), (b"g", b"1700000000000"), (b"i", b"TAGS\x01x")]

MALFORMED = {
    "ext length past the header": lambda: (
        _bin_header(310, 5, 0, PLAIN)[:17] + struct.pack(">i", 10_000) + _bin_header(310, 5, 0, PLAIN)[21:]
    ),
    "truncated entry": lambda: (lambda h: h[:17] + struct.pack(">i", len(h) - 21 - 3) + h[21:-3])(
        _bin_header(310, 5, 0, PLAIN)
    ),
    "negative key length": lambda: (
        _bin_header(310, 5, 0, [])[:17] + struct.pack(">i", 6) + b"\xff\xfe" + struct.pack(">i", 0)
    ),
    "value length past the map": lambda: (
        lambda h: h[: -len(b"TAGS\x01x") - 4] + struct.pack(">i", 999) + b"TAGS\x01x"
    )(_bin_header(310, 5, 0, PLAIN)),
    "non-ASCII topic": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"b", "Über".encode())]),
    "invalid UTF-8 value": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"zz", b"\xff\xfe")]),
    "invalid UTF-8 key": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"\xff", b"1")]),
    "huge queue id": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"e", b"99999999999999999999")]),
    "huge born timestamp": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"g", b"9223372036854775808")]),
    "queue id with a plus": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"e", b"+1")]),
    "missing topic": lambda: _bin_header(310, 5, 0, [e for e in PLAIN if e[0] != b"b"]),
    "missing queue id": lambda: _bin_header(310, 5, 0, [e for e in PLAIN if e[0] != b"e"]),
    "empty topic": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"b", b"")]),
    "a remark": lambda: _bin_header(310, 5, 0, PLAIN, remark=b"hello"),
    "bad UTF-8 remark": lambda: _bin_header(310, 5, 0, PLAIN, remark=b"\xc3"),
    "V1 names with a V2 topic": lambda: _bin_header(
        10, 5, 0, [(b"topic", b"FrameU"), (b"queueId", b"1"), (b"producerGroup", b"pg"), (b"b", b"FrameT")]
    ),
    "duplicate keys, last wins": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"e", b"3"), (b"b", b"FrameU")]),
    "bool not true/false": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"m", b"TRUE")]),
    "batch": lambda: _bin_header(310, 5, 0, [*PLAIN, (b"m", b"true")]),
    "trailing bytes after the map": lambda: _bin_header(310, 5, 0, PLAIN) + b"\x00\x01",
    "response flag": lambda: _bin_header(310, 5, 1, PLAIN),
    "short header": lambda: _bin_header(310, 5, 0, [])[:19],
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
async def test_malformed_binary_headers_are_answered_as_before(pair, name):
    f = _frame_of(1, MALFORMED[name](), b"body")
    (f_res, f_rec, f_stats), (s_res, s_rec, s_stats) = await both(pair, [f])
    assert f_res == s_res, name
    assert f_rec == s_rec and f_stats == s_stats


JSON_MALFORMED = [
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1"},"flag":0,"opaque":1e3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1"},"flag":0,"opaque":99999999999}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":1},"flag":0,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1"},"flag":0,"language":7,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1","e":"2"},"flag":0,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"Fr\\u00e4meT","e":"1"},"flag":0,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1"},"flag":0,"opaque":3',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1","x":{"y":1}},"flag":0,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":null},"flag":0,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1","m":true},"flag":0,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1"},"flag":2147483648,"opaque":3}',
    b'{"code":310,"extFields":{"a":"pg","b":"FrameT","e":"1"},"flag":2,"opaque":3}',
    b'{"code":310, "extFields":{"a":"pg","b":"FrameT","e":"1"},"flag":0,"opaque":3}',
]


@pytest.mark.parametrize("header", JSON_MALFORMED)
async def test_odd_json_headers_are_answered_as_before(pair, header):
    f = _frame_of(0, header, b"body")
    (f_res, f_rec, f_stats), (s_res, s_rec, s_stats) = await both(pair, [f])
    assert f_res == s_res
    assert f_rec == s_rec and f_stats == s_stats


def _good(ser: int, i: int) -> bytes:
    return frame(
        310,
        {"a": "pg", "b": TOPICS[i % 2], "e": str(i % 4), "g": "1700000000000", "f": "0", "i": "TAGS\x01t"},
        b"m" * (10 + i),
        ser,
        7000 + i,
    )


@st.composite
def mutated(draw):
    """A plain SEND frame with some header bytes replaced (the length words kept, and the
    code, so that the frame stays a SEND)."""
    ser = draw(st.sampled_from([0, 1]))
    f = bytearray(_good(ser, draw(st.integers(0, 7))))
    hlen = struct.unpack(">i", bytes(f[4:8]))[0] & 0xFFFFFF
    lo = 8 + (2 if ser == 1 else len(b'{"code":310,'))
    hi = 8 + hlen
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(lo, hi - 1))
        f[at] = draw(st.one_of(st.integers(0, 255), st.sampled_from(list(b'"{}:,\\0-9\x00\xff\x7f'))))
    return bytes(f)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    frames=st.lists(
        st.one_of(mutated(), st.builds(_good, st.sampled_from([0, 1]), st.integers(0, 7))), min_size=1, max_size=5
    )
)
async def test_mutated_send_frames_are_answered_as_with_the_fast_path_off(pair, frames):
    # another producer of each broker, connected throughout, must be unaffected by whatever
    # this one sends
    others = [await asyncio.open_connection("127.0.0.1", b.server.port) for b in pair]
    (f_res, f_rec, f_stats), (s_res, s_rec, s_stats) = await both(pair, frames)
    assert f_res == s_res
    assert f_rec == s_rec
    assert f_stats == s_stats
    for reader, writer in others:
        writer.write(_good(1, 1))
        reply = await read_frame(reader)
        assert reply is not None and code_of(reply) == ResponseCode.SUCCESS
        writer.close()


async def test_acl_broker_sets_no_frame_hook(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("globalWhiteRemoteAddresses:\n- 127.0.0.1\naccounts: []\n")
    async with run_broker(tmp_path / "s", acl_enable=True, rocketmq_home=str(home)) as broker:
        assert broker.send_processor.fast is not None
        assert broker.server.dispatcher.frame_hooks is None
        # unsigned SENDs from a white-listed address: checked by the ACL (on the command), then
        # the command path's fast path stores them
        replies, closed = await exchange(broker, warm_frames()[:1] * 3)
        assert not closed and [code_of(r) for r in replies] == [0] * 4, replies
        assert broker.send_processor.fast.frames == 0 and broker.send_processor.fast.taken >= 3


def test_frame_decoder_next_frame_never_asks_the_hook():
    from rmq.remoting.codec import FrameDecoder

    seen = []
    dec = FrameDecoder()
    dec.frame_hook = lambda *a: seen.append(a) or b""
    f = frame(310, {"a": "pg", "b": "T", "e": "0"}, b"x", 1, 3)
    dec.feed(f + f)
    cmd = dec.next_frame()
    assert isinstance(cmd, RemotingCommand) and cmd.body == b"x" and not seen
    assert dec.next_item() == b"" and len(seen) == 1
    hstart = len(f) + 8  # the second frame's header
    assert seen[0][1:] == (hstart, hstart + (struct.unpack(">i", f[4:8])[0] & 0xFFFFFF), 2 * len(f), 1)
    assert dec.next_item() is None


async def test_a_send_split_over_reads_is_stored_from_the_decoders_buffer(pair):
    # the first part waits in the decoder (a bytearray), the rest completes the frame there
    from rmq._testing import wait_until

    body = bytes(range(256)) * 40
    frames = [
        frame(310, {"a": "pg", "b": "FrameU", "e": "3", "g": "1700000000000", "i": "TAGS\x01s"}, body, ser, 60 + ser)
        for ser in (0, 1)
    ]
    results = []
    for b in pair:
        start = b.message_store.commit_log.max_offset
        before = b.send_processor.fast.frames if b.send_processor.fast is not None else 0
        reader, writer = await asyncio.open_connection("127.0.0.1", b.server.port)
        host, port = writer.get_extra_info("sockname")[:2]
        replies = []
        for f in frames:
            writer.write(f[: len(f) // 2])
            await wait_until(
                lambda server=b.server: any(c._decoder.buffered for c in server.connections),
                20,
                what="half a frame buffered",
            )
            writer.write(f[len(f) // 2 :])
            replies.append(normalize(b, f"{host}:{port}", await read_frame(reader)))
        writer.close()
        taken = (b.send_processor.fast.frames - before) if b.send_processor.fast is not None else None
        results.append((replies, records(b, start), stats_of(b), taken))
    (f_rep, f_rec, f_st, f_taken), (s_rep, s_rec, s_st, _) = results
    assert f_rep == s_rep and f_rec == s_rec and f_st == s_st
    assert [code_of(r) for r in f_rep] == [0, 0]
    assert f_taken == 2


CLIENTS = "/work/shared/golden/clients"


def client_sends() -> list[bytes]:
    """The SENDs of the C++ core (jsoncpp: sorted keys; batch and unitMode as "0") and of
    ali-ons (insertion order; numbers and booleans as JSON values), as frames."""
    out = []
    for name, sort in (("cpp1-rocketmq-0.4.4-requests.jsonl", True), ("alions-3.12.0-requests.jsonl", False)):
        with open(f"{CLIENTS}/{name}") as f:
            for line in f:
                d = json.loads(line)
                h = d["header"]
                if h.get("code") not in (10, 310) or h.get("flag"):
                    continue
                header = json.dumps(h, sort_keys=sort, separators=(",", ":"), ensure_ascii=False).encode()
                body = bytes.fromhex(d["body"]["hex_head"])
                out.append(_frame_of(0, header, body))
    return out


async def test_client_sends_take_the_frame_path_and_match(pair):
    sends = client_sends()
    assert len(sends) >= 4
    fast = pair[0]
    before = fast.send_processor.fast.frames
    # twice: the first SEND of each queue is a new queue (the Python path)
    (f_res, f_rec, f_stats), (s_res, s_rec, s_stats) = await both(pair, sends + sends)
    assert f_res == s_res and f_rec == s_rec and f_stats == s_stats
    assert [code_of(r) for r in f_res[0]] == [0] * (2 * len(sends) + 1)
    assert fast.send_processor.fast.frames - before >= len(sends)


@pytest.mark.parametrize("ser", [0, 1])
async def test_mixed_header_forms_are_read_by_the_request_code(pair, ser):
    """Each SEND names FrameT in the naming of its code and FrameU in the other one: the frame
    path, like the Python path and Java's parseRequestHeader, reads the code's naming only
    (issue 23, finding 1), so everything stored lands in FrameT; a 310 whose short names are
    missing is refused, whatever long names it carries."""
    long_t = {"producerGroup": "pg", "topic": "FrameT", "queueId": "1"}
    short_u = {"a": "pg", "b": "FrameU", "e": "1"}
    frames = [
        frame(10, {**long_t, **short_u}, b"ten", ser, 7001),
        frame(310, {**short_u, "b": "FrameT", "topic": "FrameU", "queueId": "1"}, b"v2", ser, 7002),
        frame(310, {**long_t, "topic": "FrameU"}, b"no short names", ser, 7003),
    ]
    taken = pair[0].send_processor.fast.frames
    (f_res, f_rec, f_stats), (s_res, s_rec, s_stats) = await both(pair, frames)
    assert pair[0].send_processor.fast.frames - taken >= 3  # these two and the probe, from their frames
    assert f_res == s_res and f_rec == s_rec and f_stats == s_stats and not f_res[1]
    assert [code_of(r) for r in f_res[0][:3]] == [ResponseCode.SUCCESS, ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR]
    for b in pair:  # the warm-up's one, and these two
        assert b.message_store.get_max_offset_in_queue("FrameT", 1) == 3
        assert b.message_store.get_max_offset_in_queue("FrameU", 1) == 1
