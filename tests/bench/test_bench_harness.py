"""The bench harness's own logic, without a broker: arguments, record walking, figures, JSON.

The record walker is checked against real PULL_MESSAGE replies of Apache RocketMQ 4.9.8
(tests/golden/rocketmq-4.9.8-pull-responses.jsonl, copied from the shared capture).
"""

import base64
import io
import json
import struct
from argparse import Namespace
from contextlib import redirect_stdout
from pathlib import Path

# bench/ is on pytest's pythonpath (pyproject.toml): the bench scripts import each other that way
import _common as c
import latency_bench
import pop_bench
import produce_bench
import pull_bench
import pytest

from rmq.remoting.codec import decode_frame

REPO = Path(__file__).resolve().parents[2]

GOLDEN = REPO / "tests" / "golden" / "rocketmq-4.9.8-pull-responses.jsonl"


def golden_pull_replies():
    """(ext_fields, body) of every FOUND pull reply in the capture."""
    out = []
    for line in GOLDEN.read_text().splitlines():
        frame = json.loads(line)
        cmd = decode_frame(base64.b64decode(frame["frame_b64"]))
        if cmd.code == 0:
            out.append((cmd.ext_fields, cmd.body_bytes()))
    return out


def first_queue_offset(body) -> int:
    return struct.unpack_from(">q", body, 20)[0]


# ------------------------------------------------------------------ record counting


def test_count_records_matches_offsets_in_every_golden_pull_body():
    replies = golden_pull_replies()
    assert len(replies) >= 30
    total = 0
    seen = set()  # (queueId, queueOffset)
    for ext, body in replies:
        n = c.count_records(body)
        # the broker's nextBeginOffset = first offset + records returned (no filter in the capture)
        assert first_queue_offset(body) + n == int(ext["nextBeginOffset"])
        # walking by hand: every record starts with the v1 magic code
        pos = 0
        for _ in range(n):
            size, magic = struct.unpack_from(">ii", body, pos)
            assert magic == c.MESSAGE_MAGIC_CODE_V1
            seen.add((struct.unpack_from(">i", body, pos + 12)[0], struct.unpack_from(">q", body, pos + 20)[0]))
            pos += size
        assert pos == len(body)
        total += n
    # the quickstart producer's 1000 messages (plus 3 of an earlier run), each pulled exactly once
    assert total == len(seen) == 1003


def test_count_records_over_a_memoryview_slice_without_copying():
    ext, body = golden_pull_replies()[0]
    framed = b"\xff" * 7 + body + b"\xee" * 5
    view = memoryview(framed)[7 : 7 + len(body)]
    assert c.count_records(view) == int(ext["nextBeginOffset"]) - first_queue_offset(body)


def test_count_records_empty_body_is_zero():
    assert c.count_records(b"") == 0


@pytest.mark.parametrize("cut", [1, 3, 50, 200])
def test_count_records_rejects_truncated_body(cut):
    _, body = golden_pull_replies()[0]
    with pytest.raises(c.RecordFormatError, match="claims|stray"):
        c.count_records(body[:-cut])


def test_count_records_rejects_nonsense_size():
    _, body = golden_pull_replies()[0]
    bad = struct.pack(">i", 12) + body[4:]
    with pytest.raises(c.RecordFormatError, match="claims 12 bytes"):
        c.count_records(bad)


def test_record_timestamps_read_born_and_store_time():
    _ext, body = golden_pull_replies()[0]
    rows = list(c.record_timestamps(body))
    assert len(rows) == c.count_records(body)
    offsets = [r[0] for r in rows]
    assert offsets == list(range(offsets[0], offsets[0] + len(rows)))
    for _qo, born, store in rows:
        assert 1_600_000_000_000 < born <= store < 2_000_000_000_000  # ms since the epoch, stored after born


# ------------------------------------------------------------------ figures


def test_percentile_nearest_rank():
    values = list(range(1, 1001))
    assert c.percentile(values, 0.5) == 500
    assert c.percentile(values, 0.99) == 990
    assert c.percentile(values, 0.999) == 999
    assert c.percentile(values, 1.0) == 1000
    assert c.percentile([], 0.5) == 0.0
    assert c.percentile([7], 0.999) == 7


def test_process_cpu_seconds_of_this_process_grows():
    import os

    before = c.process_cpu_seconds(os.getpid())
    x = 0
    for i in range(3_000_000):
        x += i
    assert c.process_cpu_seconds(os.getpid()) > before


def test_cpu_meter_per_million():
    m = c.CpuMeter(None)
    m.start()
    assert m.stop() is None and m.per_million(10) is None
    m.seconds = 2.0
    assert m.per_million(500_000) == 4.0


def test_lenient_route_json_accepts_fastjson_integer_keys():
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10912"},"brokerName":"b",'
        b'"cluster":"C"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,"writeQueueNums":3,'
        b'"topicSysFlag":0}],"filterServerTable":{}}'
    )
    route = c.parse_route("T", body)
    assert route.brokers == {"b": "127.0.0.1:10911"}
    assert [q.queue_id for q in route.read_queues] == [0, 1]
    assert [q.queue_id for q in route.write_queues] == [0, 1, 2]


def test_route_skips_read_only_and_slave_only_brokers():
    body = json.dumps(
        {
            "brokerDatas": [
                {"brokerName": "a", "brokerAddrs": {"0": "h:1"}},
                {"brokerName": "s", "brokerAddrs": {"1": "h:2"}},
            ],
            "queueDatas": [
                {"brokerName": "a", "perm": 4, "readQueueNums": 4, "writeQueueNums": 4},
                {"brokerName": "s", "perm": 6, "readQueueNums": 4, "writeQueueNums": 4},
            ],
        }
    ).encode()
    route = c.parse_route("T", body)
    assert len(route.read_queues) == 4 and route.write_queues == []


def test_encode_batch_layout():
    blob = c.encode_batch([b"abc", b"defg"], ["K\x01v\x02", ""])
    size1, magic, crc, flag, blen = struct.unpack_from(">iiiii", blob, 0)
    assert (size1, magic, crc, flag, blen) == (20 + 3 + 2 + 4, 0, 0, 0, 3)
    assert blob[20:23] == b"abc" and struct.unpack_from(">h", blob, 23)[0] == 4
    assert struct.unpack_from(">i", blob, size1)[0] == 20 + 4 + 2 + 0
    assert len(blob) == size1 + 26


def test_uniq_keys_are_32_hex_and_distinct():
    keys = {c.uniq_key(i) for i in range(1000)}
    assert len(keys) == 1000
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in keys)


# ------------------------------------------------------------------ arguments


def test_produce_defaults_match_the_issue():
    a = produce_bench.parse_args(["--namesrv", "127.0.0.1:9876", "--topic", "T"])
    assert (a.size, a.connections, a.inflight, a.duration, a.batch, a.json, a.broker_pid) == (
        1024,
        4,
        16,
        30.0,
        1,
        False,
        None,
    )


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--connections", "0"], "--connections must be >= 1"),
        (["--inflight", "-1"], "--inflight must be >= 1"),
        (["--duration", "0"], "--duration must be > 0"),
        (["--batch", "0"], "--batch must be >= 1"),
    ],
)
def test_produce_rejects_bad_numbers(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        produce_bench.parse_args(["--namesrv", "x:1", "--topic", "T", *argv])
    assert msg in str(e.value)


def test_produce_requires_namesrv_and_topic(capsys):
    with pytest.raises(SystemExit) as e:
        produce_bench.parse_args(["--topic", "T"])
    assert e.value.code == 2
    assert "--namesrv" in capsys.readouterr().err


def test_pull_defaults_to_drain_and_modes_exclude_each_other(capsys):
    a = pull_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--group", "G"])
    assert a.drain and a.duration is None and (a.inflight, a.max_msgs, a.prefill, a.size) == (4, 32, 0, 1024)
    a = pull_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--group", "G", "--duration", "5"])
    assert not a.drain and a.duration == 5.0
    with pytest.raises(SystemExit):
        pull_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--group", "G", "--duration", "5", "--drain"])
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        pull_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--group", "G", "--max-msgs", "0"])
    assert "--max-msgs must be >= 1" in str(e.value)


def test_latency_defaults():
    a = latency_bench.parse_args(["--namesrv", "x:1", "--topic", "T"])
    assert (a.rate, a.duration, a.size, a.suspend_ms, a.inflight) == (1000.0, 10.0, 1024, 15000, 1)


# ------------------------------------------------------------------ output


def test_produce_summary_and_json_line():
    args = produce_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--json"])
    stats = produce_bench.ProduceStats()
    for rt in range(1, 1001):  # 1..1000 ms
        stats.requests_ok += 1
        stats.messages_ok += 1
        stats.rt_total_ms += rt
        stats.rts.append(float(rt))
    stats.rt_max_ms = 1000.0
    stats.send_failed, stats.response_failed = 2, 3
    cpu = c.CpuMeter(None)
    cpu.seconds = 0.5
    cpu.write_bytes = 1000 * 2048
    f = produce_bench.summarize(args, stats, 2.0, cpu)
    assert f["broker_disk_kb_per_msg"] == 2.0
    assert f["tps"] == 500.0 and f["mb_per_s"] == round(1000 * 1024 / 2.0 / 1e6, 2)
    assert (f["rt_ms_p50"], f["rt_ms_p99"], f["rt_ms_p999"], f["rt_ms_max"]) == (500.0, 990.0, 999.0, 1000.0)
    assert f["broker_cpu_s_per_1m"] == 500.0 and f["rt_ms_avg"] == 500.5
    out = io.StringIO()
    with redirect_stdout(out):
        produce_bench.print_summary(f)
        c.print_json(f)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[Complete] Send Total: 1000 Send TPS: 500")
    assert "Send Failed: 2 Response Failed: 3" in lines[0]
    assert "500.00 CPU-s per 1M messages" in lines[1]
    assert json.loads(lines[-1]) == f


def test_pull_summary_line():
    f = {
        "messages": 100,
        "seconds": 2.0,
        "drain_seconds": 2.0,
        "backlog": 100,
        "msgs_per_s": 50.0,
        "mb_per_s": 0.05,
        "pulls_per_s": 2.0,
        "empty_pulls": 0,
        "errors": 0,
        "broker_cpu_s": None,
    }
    out = io.StringIO()
    with redirect_stdout(out):
        pull_bench.print_summary(f)
    assert "Pulled: 100 msgs" in out.getvalue() and "drained 100 in 2.00 s" in out.getvalue()


# ------------------------------------------------------------------ the pull framing, fed by hand


class _FakeTransport:
    def __init__(self):
        self.sent = []

    def writelines(self, parts):
        self.sent.append(b"".join(bytes(p) for p in parts))

    def close(self):
        pass


async def test_queue_puller_frames_split_replies_and_refills_holes():
    """Feed real 4.9.8 pull replies to the puller in awkward chunks; it counts every record once
    and re-asks the hole a short reply leaves."""
    from rmq.remoting.codec import FrameDecoder, encode

    replies = golden_pull_replies()[:3]
    args = Namespace(group="G", topic="TopicTest", inflight=2, max_msgs=32, suspend_ms=0, timeout=1.0)
    stats = pull_bench.PullStats()
    mq = c.MessageQueue("b", "127.0.0.1:1", 0)
    puller = pull_bench.QueuePuller(mq, args, stats, start=0, target=64)
    transport = _FakeTransport()
    puller.connection_made(transport)
    puller.fill()
    assert len(transport.sent) == 1  # both pipelined pulls leave in one write
    dec = FrameDecoder()
    dec.feed(transport.sent[0])
    cmds = list(dec)
    assert [cm.ext_fields["queueOffset"] for cm in cmds] == ["0", "32"]
    assert all(cm.ext_fields["sysFlag"] == "4" for cm in cmds)  # subscription, no suspend while draining

    # answer offset 0 with a real 32-record body, and offset 32 with a short reply of 10 records
    _ext0, body0 = replies[0]
    _ext1, body1 = replies[1]
    short = body1[: sum(struct.unpack_from(">i", body1, p)[0] for p in _record_starts(body1)[:10])]
    answer0 = cmds[0].response(
        0,
        ext_fields={"suggestWhichBrokerId": "0", "nextBeginOffset": "32", "minOffset": "0", "maxOffset": "64"},
        body=body0,
    )
    answer1 = cmds[1].response(
        0,
        ext_fields={"suggestWhichBrokerId": "0", "nextBeginOffset": "42", "minOffset": "0", "maxOffset": "64"},
        body=short,
    )
    wire = b"".join(bytes(p) for a in (answer0, answer1) for p in encode(a))
    for i in range(0, len(wire), 777):  # split at arbitrary places
        chunk = wire[i : i + 777]
        buf = puller.get_buffer(len(chunk))
        buf[: len(chunk)] = chunk
        puller.buffer_updated(len(chunk))
    assert stats.messages == 42 and stats.pulls == 2
    # the hole [42, 64) is asked for next
    dec = FrameDecoder()
    dec.feed(transport.sent[-1])
    hole = dec.next_frame()
    assert (hole.ext_fields["queueOffset"], hole.ext_fields["maxMsgNums"]) == ("42", "22")
    assert not puller.done.done()


def _record_starts(body):
    starts, pos = [], 0
    while pos < len(body):
        starts.append(pos)
        pos += struct.unpack_from(">i", body, pos)[0]
    return starts


async def test_queue_puller_never_pulls_past_the_brokers_max_offset():
    """Without a drain target, pipelined pulls stop at the max offset the broker reported (a pull
    beyond it is answered PULL_OFFSET_MOVED); a reply raising maxOffset lets them go on."""
    from rmq.remoting.codec import FrameDecoder, encode

    args = Namespace(group="G", topic="TopicTest", inflight=4, max_msgs=32, suspend_ms=1000, timeout=1.0)
    stats = pull_bench.PullStats()
    puller = pull_bench.QueuePuller(
        c.MessageQueue("b", "127.0.0.1:1", 0), args, stats, start=0, target=None, known_max=40
    )
    transport = _FakeTransport()
    puller.connection_made(transport)
    puller.fill()

    def sent_since(k):
        dec = FrameDecoder()
        dec.feed(b"".join(transport.sent[k:]))
        return [(cm, cm.ext_fields["queueOffset"], cm.ext_fields["maxMsgNums"]) for cm in dec]

    first = sent_since(0)
    assert [(o, n) for _, o, n in first] == [("0", "32"), ("32", "32")]  # 64 would be past max 40
    assert all(cm.ext_fields["sysFlag"] == "6" for cm, _, _ in first)  # subscription + suspend
    # the pull at 32 finds 8 records (32..39) and the broker now reports maxOffset 100
    _, body = golden_pull_replies()[0]
    eight = body[: sum(struct.unpack_from(">i", body, p)[0] for p in _record_starts(body)[:8])]
    reply = first[1][0].response(
        0,
        ext_fields={"suggestWhichBrokerId": "0", "nextBeginOffset": "40", "minOffset": "0", "maxOffset": "100"},
        body=eight,
    )
    wire = b"".join(bytes(p) for p in encode(reply))
    buf = puller.get_buffer(len(wire))
    buf[: len(wire)] = wire
    puller.buffer_updated(len(wire))
    assert stats.messages == 8
    assert [(o, n) for _, o, n in sent_since(1)] == [("40", "24"), ("64", "32"), ("96", "32")]


@pytest.mark.parametrize("script", ["produce", "pull", "latency"])
def test_unreachable_name_server_is_a_clear_error(script, capsys):
    port = c.free_port()  # nothing listens there
    argv = ["--namesrv", f"127.0.0.1:{port}", "--topic", "T", "--timeout", "1"]
    mod = {"produce": produce_bench, "pull": pull_bench, "latency": latency_bench}[script]
    if script == "pull":
        argv += ["--group", "G"]
    assert mod.main(argv + ["--duration", "1"]) == 2
    err = capsys.readouterr().err
    assert "error: RemotingConnectError" in err and f"127.0.0.1:{port}" in err


def test_tls_flags_and_the_bench_certificate(tmp_path):
    """--tls / --tls-ca give a client context; the certificate Standalone(tls=True) makes with
    openssl loads as a server certificate and is trusted by that context (no daemon started)."""
    import ssl

    from rmq.remoting.tls import TlsSettings

    plain = produce_bench.parse_args(["--namesrv", "x:1", "--topic", "T"])
    assert c.client_tls(plain) is None
    cert, key = c.make_bench_certificate(str(tmp_path))
    for argv in (["--tls-ca", cert], ["--tls", "--tls-ca", cert]):
        a = pull_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--group", "G", *argv])
        ctx = c.client_tls(a)
        assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode is ssl.CERT_REQUIRED
    server = TlsSettings.from_properties(
        {"tls.server.mode": "enforcing", "tls.server.certPath": cert, "tls.server.keyPath": key}
    ).server_options()
    assert server.context is not None
    # a handshake in memory: the bench client trusts the bench server for 127.0.0.1
    client = c.client_tls(produce_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--tls-ca", cert]))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    cs = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    ss = server.context.wrap_bio(s_in, s_out, server_side=True)
    done = set()
    for _ in range(10):
        for name, obj, src, dst in (("client", cs, c_out, s_in), ("server", ss, s_out, c_in)):
            if name not in done:
                try:
                    obj.do_handshake()
                    done.add(name)
                except ssl.SSLWantReadError:
                    pass
            dst.write(src.read())
    assert done == {"client", "server"}


def test_produce_threads_serialize_and_repeat_options(capsys):
    a = produce_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--threads", "16", "--serialize", "rocketmq"])
    # Java's benchmark Producer: N synchronous senders over one connection, the raw sender
    assert (a.connections, a.inflight, a.client, a.serialize, a.repeat) == (1, 16, "raw", "rocketmq", None)
    a = produce_bench.parse_args(["--topic", "T", "--repeat", "3", "--broker-arg=--flushDiskType=SYNC_FLUSH"])
    assert a.repeat == 3 and a.namesrv is None and a.broker_arg == ["--flushDiskType=SYNC_FLUSH"]
    assert a.client == "sdk" and a.serialize == "json"
    for bad in (
        ["--topic", "T", "--repeat", "2", "--namesrv", "x:1"],
        ["--topic", "T", "--namesrv", "x:1", "--tree", "/x"],
        ["--topic", "T", "--namesrv", "x:1", "--client", "raw", "--batch", "4"],
    ):
        with pytest.raises(SystemExit) as e:
            produce_bench.parse_args(bad)
        assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        produce_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--threads", "0"])
    assert "--threads must be >= 1" in str(e.value)


@pytest.mark.parametrize("serialize", ["json", "rocketmq"])
def test_raw_sender_template_patches_fixed_width_fields(serialize):
    """The raw sender's per-request frame decodes as a SEND with the patched opaque,
    timestamp and UNIQ_KEY, in the requested serialization."""
    args = produce_bench.parse_args(["--namesrv", "x:1", "--topic", "T", "--threads", "2", "--serialize", serialize])
    mq = c.MessageQueue("broker-a", "127.0.0.1:1", 3)
    route = c.Route("T", write_queues=[mq])
    producer = produce_bench.RawProducer(args, route, produce_bench.ProduceStats())
    frame = producer.templates[mq].build(1_234_567_890, 0xABC, 1_795_000_000_123)
    cmd = decode_frame(bytes(frame))
    assert cmd.serialize_type == c.SERIALIZE_TYPES[serialize] and cmd.code == 310
    assert cmd.opaque == 1_234_567_890
    ext = cmd.ext_fields
    assert (ext["b"], ext["e"], ext["g"], ext["n"]) == ("T", "3", "1795000000123", "broker-a")
    assert ext["i"] == f"UNIQ_KEY\x01{c.uniq_key(0xABC)}\x02WAIT\x01true\x02"
    assert cmd.body_bytes() == producer.body and len(producer.body) == 1024


def test_pop_bench_arguments_and_summary():
    a = pop_bench.parse_args(["--modes", "pop,simple", "--rounds", "2"])
    assert a.modes == ["pop", "simple"] and a.rounds == 2 and a.backlog == 100_000
    with pytest.raises(SystemExit):
        pop_bench.parse_args(["--modes", "pull,nope"])
    runs = [
        {"mode": "pop", "consumed": 10, "backlog": 10, "msgs_per_s": v, "broker_cpu_s_per_1M": 2 * v}
        for v in (3.0, 1.0, 2.0)
    ] + [{"mode": "simple", "consumed": 9, "backlog": 10, "msgs_per_s": 5.0}]
    pop, simple = pop_bench.summarize(runs)
    assert pop["msgs_per_s"] == {"median": 2.0, "min": 1.0, "max": 3.0} and pop["complete"]
    assert pop["broker_cpu_s_per_1M"]["median"] == 4.0
    assert simple["rounds"] == 1 and not simple["complete"] and "broker_cpu_s_per_1M" not in simple
