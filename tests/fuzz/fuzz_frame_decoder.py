"""Fuzz target: ``rmq.remoting.codec.FrameDecoder`` fed arbitrary bytes in arbitrary chunks.

Allowed: ``RemotingCommandError`` (a bad frame closes its connection). Anything else, or a
decoder that neither yields a frame nor asks for more bytes, is a crash.
"""

from __future__ import annotations

import fuzzlib

with fuzzlib.instrument():
    from rmq.errors import RemotingCommandError
    from rmq.remoting.codec import FrameDecoder

ALLOWED = (RemotingCommandError,)
MAX_FRAME = 1 << 20  # the fuzzer's inputs are small; a small limit exercises the length checks


def target(data: bytes) -> None:
    # First byte: chunk size (1..256) so frames arrive split at every possible point.
    if not data:
        return
    step = data[0] + 1
    dec = FrameDecoder(max_frame_length=MAX_FRAME)
    for i in range(1, len(data), step):
        dec.feed(data[i : i + step])
        while True:
            cmd = dec.next_frame()
            if cmd is None:
                break
            assert isinstance(cmd.code, int) and isinstance(cmd.ext_fields, dict)
            cmd.body_bytes()
    assert dec.buffered <= len(data)


def seeds() -> list[bytes]:
    return [b"\x07" + f for f in fuzzlib.golden_frames()] + [b"\xff" + f for f in fuzzlib.golden_frames()[:20]]


if __name__ == "__main__":
    fuzzlib.main(target, ALLOWED, seeds)
