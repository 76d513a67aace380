"""Topic attributes and message types (Java 5 ``TopicAttributes``, ``AttributeParser``,
``AttributeUtil``, ``TopicMessageType``).

A topic's attributes are a ``{name: value}`` map kept in its ``TopicConfig`` (``attributes`` in
topics.json and on the wire). They change through UPDATE_AND_CREATE_TOPIC's ``attributes``
header, a text of ``+name=value`` (add or change) and ``-name`` (remove) items joined by commas,
as ``mqadmin updateTopic -a`` writes it. The broker parses it with :func:`parse_attributes`
and applies it with :func:`alter_attributes` (Java's rules: only ``+`` when the topic is new,
no unknown name, no value outside the attribute's set, no change of an unchangeable one).

``message.type`` types a topic (NORMAL, FIFO, DELAY, TRANSACTION, MIXED); a SEND's own type
is read from its properties by :func:`message_type_of_properties` and compared with
:func:`check_message_type` (Java 5 ``DefaultTopicMessageTypeValidator``).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from rmq.common.message import MessageConst, java_properties

__all__ = [
    "ATTRIBUTES",
    "MESSAGE_TYPE",
    "TopicAttributeError",
    "TopicMessageType",
    "alter_attributes",
    "attributes_to_string",
    "check_message_type",
    "first_batch_item_properties",
    "message_type_of_attributes",
    "message_type_of_properties",
    "parse_attributes",
    "type_code",
]

#: the attribute that types a topic (Java ``TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE``)
MESSAGE_TYPE = "message.type"


class TopicAttributeError(ValueError):
    """An attribute text or change Java's broker refuses; the message says why (Java's words)."""


class TopicMessageType(enum.Enum):
    """Java 5 ``TopicMessageType``: a topic's declared type, and a message's."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


#: The byte the SEND fast path reads per topic (``TopicConfig.type_code``): 0 for a topic
#: without a ``message.type`` attribute (not checked), else the declared type.
_CODES = {
    TopicMessageType.NORMAL: 1,
    TopicMessageType.FIFO: 2,
    TopicMessageType.DELAY: 3,
    TopicMessageType.TRANSACTION: 4,
    TopicMessageType.MIXED: 5,
    TopicMessageType.UNSPECIFIED: 6,
}


def type_code(t: TopicMessageType | None) -> int:
    """The fast path's byte for a declared type (0: untyped)."""
    return 0 if t is None else _CODES[t]


@dataclass(frozen=True, slots=True)
class _Attribute:
    """One attribute Java 5 knows: an enum (``values``) or a long range (``lo``..``hi``).
    ``supported`` is the part rmq implements (None: all of it)."""

    name: str
    changeable: bool
    values: frozenset[str] | None = None
    lo: int = 0
    hi: int = 0
    supported: frozenset[str] | None = None

    def verify(self, value: str) -> None:
        if self.values is not None:
            if value not in self.values:
                raise TopicAttributeError(
                    f"value is not in set: {sorted(self.values)} (attribute {self.name}: {value!r})"
                )
        else:
            try:
                n = int(value, 10)
            except ValueError:
                raise TopicAttributeError(f"attribute {self.name}: {value!r} is not a number") from None
            if not self.lo <= n <= self.hi:
                raise TopicAttributeError(f"value is not in range({self.lo}, {self.hi}) (attribute {self.name}: {n})")
        if self.supported is not None and value not in self.supported:
            supported = ", ".join(sorted(self.supported))
            raise TopicAttributeError(f"attribute {self.name}={value} is not supported by rmq (supported: {supported})")


_I64_MAX = (1 << 63) - 1

#: Java 5.3.3 ``TopicAttributes.ALL``. rmq keeps one consume-queue type, deletes by age and
#: has no per-topic retention, so only those attributes' defaults are taken.
ATTRIBUTES: dict[str, _Attribute] = {
    a.name: a
    for a in (
        _Attribute("queue.type", False, frozenset({"BatchCQ", "SimpleCQ"}), supported=frozenset({"SimpleCQ"})),
        _Attribute("cleanup.policy", False, frozenset({"DELETE", "COMPACTION"}), supported=frozenset({"DELETE"})),
        _Attribute(MESSAGE_TYPE, True, frozenset(t.value for t in TopicMessageType)),
        _Attribute("reserve.time", True, None, -1, _I64_MAX, supported=frozenset({"-1"})),
    )
}


def parse_attributes(text: str | None) -> dict[str, str]:
    """Java ``AttributeParser.parseToMap``: ``"+a=1,-b"`` → ``{"+a": "1", "-b": ""}`` (signs
    kept); raises :class:`TopicAttributeError` for an item without its sign or a repeated key."""
    out: dict[str, str] = {}
    if not text:
        return out
    items = text.split(",")
    while items and items[-1] == "":  # (Java's String.split drops trailing empty strings)
        items.pop()
    for kv in items:
        if "=" in kv:
            key, _, value = kv.partition("=")
            if "+" not in key:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {key}")
            if value == "" or "=" in value:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {kv} (expected +name=value)")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise TopicAttributeError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise TopicAttributeError(f"key duplication: {key}")
        out[key] = value
    return out


def attributes_to_string(attrs: Mapping[str, str]) -> str:
    """Java ``AttributeParser.parseToString`` (``key=value`` joined by commas; an empty value
    writes the key alone)."""
    return ",".join(k if not v else f"{k}={v}" for k, v in attrs.items())


def alter_attributes(create: bool, current: Mapping[str, str], new: Mapping[str, str]) -> dict[str, str]:
    """Java ``AttributeUtil.alterCurrentAttributes``: the topic's attributes after the signed
    changes ``new`` (from :func:`parse_attributes`); ``create`` when the topic is new (then only
    ``+`` items). Raises :class:`TopicAttributeError` with Java's words."""
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in new.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise TopicAttributeError("kv string format wrong.")
        if real in seen:
            raise TopicAttributeError(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith("+"):
                raise TopicAttributeError(f"only add attribute is supported while creating topic. key: {real}")
            init[real] = value
        elif key.startswith("+"):
            (update if real in current else add)[real] = value
        elif key.startswith("-"):
            if real not in current:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {real}")
            delete[real] = value
        else:
            raise TopicAttributeError(f"wrong format key: {real}")
    steps = ((init, True, False), (add, False, False), (update, False, False), (delete, False, True))
    for alter, is_init, is_delete in steps:
        for key, value in alter.items():
            attribute = ATTRIBUTES.get(key)
            if attribute is None:
                raise TopicAttributeError(f"unsupported key: {key} (known: {', '.join(sorted(ATTRIBUTES))})")
            if not is_init and not attribute.changeable:
                raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {key}")
            if not is_delete:
                attribute.verify(value)
    out = dict(current)
    out.update(init)
    out.update(add)
    out.update(update)
    for key in delete:
        out.pop(key, None)
    return out


def message_type_of_attributes(attrs: Mapping[str, str] | None) -> TopicMessageType | None:
    """The declared ``message.type`` of a topic with ``attrs``; None when it has none (Java's
    ``TopicConfig.getTopicMessageType`` says NORMAL then)."""
    if not attrs:
        return None
    v = attrs.get(MESSAGE_TYPE)
    if not v:
        return None
    try:
        return TopicMessageType(v)
    except ValueError:
        return None


_DELAY_KEYS = frozenset(
    {
        MessageConst.DELAY_TIME_LEVEL,
        MessageConst.TIMER_DELIVER_MS,
        MessageConst.TIMER_DELAY_SEC,
        MessageConst.TIMER_DELAY_MS,
        MessageConst.START_DELIVER_TIME,
    }
)


def message_type_of_properties(properties: str | Mapping[str, str] | None) -> TopicMessageType | None:
    """Java 5 ``TopicMessageType.parseFromMessageProperty``: TRANSACTION for a prepared
    transaction message (``TRAN_MSG=true``), DELAY for a delay level or a timer
    (``DELAY``, ``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``,
    ``__STARTDELIVERTIME``), FIFO for a message group (``__SHARDINGKEY``), else NORMAL. None
    for a message carrying ``TRANSFER_FLAG`` (Java's proxy does not check those).

    ``properties`` is the wire text (``name\\x01value\\x02…``) or a map; in the text, as Java
    5's ``string2messageProperties`` reads it, a pair with an empty name or value is absent."""
    if properties is None:
        props: Mapping[str, str] = {}
    elif isinstance(properties, str):
        props = java_properties(properties)
    else:
        props = properties
    if props.get(MessageConst.TRANSFER_FLAG):
        return None
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if any(props.get(k) for k in _DELAY_KEYS):
        return TopicMessageType.DELAY
    if props.get(MessageConst.SHARDING_KEY):
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def check_message_type(expected: TopicMessageType, actual: TopicMessageType) -> str | None:
    """Java 5 ``DefaultTopicMessageTypeValidator.validate``: None when a message of type
    ``actual`` may go to a topic declared ``expected``, else the refusal's remark."""
    if actual is TopicMessageType.UNSPECIFIED or (actual is not expected and expected is not TopicMessageType.MIXED):
        return (
            f"TopicMessageType validate failed, the expected type is {expected.value}, "
            f"but actual type is {actual.value}"
        )
    return None


_BATCH_ITEM_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
_I16 = struct.Struct(">h")


def first_batch_item_properties(body: bytes | bytearray | memoryview) -> str | None:
    """The properties text of the first message in a SEND_BATCH_MESSAGE body (what Java 5's
    proxy checks a batch's type by: ``messageList.get(0)``); None when the body is too short
    to hold one (the store refuses such a batch on its own)."""
    mv = memoryview(body)
    if len(mv) < _BATCH_ITEM_HEAD.size + 2:
        return None
    body_len = _BATCH_ITEM_HEAD.unpack_from(mv, 0)[4]
    at = _BATCH_ITEM_HEAD.size + body_len
    if body_len < 0 or at + 2 > len(mv):
        return None
    n = _I16.unpack_from(mv, at)[0]
    if n < 0 or at + 2 + n > len(mv):
        return None
    return bytes(mv[at + 2 : at + 2 + n]).decode("utf-8", "replace")
