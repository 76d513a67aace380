"""Wire helpers for the broker's protocol tests (imported by tests/broker/*).

Every test talks to a real broker (and name server) on 127.0.0.1 ephemeral ports over TCP.
"""
import asyncio
import struct
import time
from dataclasses import dataclass

from rmq.remoting.client import RemotingClient
from rmq.remoting.codes import RequestCode
from rmq.remoting.command import RemotingCommand


@dataclass
class Env:
    ns: object
    broker: object
    client: RemotingClient

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    async def call(self, code, ext=None, body=None, timeout=5.0):
        return await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), timeout=timeout)

    async def ns_call(self, code, ext=None, body=None):
        return await self.client.invoke(self.ns.address, RemotingCommand.request(code, ext, body), timeout=5.0)

    async def create_topic(self, topic, queues=4, perm=6):
        return await self.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
            "perm": perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})

    async def send(self, topic, body=b"hello", queue_id=0, tags="TagA", keys=None, extra_props=None, code=None,
                   batch=False):
        props = {"TAGS": tags} if tags else {}
        if keys:
            props["KEYS"] = keys
        props.update(extra_props or {})
        props["WAIT"] = "true"
        ext = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
               "queueId": queue_id, "sysFlag": 0, "bornTimestamp": str(int(time.time() * 1000)), "flag": 0,
               "properties": encode_props(props), "reconsumeTimes": "0", "unitMode": "0",
               "batch": "1" if batch else "0"}
        resp = await self.call(code or RequestCode.SEND_MESSAGE, ext, body)
        await self.dispatched()
        return resp

    async def dispatched(self, timeout=5.0):
        """Wait until the store's reput service has dispatched everything appended so far
        (a pull sent right after a send may otherwise race the asynchronous dispatch)."""
        store = self.broker.message_store
        deadline = time.monotonic() + timeout
        while store.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.002)

    async def pull(self, topic, queue_id=0, offset=0, group="CG", sys_flag=4, suspend_ms=15000, subscription="*",
                   max_nums=32, commit_offset=0, timeout=20.0):
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": str(offset),
               "maxMsgNums": max_nums, "sysFlag": sys_flag, "commitOffset": str(commit_offset),
               "suspendTimeoutMillis": str(suspend_ms), "subscription": subscription, "subVersion": "0"}
        return await self.call(RequestCode.PULL_MESSAGE, ext, timeout=timeout)


def encode_props(props: dict) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def decode_props(s: str) -> dict:
    out = {}
    for item in s.split("\x02"):
        if item:
            k, _, v = item.partition("\x01")
            out[k] = v
    return out


def encode_batch(items):
    """§5.2 batch blob: TOTALSIZE|MAGIC|BODYCRC|FLAG|BODYLEN|body|PROPLEN|props per item."""
    out = b""
    for body, props in items:
        p = encode_props(props).encode()
        out += struct.pack(">iiiii", 20 + len(body) + 2 + len(p), 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
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
    """Walk v1 CommitLog records back to back (wire-contract §9)."""
    out, pos = [], 0
    while pos < len(data):
        total, magic, _crc, qid, flag, qoff, phy, sysflag, born = struct.unpack_from(">iiiiiqqiq", data, pos)
        assert magic == -626843481, hex(magic & 0xFFFFFFFF)  # 0xDAA320A7
        p = pos + 48
        p += 8  # born host
        (store_ts,) = struct.unpack_from(">q", data, p)
        p += 8
        sip = ".".join(str(b) for b in data[p:p + 4])
        (sport,) = struct.unpack_from(">i", data, p + 4)
        p += 8
        recon, _prep, blen = struct.unpack_from(">iqi", data, p)
        p += 16
        body = data[p:p + blen]
        p += blen
        tlen = data[p]
        topic = data[p + 1:p + 1 + tlen].decode()
        p += 1 + tlen
        (plen,) = struct.unpack_from(">h", data, p)
        props = decode_props(data[p + 2:p + 2 + plen].decode())
        p += 2 + plen
        assert p - pos == total, (p - pos, total)
        out.append(Record(qid, flag, qoff, phy, sysflag, born, store_ts, f"{sip}:{sport}", recon, body, topic, props))
        pos += total
    return out
