"""The requests a broker (or an admin tool through it) sends to a consumer, over the consumer's
own connection, against a real in-process broker: each is read through its typed header."""

from __future__ import annotations

import logging

from sdk_support import create_topic, wait_until

import rmq
from rmq.protocol.body.conns import ConsumerRunningInfo, GetConsumerStatusBody, ResetOffsetBody
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.client import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
)
from rmq.protocol.headers.consumer import ResetOffsetRequestHeader

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_broker_to_client_requests_use_typed_headers(cluster, namesrv_addr, unique, caplog):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        await p.send(rmq.Message(topic, b"once"))
    got = []

    async def handler(msg):
        got.append(msg.body)

    c = rmq.PushConsumer(namesrv_addr, cg, handler=handler, consume_from_where=FIRST)
    c.subscribe(topic, "*")
    async with c:
        await wait_until(lambda: got == [b"once"], what="the message consumed")
        await wait_until(
            lambda: broker.consumer_manager.get_consumer_group_info(cg) is not None, what="the consumer registered"
        )
        conn = next(iter(broker.consumer_manager.get_consumer_group_info(cg).channels))

        async def ask(code, header):
            return await conn.invoke(RemotingCommand.request(code, header), timeout=10)

        r = await ask(
            RequestCode.GET_CONSUMER_RUNNING_INFO, GetConsumerRunningInfoRequestHeader(consumer_group=cg, client_id="x")
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        running = ConsumerRunningInfo.decode(r.body_bytes())  # Java's shape: fastjson object keys
        assert topic in [s.topic for s in running.subscription_set]
        assert rmq.MessageQueue(topic, broker.broker_config.broker_name, 0) in running.mq_table
        assert running.properties["PROP_CONSUMEORDERLY"] == "false" and running.properties["consumerGroup"] == cg

        r = await ask(
            RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, GetConsumerStatusRequestHeader(topic=topic, group=cg)
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        table = GetConsumerStatusBody.decode(r.body_bytes()).message_queue_table
        assert list(table) == [rmq.MessageQueue(topic, broker.broker_config.broker_name, 0)]
        r = await ask(
            RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, GetConsumerStatusRequestHeader(topic=topic, group="nope")
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and "not online" in r.remark
        # a required field missing: refused with the header's own words, not guessed
        r = await conn.invoke(
            RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"group": cg}), timeout=10
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and "'topic'" in r.remark, r.remark
        r = await conn.invoke(RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {"msgId": "x"}), timeout=10)
        assert r.code == ResponseCode.SYSTEM_ERROR and "'consumerGroup'" in r.remark, r.remark
        r = await ask(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, ConsumeMessageDirectlyResultRequestHeader(consumer_group=cg)
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and "no message" in r.remark, r.remark

        # reset the queue to 0: the message is consumed again
        body = ResetOffsetBody({rmq.MessageQueue(topic, broker.broker_config.broker_name, 0): 0}).encode()
        r = await conn.invoke(
            RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                ResetOffsetRequestHeader(topic=topic, group=cg, timestamp=0),
                body,
            ),
            timeout=10,
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        await wait_until(lambda: got == [b"once", b"once"], what="the message consumed again after the reset")

        with caplog.at_level(logging.INFO, logger="rmq.client"):
            caplog.clear()
            conn.invoke_oneway(
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, NotifyConsumerIdsChangedRequestHeader(consumer_group=cg)
                )
            )
            await wait_until(
                lambda: any(f"members of {cg} changed" in r.getMessage() for r in caplog.records),
                what="the notification read",
            )
