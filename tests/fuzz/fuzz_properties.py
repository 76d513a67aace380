"""Fuzz target: ``rmq.common.message.string_to_properties`` (documented lenient: it never
raises) on bytes and on the same text as ``str``; both must agree.

Allowed: nothing.
"""

from __future__ import annotations

import fuzzlib

with fuzzlib.instrument():
    from rmq.common.message import string_to_properties

ALLOWED: tuple[type[BaseException], ...] = ()


def target(data: bytes) -> None:
    from_bytes = string_to_properties(data)
    from_text = string_to_properties(data.decode("utf-8", "replace"))
    assert from_bytes == from_text
    assert all(k and "\x01" not in k and "\x02" not in k for k in from_bytes)


def seeds() -> list[bytes]:
    return [b"", b"TAGS\x01a\x02KEYS\x01k1 k2\x02", b"UNIQ_KEY\x01ABC\x02\x02\x01x\x02noval\x02", "ü\x01é".encode()]


if __name__ == "__main__":
    fuzzlib.main(target, ALLOWED, seeds)
