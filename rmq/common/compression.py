"""Message body compression: zlib, LZ4 and Zstandard, chosen by the sysFlag's type bits.

RocketMQ 5 (Java ``MessageSysFlag``, ``CompressionType``, ``CompressorFactory``) keeps the
codec of a COMPRESSED_FLAG body in bits 8..10 of the sysFlag::

    COMPRESSED_FLAG 0x1 | type << 8     type: 1 LZ4, 2 ZSTD, 3 ZLIB, 0 = ZLIB (4.x wrote no type)

The formats are those of Java's compressors, so bodies pass both ways:

- ZLIB (``ZlibCompressor``): a zlib stream from ``Deflater(level)`` — ``zlib.compress``.
- LZ4 (``Lz4Compressor``): lz4-java's ``LZ4FrameOutputStream`` defaults — one LZ4 *frame*,
  independent 4 MiB blocks, no content size, no checksums, fast compressor (no level).
- ZSTD (``ZstdCompressor``): zstd-jni's ``ZstdOutputStream(level)`` — one zstd frame written as
  a stream (write, flush, close: no content size, no checksum).

LZ4 and ZSTD need the optional ``compression`` extra (``pip install 'rmq[compression]'``:
``lz4``, and ``backports.zstd`` before Python 3.14, whose stdlib has ``compression.zstd``); they
are imported on first use, and a missing one is a clear error naming the extra. The broker never
looks inside bodies: it stores them as sent.
"""

from __future__ import annotations

import enum
import importlib
import sys
import zlib
from types import ModuleType
from typing import Any

__all__ = [
    "CompressionType",
    "CompressionUnavailable",
    "COMPRESSED_FLAG",
    "COMPRESSION_TYPE_MASK",
    "compress",
    "decompress",
    "compression_type_of",
    "check_available",
]

COMPRESSED_FLAG = 0x1
COMPRESSION_TYPE_MASK = 0x7 << 8
"""The sysFlag bits naming the codec (Java ``COMPRESSION_TYPE_COMPARATOR``)."""


class CompressionType(enum.IntEnum):
    """A body codec and its sysFlag value (Java ``CompressionType``)."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def flag(self) -> int:
        """The sysFlag bits of this type (Java ``getCompressionFlag``): ``value << 8``."""
        return int(self.value) << 8

    @classmethod
    def of(cls, name: str) -> CompressionType:
        """``"zlib"`` / ``"lz4"`` / ``"zstd"``, any case (Java ``CompressionType.of``).

        Raises:
            ValueError: another name.
        """
        try:
            return cls[str(name).strip().upper()]
        except KeyError:
            raise ValueError(f"unsupported compress type name: {name!r}") from None


def compression_type_of(sys_flag: int) -> CompressionType:
    """The codec of a COMPRESSED_FLAG body (Java ``MessageSysFlag.getCompressionType``); no
    type bits means ZLIB, as every 4.x producer wrote.

    Raises:
        ValueError: type bits 4..7, which no RocketMQ version defines.
    """
    value = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if value == 0:
        return CompressionType.ZLIB
    try:
        return CompressionType(value)
    except ValueError:
        raise ValueError(f"names an unknown compression type {value} (sysFlag {sys_flag:#x})") from None


class CompressionUnavailable(ImportError):
    """The library of a compression type is not installed (the ``compression`` extra)."""


_EXTRA_HINT = "install the compression extra: pip install 'rmq[compression]'"


def _lz4() -> ModuleType:
    try:
        return importlib.import_module("lz4.frame")
    except ImportError:
        raise CompressionUnavailable(f"LZ4 needs the lz4 package; {_EXTRA_HINT}") from None


def _zstd() -> ModuleType:
    name = "compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd"
    try:
        return importlib.import_module(name)
    except ImportError:
        raise CompressionUnavailable(f"Zstandard needs {name}; {_EXTRA_HINT}") from None


def check_available(ctype: CompressionType) -> None:
    """Raise :class:`CompressionUnavailable` when ``ctype``'s library is missing."""
    if ctype is CompressionType.LZ4:
        _lz4()
    elif ctype is CompressionType.ZSTD:
        _zstd()


def compress(body: bytes, ctype: CompressionType = CompressionType.ZLIB, level: int = 5) -> bytes:
    """``body`` in ``ctype``'s format as Java 5's compressor of that type writes it.

    ``level``: zlib 0..9 (Java's default 5); zstd's levels (5 too, Java passes the producer's
    ``compressLevel`` to ``ZstdOutputStream``); LZ4 has none (lz4-java's fast compressor).

    Raises:
        CompressionUnavailable: LZ4 or ZSTD without its library.
    """
    if ctype is CompressionType.ZLIB:
        return zlib.compress(body, level)
    if ctype is CompressionType.LZ4:
        frame: Any = _lz4()
        # lz4-java LZ4FrameOutputStream(out): BLOCKSIZE.SIZE_4MB, FLG BLOCK_INDEPENDENCE only.
        # The streaming calls, not lz4.frame.compress: that one shrinks the block size of a
        # small input to fit it (LZ4F_compressFrame), and lz4-java always writes 4 MiB.
        c = frame.LZ4FrameCompressor(
            block_size=frame.BLOCKSIZE_MAX4MB,
            block_linked=False,
            compression_level=0,
            content_checksum=False,
            block_checksum=False,
        )
        out: bytes = c.begin() + c.compress(body) + c.flush()
        return out
    zstd: Any = _zstd()
    # zstd-jni ZstdOutputStream: write (continue), flush (a block), close (ends the frame)
    c = zstd.ZstdCompressor(level=level)
    data: bytes = c.compress(body, c.CONTINUE) + c.flush(c.FLUSH_BLOCK) + c.flush(c.FLUSH_FRAME)
    return data


def decompress(data: bytes | memoryview, sys_flag: int, limit: int) -> bytes:
    """Decompress a COMPRESSED_FLAG body by ``sys_flag``'s type bits into at most ``limit``
    bytes (a small body must not make a consumer allocate without bound).

    Raises:
        ValueError: the body does not decompress, is incomplete, inflates past ``limit``, or
            names an unknown type; the text continues "the body of ..." (``inflate_body``).
        CompressionUnavailable: an ImportError: the type's library is missing.
    """
    ctype = compression_type_of(sys_flag)
    if ctype is CompressionType.ZLIB:
        d: Any = zlib.decompressobj()
        errors: tuple[type[BaseException], ...] = (zlib.error,)
        name = "zlib"
    elif ctype is CompressionType.LZ4:
        d = _lz4().LZ4FrameDecompressor()
        errors = (RuntimeError, ValueError)
        name = "LZ4"
    else:
        zstd: Any = _zstd()
        d = zstd.ZstdDecompressor()
        errors = (zstd.ZstdError, ValueError)
        name = "zstd"
    try:
        out: bytes = d.decompress(data, limit + 1) if name == "zlib" else d.decompress(data, max_length=limit + 1)
    except errors as e:
        raise ValueError(f"does not inflate ({name}): {e}") from None
    if len(out) > limit:
        raise ValueError(f"inflates past the limit of {limit} bytes ({name})")
    if not d.eof:
        raise ValueError(f"does not inflate ({name}): incomplete or truncated stream")
    return out
