"""Helpers of the broker's protocol tests (imported by tests/broker/*).

Every test talks to a real broker (and name server) on 127.0.0.1 ephemeral ports over TCP. The
environment itself is ``rmq._testing.BrokerEnv`` (``Env`` is its old name here).
"""

import struct
from dataclasses import dataclass

from rmq._testing import BrokerEnv, decode_props, encode_props

Env = BrokerEnv

__all__ = ["Env", "Record", "decode_props", "decode_records", "encode_batch", "encode_props"]


def encode_batch(items):
    """A SEND_BATCH_MESSAGE body (Java MessageDecoder.encodeMessages): per item
    TOTALSIZE|MAGIC|BODYCRC|FLAG|BODYLEN|body|PROPLEN|props."""
    out = b""
    for body, props in items:
        p = encode_props(props).encode()
        out += struct.pack(">iiiii", 20 + len(body) + 2 + len(p), 0, 0, 0, len(body)) + body
        out += struct.pack(">h", len(p)) + p
    return out


@dataclass
class Record:
    queue_id: int
    flag: int
    queue_offset: int
    phy_offset: int
    sys_flag: int
    born_timestamp: int
    store_timestamp: int
    store_host: str
    reconsume_times: int
    body: bytes
    topic: str
    properties: dict

    @property
    def offset_msg_id(self) -> str:
        ip, port = self.store_host.rsplit(":", 1)
        return (bytes(int(x) for x in ip.split(".")) + struct.pack(">iq", int(port), self.phy_offset)).hex().upper()


def decode_records(data: bytes) -> list[Record]:
    """Walk v1 CommitLog records back to back, as a PULL_MESSAGE body carries them (the layout of
    Java MessageDecoder.decode, written out independently of rmq's decoders to check them)."""
    out, pos = [], 0
    while pos < len(data):
        total, magic, _crc, qid, flag, qoff, phy, sysflag, born = struct.unpack_from(">iiiiiqqiq", data, pos)
        assert magic == -626843481, hex(magic & 0xFFFFFFFF)  # 0xDAA320A7
        p = pos + 48
        p += 8  # born host
        (store_ts,) = struct.unpack_from(">q", data, p)
        p += 8
        sip = ".".join(str(b) for b in data[p : p + 4])
        (sport,) = struct.unpack_from(">i", data, p + 4)
        p += 8
        recon, _prep, blen = struct.unpack_from(">iqi", data, p)
        p += 16
        body = data[p : p + blen]
        p += blen
        tlen = data[p]
        topic = data[p + 1 : p + 1 + tlen].decode()
        p += 1 + tlen
        (plen,) = struct.unpack_from(">h", data, p)
        props = decode_props(data[p + 2 : p + 2 + plen].decode())
        p += 2 + plen
        assert p - pos == total, (p - pos, total)
        out.append(Record(qid, flag, qoff, phy, sysflag, born, store_ts, f"{sip}:{sport}", recon, body, topic, props))
        pos += total
    return out
