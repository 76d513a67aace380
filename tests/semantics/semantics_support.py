"""Wire helpers of the message-semantics tests: raw requests to a real broker over TCP."""
from __future__ import annotations

import asyncio
import json
import struct
import time
from dataclasses import dataclass

from rmq.remoting.client import RemotingClient
from rmq.remoting.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.store.message import decode_offset_msg_id, properties_to_string, string_to_properties

# level:   1    2    3    4    5    6 ...  (index = level - 1)
SHORT_LEVELS = "1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s"


@dataclass
class Wire:
    ns: object
    broker: object
    client: RemotingClient

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    @property
    def store(self):
        return self.broker.message_store

    async def call(self, code, ext=None, body=None, timeout=5.0):
        return await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), timeout=timeout)

    async def create_topic(self, topic, queues=4, perm=6):
        resp = await self.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
            "perm": perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    async def send(self, topic, body=b"hello", queue_id=0, props=None, reconsume_times=0, max_reconsume_times=None,
                   sys_flag=0, group="PG"):
        """SEND_MESSAGE_V2 with ``props``; returns the response (``msgId`` = offsetMsgId)."""
        p = {"TAGS": "TagA", "WAIT": "true"}
        p.update(props or {})
        ext = {"producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
               "queueId": queue_id, "sysFlag": sys_flag, "bornTimestamp": str(int(time.time() * 1000)), "flag": 7,
               "properties": properties_to_string(p), "reconsumeTimes": str(reconsume_times), "unitMode": "false",
               "batch": "false"}
        if max_reconsume_times is not None:
            ext["maxReconsumeTimes"] = str(max_reconsume_times)
        return await self.call(RequestCode.SEND_MESSAGE, ext, body)

    async def dispatched(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while self.store.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.002)

    def messages(self, topic, queue_id=0):
        """Every message stored in ``topic``/``queue_id`` (decoded from the CommitLog)."""
        store = self.store
        cq = store.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return []
        out = []
        for off in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()):
            unit = cq.get_unit(off)
            out.append(store.look_message_by_offset(unit[0], unit[1]))
        return out

    def all_messages(self, topic):
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        n = tc.read_queue_nums if tc else 1
        return [m for q in range(n) for m in self.messages(topic, q)]

    async def send_back(self, offset, group, delay_level=0, max_reconsume_times=None, origin_msg_id=None):
        ext = {"offset": str(offset), "group": group, "delayLevel": str(delay_level), "unitMode": "false"}
        if max_reconsume_times is not None:
            ext["maxReconsumeTimes"] = str(max_reconsume_times)
        if origin_msg_id:
            ext["originMsgId"] = origin_msg_id
        return await self.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)

    async def lock(self, group, client_id, mqs, unlock=False):
        body = json.dumps({"consumerGroup": group, "clientId": client_id,
                           "mqSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in mqs]}).encode()
        code = RequestCode.UNLOCK_BATCH_MQ if unlock else RequestCode.LOCK_BATCH_MQ
        return await self.call(code, None, body)

    async def route(self, topic):
        resp = await self.client.invoke(self.ns.address, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout=5.0)
        return resp


def phy_offset(msg_id: str) -> int:
    return decode_offset_msg_id(msg_id)[2]


async def wait_for(pred, timeout=15.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


__all__ = ["SHORT_LEVELS", "Wire", "phy_offset", "wait_for", "string_to_properties", "struct"]
