"""Helpers of the Spark connector tests: a running standalone and calls bound to it."""

from __future__ import annotations

import time

from rmq._testing import StandaloneProcess, wait_until_sync
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests import check_success
from rmq.protocol.requests.message import parse_send, send_message
from rmq.protocol.requests.topic import create_topic
from rmq.spark._client import RocketMQClient
from rmq.spark._records import encode_properties
from rmq.types import MessageQueue


def time_cut() -> int:
    """A store timestamp (ms) after every message stored before the call and before every one
    stored after it returns: store timestamps have millisecond resolution, so the clock is
    let move on around the cut."""
    first = int(time.time() * 1000)
    wait_until_sync(lambda: int(time.time() * 1000) > first, interval=0.001, what="the next millisecond")
    cut = int(time.time() * 1000)
    wait_until_sync(lambda: int(time.time() * 1000) > cut, interval=0.001, what="the next millisecond")
    return cut


class Rmq:
    """A running standalone plus helpers bound to it."""

    def __init__(self, proc: StandaloneProcess) -> None:
        self.proc = proc
        self.namesrv = proc.namesrv_addr
        self.broker = proc.broker_addr
        self.client = RocketMQClient([self.namesrv])

    def create_topic(self, topic: str, queues: int = 2) -> None:
        check_success(
            self.client.invoke(
                self.broker,
                create_topic(
                    CreateTopicRequestHeader(
                        topic=topic, read_queue_nums=queues, write_queue_nums=queues, topic_sys_flag=0
                    )
                ),
            )
        )

        def routed():  # the broker registers the new route with the name server
            route = self.client.topic_route(topic)
            return route.queue_datas and route.queue_datas[0].read_queue_nums == queues

        wait_until_sync(routed, what=f"the route of {topic} to show {queues} queues")

    def send(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        tags: str | None = None,
        keys: str | None = None,
        props: dict | None = None,
    ) -> tuple[int, str]:
        """One SEND_MESSAGE_V2; returns ``(queue offset, msgId)`` from the broker's reply."""
        p = dict(props or {})
        if tags:
            p["TAGS"] = tags
        if keys:
            p["KEYS"] = keys
        header = SendMessageRequestHeader(
            producer_group="test-producer",
            topic=topic,
            queue_id=queue_id,
            born_timestamp=int(time.time() * 1000),
            properties=encode_properties(p),
            reconsume_times=0,
        )
        result = parse_send(
            self.client.invoke(self.broker, send_message(header, body)), MessageQueue(topic, "", queue_id)
        )
        return result.queue_offset, result.offset_msg_id

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.client.max_offset(self.broker, topic, queue_id)

    def close(self) -> None:
        self.client.close()
