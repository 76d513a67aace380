"""The client-id index the reply processor finds requesters by (Java ProducerManager.findChannel):
one entry per connection whatever ids its heartbeats carry, gone with the connection."""

from __future__ import annotations

import json

from rmq._testing import run_standalone, wait_until
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

HEART_BEAT = 34


def _heartbeat(client_id: str, *, consumer: bool) -> RemotingCommand:
    body: dict[str, object] = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": []}
    if consumer:
        body["consumerDataSet"] = [
            {
                "groupName": "IdxCG",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [],
            }
        ]
    else:
        body["producerDataSet"] = [{"groupName": "IdxPG"}]
    return RemotingCommand.request(HEART_BEAT, {}, json.dumps(body).encode())


async def test_changing_client_ids_on_one_connection_leave_one_entry(tmp_path):
    async with run_standalone(tmp_path / "store") as (_, broker):
        pm, cm = broker.producer_manager, broker.consumer_manager
        client = RemotingClient()
        try:
            for i in range(50):
                for consumer in (False, True):
                    resp = await client.invoke(broker.broker_addr, _heartbeat(f"10.0.0.1@{i}#x", consumer=consumer))
                    assert resp.code == 0, resp.remark
            assert pm.clients.ids() == ["10.0.0.1@49#x"]
            assert cm.clients.ids() == ["10.0.0.1@49#x"]
            assert pm.find_channel("10.0.0.1@49#x") is not None and pm.find_channel("10.0.0.1@48#x") is None
        finally:
            await client.close()
        await wait_until(lambda: not pm.clients and not cm.clients, 10, what="the index emptied at close")
