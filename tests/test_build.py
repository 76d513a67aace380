import zlib

import rmq
import rmq._store


def test_extension_is_compiled():
    assert rmq._store.__file__.endswith(".so")


def test_body_crc_matches_java():
    body = b"Hello RocketMQ 0"
    assert rmq._store.body_crc(body) == zlib.crc32(body) & 0x7FFFFFFF
    assert rmq.__version__
