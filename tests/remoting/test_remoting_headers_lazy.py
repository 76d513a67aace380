"""@header generates a class's members on first use (docs/design.md "Start-up time"): until then
they are stubs; what they generate behaves as ``dataclasses.dataclass(slots=True, kw_only=True)``
and the codecs generated at import did."""

from __future__ import annotations

import dataclasses

import pytest

from rmq.protocol.headers import Header, _Lazy, header, w

MEMBERS = ("__init__", "__repr__", "__eq__", "from_ext_fields", "to_ext_fields")


def _declare() -> tuple[type, type]:
    """The same fields twice: as a header (lazy) and as a plain slotted kw-only dataclass."""

    @header
    class Probe(Header):
        topic: str = w("topic")
        queue_id: int = w("queueId")
        offset: int | None = w("offset", default=None, int64=True)
        flag: bool = w("flag", default=False)

    @dataclasses.dataclass(slots=True, kw_only=True)
    class Probe2:
        topic: str
        queue_id: int
        offset: int | None = None
        flag: bool = False

    return Probe, Probe2


def test_members_are_stubs_until_first_use_then_the_generated_ones():
    Probe, _ = _declare()
    assert all(isinstance(vars(Probe)[m], _Lazy) for m in MEMBERS)
    assert Probe.WIRE_NAMES == {"topic": "topic", "queue_id": "queueId", "offset": "offset", "flag": "flag"}
    p = Probe(topic="T", queue_id=3)  # the first use generates every member
    assert not any(isinstance(vars(Probe)[m], _Lazy) for m in MEMBERS)
    assert p.to_ext_fields() == {"topic": "T", "queueId": "3", "flag": "false"}
    assert Probe.from_ext_fields({"topic": "T", "queueId": "3", "offset": "9"}) == Probe(
        topic="T", queue_id=3, offset=9
    )


@pytest.mark.parametrize("first", ["decode", "encode", "repr", "eq", "vars"])
def test_any_first_use_generates(first):
    Probe, _ = _declare()
    if first == "decode":
        assert Probe.from_ext_fields({"topic": "T", "queueId": 1}).queue_id == 1
    elif first == "encode":
        assert Probe.to_ext_fields(Probe(topic="T", queue_id=1))["queueId"] == "1"
    elif first == "repr":
        assert repr(Probe.from_ext_fields({"topic": "T", "queueId": 1})).startswith("_declare.<locals>.Probe(")
    elif first == "eq":
        assert Probe.from_ext_fields({"topic": "T", "queueId": 1}) != Probe.from_ext_fields(
            {"topic": "U", "queueId": 1}
        )
    else:  # what tests/remoting/test_remoting_headers.py reads: the reader under the classmethod
        reader = vars(Probe)["from_ext_fields"].__func__
        assert reader(Probe, {"topic": "T", "queueId": "2"}).queue_id == 2
    assert not isinstance(vars(Probe)["__init__"], _Lazy)


def test_generated_methods_behave_as_the_dataclass_ones():
    Probe, Probe2 = _declare()
    a, b = Probe(topic="T", queue_id=1, offset=5), Probe2(topic="T", queue_id=1, offset=5)
    assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
    assert repr(a).startswith(Probe.__qualname__ + "(")
    assert a == Probe(topic="T", queue_id=1, offset=5) and a != Probe(topic="T", queue_id=2, offset=5)
    assert a.__eq__(b) is NotImplemented  # another class: as a dataclass's __eq__
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    for bad in ({"topic": "T"}, {"topic": "T", "queue_id": 1, "nope": 2}):
        with pytest.raises(TypeError) as mine:
            Probe(**bad)
        with pytest.raises(TypeError) as theirs:
            Probe2(**bad)
        assert str(mine.value).split("(", 1)[1] == str(theirs.value).split("(", 1)[1]
    with pytest.raises(TypeError):
        Probe("T", 1)  # keyword-only, as kw_only=True
    assert dataclasses.replace(a, queue_id=7) == Probe(topic="T", queue_id=7, offset=5)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert not hasattr(a, "__dict__")  # slotted
    assert Probe.__init__.__qualname__ == f"{Probe.__qualname__}.__init__"
    assert Probe.__doc__ == "Probe" + str(__import__("inspect").signature(Probe)).replace(" -> None", "")
    assert Probe.__doc__.replace("Probe", "") == Probe2.__doc__.replace("Probe2", "")
