#!/usr/bin/env python3
"""JSON header codec candidates, in-process, no sockets.

    python bench/header_codec_bench.py [--json]

Decoding: every JSON header of the golden captures (tests/golden/remoting: RocketMQ 4.9.8
quickstart and serialize frames, ali-ons and C++ client requests) through
  msgspec   the codec's decoder (a typed msgspec Struct, rmq.remoting.codec._msgspec_decode)
  orjson    orjson.loads + the reference's field checks
  python    the pure-Python reference (json scanner + checks)
Encoding: a SEND_MESSAGE reply's frame head (length words + header) through
  cython    rmq.protocol._codec.json_header_encode (rmq/protocol/_codec.pyx), the codec's encoder
  orjson    orjson.dumps of the header dict in fastjson's key order + struct.pack
  msgspec   msgspec encode_into of a Struct in that order
Microseconds per header, best of 5 repeats of thread CPU time (waits for a core on a busy
machine left out). Every candidate is checked to give the
reference's result first. Nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import msgspec
import orjson

from rmq.protocol.command import RemotingCommand
from rmq.remoting import codec

GOLDEN = HERE.parent / "tests" / "golden" / "remoting"
REPLY_EXT = {
    "msgId": "7F0000010000000000000000000012AB",
    "queueId": "3",
    "queueOffset": "1234",
    "transactionId": "",
    "MSG_REGION": "DefaultRegion",
    "TRACE_ON": "true",
}


def golden_headers() -> list[bytes]:
    out = []
    for f in sorted(GOLDEN.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if "frame_b64" in row:
                fr = base64.b64decode(row["frame_b64"])
                if fr[4] == 0:
                    out.append(fr[8 : 8 + (struct.unpack_from(">i", fr, 4)[0] & 0xFFFFFF)])
            elif "header" in row:
                out.append(json.dumps(row["header"], separators=(",", ":")).encode())
    return out


def _orjson_decode(h: bytes):
    try:
        obj = orjson.loads(h)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or type(obj.get("code")) is not int:
        return None
    g = obj.get
    lang, ver, op, fl = g("language", "JAVA"), g("version", 0), g("opaque", 0), g("flag", 0)
    rm, ext = g("remark"), g("extFields")
    if type(lang) is not str or type(ver) is not int or type(op) is not int or type(fl) is not int:
        return None
    if rm is not None and type(rm) is not str:
        return None
    if ext is None:
        ext = {}
    elif type(ext) is not dict or any(type(v) not in (str, int, bool, float) and v is not None for v in ext.values()):
        return None
    c = object.__new__(RemotingCommand)
    c.code, c.language, c.version, c.opaque, c.flag, c.remark, c.ext_fields = obj["code"], lang, ver, op, fl, rm, ext
    c.body, c.serialize_type = None, 0
    return c


class _Reply(msgspec.Struct, kw_only=True, omit_defaults=True):
    code: int
    extFields: dict[str, str]
    flag: int
    language: str
    opaque: int
    remark: str | None = None
    serializeTypeCurrentRPC: str
    version: int


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if codec._fast_decode is None or codec._fast_encode is None:
        raise SystemExit("the fast codec is off (RMQ_NO_EXTENSIONS=1 or not built)")
    headers = golden_headers()
    fast = codec._fast_decode
    slots = RemotingCommand.__slots__
    for h in headers:
        ref = codec._decode_json_header_py(h)
        for got in (fast(h, 0, len(h), RemotingCommand), _orjson_decode(h)):
            assert got is None or all(getattr(got, s) == getattr(ref, s) for s in slots), h

    def per_header(fn) -> float:
        def loop() -> None:
            for h in headers:
                fn(h)

        best = min(timeit.repeat(loop, number=100, repeat=5, timer=time.thread_time))
        return round(best / 100 / len(headers) * 1e6, 3)

    decode = {
        "msgspec": per_header(lambda h: fast(h, 0, len(h), RemotingCommand)),
        "orjson": per_header(_orjson_decode),
        "python": per_header(codec._decode_json_header_py),
    }
    enc = codec._fast_encode
    lengths = struct.Struct(">ii")
    ms_enc = msgspec.json.Encoder()

    def cython_enc() -> bytes:
        return enc(0, REPLY_EXT, 1, "JAVA", 4711, None, 409, 1024)

    def orjson_enc() -> bytes:
        h = orjson.dumps(
            {
                "code": 0,
                "extFields": REPLY_EXT,
                "flag": 1,
                "language": "JAVA",
                "opaque": 4711,
                "serializeTypeCurrentRPC": "JSON",
                "version": 409,
            }
        )
        return lengths.pack(4 + len(h) + 1024, len(h)) + h

    def msgspec_enc() -> bytes:
        buf = bytearray(8)
        ms_enc.encode_into(
            _Reply(
                code=0,
                extFields=REPLY_EXT,
                flag=1,
                language="JAVA",
                opaque=4711,
                serializeTypeCurrentRPC="JSON",
                version=409,
            ),
            buf,
            8,
        )
        lengths.pack_into(buf, 0, len(buf) - 4 + 1024, len(buf) - 8)
        return bytes(buf)

    assert cython_enc() == orjson_enc() == msgspec_enc()
    encode = {
        name: round(min(timeit.repeat(fn, number=100_000, repeat=5, timer=time.thread_time)) / 100_000 * 1e6, 3)
        for name, fn in (("cython", cython_enc), ("orjson", orjson_enc), ("msgspec", msgspec_enc))
    }
    figures = {"headers": len(headers), "decode_us": decode, "encode_us": encode}
    print(json.dumps({"bench": "header_codec", **figures}) if args.json else figures)


if __name__ == "__main__":
    main()
