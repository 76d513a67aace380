"""Floods against a real ``rmq standalone`` subprocess while other clients keep being served:
pipelined pulls on one connection, bulk topic creation, a name-server registration flood.

Counted by order, not by wall time: a second client completes its round trips while the flood's
answers are still coming (the broker interleaves it with the flood's slices), and a created
topic is routable from the name server as soon as its creation is answered. A NoisyNeighbour
measures round trips meanwhile (printed; only its failures are asserted)."""

from __future__ import annotations

import pytest

from rmq._testing import NoisyNeighbour, StandaloneProcess, wait_until_sync
from rmq._testing.floods import FloodReader, Wire, flood, pull, register_broker_body, register_broker_cmd, send_message
from rmq.common.constants import TopicValidator
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import GetMaxOffsetRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader, DeleteTopicRequestHeader

pytestmark = pytest.mark.integration  # a broker subprocess


def _probe_while_flooding(
    wire: Wire, probe: Wire, requests: list[RemotingCommand], probe_cmd, rounds: int = 3
) -> FloodReader:
    """Send the flood, then ``rounds`` round trips of the probe once the flood's answers have
    started; asserts the probe was done while the flood still had answers to come."""
    reader = flood(wire, requests)
    wait_until_sync(lambda: reader.count > 0, what="the flood's first answer")
    for _ in range(rounds):
        assert probe.call(probe_cmd()).code == ResponseCode.SUCCESS
    seen = reader.count
    reader.join(120)
    assert reader.count == len(requests), reader.codes
    assert seen < len(requests), "the probe waited for the whole flood"
    return reader


def test_pipelined_pulls_on_one_connection_leave_room_for_another_client(tmp_path):
    with StandaloneProcess(tmp_path / "store") as proc:
        setup = Wire(proc.broker_addr)
        assert send_message(setup, "FloodT", b"only").code == 0
        wire, probe = Wire(proc.broker_addr), Wire(proc.broker_addr)
        n = 30_000
        with NoisyNeighbour(proc.broker_addr) as neighbour:
            reader = _probe_while_flooding(
                wire,
                probe,
                [pull("FloodT", 1) for _ in range(n)],
                lambda: RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET,
                    GetMaxOffsetRequestHeader(topic=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC, queue_id=0),
                ),
            )
        print("neighbour:", neighbour.summary())
        assert reader.codes == {ResponseCode.PULL_NOT_FOUND: n}
        assert neighbour.failures == 0, neighbour.summary()


def _route(wire: Wire, topic: str) -> int:
    return wire.call(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code


def test_topics_created_one_at_a_time_are_routed_when_answered(tmp_path):
    """Each creation registers the new topic with the name server (incrementally) before it is
    answered, so the route exists at once; a deletion's full registration removes it."""
    with StandaloneProcess(tmp_path / "store") as proc:
        admin, ns = Wire(proc.broker_addr), Wire(proc.namesrv_addr)
        with NoisyNeighbour(
            proc.namesrv_addr,
            code=RequestCode.GET_ROUTEINFO_BY_TOPIC,
            ext_fields={"topic": TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC},
        ) as neighbour:
            for i in range(200):
                topic = f"Bulk{i}"
                resp = admin.call(
                    RemotingCommand.request(
                        RequestCode.UPDATE_AND_CREATE_TOPIC,
                        CreateTopicRequestHeader(topic=topic, read_queue_nums=2, write_queue_nums=2),
                    )
                )
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                assert _route(ns, topic) == ResponseCode.SUCCESS, topic
        print("neighbour:", neighbour.summary())
        assert neighbour.failures == 0, neighbour.summary()
        # the earlier topics survived the increments
        assert all(_route(ns, f"Bulk{i}") == ResponseCode.SUCCESS for i in range(0, 200, 17))
        resp = admin.call(
            RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic="Bulk7"))
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        wait_until_sync(
            lambda: _route(ns, "Bulk7") == ResponseCode.TOPIC_NOT_EXIST, what="the deleted topic's route gone"
        )
        assert _route(ns, "Bulk8") == ResponseCode.SUCCESS


def _register(counter: int) -> RemotingCommand:
    """A new version (``counter``) of a 301-topic table."""
    body = register_broker_body(["broker-z", *(f"Z{i}" for i in range(300))], counter)
    return register_broker_cmd(body, name="broker-z", cluster="Flood")


def test_a_registration_flood_leaves_room_for_route_lookups(tmp_path):
    with StandaloneProcess(tmp_path / "store") as proc:
        wire, probe = Wire(proc.namesrv_addr), Wire(proc.namesrv_addr)
        n = 600  # each a new version of a 301-topic table: parsed and applied
        with NoisyNeighbour(
            proc.namesrv_addr,
            code=RequestCode.GET_ROUTEINFO_BY_TOPIC,
            ext_fields={"topic": TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC},
        ) as neighbour:
            reader = _probe_while_flooding(
                wire,
                probe,
                [_register(i) for i in range(n)],
                lambda: RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC}
                ),
            )
        print("neighbour:", neighbour.summary())
        assert reader.codes == {ResponseCode.SUCCESS: n}
        assert neighbour.failures == 0, neighbour.summary()
