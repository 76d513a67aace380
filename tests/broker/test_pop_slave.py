"""POP against a slave: Java 5 clients send POP, ACK and CHANGE_INVISIBLE to the master only
(``PullAPIWrapper.popAsync`` asks for ``MixAll.MASTER_ID``) and a slave runs no revive service,
so rmq's slave refuses them at once (SERVICE_NOT_AVAILABLE, naming the master) instead of an
empty POLLING_TIMEOUT; NOTIFICATION only reads and a slave answers it. The master serves all."""

import json
import time

import pytest

from rmq._testing import run_broker, run_namesrv, wait_until
from rmq._testing.env import BrokerEnv
from rmq.broker.pop import SLAVE_POP_REMARK
from rmq.client._codec import decode_messages
from rmq.common.message import MessageConst
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers.pop import NotificationRequestHeader, PopMessageRequestHeader
from rmq.protocol.requests import pop as wire
from rmq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(120)
GROUP = "SlavePopG"


def _pop_request(topic):
    return wire.pop_message(
        PopMessageRequestHeader(
            consumer_group=GROUP,
            topic=topic,
            queue_id=-1,
            max_msg_nums=32,
            invisible_time=60_000,
            poll_time=0,
            born_time=int(time.time() * 1000),
            init_mode=0,
        )
    )


async def test_pop_ack_and_change_invisible_on_a_slave_are_refused_the_master_serves(tmp_path):
    async with run_namesrv() as ns, run_broker(tmp_path / "m", ns) as master:
        client = RemotingClient()
        try:
            env = BrokerEnv(ns, master, client)
            await env.create_topic("SP", 1)
            body = json.dumps({"groupName": GROUP}).encode()
            assert (await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)).code == 0
            for i in range(3):
                await env.send("SP", f"s{i}".encode(), queue_id=0)
            async with run_broker(
                tmp_path / "s", ns, broker_id=1, broker_role="SLAVE", slave_sync_interval_ms=200
            ) as slave:
                await wait_until(
                    lambda: (
                        slave.message_store.get_max_offset_in_queue("SP", 0) == 3
                        and slave.topic_config_manager.select_topic_config("SP") is not None
                    ),
                    what="the messages and the topic on the slave",
                )
                saddr = slave.broker_addr
                resp = await client.invoke(saddr, _pop_request("SP"), timeout=10)
                assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE and resp.remark == SLAVE_POP_REMARK
                # the master serves the POP; the slave refuses the ack and the invisible-time change
                reply = wire.parse_pop(await client.invoke(env.addr, _pop_request("SP"), timeout=10))
                msgs = decode_messages(reply.body)
                assert [m.body for m in msgs] == [b"s0", b"s1", b"s2"]
                for m in msgs:  # the handles as the SDK builds them (Java processPopResponse)
                    m.properties[MessageConst.POP_CK] = reply.handle(
                        m.topic, m.queue_id, m.queue_offset, master.broker_config.broker_name
                    )
                ck = msgs[0].properties[MessageConst.POP_CK]
                resp = await client.invoke(saddr, wire.ack_message(GROUP, "SP", ck), timeout=10)
                assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
                resp = await client.invoke(saddr, wire.change_invisible_time(GROUP, "SP", ck, 1000), timeout=10)
                assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
                for m in msgs:
                    resp = await client.invoke(
                        env.addr, wire.ack_message(GROUP, "SP", m.properties[MessageConst.POP_CK]), timeout=10
                    )
                    assert resp.code == ResponseCode.SUCCESS
                # NOTIFICATION reads only: the slave answers it (its copy has the messages)
                n = NotificationRequestHeader(
                    consumer_group=GROUP, topic="SP", queue_id=0, poll_time=0, born_time=int(time.time() * 1000)
                )
                resp = await client.invoke(saddr, wire.notification(n), timeout=10)
                assert resp.code == ResponseCode.SUCCESS
        finally:
            await client.close()
