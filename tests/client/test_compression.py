"""Compressed bodies over TCP: each RocketMQ 5 type through a real broker to both consumers and
the admin view; the broker keeps the bytes as sent; a 4.x-shaped zlib message still decodes."""

from __future__ import annotations

import asyncio
import time
import zlib

import pytest
from sdk_support import create_topic, drain

import rmq
from rmq.common.compression import CompressionType, compress
from rmq.common.message import MessageSysFlag
from rmq.protocol.codes import ResponseCode
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.protocol.requests.message import send_message
from rmq.remoting import RemotingClient

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
BODY = b"".join(b"compressible line %06d\n" % i for i in range(1000))  # 25 KB > compress_over


@pytest.mark.parametrize("name", ["zlib", "lz4", "zstd"])
async def test_each_type_round_trips_through_the_broker(cluster, namesrv_addr, unique, name):
    _ns, broker = cluster
    ctype = CompressionType.of(name)
    topic = unique("CT")
    await create_topic(broker.broker_addr, topic, queues=2)
    async with rmq.Producer(namesrv_addr, unique("PG"), compress_type=name, compress_level=3) as p:
        big = await p.send(rmq.Message(topic, BODY, tags="big"))
        small = await p.send(rmq.Message(topic, b"small body", tags="small"))

    # the pull consumer (the shared decode): the body as sent, the sysFlag as Java 5 sets it
    msgs = {m.tags: m for m in await drain(namesrv_addr, topic, 2, group=unique("DRAIN"))}
    assert msgs["big"].body == BODY and msgs["small"].body == b"small body"
    assert msgs["big"].sys_flag & (MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_TYPE_COMPARATOR) == (
        MessageSysFlag.COMPRESSED_FLAG | ctype.flag
    )
    assert msgs["small"].sys_flag & (MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_TYPE_COMPARATOR) == 0
    # the broker stored the compressed bytes as sent: its body CRC is that of our compressed body
    assert msgs["big"].body_crc == zlib.crc32(compress(BODY, ctype, 3)) & 0x7FFFFFFF

    # the push consumer
    got: asyncio.Queue[rmq.MessageExt] = asyncio.Queue()
    c = rmq.PushConsumer(namesrv_addr, unique("CG"), handler=got.put, consume_from_where=FIRST)
    c.subscribe(topic, "big")
    async with c:
        pushed = await asyncio.wait_for(got.get(), 30)
    assert pushed.body == BODY and pushed.msg_id == big.msg_id

    # the admin view (mqadmin queryMsgById; the console's message view uses the same call)
    async with rmq.Admin(namesrv_addr) as admin:
        viewed = await admin.view_message(big.offset_msg_id)
    assert viewed is not None and viewed.body == BODY
    assert small.status is rmq.SendStatus.SEND_OK


async def test_a_4x_shaped_zlib_message_still_decodes(cluster, namesrv_addr, unique):
    """Java 4.x producers set COMPRESSED_FLAG alone (no type bits): zlib."""
    _ns, broker = cluster
    topic = unique("OLD")
    await create_topic(broker.broker_addr, topic, queues=1)
    header = SendMessageRequestHeader(
        producer_group="PG4",
        topic=topic,
        queue_id=0,
        sys_flag=MessageSysFlag.COMPRESSED_FLAG,
        born_timestamp=int(time.time() * 1000),
        properties="TAGS\x01old\x02WAIT\x01true\x02",
    )
    async with RemotingClient() as rc:
        resp = await rc.invoke(broker.broker_addr, send_message(header, zlib.compress(BODY, 5)), timeout=5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [msg] = await drain(namesrv_addr, topic, 1, group=unique("DRAIN"))
    assert msg.body == BODY and msg.sys_flag & 0x701 == 0x1 and msg.tags == "old"


async def test_a_redelivered_lz4_message_keeps_its_codec(cluster, namesrv_addr, unique):
    """The broker's send-back copies body and sysFlag: the retry decodes with the same codec."""
    _ns, broker = cluster
    topic = unique("RT")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.Producer(namesrv_addr, unique("PG"), compress_type="lz4") as p:
        sent = await p.send(rmq.Message(topic, BODY))
    deliveries: asyncio.Queue[rmq.MessageExt] = asyncio.Queue()

    async def handler(msg: rmq.MessageExt) -> None:
        await deliveries.put(msg)
        if msg.reconsume_times == 0:
            raise RuntimeError("consume later")

    c = rmq.PushConsumer(
        namesrv_addr, unique("CG"), handler=handler, consume_from_where=FIRST, delay_level_when_next_consume=1
    )
    c.subscribe(topic)
    async with c:
        first = await asyncio.wait_for(deliveries.get(), 30)
        again = await asyncio.wait_for(deliveries.get(), 60)
    assert first.body == again.body == BODY and again.reconsume_times == 1 and again.msg_id == sent.msg_id
    assert again.sys_flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR == MessageSysFlag.COMPRESSION_LZ4_TYPE
