"""``BrokerEnv``: a name server + broker under test, with a raw ``RemotingClient`` and helpers
that build the requests a RocketMQ client would send (create a topic, send, pull, send back,
lock, route).

The protocol tests of tests/broker and tests/semantics use it through their ``env`` / ``wire``
fixtures::

    async with broker_env(tmp_path / "store") as env:       # in-process, ephemeral ports
        await env.create_topic("T")
        resp = await env.send("T", b"hello")
        pulled = await env.pull("T", offset=0)

A broker in another process (``StandaloneProcess``) works too: ``BrokerEnv.of_process(proc,
client)``; then the helpers that read the in-process store (``store``, ``messages``,
``dispatched``) are not available or are no-ops, as documented on each.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rmq.common.message import decode_offset_msg_id, properties_to_string, string_to_properties
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import SEND_V2_CODES, SendMessageRequestHeader, send_wire_names
from rmq.remoting.client import RemotingClient

__all__ = ["BrokerEnv", "broker_env", "decode_props", "encode_props", "phy_offset"]


def encode_props(props: Mapping[str, str]) -> str:
    """Message properties in the client form (``k\\x01v\\x02`` after every pair)."""
    return properties_to_string(props, trailing_separator=True)


def decode_props(s: str | bytes) -> dict[str, str]:
    """Message properties from their wire string (either form)."""
    return string_to_properties(s)


def phy_offset(msg_id: str) -> int:
    """The CommitLog offset inside an offsetMsgId (the ``msgId`` a SEND response carries)."""
    return decode_offset_msg_id(msg_id)[2]


@dataclass
class BrokerEnv:
    """A broker (and usually a name server) under test, reached over TCP through ``client``.

    Args:
        ns: an in-process ``NamesrvController`` or None.
        broker: an in-process ``BrokerController`` or None (a broker in another process).
        client: the ``RemotingClient`` every helper sends through (the caller closes it, or
            :func:`broker_env` does).
        broker_addr / namesrv_addr: ``"host:port"``; default: read from ``broker`` / ``ns``.
    """

    ns: Any
    broker: Any
    client: RemotingClient
    broker_addr: str | None = None
    namesrv_addr: str | None = None

    @classmethod
    def of_process(cls, proc: Any, client: RemotingClient) -> BrokerEnv:
        """For a ``StandaloneProcess`` (anything with ``broker_addr`` and ``namesrv_addr``)."""
        return cls(None, None, client, broker_addr=proc.broker_addr, namesrv_addr=proc.namesrv_addr)

    @property
    def addr(self) -> str:
        """The broker's ``"host:port"``."""
        if self.broker_addr is not None:
            return self.broker_addr
        return f"127.0.0.1:{self.broker.port}"

    @property
    def ns_addr(self) -> str:
        """The name server's ``"host:port"``."""
        if self.namesrv_addr is not None:
            return self.namesrv_addr
        if self.ns is None:
            raise RuntimeError("this BrokerEnv has no name server")
        return str(self.ns.address)

    @property
    def store(self) -> Any:
        """The in-process broker's ``MessageStore``."""
        if self.broker is None:
            raise RuntimeError("the broker runs in another process: its store is not reachable")
        return self.broker.message_store

    # --- raw requests --------------------------------------------------------------------

    async def call(
        self, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None, timeout: float = 5.0
    ) -> RemotingCommand:
        """One request to the broker; returns the response command (any code)."""
        return await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), timeout=timeout)

    async def ns_call(
        self, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None, timeout: float = 5.0
    ) -> RemotingCommand:
        """One request to the name server."""
        return await self.client.invoke(self.ns_addr, RemotingCommand.request(code, ext, body), timeout=timeout)

    # --- what a client or an admin tool sends --------------------------------------------

    async def create_topic(
        self,
        topic: str,
        queues: int = 4,
        perm: int = 6,
        expect: int | None = ResponseCode.SUCCESS,
        attributes: str | None = None,
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC with ``queues`` read and write queues; asserts the response
        code is ``expect`` (default SUCCESS; None: no check) and returns the response.
        ``attributes``: Java 5's ``attributes`` field (``"+message.type=FIFO"``); default None
        sends a 4.x frame without it."""
        ext: dict[str, Any] = {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": perm,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": "false",
        }
        if attributes is not None:
            ext["attributes"] = attributes
        resp = await self.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        if expect is not None:
            assert resp.code == expect, (resp.code, resp.remark)
        return resp

    async def send(
        self,
        topic: str,
        body: bytes = b"hello",
        queue_id: int = 0,
        *,
        tags: str | None = "TagA",
        keys: str | None = None,
        props: Mapping[str, str] | None = None,
        extra_props: Mapping[str, str] | None = None,
        reconsume_times: int = 0,
        max_reconsume_times: int | None = None,
        sys_flag: int = 0,
        flag: int = 7,
        group: str = "PG",
        code: int | None = None,
        batch: bool = False,
        wait_dispatch: bool = True,
        raw_properties: str | None = None,
        timeout: float = 30.0,
    ) -> RemotingCommand:
        """SEND_MESSAGE (or ``code``, e.g. SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE) as a producer of
        ``group`` sends it; returns the response (``msgId`` = offsetMsgId).

        Properties: ``TAGS`` = ``tags`` (None: none), ``KEYS`` = ``keys``, then ``props`` and
        ``extra_props`` (the same thing, two spellings), and ``WAIT=true`` unless given. ``flag``
        defaults to 7 so tests can see the message flag carried through. With ``wait_dispatch``
        (default) it returns once the in-process store has dispatched everything appended so far,
        so a pull sent next sees the message (no-op for a broker in another process).
        ``raw_properties`` (default None) is sent as the properties text verbatim instead.
        ``timeout`` (default 30 s, not ``call``'s 5 s): a send waits on the broker's store and,
        for a SYNC master, its slave; on a machine at load 20 that can pass 5 s, and a test
        asserts what was stored, not how fast.
        """
        p: dict[str, str] = {}
        if tags:
            p["TAGS"] = tags
        if keys:
            p["KEYS"] = keys
        p["WAIT"] = "true"
        p.update(props or {})
        p.update(extra_props or {})
        ext = {
            "producerGroup": group,
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": queue_id,
            "sysFlag": sys_flag,
            "bornTimestamp": str(int(time.time() * 1000)),
            "flag": flag,
            "properties": encode_props(p) if raw_properties is None else raw_properties,
            "reconsumeTimes": str(reconsume_times),
            "unitMode": "false",
            "batch": "true" if batch else "false",
        }
        if max_reconsume_times is not None:
            ext["maxReconsumeTimes"] = str(max_reconsume_times)
        code = code or RequestCode.SEND_MESSAGE
        if code in SEND_V2_CODES:  # the broker reads the naming of the code (Java parseRequestHeader)
            v1, v2 = SendMessageRequestHeader.WIRE_NAMES, send_wire_names(code)
            short = {v1[attr]: v2[attr] for attr in v1}
            ext = {short[k]: v for k, v in ext.items()}
        resp = await self.call(code, ext, body, timeout=timeout)
        if wait_dispatch:
            await self.dispatched()
        return resp

    async def dispatched(self, timeout: float = 20.0) -> None:
        """Wait until the in-process store's reput service has dispatched everything appended
        so far (a pull sent right after a send may otherwise race the asynchronous dispatch).
        No-op for a broker in another process."""
        if self.broker is None:
            return
        from rmq._testing import wait_until

        store = self.store
        await wait_until(
            lambda: store.dispatch_behind_bytes() <= 0,
            timeout=timeout,
            interval=0.002,
            what="the store to dispatch everything appended",
        )

    async def pull(
        self,
        topic: str,
        queue_id: int = 0,
        offset: int = 0,
        group: str = "CG",
        sys_flag: int = 4,
        suspend_ms: int = 15000,
        subscription: str = "*",
        max_nums: int = 32,
        commit_offset: int = 0,
        timeout: float = 20.0,
    ) -> RemotingCommand:
        """PULL_MESSAGE; ``sys_flag`` 4 = subscription in the request (no heartbeat needed)."""
        ext = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": str(offset),
            "maxMsgNums": max_nums,
            "sysFlag": sys_flag,
            "commitOffset": str(commit_offset),
            "suspendTimeoutMillis": str(suspend_ms),
            "subscription": subscription,
            "subVersion": "0",
        }
        return await self.call(RequestCode.PULL_MESSAGE, ext, timeout=timeout)

    async def send_back(
        self,
        offset: int,
        group: str,
        delay_level: int = 0,
        max_reconsume_times: int | None = None,
        origin_msg_id: str | None = None,
    ) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK of the message at CommitLog ``offset`` for ``group``."""
        ext = {"offset": str(offset), "group": group, "delayLevel": str(delay_level), "unitMode": "false"}
        if max_reconsume_times is not None:
            ext["maxReconsumeTimes"] = str(max_reconsume_times)
        if origin_msg_id:
            ext["originMsgId"] = origin_msg_id
        return await self.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)

    async def lock(
        self, group: str, client_id: str, mqs: Iterable[tuple[str, str, int]], unlock: bool = False
    ) -> RemotingCommand:
        """LOCK_BATCH_MQ (or UNLOCK_BATCH_MQ) of ``(topic, broker name, queue id)`` triples."""
        body = json.dumps(
            {
                "consumerGroup": group,
                "clientId": client_id,
                "mqSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in mqs],
            }
        ).encode()
        code = RequestCode.UNLOCK_BATCH_MQ if unlock else RequestCode.LOCK_BATCH_MQ
        return await self.call(code, None, body)

    async def route(self, topic: str) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC from the name server."""
        return await self.ns_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})

    # --- what the in-process store holds -------------------------------------------------

    def messages(self, topic: str, queue_id: int = 0) -> list[Any]:
        """Every message stored in ``topic``/``queue_id``, read through the ConsumeQueue."""
        store = self.store
        cq = store.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return []
        out = []
        for off in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()):
            unit = cq.get_unit(off)
            out.append(store.look_message_by_offset(unit[0], unit[1]))
        return out

    def all_messages(self, topic: str) -> list[Any]:
        """Every message stored in any read queue of ``topic``."""
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        n = tc.read_queue_nums if tc else 1
        return [m for q in range(n) for m in self.messages(topic, q)]


@contextlib.asynccontextmanager
async def broker_env(store_dir: Any, **overrides: Any) -> AsyncIterator[BrokerEnv]:
    """An in-process name server + broker (``run_standalone``) and a ``RemotingClient``, as a
    :class:`BrokerEnv`; ``overrides`` are snake_case ``BrokerConfig`` / ``StoreConfig`` fields."""
    from rmq._testing import run_standalone

    async with run_standalone(store_dir, **overrides) as (ns, broker):
        client = RemotingClient()
        try:
            yield BrokerEnv(ns, broker, client)
        finally:
            await client.close()
