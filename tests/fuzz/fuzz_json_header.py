"""Fuzz target: ``rmq.remoting.codec.decode_json_header`` (the Cython fast path with the
pure-Python reference behind it) on arbitrary header bytes, and the reference on its own
(its coverage is what guides the fuzzer: the compiled path is not instrumented).

Allowed: ``RemotingCommandError``.
"""

from __future__ import annotations

import struct

import fuzzlib

with fuzzlib.instrument():
    from rmq.errors import RemotingCommandError
    from rmq.remoting import codec
    from rmq.remoting.codec import decode_json_header

ALLOWED = (RemotingCommandError,)


_reference = getattr(codec, "_decode_json_header_py", None)


def target(data: bytes) -> None:
    if _reference is not None:
        try:
            _check(_reference(data))
        except RemotingCommandError:
            pass
    _check(decode_json_header(data))


def _check(cmd: object) -> None:
    assert isinstance(cmd.code, int) and isinstance(cmd.ext_fields, dict)  # type: ignore[attr-defined]
    assert all(isinstance(k, str) for k in cmd.ext_fields)  # type: ignore[attr-defined]


def seeds() -> list[bytes]:
    out = []
    for frame in fuzzlib.golden_frames():
        _length, word = struct.unpack_from(">ii", frame)
        if (word >> 24) & 0xFF == 0:
            out.append(frame[8 : 8 + (word & 0xFFFFFF)])
    return out


if __name__ == "__main__":
    fuzzlib.main(target, ALLOWED, seeds)
