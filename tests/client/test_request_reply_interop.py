"""Request-reply with a Java client, frame for frame: the requests and replies below are
written out with Java 4.9.8's wire names and codes (DefaultMQProducerImpl.prepareSendRequest,
MQClientAPIImpl.sendMessage with SendMessageRequestHeaderV2, MessageUtil.createReplyMessage,
ReplyMessageRequestHeader), not with rmq's builders. A Java-style requester is answered by an
rmq SDK consumer, an rmq requester by a Java-style responder; and the broker's bounds and
remarks when the requester does not take its pushes."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from sdk_support import create_topic

import rmq
from rmq._testing import run_standalone, wait_until
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests.consumer import get_max_offset
from rmq.remoting import RemotingClient

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
HEART_BEAT, SEND_MESSAGE_V2, SEND_REPLY_MESSAGE, SEND_REPLY_MESSAGE_V2, PUSH_REPLY = 34, 310, 324, 325, 326
S1, S2 = "\x01", "\x02"


def _props(**kv: str) -> str:
    """Java MessageDecoder.messageProperties2String (client form: a separator after each pair)."""
    return "".join(f"{k}{S1}{v}{S2}" for k, v in kv.items())


def _java(code: int, ext: dict[str, str], body: bytes | None = None) -> RemotingCommand:
    cmd = RemotingCommand.request(code, ext, body)
    cmd.language = "JAVA"
    cmd.version = 409  # V4_9_8
    return cmd


class JavaRequester:
    """A Java producer's side of request-reply: its heartbeat, its SEND_MESSAGE_V2 request,
    and its answers to PUSH_REPLY_MESSAGE_TO_CLIENT (ClientRemotingProcessor.receiveReplyMessage)."""

    def __init__(self, broker_addr: str, *, answer: str = "ok", as_consumer: bool = False) -> None:
        self.as_consumer = as_consumer  # heartbeat a consumer group only (no producer group)
        self.broker_addr = broker_addr
        self.client_id = f"10.9.8.7@{uuid.uuid4().hex[:6]}#java"
        self.pushes: list[RemotingCommand] = []
        self.answer = answer  # "ok", "fail" or "hang"
        self.release = asyncio.Event()
        self.remoting = RemotingClient()
        self.remoting.register_processor(PUSH_REPLY, self)

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn, cmd: RemotingCommand):
        self.pushes.append(cmd)
        if self.answer == "hang":

            async def later() -> RemotingCommand:
                await self.release.wait()
                return cmd.response(0, None, {})

            return later()
        if self.answer == "fail":
            return cmd.response(1, "process reply message fail", {})
        return cmd.response(0, None, {})

    async def heartbeat(self) -> None:
        body: dict[str, object] = {
            "clientID": self.client_id,
            "consumerDataSet": [],
            "producerDataSet": [{"groupName": "JPG"}, {"groupName": "CLIENT_INNER_PRODUCER"}],
        }
        if self.as_consumer:
            body["producerDataSet"] = []
            body["consumerDataSet"] = [
                {
                    "groupName": "JCG_ONLY",
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {
                            "topic": "JOnly",
                            "subString": "*",
                            "tagsSet": [],
                            "codeSet": [],
                            "subVersion": 1,
                            "classFilterMode": False,
                            "expressionType": "TAG",
                        }
                    ],
                }
            ]
        resp = await self.remoting.invoke(self.broker_addr, _java(HEART_BEAT, {}, json.dumps(body).encode()))
        assert resp.code == 0, resp.remark

    async def request(self, topic: str, body: bytes) -> str:
        correlation_id = str(uuid.uuid4())
        props = _props(
            CORRELATION_ID=correlation_id,
            REPLY_TO_CLIENT=self.client_id,
            TTL="3000",
            UNIQ_KEY=uuid.uuid4().hex.upper(),
            WAIT="true",
        )
        ext = {
            "a": "JPG",
            "b": topic,
            "c": "TBW102",
            "d": "4",
            "e": "0",
            "f": "0",
            "g": str(int(time.time() * 1000)),
            "h": "0",
            "i": props,
            "j": "0",
            "k": "false",
            "m": "false",
        }
        resp = await self.remoting.invoke(self.broker_addr, _java(SEND_MESSAGE_V2, ext, body))
        assert resp.code == 0, resp.remark
        return correlation_id

    async def close(self) -> None:
        self.release.set()
        await self.remoting.close()


def _reply_ext(request: rmq.MessageExt, *, v2: bool) -> dict[str, str]:
    """Java MessageUtil.createReplyMessage + producer.send: the reply's send header."""
    p = request.properties
    props = _props(
        CORRELATION_ID=p["CORRELATION_ID"],
        REPLY_TO_CLIENT=p["REPLY_TO_CLIENT"],
        TTL=p["TTL"],
        MSG_TYPE="reply",
        UNIQ_KEY=uuid.uuid4().hex.upper(),
        WAIT="true",
    )
    values = {
        "producerGroup": "JRG",
        "topic": f"{p['CLUSTER']}_REPLY_TOPIC",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": props,
        "reconsumeTimes": "0",
        "unitMode": "false",
    }
    if not v2:
        return values
    short = dict(zip(values, "abcdefghijk", strict=True))
    return {short[k]: v for k, v in values.items()}


async def _message_with(namesrv: str, topic: str, group: str, body: bytes) -> rmq.MessageExt:
    c = rmq.PullConsumer(namesrv, group, consume_from_where=FIRST, poll_timeout=0.5)
    c.subscribe(topic)
    async with c:
        got: list[rmq.MessageExt] = []

        async def polled() -> bool:
            got.extend(m for m in await c.poll() if m.body == body)
            return bool(got)

        await wait_until(polled, 20, what="the request delivered")
        return got[0]


@pytest.mark.parametrize("as_consumer", [False, True], ids=["producer", "consumer-only"])
async def test_a_java_request_answered_by_an_rmq_consumer(tmp_path, unique, as_consumer):
    """The requester is found by its client id among the producer connections, or, for a
    client that only consumes, among the consumer connections."""
    async with run_standalone(tmp_path / "store") as (ns, broker):
        namesrv, topic = f"127.0.0.1:{ns.port}", unique("JRQ")
        await create_topic(broker.broker_addr, topic)
        java = JavaRequester(broker.broker_addr, as_consumer=as_consumer)
        try:
            await java.heartbeat()

            async def handler(msg: rmq.MessageExt) -> None:
                await rmq.reply(msg, b"answer to " + msg.body)

            c = rmq.PushConsumer(namesrv, unique("RG"), handler=handler, consume_from_where=FIRST)
            c.subscribe(topic)
            async with c:
                correlation_id = await java.request(topic, b"java question")
                await wait_until(lambda: java.pushes, 20, what="the reply pushed to the Java requester")
            push = java.pushes[0]
            h = push.ext_fields
            # ReplyMessageRequestHeader, as ReplyMessageProcessor.pushReplyMessage fills it
            assert h["topic"] == "DefaultCluster_REPLY_TOPIC"
            assert h["storeHost"] == broker.broker_addr
            assert h["bornHost"].startswith("127.0.0.1:")
            for name in (
                "producerGroup",
                "defaultTopic",
                "defaultTopicQueueNums",
                "queueId",
                "sysFlag",
                "bornTimestamp",
                "flag",
                "storeTimestamp",
            ):
                assert name in h, name
            props = dict(kv.split(S1, 1) for kv in h["properties"].split(S2) if kv)
            assert props["CORRELATION_ID"] == correlation_id
            assert props["REPLY_TO_CLIENT"] == java.client_id
            assert props["MSG_TYPE"] == "reply" and props["TTL"] == "3000" and "PUSH_REPLY_TIME" in props
            assert push.body_bytes() == b"answer to java question"
        finally:
            await java.close()


async def test_an_rmq_request_answered_by_a_java_responder(tmp_path, unique):
    """The Java responder's reply as SEND_REPLY_MESSAGE_V2 (sendSmartMsg, the default) and as
    SEND_REPLY_MESSAGE with the long names."""
    async with run_standalone(tmp_path / "store") as (ns, broker):
        namesrv, topic = f"127.0.0.1:{ns.port}", unique("RRQ")
        await create_topic(broker.broker_addr, topic)
        responder = RemotingClient()
        try:
            async with rmq.Producer(namesrv, unique("PG")) as p:
                for code, v2 in ((SEND_REPLY_MESSAGE_V2, True), (SEND_REPLY_MESSAGE, False)):
                    question = f"q{code}".encode()
                    pending = asyncio.create_task(p.request(rmq.Message(topic=topic, body=question), timeout=20))
                    request = await _message_with(namesrv, topic, unique("JCG"), question)
                    assert request.properties["CLUSTER"] == "DefaultCluster"  # added by the broker
                    assert request.properties["REPLY_TO_CLIENT"] == p.client_id
                    resp = await responder.invoke(
                        broker.broker_addr, _java(code, _reply_ext(request, v2=v2), b"java answer")
                    )
                    assert resp.code == 0, resp.remark
                    assert resp.ext_fields["msgId"] != "0"  # stored (storeReplyMessageEnable)
                    assert resp.ext_fields["TRACE_ON"] == "true" and resp.ext_fields["MSG_REGION"]
                    reply = await pending
                    assert reply.body == b"java answer"
                    assert reply.properties["CORRELATION_ID"] == request.properties["CORRELATION_ID"]
        finally:
            await responder.close()


async def test_the_broker_answers_as_java_when_the_push_fails(tmp_path, unique):
    """A requester that refuses its push, one that never answers (bounded per client), a
    reply without REPLY_TO_CLIENT."""
    async with run_standalone(tmp_path / "store", max_reply_pushes_per_client=1, call_client_timeout_mills=3000) as (
        ns,
        broker,
    ):
        namesrv, topic = f"127.0.0.1:{ns.port}", unique("BRQ")
        await create_topic(broker.broker_addr, topic)
        refusing = JavaRequester(broker.broker_addr, answer="fail")
        silent = JavaRequester(broker.broker_addr, answer="hang")
        responder = RemotingClient()
        try:
            for j in (refusing, silent):
                await j.heartbeat()
                await j.request(topic, b"q")
            got: list[rmq.MessageExt] = []
            c = rmq.PullConsumer(namesrv, unique("JCG"), consume_from_where=FIRST, poll_timeout=0.5)
            c.subscribe(topic)
            async with c:

                async def polled() -> bool:
                    got.extend(await c.poll())
                    return len(got) >= 2

                await wait_until(polled, 20, what="both requests delivered")
            by_client = {m.properties["REPLY_TO_CLIENT"]: m for m in got}

            def reply_cmd(m: rmq.MessageExt) -> RemotingCommand:
                return _java(SEND_REPLY_MESSAGE_V2, _reply_ext(m, v2=True), b"r")

            resp = await responder.invoke(broker.broker_addr, reply_cmd(by_client[refusing.client_id]))
            assert (resp.code, resp.remark) == (1, f"push reply message to {refusing.client_id}fail.")

            first = asyncio.create_task(
                responder.invoke(broker.broker_addr, reply_cmd(by_client[silent.client_id]), timeout=10)
            )
            await wait_until(lambda: silent.pushes, 10, what="the first push to the silent requester")
            resp = await responder.invoke(broker.broker_addr, reply_cmd(by_client[silent.client_id]))
            assert resp.code == 1 and "maxReplyPushesPerClient=1" in resp.remark
            silent.release.set()
            assert (await first).code == 0

            ext = _reply_ext(by_client[silent.client_id], v2=True)
            ext["i"] = _props(CORRELATION_ID="x", MSG_TYPE="reply")
            resp = await responder.invoke(broker.broker_addr, _java(SEND_REPLY_MESSAGE_V2, ext, b"r"))
            assert (resp.code, resp.remark) == (1, "reply message properties[REPLY_TO_CLIENT] is null")
        finally:
            await responder.close()
            await refusing.close()
            await silent.close()


def _reply_to(client_id: str, topic: str = "DefaultCluster_REPLY_TOPIC") -> dict[str, str]:
    props = _props(
        CORRELATION_ID=str(uuid.uuid4()),
        REPLY_TO_CLIENT=client_id,
        TTL="3000",
        MSG_TYPE="reply",
        UNIQ_KEY=uuid.uuid4().hex.upper(),
        WAIT="true",
    )
    return {
        "a": "JRG",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
    }


async def test_silent_requesters_hold_only_their_own_share_of_replies(tmp_path):
    """Four requesters that never answer their pushes, 64 pipelined replies each (Java's reply
    executor and the old pool had 256 slots: they held all of them and a legitimate reply waited
    for callClientTimeoutMills). Now each holds at most maxReplyPushesPerClient replies and
    MAX_REPLY_BYTES_PER_CLIENT bytes, past which a reply is refused at once, and another
    requester's reply is pushed while they wait (issue 23, finding 10)."""
    from rmq.broker.processors.reply import MAX_REPLY_BYTES_PER_CLIENT

    async with run_standalone(tmp_path / "store", call_client_timeout_mills=120_000) as (_ns, broker):
        addr = broker.broker_addr
        silent = [JavaRequester(addr, answer="hang") for _ in range(5)]
        live = JavaRequester(addr)
        responder = RemotingClient()
        try:
            for j in (*silent, live):
                await j.heartbeat()
            held = [
                asyncio.create_task(
                    responder.invoke(addr, _java(SEND_REPLY_MESSAGE_V2, _reply_to(j.client_id), b"r"), timeout=300)
                )
                for j in silent[:4]
                for _ in range(64)
            ]
            await wait_until(lambda: all(len(j.pushes) == 64 for j in silent[:4]), 60, what="256 pushes waiting")
            resp = await responder.invoke(
                addr, _java(SEND_REPLY_MESSAGE_V2, _reply_to(silent[0].client_id), b"r"), timeout=30
            )
            assert resp.code == 1 and "maxReplyPushesPerClient=64" in resp.remark, resp.remark
            resp = await responder.invoke(
                addr, _java(SEND_REPLY_MESSAGE_V2, _reply_to(live.client_id), b"live"), timeout=30
            )
            assert resp.code == 0, resp.remark
            assert [p.body_bytes() for p in live.pushes] == [b"live"]
            # pipelined big replies to one silent requester: bounded in bytes as well
            mib = b"x" * (1 << 20)
            big = [
                asyncio.create_task(
                    responder.invoke(
                        addr, _java(SEND_REPLY_MESSAGE_V2, _reply_to(silent[4].client_id), mib), timeout=300
                    )
                )
                for _ in range(MAX_REPLY_BYTES_PER_CLIENT // len(mib) + 4)
            ]
            refused = await asyncio.gather(*big[-4:])
            assert all(r.code == 1 and "bytes" in r.remark for r in refused), [r.remark for r in refused]
            assert len(silent[4].pushes) <= MAX_REPLY_BYTES_PER_CLIENT // len(mib)
            for j in silent:
                j.release.set()
            assert {r.code for r in await asyncio.gather(*held, *big[:-4])} == {0}
        finally:
            await responder.close()
            for j in (*silent, live):
                await j.close()


async def test_a_reply_goes_only_to_the_reply_topic(tmp_path, unique):
    """Java stores a reply (324/325) into whatever topic it names; rmq takes replies only to
    the cluster's reply topic (issue 23, finding 10)."""
    async with run_standalone(tmp_path / "store") as (_ns, broker):
        topic = unique("NotReply")
        await create_topic(broker.broker_addr, topic)
        live = JavaRequester(broker.broker_addr)
        try:
            await live.heartbeat()
            for code, ext in (
                (SEND_REPLY_MESSAGE_V2, _reply_to(live.client_id, topic)),
                (
                    SEND_REPLY_MESSAGE,
                    {
                        "producerGroup": "JRG",
                        "topic": topic,
                        "queueId": "0",
                        "properties": _reply_to(live.client_id)["i"],
                    },
                ),
            ):
                resp = await live.remoting.invoke(broker.broker_addr, _java(code, ext, b"r"))
                assert resp.code == 1 and "DefaultCluster_REPLY_TOPIC" in resp.remark, resp.remark
            assert not live.pushes
            resp = await live.remoting.invoke(broker.broker_addr, get_max_offset(topic, 0))
            assert resp.code == 0 and resp.ext_fields["offset"] == "0"
        finally:
            await live.close()
