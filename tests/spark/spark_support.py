"""Helpers of the Spark connector tests: a running standalone and calls bound to it."""
from __future__ import annotations

import time

from rmq._testing import StandaloneProcess, wait_until_sync
from rmq.remoting.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.spark._client import RocketMQClient
from rmq.spark._records import encode_properties


class Rmq:
    """A running standalone plus helpers bound to it."""

    def __init__(self, proc: StandaloneProcess) -> None:
        self.proc = proc
        self.namesrv = proc.namesrv_addr
        self.broker = proc.broker_addr
        self.client = RocketMQClient([self.namesrv])

    def create_topic(self, topic: str, queues: int = 2) -> None:
        resp = self.client.invoke(self.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
            "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}))
        assert resp.code == ResponseCode.SUCCESS, resp.remark

        def routed():  # the broker registers the new route with the name server
            route = self.client.topic_route(topic)
            return route.queue_datas and route.queue_datas[0].read_queue_nums == queues

        wait_until_sync(routed, what=f"the route of {topic} to show {queues} queues")

    def send(self, topic: str, queue_id: int, body: bytes, tags: str | None = None, keys: str | None = None,
             props: dict | None = None) -> tuple[int, str]:
        """One SEND_MESSAGE_V2; returns ``(queue offset, msgId)`` from the broker's reply."""
        p = dict(props or {})
        if tags:
            p["TAGS"] = tags
        if keys:
            p["KEYS"] = keys
        resp = self.client.invoke(self.broker, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
            "a": "test-producer", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0,
            "g": int(time.time() * 1000), "h": 0, "i": encode_properties(p), "j": 0, "k": False}, body))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return int(resp.ext_fields["queueOffset"]), resp.ext_fields["msgId"]

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.client.max_offset(self.broker, topic, queue_id)

    def close(self) -> None:
        self.client.close()
