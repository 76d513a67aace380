"""The HA wire protocol (Java ``HAService.HAClient`` / ``HAConnection``), sans-IO.

Two raw byte streams over one TCP connection, no framing beyond what is drawn here; all
integers big-endian.

slave → master: an offset report, "I have everything below this CommitLog offset", sent at
connect, after each stored transfer and every ``haSendHeartbeatInterval`` (5 s)::

    +0                        +8
    | maxPhyOffset  int64     |

master → slave: a transfer, a 12-byte header followed by ``size`` bytes of CommitLog taken
from one mapped file at ``phyOffset`` (raw records, BLANK tail included, at most
``haTransferBatchSize``, 32 KiB, per transfer); ``size`` 0 is a heartbeat, sent when there was
nothing new for ``haSendHeartbeatInterval``, and carries the offset the next transfer starts at::

    +0                        +8              +12                       +12+size
    | phyOffset  int64        | size  int32   | CommitLog bytes ...     |

Not in Java, an rmq slave given ``haAuthSecret`` proves it before its first report (a
challenge-response; the secret never crosses the wire)::

    slave → master   AUTH_HELLO  8 bytes, a negative int64 no offset report can be
    master → slave   nonce       16 random bytes (AUTH_NONCE_SIZE)
    slave → master   mac         32 bytes, HMAC-SHA256(secret, AUTH_CONTEXT + nonce)
    ... then the ordinary protocol: the slave's first report, the master's transfers.

Not in Java either, a slave in controller mode (docs/design.md "Controller mode") asks for the
master's epochs before its first report, so it can cut its CommitLog back to the last point
both agree on (Java 5's AutoSwitchHAClient does the same in its own handshake; this keeps the
4.x stream for everything else)::

    slave → master   EPOCH_HELLO  8 bytes (another negative int64) + the slave's brokerId int64
    master → slave   count int32, count × (epoch int32, startOffset int64), maxPhyOffset int64
    ... then the slave truncates if it must, and sends its first report.

On such a controller-mode connection every transfer header (heartbeats included) carries the
master's confirm offset as a third field, 20 bytes in all (Java 5 ``AutoSwitchHAConnection``'s
transfer header carries it the same way, as its "additional info"); the slave dispatches no
further than it, so its consumers never read a record not every SyncStateSet member has
(docs/design.md "Controller mode", "What a slave serves")::

    +0                        +8              +12                       +20          +20+size
    | phyOffset  int64        | size  int32   | confirmOffset  int64    | CommitLog bytes ...  |

A Java 4.9.8 slave never sends AUTH_HELLO (its first bytes are a report); the master decides
from the peer's address whether it may follow (``haAllowedSlaves``, rmq.store.ha.service).

The master reads only whole 8-byte reports and keeps the newest one that arrived (Java
``ReadSocketService.processReadEvent`` takes the last complete value of a read); the slave
refuses a transfer whose ``phyOffset`` is not its own CommitLog end (Java
``HAClient.dispatchReadRequest``), which the caller checks with the offsets the decoder yields.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterator

__all__ = [
    "AUTH_HELLO",
    "AUTH_MAC_SIZE",
    "AUTH_NONCE_SIZE",
    "EPOCH_HELLO",
    "EPOCH_HELLO_SIZE",
    "decode_epoch_answer",
    "encode_epoch_answer",
    "encode_epoch_hello",
    "HAProtocolError",
    "auth_mac",
    "MAX_TRANSFER_BODY",
    "OffsetReportDecoder",
    "REPORT_SIZE",
    "TRANSFER_HEADER_SIZE",
    "CONFIRM_HEADER_SIZE",
    "TransferDecoder",
    "encode_offset_report",
    "encode_transfer_header",
]

REPORT_SIZE = 8
TRANSFER_HEADER_SIZE = 12
#: A controller-mode transfer header: the 4.x one and the master's confirm offset.
CONFIRM_HEADER_SIZE = 20
#: The largest transfer body a slave accepts: Java's slave reads into a 4 MiB buffer
#: (``HAClient.READ_MAX_BUFFER_SIZE``) and could never complete a bigger transfer.
MAX_TRANSFER_BODY = 4 * 1024 * 1024 - TRANSFER_HEADER_SIZE
_MAX_OFFSET = (1 << 63) - 1

#: The 8 bytes an authenticating slave opens with: "\xffRMQHA1\0", negative as an int64, so no
#: Java slave's first report (an offset, 0 or more) can be mistaken for it.
AUTH_HELLO = b"\xffRMQHA1\x00"
AUTH_NONCE_SIZE = 16
AUTH_MAC_SIZE = 32
AUTH_CONTEXT = b"rmq-ha-auth-v1\x00"
#: The 8 bytes a controller-mode slave opens its stream with (after AUTH), then its brokerId.
EPOCH_HELLO = b"\xffRMQHA2\x00"
EPOCH_HELLO_SIZE = 16
#: Entries an epoch answer may carry (rmq.store.ha.epoch.MAX_ENTRIES).
MAX_EPOCH_ENTRIES = 1024
_EPOCH_ENTRY = struct.Struct(">iq")
_COUNT = struct.Struct(">i")

_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")
_CONFIRM_HEADER = struct.Struct(">qiq")


class HAProtocolError(ValueError):
    """The peer sent bytes that are not the HA protocol (negative offset or size, a size past
    the bound): the connection is closed."""


def auth_mac(secret: str, nonce: bytes) -> bytes:
    """The slave's answer to the master's ``nonce``: HMAC-SHA256 keyed with ``secret`` (UTF-8)
    over :data:`AUTH_CONTEXT` + ``nonce`` (a fresh nonce per connection: a recorded answer is
    worth nothing on another)."""
    return hmac.new(secret.encode("utf-8"), AUTH_CONTEXT + nonce, hashlib.sha256).digest()


def encode_epoch_hello(broker_id: int) -> bytes:
    """The controller-mode slave's opening: :data:`EPOCH_HELLO` + its brokerId."""
    return EPOCH_HELLO + _REPORT.pack(broker_id)


def encode_epoch_answer(entries: list[tuple[int, int]], max_offset: int) -> bytes:
    """The master's epochs ``(epoch, start)`` (the newest :data:`MAX_EPOCH_ENTRIES`) and its
    CommitLog end."""
    entries = entries[-MAX_EPOCH_ENTRIES:]
    return b"".join(
        [_COUNT.pack(len(entries)), *(_EPOCH_ENTRY.pack(e, s) for e, s in entries), _REPORT.pack(max_offset)]
    )


def decode_epoch_answer(buf: bytes | bytearray) -> tuple[list[tuple[int, int]], int, int] | None:
    """``(entries, max_offset, bytes used)`` once ``buf`` holds a whole answer, else None;
    HAProtocolError for a count past the bound or offsets that are negative or do not grow."""
    if len(buf) < _COUNT.size:
        return None
    (count,) = _COUNT.unpack_from(buf, 0)
    if not 0 <= count <= MAX_EPOCH_ENTRIES:
        raise HAProtocolError(f"epoch answer with {count} entries (0..{MAX_EPOCH_ENTRIES})")
    need = _COUNT.size + count * _EPOCH_ENTRY.size + REPORT_SIZE
    if len(buf) < need:
        return None
    entries = [_EPOCH_ENTRY.unpack_from(buf, _COUNT.size + i * _EPOCH_ENTRY.size) for i in range(count)]
    (max_offset,) = _REPORT.unpack_from(buf, need - REPORT_SIZE)
    prev = (-1, 0)
    for e in entries:
        if e[1] < prev[1] or e[0] <= prev[0] or e[1] > max_offset:
            raise HAProtocolError(f"epoch entries out of order: {prev} then {e} (end {max_offset})")
        prev = e
    if max_offset < 0:
        raise HAProtocolError(f"negative master offset {max_offset}")
    return [(int(e), int(s)) for e, s in entries], int(max_offset), need


def encode_offset_report(offset: int) -> bytes:
    """The slave's 8-byte report of ``offset`` (0 ≤ offset < 2**63)."""
    if not 0 <= offset <= _MAX_OFFSET:
        raise ValueError(f"offset {offset} out of range")
    return _REPORT.pack(offset)


def encode_transfer_header(phy_offset: int, size: int, confirm: int | None = None) -> bytes:
    """The master's 12-byte header; ``size`` 0 is a heartbeat. With ``confirm`` (a
    controller-mode connection) the 20-byte header that also carries the confirm offset."""
    if not 0 <= phy_offset <= _MAX_OFFSET:
        raise ValueError(f"offset {phy_offset} out of range")
    if not 0 <= size <= 0x7FFFFFFF:
        raise ValueError(f"size {size} out of range")
    if confirm is None:
        return _HEADER.pack(phy_offset, size)
    if not 0 <= confirm <= _MAX_OFFSET:
        raise ValueError(f"confirm offset {confirm} out of range")
    return _CONFIRM_HEADER.pack(phy_offset, size, confirm)


class OffsetReportDecoder:
    """The master's side: feed received bytes, read ``latest`` (None until a whole report
    arrived). Holds at most 7 bytes between feeds."""

    __slots__ = ("_partial", "latest", "reports")

    def __init__(self) -> None:
        self._partial = b""
        self.latest: int | None = None
        self.reports = 0

    def feed(self, data: bytes) -> int | None:
        """Consume ``data``; returns the newest complete report in it (None when ``data``
        completed none). Raises HAProtocolError for a negative offset."""
        if self._partial:
            data = self._partial + data
        n = len(data) - len(data) % REPORT_SIZE
        self._partial = bytes(data[n:])
        if n == 0:
            return None
        value: int = _REPORT.unpack_from(data, n - REPORT_SIZE)[0]
        if value < 0:
            raise HAProtocolError(f"negative offset report {value}")
        self.reports += n // REPORT_SIZE
        self.latest = value
        return value


class TransferDecoder:
    """The slave's side: ``feed(data)`` yields ``(phy_offset, body)`` per complete transfer
    (``body`` a memoryview, empty for a heartbeat, valid until the next ``feed``).

    A transfer split across reads is kept in one bytearray of at most
    ``header + max_body`` bytes; a complete transfer inside one read is yielded
    as a view of that read without a copy.

    Args:
        max_body: the largest size accepted (default :data:`MAX_TRANSFER_BODY`); a larger one
            raises HAProtocolError before any of its bytes are buffered.
        with_confirm: the controller-mode headers (:data:`CONFIRM_HEADER_SIZE` bytes; default
            False: the 4.x ones); ``confirm`` then holds the confirm offset of the transfer
            just yielded (-1 before the first).
    """

    __slots__ = ("_buf", "max_body", "transfers", "bytes", "header_size", "confirm", "_struct")

    def __init__(self, max_body: int = MAX_TRANSFER_BODY, with_confirm: bool = False) -> None:
        self._buf = bytearray()
        self.max_body = max_body
        self.transfers = 0
        self.bytes = 0
        self.header_size = CONFIRM_HEADER_SIZE if with_confirm else TRANSFER_HEADER_SIZE
        self._struct = _CONFIRM_HEADER if with_confirm else _HEADER
        self.confirm = -1

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete transfer held now."""
        return len(self._buf)

    def _header(self, view: memoryview | bytearray, at: int) -> tuple[int, int, int]:
        fields = self._struct.unpack_from(view, at)
        offset, size = fields[0], fields[1]
        confirm = fields[2] if len(fields) > 2 else -1
        if offset < 0:
            raise HAProtocolError(f"negative transfer offset {offset}")
        if size < 0 or size > self.max_body:
            raise HAProtocolError(f"transfer size {size} outside 0..{self.max_body}")
        if len(fields) > 2 and confirm < 0:
            raise HAProtocolError(f"negative confirm offset {confirm}")
        return offset, size, confirm

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[tuple[int, memoryview]]:
        view = memoryview(data)
        buf = self._buf
        hs = self.header_size
        if buf:
            # Complete the pending transfer first (copying only what it still needs).
            if len(buf) < hs:
                need = hs - len(buf)
                buf += view[:need]
                view = view[need:]
                if len(buf) < hs:
                    return
            offset, size, confirm = self._header(buf, 0)
            need = hs + size - len(buf)
            buf += view[:need]
            view = view[need:]
            if len(buf) < hs + size:
                return
            self._buf = bytearray()
            self.transfers += 1
            self.bytes += size
            self.confirm = confirm
            yield offset, memoryview(buf)[hs:]
        at = 0
        end = len(view)
        while end - at >= hs:
            offset, size, confirm = self._header(view, at)
            if end - at - hs < size:
                break
            start = at + hs
            at = start + size
            self.transfers += 1
            self.bytes += size
            self.confirm = confirm
            yield offset, view[start:at]
        if at < end:
            rest = view[at:]
            if len(rest) >= hs:
                self._header(rest, 0)  # refuse an oversized transfer before buffering it
            self._buf = bytearray(rest)
