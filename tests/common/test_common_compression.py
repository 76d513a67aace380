"""Body codecs against Java 5's compressors: the bytes lz4-java, zstd-jni and java.util.zip
wrote for RocketMQ 5.3.3's Lz4Compressor / ZstdCompressor / ZlibCompressor calls
(tests/golden/compression/java5-compressors.json says how they were made)."""

from __future__ import annotations

import json
import pathlib
import struct
import sys
import zlib

import lz4.block
import pytest

import rmq
from rmq.common import compression
from rmq.common.compression import CompressionType, compress, compression_type_of, decompress
from rmq.common.message import MessageSysFlag, RecordDecodeError, inflate_body

GOLDEN = json.loads(
    (pathlib.Path(__file__).parents[1] / "golden" / "compression" / "java5-compressors.json").read_text()
)
SOURCE = b"".join(b"rmq message %05d;" % i for i in range(300))
TYPES = [CompressionType.LZ4, CompressionType.ZSTD, CompressionType.ZLIB]


def test_the_sysflag_bits_are_java_5s():
    # Java MessageSysFlag: COMPRESSION_LZ4_TYPE 0x1 << 8, ZSTD 0x2 << 8, ZLIB 0x3 << 8, mask 0x7 << 8
    assert [t.flag for t in TYPES] == [0x100, 0x200, 0x300]
    assert [MessageSysFlag.COMPRESSION_LZ4_TYPE, MessageSysFlag.COMPRESSION_ZSTD_TYPE] == [0x100, 0x200]
    assert MessageSysFlag.COMPRESSION_ZLIB_TYPE == 0x300 and MessageSysFlag.COMPRESSION_TYPE_COMPARATOR == 0x700
    # a 4.x producer wrote COMPRESSED_FLAG alone: zlib (Java CompressionType.findByValue(0))
    assert compression_type_of(0x1) is CompressionType.ZLIB
    assert compression_type_of(0x1 | 0x200 | 0x10) is CompressionType.ZSTD
    with pytest.raises(ValueError, match="unknown compression type 5"):
        compression_type_of(0x501)
    assert CompressionType.of(" Lz4 ") is CompressionType.LZ4 and rmq.CompressionType is CompressionType
    with pytest.raises(ValueError, match="unsupported compress type name: 'snappy'"):
        CompressionType.of("snappy")


@pytest.mark.parametrize("ctype", TYPES, ids=lambda t: t.name)
def test_our_bodies_are_the_bytes_java_5_writes(ctype):
    java = bytes.fromhex(GOLDEN[ctype.name.lower()])
    assert compress(SOURCE, ctype, 5) == java
    assert decompress(java, 0x1 | ctype.flag, len(SOURCE)) == SOURCE


def test_the_lz4_frame_is_lz4_javas_default_one():
    """LZ4FrameOutputStream(out): magic, FLG 0x60 (version 1, independent blocks, no checksums,
    no content size), BD 0x70 (4 MiB blocks), header checksum; blocks; a zero end mark."""
    body = compress(SOURCE, CompressionType.LZ4)
    assert body[:4] == struct.pack("<I", 0x184D2204) and body[4:6] == b"\x60\x70"
    pos, out = 7, b""
    while True:
        (size,) = struct.unpack_from("<I", body, pos)
        pos += 4
        if size == 0:
            break
        block = body[pos : pos + (size & 0x7FFFFFFF)]
        pos += size & 0x7FFFFFFF
        out += block if size & 0x80000000 else lz4.block.decompress(block, uncompressed_size=4 << 20)
    assert pos == len(body) and out == SOURCE
    # an incompressible body is stored in a raw block, as lz4-java does
    raw = bytes(range(100))
    assert compress(raw, CompressionType.LZ4)[7:11] == struct.pack("<I", 0x80000000 | 100)


@pytest.mark.parametrize("ctype", TYPES, ids=lambda t: t.name)
def test_decompression_is_bounded_and_checked(ctype):
    body = compress(SOURCE, ctype)
    flag = 0x1 | ctype.flag
    with pytest.raises(RecordDecodeError, match=r"body of T@3 inflates past the limit of 5399 bytes"):
        inflate_body(body, len(SOURCE) - 1, what="body of T@3", sys_flag=flag)
    with pytest.raises(RecordDecodeError, match=r"body of T@3 does not inflate"):
        inflate_body(body[:-5], len(SOURCE), what="body of T@3", sys_flag=flag)
    with pytest.raises(RecordDecodeError, match=r"does not inflate"):
        inflate_body(b"not compressed at all", len(SOURCE), what="body", sys_flag=flag)
    assert inflate_body(body, len(SOURCE), sys_flag=flag) == SOURCE


def test_a_4x_zlib_body_still_inflates():
    assert inflate_body(zlib.compress(SOURCE), sys_flag=MessageSysFlag.COMPRESSED_FLAG) == SOURCE
    assert inflate_body(zlib.compress(SOURCE)) == SOURCE  # no sys_flag: zlib, as before


def test_a_missing_codec_library_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lz4.frame", None)  # what `import lz4.frame` meets without lz4
    zstd_module = "compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd"
    monkeypatch.setitem(sys.modules, zstd_module, None)
    for ctype in (CompressionType.LZ4, CompressionType.ZSTD):
        with pytest.raises(compression.CompressionUnavailable, match=r"pip install 'rmq\[compression\]'"):
            compress(SOURCE, ctype)
        with pytest.raises(RecordDecodeError, match=r"body of T@0 cannot be read: .*rmq\[compression\]"):
            inflate_body(b"x", what="body of T@0", sys_flag=0x1 | ctype.flag)
        with pytest.raises(rmq.ConfigError, match=r"compress_type.*rmq\[compression\]"):
            rmq.Producer("127.0.0.1:9876", "PG", compress_type=ctype.name.lower())
    # zlib needs nothing more
    assert decompress(compress(SOURCE), 0x301, len(SOURCE)) == SOURCE


def test_producer_compression_arguments_are_checked():
    with pytest.raises(rmq.ConfigError, match="compress_type"):
        rmq.Producer("127.0.0.1:9876", "PG", compress_type="snappy")
    with pytest.raises(rmq.ConfigError, match="compress_level"):
        rmq.Producer("127.0.0.1:9876", "PG", compress_level=10)  # zlib: 0..9
    rmq.Producer("127.0.0.1:9876", "PG", compress_type="zstd", compress_level=19)  # zstd: 1..22
    with pytest.raises(rmq.ConfigError, match="compress_level"):
        rmq.Producer("127.0.0.1:9876", "PG", compress_type=CompressionType.ZSTD, compress_level=23)
