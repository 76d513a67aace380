# cython: language_level=3
"""rmq._store: the byte-level hot paths of rmq (grown by the store work)."""
from zlib import crc32 as _zlib_crc32


def body_crc(body) -> int:
    """CRC32 of a message body as Java stores it (``crc32 & 0x7FFFFFFF``)."""
    return _zlib_crc32(body) & 0x7FFFFFFF
