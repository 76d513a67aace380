"""Fuzz target: one CommitLog record, ``rmq._store.decode_record`` (with and without the CRC
check), through :func:`decode_one` so it can be repointed at the unified record walker.

Allowed: ``ValueError`` (which ``RecordDecodeError`` is).

The compiled decoder gives libFuzzer no coverage, so the SDK's pure-Python batch decoder runs
on the same bytes first as a guide only (its own errors are the batch target's business):
inputs that get further into a record's layout there are kept and mutated.
"""

from __future__ import annotations

import fuzzlib

with fuzzlib.instrument():
    from rmq._store import decode_record
    from rmq.client._codec import decode_messages as _guide

ALLOWED = (ValueError,)


def decode_one(buf: bytes, check_crc: bool) -> object:
    """The store's record decoder (the adapter to repoint when the walker lands)."""
    return decode_record(buf, 0, check_crc)


def target(data: bytes) -> None:
    if not data:
        return
    try:
        _guide(data[1:], decompress=False)
    except Exception:
        pass
    fields = decode_one(data[1:], bool(data[0] & 1))
    assert isinstance(fields, dict)


def seeds() -> list[bytes]:
    out = []
    for body in fuzzlib.golden_pull_bodies():
        total = int.from_bytes(body[:4], "big")
        out += [b"\x00" + body[:total], b"\x01" + body[:total]]
    return out


if __name__ == "__main__":
    fuzzlib.main(target, ALLOWED, seeds)
