"""What the SEND fast path reads of the broker per SEND (``SendGate``,
rmq/broker/processors/_sendpath.pyx): the BrokerConfig's and the TopicConfig's fields, read in
their ``__slots__`` at the offsets bound when the gate is built. Nothing is cached: a live
UPDATE_BROKER_CONFIG or a topic update is seen by the very next SEND the fast path takes or
declines; a config of another class or a slot holding an unexpected value declines the SEND to
the Python path, which answers it as always."""

import dataclasses

import pytest

from rmq._testing import broker_env
from rmq.broker.managers.topic_config import TopicConfig
from rmq.broker.processors._sendpath import PutCounters, SendGate
from rmq.config import BrokerConfig
from rmq.protocol.codes import RequestCode, ResponseCode


class _Int(int):
    """An int the Python path computes with as any int, but not an exact int."""


class _Str(str):
    """A str the Python path writes as any str, but not an exact str."""


class _SubBrokerConfig(BrokerConfig):
    __slots__ = ()


class _SubTopicConfig(TopicConfig):
    __slots__ = ()


class _Sender:
    """SENDs to one queue of a topic through the broker's frame hook, each telling which path
    took it."""

    def __init__(self, env, topic: str, queue_id: int = 0):
        self.env = env
        self.topic = topic
        self.queue_id = queue_id
        self.fast = env.broker.send_processor.fast

    async def send(self, fast: bool, **kw):
        """One SEND; asserts that the fast path stored it (``fast``) or declined it to the Python
        path (not ``fast``, whatever the Python path then answers)."""
        taken, declined = self.fast.taken, self.fast.declined
        resp = await self.env.send(self.topic, b"g", self.queue_id, **kw)
        if fast:
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert (self.fast.taken, self.fast.declined) == (taken + 1, declined)
        else:
            assert (self.fast.taken, self.fast.declined) == (taken, declined + 1)
        return resp


async def _sending(env, topic: str) -> tuple[_Sender, object]:
    """A one-queue ``topic`` with its first message stored (the Python path admits a new queue)
    and a second taken by the fast path: the sender and that second SEND's response."""
    await env.create_topic(topic, queues=1)
    s = _Sender(env, topic)
    await s.send(fast=False)
    return s, await s.send(fast=True)


async def _update(env, props: bytes) -> None:
    resp = await env.call(RequestCode.UPDATE_BROKER_CONFIG, None, props)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def test_the_gate_binds_only_classes_with_those_slots():
    class Plain:  # the names as class attributes, no slots
        region_id = "DefaultRegion"
        broker_permission = 6
        enable_topic_message_type_check = trace_on = True
        perm = write_queue_nums = read_queue_nums = type_code = 0

    with pytest.raises(TypeError, match="not a writable slot"):
        SendGate({}, BrokerConfig(), None, Plain, TopicConfig)
    with pytest.raises(TypeError, match="not a writable slot"):
        SendGate({}, BrokerConfig(), None, BrokerConfig, Plain)
    gate = SendGate({}, BrokerConfig(), None, BrokerConfig, TopicConfig)
    assert (gate.broker_config_type, gate.topic_config_type) == (BrokerConfig, TopicConfig)


def test_the_gate_binds_only_slots_their_class_publishes_to_native_code():
    # the slots are there, but the class's module lists none of them in __native_slots__ (the
    # fields it lets native code read): its state stays its own
    @dataclasses.dataclass(slots=True)
    class Unpublished:
        region_id: str = "DefaultRegion"
        broker_permission: int = 6
        enable_topic_message_type_check: bool = True
        trace_on: bool = True

    @dataclasses.dataclass(slots=True)
    class PartlyPublished:
        __native_slots__ = ("perm", "write_queue_nums", "read_queue_nums")  # not type_code
        perm: int = 6
        write_queue_nums: int = 1
        read_queue_nums: int = 1
        type_code: int = 0

    with pytest.raises(TypeError, match="region_id is a slot of .*Unpublished.* __native_slots__ does not list"):
        SendGate({}, BrokerConfig(), None, Unpublished, TopicConfig)
    with pytest.raises(TypeError, match="type_code is a slot of .*PartlyPublished"):
        SendGate({}, BrokerConfig(), None, BrokerConfig, PartlyPublished)


def test_put_counters_count_by_topic_across_takes():
    # the counter block remembers the last topic's entry: a take starts over, and a topic
    # equal to but not the same str as the last one counts into the same entry
    c = PutCounters()
    a = "GateA"
    c.count(a, 10, 1000)
    c.count(a, 20, 1000)
    c.count("Gate" + "B", 5, 1000)
    c.count("".join(["Gate", "A"]), 1, 1000)
    taken = c.take()
    assert taken is not None
    assert sorted(taken[0]) == [("GateA", 3, 31, 3), ("GateB", 1, 5, 1)]
    assert c.take() is None
    c.count(a, 7, 1000)
    taken = c.take()
    assert taken is not None and taken[0] == [("GateA", 1, 7, 1)]


async def test_live_broker_config_updates_are_seen_by_the_next_fast_send(tmp_path):
    async with broker_env(tmp_path / "s") as env:
        s, resp = await _sending(env, "Gate")
        assert (resp.ext_fields["MSG_REGION"], resp.ext_fields["TRACE_ON"]) == ("DefaultRegion", "true")

        await _update(env, b"regionId=GateRegion\n")
        resp = await s.send(fast=True)
        assert resp.ext_fields["MSG_REGION"] == "GateRegion"
        await _update(env, b"traceOn=false\n")
        resp = await s.send(fast=True)
        assert (resp.ext_fields["MSG_REGION"], resp.ext_fields["TRACE_ON"]) == ("GateRegion", "false")
        await _update(env, b"traceOn=true\n")
        assert (await s.send(fast=True)).ext_fields["TRACE_ON"] == "true"

        # Java msgCheck: a broker without write permission refuses (in the Python path's words)
        await _update(env, b"brokerPermission=4\n")
        assert (await s.send(fast=False)).code == ResponseCode.NO_PERMISSION
        await _update(env, b"brokerPermission=6\n")
        await s.send(fast=True)

        # a typed topic: the type check switch, both ways
        await env.create_topic("GateFifo", queues=1, attributes="+message.type=FIFO")
        f = _Sender(env, "GateFifo")
        await f.send(fast=False, props={"__SHARDINGKEY": "k"})
        await f.send(fast=True, props={"__SHARDINGKEY": "k"})
        assert (await f.send(fast=False)).code == ResponseCode.MESSAGE_ILLEGAL  # NORMAL to FIFO
        await _update(env, b"enableTopicMessageTypeCheck=false\n")
        await f.send(fast=True)
        await _update(env, b"enableTopicMessageTypeCheck=true\n")
        assert (await f.send(fast=False)).code == ResponseCode.MESSAGE_ILLEGAL


async def test_topic_updates_are_seen_by_the_next_fast_send(tmp_path):
    async with broker_env(tmp_path / "s") as env:
        s, _ = await _sending(env, "GateT")
        await env.create_topic("GateT", queues=1, perm=4)  # read only
        assert (await s.send(fast=False)).code == ResponseCode.NO_PERMISSION
        await env.create_topic("GateT", queues=1, perm=6)
        await s.send(fast=True)
        # queue 1 is outside the topic's queues, then inside once it has two
        s1 = _Sender(env, "GateT", queue_id=1)
        assert (await s1.send(fast=False)).code != ResponseCode.SUCCESS
        await env.create_topic("GateT", queues=2)
        await s1.send(fast=False)  # the queue's first message
        await s1.send(fast=True)
        # the topic's type, set by an update
        await env.create_topic("GateT", queues=2, attributes="+message.type=FIFO")
        assert (await s.send(fast=False)).code == ResponseCode.MESSAGE_ILLEGAL
        await env.create_topic("GateT", queues=2, attributes="-message.type")
        await s.send(fast=True)


async def test_unexpected_slot_values_decline_to_the_python_path(tmp_path):
    async with broker_env(tmp_path / "s") as env:
        s, _ = await _sending(env, "GateOdd")
        bc = env.broker.broker_config
        table = env.broker.topic_config_manager.topic_config_table
        tc = table["GateOdd"]
        odd = [
            (tc, "perm", _Int(6)),
            (tc, "write_queue_nums", _Int(1)),
            (tc, "read_queue_nums", _Int(1)),
            (tc, "type_code", _Int(0)),
            (bc, "broker_permission", _Int(6)),
            (bc, "region_id", _Str("DefaultRegion")),
            (bc, "trace_on", 1),
        ]
        for obj, name, value in odd:
            old = getattr(obj, name)
            setattr(obj, name, value)
            try:
                resp = await s.send(fast=False)  # declined, then stored by the Python path
                assert resp.code == ResponseCode.SUCCESS, (name, resp.remark)
                assert (resp.ext_fields["MSG_REGION"], resp.ext_fields["TRACE_ON"]) == ("DefaultRegion", "true")
            finally:
                setattr(obj, name, old)
            await s.send(fast=True)

        # a config of another class (a subclass too) than the one the gate bound
        gate = env.broker.send_processor.fast.gate
        sub = _SubBrokerConfig(**{f.name: getattr(bc, f.name) for f in dataclasses.fields(bc) if f.init})
        gate.broker_config = sub
        try:
            assert (await s.send(fast=False)).code == ResponseCode.SUCCESS
        finally:
            gate.broker_config = bc
        await s.send(fast=True)
        table["GateOdd"] = _SubTopicConfig(topic_name="GateOdd", read_queue_nums=1, write_queue_nums=1)
        try:
            assert (await s.send(fast=False)).code == ResponseCode.SUCCESS
        finally:
            table["GateOdd"] = tc
        await s.send(fast=True)
        # every SEND stored, whichever path took it
        await env.dispatched()
        assert len(env.messages("GateOdd")) == 2 + 2 * len(odd) + 4
