"""The HA protocol's bytes (rmq.store.ha.codec): from hand-made bytes and from the golden HA
stream of a Java 4.9.8 master and slave."""

import struct

import pytest
from remoting_golden import ha_stream

from rmq import _store
from rmq.store.ha.codec import (
    MAX_TRANSFER_BODY,
    HAProtocolError,
    OffsetReportDecoder,
    TransferDecoder,
    encode_offset_report,
    encode_transfer_header,
)


def test_report_and_header_layouts():
    assert encode_offset_report(0) == bytes(8)
    assert encode_offset_report(42690) == b"\x00\x00\x00\x00\x00\x00\xa6\xc2"
    assert encode_transfer_header(32768, 9922) == struct.pack(">qi", 32768, 9922)
    assert encode_transfer_header(42690, 0) == b"\x00\x00\x00\x00\x00\x00\xa6\xc2" + bytes(4)  # heartbeat
    with pytest.raises(ValueError):
        encode_offset_report(-1)
    with pytest.raises(ValueError):
        encode_transfer_header(0, -1)


def test_golden_slave_reports_decode_at_every_split():
    g = ha_stream()
    raw = g["slave_to_master"]
    assert len(raw) == 8 * len(g["slave_reports"])
    for split in range(len(raw) + 1):
        d = OffsetReportDecoder()
        seen = []
        for part in (raw[:split], raw[split:]):
            # one report per feed when fed 8 bytes at a time; here the newest of each feed
            for i in range(0, len(part), 1):
                v = d.feed(part[i : i + 1])
                if v is not None:
                    seen.append(v)
        assert seen == g["slave_reports"]
        assert d.latest == g["slave_reports"][-1]
    # our encoder writes the same bytes
    assert b"".join(encode_offset_report(v) for v in g["slave_reports"]) == raw


def test_report_decoder_keeps_the_newest_of_one_read():
    d = OffsetReportDecoder()
    assert d.feed(encode_offset_report(5) + encode_offset_report(9) + b"\x00\x00") == 9
    assert d.feed(b"\x00\x00\x00\x00\x00") is None
    assert d.feed(b"\x07") == 7
    assert d.reports == 3
    with pytest.raises(HAProtocolError):
        OffsetReportDecoder().feed(b"\xff" * 8)


def test_golden_master_transfers_decode_at_every_split():
    g = ha_stream()
    raw = g["master_to_slave"]
    want = [(t["phy_offset"], t["size"]) for t in g["master_transfers"]]
    assert g["master_to_slave_trailing_bytes"] == 0
    # headers, heartbeats (size 0) and at most 32 KiB per transfer, as the Java master sent them
    assert max(s for _, s in want) == 32 * 1024
    assert want[0] == (0, 0)
    for split in range(0, len(raw) + 1, 97):
        d = TransferDecoder()
        got = []
        bodies = []
        for part in (raw[:split], raw[split:]):
            for off, body in d.feed(part):
                got.append((off, len(body)))
                bodies.append(bytes(body))
        assert got == want
        assert d.buffered == 0
    # the bodies are the master's CommitLog: contiguous offsets; whole records once joined
    log = b"".join(bodies)
    offsets = [o for o, s in want if s]
    assert offsets == [0, 32768]
    recs, at, _outcome, _ = _store.scan_records(log, 0, len(log), 0, True)
    assert at == len(log) and len(recs) == 200
    assert [r[0] for r in recs][:2] == [0, recs[1][0]] and recs[-1][0] + recs[-1][1] == len(log)
    # and our header encoder writes the same headers
    pos = 0
    for off, size in want:
        assert raw[pos : pos + 12] == encode_transfer_header(off, size)
        pos += 12 + size


def test_transfer_decoder_byte_by_byte_and_views():
    frames = encode_transfer_header(100, 3) + b"abc" + encode_transfer_header(103, 0) + encode_transfer_header(103, 2)
    d = TransferDecoder()
    got = []
    for i in range(len(frames)):
        got += [(o, bytes(b)) for o, b in d.feed(frames[i : i + 1])]
    assert got == [(100, b"abc"), (103, b"")]
    assert d.buffered == 12  # a header whose body has not come yet
    got = [(o, bytes(b)) for o, b in d.feed(b"xy")]
    assert got == [(103, b"xy")]
    # a whole transfer inside one read is a view of that read (no copy)
    data = encode_transfer_header(7, 4) + b"wxyz"
    [(off, body)] = list(TransferDecoder().feed(data))
    assert off == 7 and body.obj is data


@pytest.mark.parametrize(
    "header",
    [
        struct.pack(">qi", 0, MAX_TRANSFER_BODY + 1),  # huge size: refused before buffering
        struct.pack(">qi", 0, -5),  # negative size
        struct.pack(">qi", -1, 0),  # negative offset
    ],
)
def test_transfer_decoder_refuses_bad_headers(header):
    with pytest.raises(HAProtocolError):
        list(TransferDecoder().feed(header + b"x" * 100))
    d = TransferDecoder()
    with pytest.raises(HAProtocolError):  # split in the middle of the header
        list(d.feed(header[:5]))
        list(d.feed(header[5:]))


def test_transfer_decoder_bound_is_configurable():
    d = TransferDecoder(max_body=32 * 1024)
    assert [len(b) for _, b in d.feed(encode_transfer_header(0, 32 * 1024) + bytes(32 * 1024))] == [32 * 1024]
    with pytest.raises(HAProtocolError):
        list(d.feed(encode_transfer_header(0, 32 * 1024 + 1)))


def test_controller_mode_headers_carry_the_confirm_offset():
    # Java 5 AutoSwitchHAConnection's header carries the confirm offset; ours is the 4.x header
    # with it appended (20 bytes), on controller-mode connections only
    assert encode_transfer_header(100, 3, 90) == struct.pack(">qiq", 100, 3, 90)
    with pytest.raises(ValueError):
        encode_transfer_header(100, 3, -1)
    frames = encode_transfer_header(100, 3, 90) + b"abc" + encode_transfer_header(103, 0, 103)
    d = TransferDecoder(with_confirm=True)
    got = []
    for i in range(len(frames)):  # byte by byte: the confirm offset belongs to the transfer yielded
        got += [(o, bytes(b), d.confirm) for o, b in d.feed(frames[i : i + 1])]
    assert got == [(100, b"abc", 90), (103, b"", 103)]
    whole = TransferDecoder(with_confirm=True)  # in one read: each as it is yielded
    assert [(o, bytes(b), whole.confirm) for o, b in whole.feed(frames)] == got
    with pytest.raises(HAProtocolError):
        list(TransferDecoder(with_confirm=True).feed(struct.pack(">qiq", 0, 0, -7)))
