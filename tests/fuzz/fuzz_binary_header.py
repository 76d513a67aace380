"""Fuzz target: ``rmq.remoting.codec.decode_binary_header`` (the ROCKETMQ binary header codec).

Allowed: ``RemotingCommandError``.
"""

from __future__ import annotations

import struct

import fuzzlib

with fuzzlib.instrument():
    from rmq.errors import RemotingCommandError
    from rmq.remoting.codec import decode_binary_header

ALLOWED = (RemotingCommandError,)


def target(data: bytes) -> None:
    # First byte: where the header starts inside the buffer (the decoder reads in place).
    if not data:
        return
    start = data[0] % 8
    buf = data[1:]
    header_len = max(0, len(buf) - start)
    cmd = decode_binary_header(buf, start, header_len)
    assert isinstance(cmd.code, int) and isinstance(cmd.ext_fields, dict)


def seeds() -> list[bytes]:
    out = []
    for frame in fuzzlib.golden_frames():
        _length, word = struct.unpack_from(">ii", frame)
        if (word >> 24) & 0xFF == 1:
            out.append(b"\x00" + frame[8 : 8 + (word & 0xFFFFFF)])
    return out


if __name__ == "__main__":
    fuzzlib.main(target, ALLOWED, seeds)
