"""Restart on the same store: topics, groups, offsets and messages all survive."""

import json

from broker_support import Env, decode_records

from rmq._testing import free_broker_port, run_standalone
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient


async def test_restart_keeps_topics_offsets_and_messages(tmp_path):
    store = tmp_path / "store"
    client = RemotingClient()
    try:
        # a fixed port from the start: the restart binds it again with its HA and VIP neighbours
        port = free_broker_port()
        async with run_standalone(store, listen_port=port) as (ns, broker):
            env = Env(ns, broker, client)
            await env.create_topic("Keep", 2)
            ids = [(await env.send("Keep", f"m{i}".encode(), queue_id=1)).ext_fields["msgId"] for i in range(5)]
            await env.call(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "KG", "topic": "Keep", "queueId": 1, "commitOffset": "3"},
            )
            body = json.dumps({"groupName": "KeepGroup", "retryMaxTimes": 3}).encode()
            await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        assert not (store / "abort").exists()

        async with run_standalone(store, listen_port=port) as (ns, broker):
            env = Env(ns, broker, client)
            tc = broker.topic_config_manager.select_topic_config("Keep")
            assert tc is not None and tc.write_queue_nums == 2
            assert broker.subscription_group_manager.subscription_group_table["KeepGroup"].retry_max_times == 3
            resp = await env.call(
                RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "KG", "topic": "Keep", "queueId": 1}
            )
            assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "3"
            recs = decode_records((await env.pull("Keep", queue_id=1)).body_bytes())
            assert [r.body for r in recs] == [f"m{i}".encode() for i in range(5)]
            assert [r.offset_msg_id for r in recs] == ids
            # and the name server routes it again
            r = await env.ns_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Keep"})
            assert r.code == ResponseCode.SUCCESS
            resp = await env.send("Keep", b"m5", queue_id=1)
            assert resp.ext_fields["queueOffset"] == "5"
    finally:
        await client.close()
