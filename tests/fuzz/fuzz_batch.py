"""Fuzz target: a pull body of back-to-back records, ``rmq.client._codec.decode_messages``,
through :func:`decode_batch` so it can be repointed at the unified record walker.

Allowed: ``RecordDecodeError`` (the documented error: a batch is all or nothing).
"""

from __future__ import annotations

import fuzzlib

with fuzzlib.instrument():
    from rmq.client._codec import decode_messages
    from rmq.common.message import RecordDecodeError

ALLOWED = (RecordDecodeError,)


def decode_batch(buf: bytes) -> list:
    """The SDK's batch decoder (the adapter to repoint when the walker lands)."""
    return decode_messages(buf, "broker-a")


def target(data: bytes) -> None:
    msgs = decode_batch(data)
    assert isinstance(msgs, list)


def seeds() -> list[bytes]:
    return fuzzlib.golden_pull_bodies()


if __name__ == "__main__":
    fuzzlib.main(target, ALLOWED, seeds)
