"""CLEAN_UNUSED_TOPIC (316), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) and GET_ALL_PRODUCER_INFO
(328) against hostile clients: ``rmq admin`` sends them (cleanUnusedTopic, exportMetadata,
exportConfigs, exportMetrics, startMonitoring), so any client may.

None of the three has a request header (Java sends them with ``null``): whatever a client puts
in the extFields or the body is ignored and the answer is the one a clean request gets, on a
connection that goes on serving. A header the codec cannot read (a value of the wrong JSON type)
closes that connection only. A flood of the three from one client leaves a second client's
round trips prompt. Under ACL, 316 needs an admin account (tests/broker/test_broker_acl.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import threading

import pytest

from rmq._testing import NoisyNeighbour, StandaloneProcess, wait_until_sync
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from rmq.protocol.requests.client import parse_all_producer_info
from rmq.protocol.requests.namesrv import parse_topic_list
from rmq.remoting.codec import FrameDecoder, encode

pytestmark = pytest.mark.integration  # a broker (in process, or a subprocess for the flood)

CODES = (
    RequestCode.CLEAN_UNUSED_TOPIC,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    RequestCode.GET_ALL_PRODUCER_INFO,
)
WORST_ROUND_TRIP = 2.0  # seconds, as the other NoisyNeighbour tests

# extFields a header-less code must ignore: names other codes read, numbers out of every range,
# empty and long values, odd names.
JUNK_EXT = {
    "topic": "KeptT",
    "cluster": "",
    "brokerName": "b" * 4000,
    "queueId": "-1",
    "offset": "-9223372036854775809",
    "count": "99999999999999999999999999",
    "timestamp": "1e400",
    "removeOffset": "maybe",
    "": "empty name",
    "x" * 300: "long name",
}


def _json_frame(header: dict, body: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return struct.pack(">II", 4 + len(h) + len(body), len(h)) + h + body


def _header(code: int | str, opaque: int, **over: object) -> dict:
    h = {
        "code": code,  # as given: a test passes a string
        "flag": 0,
        "language": "JAVA",
        "opaque": opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": 399,
    }
    h.update(over)
    return h


def _binary_frame(code: int, opaque: int, ext: dict[str, str], body: bytes = b"") -> bytes:
    cmd = RemotingCommand.request(code, dict(ext), body or None)
    cmd.opaque = opaque
    cmd.serialize_type = 1  # ROCKETMQ binary header
    return b"".join(bytes(p) for p in encode(cmd))


def _hostile_frames(code: int) -> tuple[list[bytes], list[int], list[int]]:
    """Frames for ``code`` and the opaques that must be answered / must get no answer."""
    noise = os.urandom(256 * 1024)
    frames = [
        (1, _json_frame(_header(code, 1, extFields=JUNK_EXT))),
        (2, _json_frame(_header(code, 2), noise)),  # a body that is not JSON
        (3, _json_frame(_header(code, 3), b'{"topicList": ' + b"[" * 5000)),  # deep, unfinished JSON
        (4, _binary_frame(code, 4, JUNK_EXT, noise[:4096])),
        (-5, _json_frame(_header(code, -5, version=-1))),  # negative opaque and version
        (6, _json_frame(_header(code, 6, version=2**31 - 1, language="KLINGON"))),
        (7, _json_frame(_header(code, 7, serializeTypeCurrentRPC="XML", remark="r" * 5000))),
        (8, _json_frame(_header(code, 8, flag=FLAG_ONEWAY, extFields=JUNK_EXT))),  # oneway: no answer
        # A frame flagged as a response answers nothing the broker asked: dropped, never run.
        (9, _json_frame(_header(code, 9, flag=FLAG_RESPONSE, extFields=JUNK_EXT))),
        (10, _json_frame(_header(code, 10))),  # a clean one last, on the same connection
    ]
    silent = [8, 9]
    return [f for _, f in frames], [o for o, _ in frames if o not in silent], silent


async def _exchange(addr: str, data: bytes, answers: int, timeout: float = 30.0) -> dict[int, RemotingCommand]:
    """Write ``data`` on a new connection and read ``answers`` responses (by opaque), then one
    more round trip proving the connection still serves."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    dec = FrameDecoder()
    got: dict[int, RemotingCommand] = {}
    try:
        writer.write(data)
        async with asyncio.timeout(timeout):
            while len(got) < answers:
                cmd = dec.next_frame()
                if cmd is None:
                    chunk = await reader.read(1 << 16)
                    assert chunk, f"the broker closed the connection after {sorted(got)}"
                    dec.feed(chunk)
                elif cmd.is_response:
                    assert cmd.opaque not in got, f"opaque {cmd.opaque} answered twice"
                    got[cmd.opaque] = cmd
        return got
    finally:
        writer.close()


def _producer_heartbeat(client_id: str, *groups: str) -> bytes:
    producers = [{"groupName": g} for g in groups]
    return json.dumps({"clientID": client_id, "producerDataSet": producers, "consumerDataSet": []}).encode()


def _same_answer(code: int, resp: RemotingCommand, clean: RemotingCommand) -> None:
    assert resp.code == clean.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    if code == RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER:
        assert parse_topic_list(resp) == parse_topic_list(clean) and "TBW102" in parse_topic_list(resp)
    elif code == RequestCode.GET_ALL_PRODUCER_INFO:

        def who(r: RemotingCommand) -> dict[str, list[str]]:
            return {g: sorted(p.client_id for p in ps) for g, ps in parse_all_producer_info(r).data.items()}

        assert who(resp) == who(clean) and who(resp).get("HostilePG") == ["hostile@1"]
    else:
        assert not resp.body_bytes()


@pytest.mark.parametrize("code", CODES, ids=lambda c: RequestCode(c).name)
async def test_hostile_requests_get_the_clean_answer_on_a_connection_that_stays_usable(env, code):
    await env.create_topic("KeptT", queues=1)
    assert (await env.call(RequestCode.HEART_BEAT, None, _producer_heartbeat("hostile@1", "HostilePG"))).code == 0
    stored = await env.send("KeptT", b"kept", group="HostilePG")
    assert stored.code == ResponseCode.SUCCESS, stored.remark
    clean = await env.call(code)
    frames, answered, silent = _hostile_frames(code)
    got = await _exchange(env.addr, b"".join(frames), len(answered))
    assert sorted(got) == sorted(answered)
    for opaque in answered:
        _same_answer(code, got[opaque], clean)
    assert not set(silent) & set(got)
    # 316 with junk naming KeptT destroyed nothing the broker has a config for.
    assert env.store.get_max_offset_in_queue("KeptT", 0) == 1


@pytest.mark.parametrize("code", CODES, ids=lambda c: RequestCode(c).name)
async def test_a_header_of_the_wrong_types_closes_only_that_connection(env, code):
    bystander = await _exchange(env.addr, _json_frame(_header(code, 1)), 1)  # warms nothing up; a baseline
    assert bystander[1].code == ResponseCode.SUCCESS
    host, port = env.addr.rsplit(":", 1)
    for bad in (
        _header(code, 2, extFields={"topic": ["a", "list"]}),
        _header(code, 3, extFields=[1, 2]),
        _header(str(code), 4),  # the code as a string
        _header(code, 5, flag="oneway"),
    ):
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(_json_frame(bad))
            async with asyncio.timeout(10):
                rest = await reader.read()  # to EOF: no answer, the connection closed
            assert rest == b"", rest[:200]
        finally:
            writer.close()
        # the broker goes on serving everyone else, this code included
        after = await _exchange(env.addr, _json_frame(_header(code, 6)), 1)
        assert after[6].code == ResponseCode.SUCCESS


# ------------------------------------------------------------------------- the noisy neighbour


class _Flooder(threading.Thread):
    """Pipelines ``rounds`` batches of the three codes (junk extFields, a 4 KiB garbage body) on
    one connection and reads every answer; ``answers`` counts them by response code."""

    def __init__(self, addr: str, rounds: int, batch: int, codes: tuple[int, ...] = CODES) -> None:
        super().__init__(name="admin-code-flood", daemon=True)
        self.codes = codes
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.rounds, self.batch = rounds, batch
        self.answers: dict[int, int] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        dec = FrameDecoder()
        garbage = os.urandom(4096)
        opaque = 0
        try:
            for _ in range(self.rounds):
                frames = []
                for _ in range(self.batch):
                    for code in self.codes:
                        opaque += 1
                        frames.append(_json_frame(_header(code, opaque, extFields=JUNK_EXT), garbage))
                self.sock.sendall(b"".join(frames))
                want = sum(self.answers.values()) + len(frames)
                while sum(self.answers.values()) < want:
                    cmd = dec.next_frame()
                    if cmd is None:
                        chunk = self.sock.recv(1 << 20)
                        if not chunk:
                            raise ConnectionResetError("the broker closed the flooding connection")
                        dec.feed(chunk)
                    elif cmd.is_response:
                        self.answers[cmd.code] = self.answers.get(cmd.code, 0) + 1
        except BaseException as e:  # reported by the test
            self.error = e
        finally:
            self.sock.close()


def test_a_flood_of_the_admin_codes_leaves_room_for_a_neighbour(tmp_path):
    """One client pipelines 3 x 1 200 requests of 316, 305 and 328 (junk extFields and a body)
    while 1 000 producer groups are registered, so every 328 answer lists them all; a second
    client's GET_MAX_OFFSET round trips stay under 2 s and every flood request is answered
    (SUCCESS, or SYSTEM_BUSY from a full pool). (Each 328 used to encode the whole table: the
    neighbour then waited seconds.)"""
    groups = [f"FloodPG{i}" for i in range(1000)]
    with StandaloneProcess(tmp_path / "store") as proc:
        setup = socket.create_connection(("127.0.0.1", proc.broker_port), timeout=30)
        try:
            beats = []
            for i in range(0, len(groups), 100):
                body = _producer_heartbeat("flood@1", *groups[i : i + 100])
                beats.append(
                    b"".join(bytes(p) for p in encode(RemotingCommand.request(RequestCode.HEART_BEAT, None, body)))
                )
            setup.sendall(b"".join(beats))
            dec, answered = FrameDecoder(), 0
            while answered < len(beats):
                cmd = dec.next_frame()
                if cmd is None:
                    chunk = setup.recv(1 << 20)
                    assert chunk, "the broker closed the setup connection"
                    dec.feed(chunk)
                elif cmd.is_response:
                    assert cmd.code == ResponseCode.SUCCESS, cmd.remark
                    answered += 1
            flood = _Flooder(proc.broker_addr, rounds=12, batch=100)
            with NoisyNeighbour(proc.broker_addr) as probe:
                flood.start()
                wait_until_sync(lambda: not flood.is_alive(), timeout=240, what="the flood's answers")
            assert flood.error is None, flood.error
            total = sum(flood.answers.values())
            assert total == 12 * 100 * len(CODES), flood.answers
            assert set(flood.answers) <= {ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY}, flood.answers
            assert flood.answers.get(ResponseCode.SUCCESS, 0) > 0, flood.answers
            print("neighbour:", probe.summary(), "flood answers:", flood.answers)
            assert probe.failures == 0, probe.summary()
            assert probe.worst < WORST_ROUND_TRIP, probe.summary()
            # the producers are still all there (the heartbeats' connection is open)
            info = RemotingCommand.request(RequestCode.GET_ALL_PRODUCER_INFO)
            setup.sendall(b"".join(bytes(p) for p in encode(info)))
            while True:
                cmd = dec.next_frame()
                if cmd is None:
                    dec.feed(setup.recv(1 << 20))
                elif cmd.is_response and cmd.opaque == info.opaque:
                    break
            assert sorted(parse_all_producer_info(cmd).data) == sorted(groups)
        finally:
            setup.close()


async def test_the_reused_producer_table_shows_a_change_at_once(env):
    """GET_ALL_PRODUCER_INFO reuses its encoded answer for a second, but never past a change of
    the table: a producer group that joins or leaves is in the very next answer."""

    async def groups() -> set[str]:
        return set(parse_all_producer_info(await env.call(RequestCode.GET_ALL_PRODUCER_INFO)).data)

    assert (await env.call(RequestCode.HEART_BEAT, None, _producer_heartbeat("reuse@1", "ReusePG1"))).code == 0
    assert "ReusePG1" in await groups()
    assert (await env.call(RequestCode.HEART_BEAT, None, _producer_heartbeat("reuse@1", "ReusePG2"))).code == 0
    assert {"ReusePG1", "ReusePG2"} <= await groups()
    gone = await env.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "reuse@1", "producerGroup": "ReusePG1"})
    assert gone.code == ResponseCode.SUCCESS, gone.remark
    now = await groups()
    assert "ReusePG1" not in now and "ReusePG2" in now


# ------------------------------------------------------ the RocketMQ 5 codes added beside them

# GET_TOPIC_CONFIG (351), QUERY_ASSIGNMENT (400), SET_MESSAGE_REQUEST_MODE (401),
# GET_TIMER_CHECK_POINT (60) and GET_TIMER_METRICS (61) read a header or a JSON body: hostile
# ones get an answer (an error code where the input is wrong) on a connection that goes on
# serving, and a flood of them leaves a second client's round trips prompt. Who may call them:
# 401 needs an admin account under ACL (test_broker_acl.py); the others are reads, as in Java.
RM5_CODES = (
    RequestCode.GET_TOPIC_CONFIG,
    RequestCode.QUERY_ASSIGNMENT,
    RequestCode.SET_MESSAGE_REQUEST_MODE,
    RequestCode.GET_TIMER_CHECK_POINT,
    RequestCode.GET_TIMER_METRICS,
)
_HOSTILE_BODIES = (
    b'{"topic": "KeptT", "consumerGroup": "G", "clientId": "c", "strategyName": "AVG", '
    b'"messageModel": "CLUSTERING", "mode": "POP", "popShareQueueNum": 99999999999999999999}',
    b'{"topic": ["a"], "consumerGroup": {"x": 1}, "mode": 7, "popShareQueueNum": "-1"}',
    b"[" * 5000,
    b"\xff\xfe not json",
)


@pytest.mark.parametrize("code", RM5_CODES, ids=lambda c: RequestCode(c).name)
async def test_hostile_rocketmq5_requests_are_answered_and_the_connection_serves_on(env, code):
    await env.create_topic("KeptT", queues=2)
    noise = os.urandom(64 * 1024)
    frames = [_json_frame(_header(code, 1, extFields=JUNK_EXT))]
    frames += [_json_frame(_header(code, 2 + i, extFields=JUNK_EXT), b) for i, b in enumerate(_HOSTILE_BODIES)]
    frames += [
        _json_frame(_header(code, 10, extFields={"topic": "\u0000" * 300, "dataVersion": "{"}), noise),
        _binary_frame(code, 11, JUNK_EXT, noise[:4096]),
        _json_frame(_header(code, 12, flag=FLAG_ONEWAY, extFields=JUNK_EXT)),  # oneway: no answer
        _json_frame(_header(RequestCode.GET_MAX_OFFSET, 13, extFields={"topic": "KeptT", "queueId": "0"})),
    ]
    answered = [1, 2, 3, 4, 5, 10, 11, 13]
    got = await _exchange(env.addr, b"".join(frames), len(answered))
    assert sorted(got) == answered
    # the connection still serves a clean request after them, and nothing was stored or broken
    assert got[13].code == ResponseCode.SUCCESS, got[13].remark
    assert env.store.get_max_offset_in_queue("KeptT", 0) == 0
    if code == RequestCode.SET_MESSAGE_REQUEST_MODE:  # the one write: no hostile body stored a mode
        assert all(got[o].code != ResponseCode.SUCCESS for o in answered[:-1]), {o: got[o].remark for o in got}


def test_a_flood_of_the_rocketmq5_codes_leaves_room_for_a_neighbour(tmp_path):
    """One client pipelines 5 x 600 requests of 351/400/401/60/61 with junk extFields and a
    4 KiB garbage body; a second client's GET_MAX_OFFSET round trips stay under 2 s and every
    flood request is answered."""
    with StandaloneProcess(tmp_path / "store") as proc:
        flood = _Flooder(proc.broker_addr, rounds=6, batch=100, codes=RM5_CODES)
        with NoisyNeighbour(proc.broker_addr) as probe:
            flood.start()
            wait_until_sync(lambda: not flood.is_alive(), timeout=240, what="the flood's answers")
        assert flood.error is None, flood.error
        assert sum(flood.answers.values()) == 6 * 100 * len(RM5_CODES), flood.answers
        print("neighbour:", probe.summary(), "flood answers:", flood.answers)
        assert probe.failures == 0, probe.summary()
        assert probe.worst < WORST_ROUND_TRIP, probe.summary()
