"""Typed custom headers ↔ ``extFields`` (Java's ``*RequestHeader`` / ``*ResponseHeader``).

Each header is a slotted, keyword-only dataclass with snake_case attributes; the camelCase
wire name of every field is declared once, with ``w("wireName")`` (required) or
``w("wireName", default=...)`` (optional). The ``@header`` decorator then *generates* two plain
functions per class, so parsing costs no reflection per call (this is on the send and pull
hot paths):

* ``Header.from_ext_fields(ext)`` reads leniently, as real clients send mixed JSON types
  (Java's fastjson and the C++ client's JsonCpp differ): integers from JSON numbers or
  decimal strings; booleans from ``true/false``, ``"true"/"false"`` (any case), ``"0"/"1"``
  and ``0/1``; strings from
  strings or numbers. Unknown keys are ignored, JSON ``null`` counts as absent. A missing
  required field or an unparsable value raises ``RemotingCommandError`` naming the class
  and the wire field.
* ``header.to_ext_fields()`` returns ``dict[str, str]``: every value as a string (the C++
  client reads reply fields only when they are strings), absent (None) fields omitted.

Ranges, as Java's parsers enforce them: an int field is a Java ``Integer`` (int32) unless
declared ``w(..., int64=True)`` (a Java ``Long``), and a field may narrow that with ``lo``/``hi``
(``perm`` is 0..15). A value outside its range, or a string that cannot be encoded as UTF-8
(a lone surrogate from a ``\ud800`` JSON escape), raises ``RemotingCommandError`` when the
header is read, so no such value ever reaches a table that is persisted. Both readers check:
the generated Python one inline, the Cython ``HeaderReader`` as it converts (it hands a value
it refuses to the generated reader, which words the error).

Field names follow the Java classes of apache/rocketmq 4.9.8 exactly
(``common/.../protocol/header/**``). ``SendMessageRequestHeader`` also reads and writes the
one-letter names of ``SendMessageRequestHeaderV2`` (``a``…``n``); which naming a request uses
is decided by its request code alone (:func:`send_wire_names`, :func:`read_send_header`).
"""
import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, dataclass_transform, overload

from rmq.common import native
from rmq.common.constants import PermName, TopicValidator
from rmq.errors import RemotingCommandError
from rmq.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmq.remoting._codec import HeaderReader

__all__ = [
    "Header",
    "header",
    "w",
    "SEND_MESSAGE_V2_NAMES",
    "SEND_V2_CODES",
    "SendMessageRequestHeader",
    "read_send_header",
    "send_wire_names",
    "SendMessageResponseHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "GetConsumerListByGroupRequestHeader",
    "UnregisterClientRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "EndTransactionRequestHeader",
    "CheckTransactionStateRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteTopicRequestHeader",
    "GetRouteInfoRequestHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnRegisterBrokerRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "ResetOffsetRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "GetConsumerStatusRequestHeader",
    "ViewMessageRequestHeader",
    "QueryMessageRequestHeader",
    "GetKVConfigRequestHeader",
    "QueryMessageResponseHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
]

_REQUIRED = dataclasses.MISSING


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def w(wire: str, *, default: Any = _REQUIRED, int64: bool = False, lo: int | None = None,
      hi: int | None = None) -> Any:
    """Declare a header field: its camelCase wire name and, if optional, its ``default``.

    ``default`` is keyword-only: it is how type checkers (``dataclass_transform``) tell an
    optional field from a required one.

    For an int field: ``int64=True`` when Java declares it ``Long`` (else it is an ``Integer``,
    int32); ``lo``/``hi`` narrow the range further. A value outside is refused on reading.
    """
    lo_t, hi_t = (INT64_MIN, INT64_MAX) if int64 else (INT32_MIN, INT32_MAX)
    rng = (lo_t if lo is None else max(lo, lo_t), hi_t if hi is None else min(hi, hi_t))
    return dataclasses.field(default=default, metadata={"wire": wire, "range": rng})


# --------------------------------------------------------------------------- lenient readers
# Called only when the value is not already of the target type (the common case is inlined
# in the generated code as a `type(v) is …` check).


def _int(v: Any, cls: str, name: str) -> int:
    if type(v) is str:
        try:
            return int(v)  # int() itself allows surrounding whitespace
        except ValueError:
            pass
    elif type(v) is bool or (type(v) is float and v.is_integer()):
        return int(v)
    raise RemotingCommandError(f"{cls}: field {name!r} is not an integer: {v!r}")


_TRUE = frozenset(("true", "1"))
_FALSE = frozenset(("false", "0", ""))


def _bool(v: Any, cls: str, name: str) -> bool:
    if type(v) is str:
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
    elif type(v) is int and v in (0, 1):
        return bool(v)
    raise RemotingCommandError(f"{cls}: field {name!r} is not a boolean: {v!r}")


def _str(v: Any, cls: str, name: str) -> str:
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is int or type(v) is float:
        return str(v)
    raise RemotingCommandError(f"{cls}: field {name!r} is not a string: {v!r}")


def _missing(cls: str, name: str) -> RemotingCommandError:
    return RemotingCommandError(f"{cls}: missing required field {name!r}")


def _out_of_range(cls: str, name: str, v: int, lo: int, hi: int) -> RemotingCommandError:
    shown = str(v) if abs(v) < 10**30 else f"a {v.bit_length()}-bit integer"
    return RemotingCommandError(f"{cls}: field {name!r} is out of range {lo}..{hi}: {shown}")


def _check_text(v: str, cls: str, name: str) -> None:
    """Refuse text that cannot be written as UTF-8 (lone surrogates)."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise RemotingCommandError(f"{cls}: field {name!r} is not valid Unicode text "
                                   "(a lone surrogate)") from None


def _wstr(v: Any) -> str:
    if type(v) is str:
        return v
    if type(v) is bool:
        return "true" if v else "false"
    return str(v)


_READERS = {int: "_int", bool: "_bool", str: "_str"}

# The Cython twin of the generated readers (rmq/remoting/_codec.pyx): takes the common values, hands
# everything else to the generated reader. RMQ_NO_EXTENSIONS=1 leaves it out.
_HeaderReader: "type[HeaderReader] | None" = None
if native.ENABLED:
    try:
        from rmq.remoting._codec import HeaderReader as _HeaderReader
    except ImportError:  # pragma: no cover - an extension built before the reader existed
        pass
    if not getattr(_HeaderReader, "checks_ranges", False):  # pragma: no cover - built before
        _HeaderReader = None  # the reader checked ranges: it would let out-of-range values in
native.chose("header reader", _HeaderReader is not None)
_KIND = {str: 0, int: 1, bool: 2}

# (field, its base type: int, str or bool) per header field, in declaration order.
_Fields = list[tuple["dataclasses.Field[Any]", type]]


def _base_type(tp: Any) -> type:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base: type = args[0] if args else tp
    if base not in _READERS:
        raise TypeError(f"header fields must be int, str or bool (optionally | None), not {tp!r}")
    return base


def _gen_reader(cls: type, fields: _Fields, names: dict[str, str]) -> "classmethod[Any, ..., Any]":
    # Straight-line code, one local per field, one keyword call at the end: about twice as
    # fast as filling a dict and calling cls(**kw).
    cname = cls.__name__
    if "__post_init__" in vars(cls):
        raise TypeError(f"{cls.__name__}: headers are built without __init__, so no __post_init__")
    ns: dict[str, Any] = {"_missing": _missing, "_int": _int, "_bool": _bool, "_str": _str,
                          "_new": object.__new__, "_oor": _out_of_range, "_text": _check_text}
    lines = ["def from_ext_fields(cls, ext):", "    g = ext.get"]
    args = []
    for i, (f, tp) in enumerate(fields):
        wire = names[f.name]
        slow = f"{_READERS[tp]}(v, {cname!r}, {wire!r})"
        lines.append(f"    v = g({wire!r})")
        if f.default is _REQUIRED:
            lines.append(f"    if v is None: raise _missing({cname!r}, {wire!r})")
        else:
            ns[f"_d{i}"] = f.default
            lines.append(f"    if v is None: a{i} = _d{i}")
        lines.append(f"    {'el' if f.default is not _REQUIRED else ''}if type(v) is {tp.__name__}: a{i} = v")
        # Java clients send every value as a JSON string ("3", "false"): the common
        # conversions are inlined; the reader functions handle the rest and word the errors.
        if tp is int:
            lines.append("    elif type(v) is str:")
            lines.append(f"        try: a{i} = int(v)")
            lines.append(f"        except ValueError: a{i} = {slow}")
        elif tp is bool:
            lines.append(f"    elif v == 'false' and type(v) is str: a{i} = False")
            lines.append(f"    elif v == 'true' and type(v) is str: a{i} = True")
        lines.append(f"    else: a{i} = {slow}")
        lines += _check_lines(f"a{i}", f, tp, cname, wire, "    ")
        args.append(f"{f.name}=a{i}")
    # Slot stores on a bare instance: a third cheaper than a 14-keyword __init__ call (the
    # generated dataclass __init__ only assigns; no header has a __post_init__).
    lines.append("    o = _new(cls)")
    lines += [f"    o.{a.split('=')[0]} = {a.split('=')[1]}" for a in args]
    lines.append("    return o")
    exec("\n".join(lines), ns)  # generated once per class at import time
    reader = ns["from_ext_fields"]
    if _HeaderReader is not None:
        spec = [(f.name, names[f.name], _KIND[tp], f.default is _REQUIRED,
                 None if f.default is _REQUIRED else f.default,
                 *(f.metadata["range"] if tp is int else (0, 0))) for f, tp in fields]
        reader = _HeaderReader(spec, reader)  # .fallback is the generated reader
    return classmethod(reader)


def _check_lines(var: str, f: "dataclasses.Field[Any]", tp: type, cname: str, wire: str, indent: str) -> list[str]:
    """Generated checks of one decoded value: the int range, or text encodable as UTF-8."""
    maybe_none = f.default is not _REQUIRED and f.default is None
    guard = f"{var} is not None and " if maybe_none else ""
    if tp is int:
        lo, hi = f.metadata["range"]
        return [f"{indent}if {guard}not ({lo} <= {var} <= {hi}): raise _oor({cname!r}, {wire!r}, {var}, {lo}, {hi})"]
    if tp is str:
        return [f"{indent}if {guard}not {var}.isascii(): _text({var}, {cname!r}, {wire!r})"]
    return []


def _gen_writer(cls: type, fields: _Fields, names: dict[str, str], fname: str) -> Callable[..., dict[str, str]]:
    lines = [f"def {fname}(self):", "    d = {}"]
    for f, tp in fields:
        wire = names[f.name]
        conv = {str: "_wstr(v)", int: "str(v)", bool: "('true' if v else 'false')"}[tp]
        lines.append(f"    v = self.{f.name}")
        lines.append(f"    if v is not None: d[{wire!r}] = {conv}")
    lines.append("    return d")
    ns: dict[str, Any] = {"_wstr": _wstr}
    exec("\n".join(lines), ns)
    writer: Callable[..., dict[str, str]] = ns[fname]
    return writer


class Header:
    """Base of all typed headers (for isinstance checks and typing)."""

    __slots__ = ()
    WIRE_NAMES: ClassVar[dict[str, str]]
    __dataclass_fields__: ClassVar[dict[str, "dataclasses.Field[Any]"]]  # set by @header

    # Both are generated per class by the @header decorator (straight-line code, no reflection
    # per call); reaching these means a header class was declared without it.
    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, Any]) -> Self:
        raise TypeError(f"{cls.__name__} is not decorated with @header")

    def to_ext_fields(self) -> dict[str, str]:
        raise TypeError(f"{type(self).__name__} is not decorated with @header")


_H = TypeVar("_H", bound=Header)


@overload
def header(cls: type[_H], /) -> type[_H]: ...


@overload
def header(*, v2: dict[str, str] | None = None) -> Callable[[type[_H]], type[_H]]: ...


@dataclass_transform(kw_only_default=True, field_specifiers=(w,))
def header(cls: type[_H] | None = None, *, v2: dict[str, str] | None = None
           ) -> type[_H] | Callable[[type[_H]], type[_H]]:
    """Class decorator: make ``cls`` a slotted kw-only dataclass and generate its codecs.

    Args:
        v2: optional second set of wire names (snake_case attribute → wire name), which
            generates ``from_ext_fields_v2`` / ``to_ext_fields_v2`` (the class declares them
            for the type checker). ``from_ext_fields`` reads the first naming only: a
            request's code says which naming it uses, never the names present.
    """

    def wrap(cls: type[_H]) -> type[_H]:
        dc = dataclasses.dataclass(slots=True, kw_only=True)(cls)
        hints = typing.get_type_hints(dc)
        fields = [(f, _base_type(hints[f.name])) for f in dataclasses.fields(dc)]
        names = {f.name: f.metadata["wire"] for f, _ in fields}
        # The generated members replace the base class's stubs (set with setattr: they are
        # not declared in the class body).
        reader = _gen_reader(dc, fields, names)
        members: dict[str, Any] = {"WIRE_NAMES": names,
                                   "to_ext_fields": _gen_writer(dc, fields, names, "to_ext_fields")}
        if v2 is not None:
            v2_names = {f.name: v2.get(f.name, names[f.name]) for f, _ in fields}
            reader_v2 = _gen_reader(dc, fields, v2_names)
            members.update(WIRE_NAMES_V2=v2_names, from_ext_fields_v2=reader_v2,
                           to_ext_fields_v2=_gen_writer(dc, fields, v2_names, "to_ext_fields_v2"))
        members["from_ext_fields"] = reader
        for name, value in members.items():
            setattr(dc, name, value)
        return dc

    return wrap if cls is None else wrap(cls)


# ============================================================================ producer

# SendMessageRequestHeaderV2: the same fields under one-letter names, to shrink every send.
SEND_MESSAGE_V2_NAMES = {
    "producer_group": "a",
    "topic": "b",
    "default_topic": "c",
    "default_topic_queue_nums": "d",
    "queue_id": "e",
    "sys_flag": "f",
    "born_timestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsume_times": "j",
    "unit_mode": "k",
    "max_reconsume_times": "l",
    "batch": "m",
    "broker_name": "n",
}


@header(v2=SEND_MESSAGE_V2_NAMES)
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (10, V1 names) and SEND_MESSAGE_V2 (310, ``a``…``n``); also SEND_BATCH_MESSAGE
    (320, V2 names) and the replies 324 (V1) / 325 (V2).

    ``from_ext_fields`` reads the V1 names only, ``from_ext_fields_v2`` the V2 names only; read a
    request with :func:`read_send_header`, which picks by its code.
    """

    producer_group: str = w("producerGroup")
    topic: str = w("topic")
    default_topic: str = w("defaultTopic", default=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC)
    default_topic_queue_nums: int = w("defaultTopicQueueNums", default=4)
    queue_id: int = w("queueId")
    sys_flag: int = w("sysFlag", default=0)
    born_timestamp: int = w("bornTimestamp", default=0, int64=True)
    flag: int = w("flag", default=0)
    properties: str | None = w("properties", default=None)
    reconsume_times: int | None = w("reconsumeTimes", default=None)
    unit_mode: bool = w("unitMode", default=False)
    batch: bool = w("batch", default=False)
    max_reconsume_times: int | None = w("maxReconsumeTimes", default=None)
    broker_name: str | None = w("brokerName", default=None)  # V2 only in Java (`n`)

    if TYPE_CHECKING:  # generated by @header(v2=...)
        WIRE_NAMES_V2: ClassVar[dict[str, str]]

        @classmethod
        def from_ext_fields_v2(cls, ext: Mapping[str, Any]) -> Self: ...

        def to_ext_fields_v2(self) -> dict[str, str]: ...


# The codes whose header is SendMessageRequestHeaderV2 (one-letter names); every other code
# carrying a SEND header uses the long names. Java decides by the code alone
# (AbstractSendMessageProcessor.parseRequestHeader, ReplyMessageProcessor.parseRequestHeader,
# PlainAccessValidator.parse): a 310 with long names has no topic, a 10 with ``b`` has no
# second topic. The ACL check and every SEND entry point (Python and rmq/broker/processors/_sendpath.pyx) read
# by code through these, so no request can name one topic to the ACL and another to the store.
SEND_V2_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                           RequestCode.SEND_REPLY_MESSAGE_V2})


def send_wire_names(code: int) -> dict[str, str]:
    """The wire names (attribute → name) of a SEND header sent with request ``code``."""
    if code in SEND_V2_CODES:
        return SendMessageRequestHeader.WIRE_NAMES_V2
    return SendMessageRequestHeader.WIRE_NAMES


def read_send_header(code: int, ext: Mapping[str, Any]) -> SendMessageRequestHeader:
    """The SEND header of a request with ``code`` (10, 310, 320, 324, 325): the V2 names for
    310/320/325, the V1 names otherwise; raises ``RemotingCommandError`` naming the missing or
    bad field of that naming."""
    if code in SEND_V2_CODES:
        return SendMessageRequestHeader.from_ext_fields_v2(ext)
    return SendMessageRequestHeader.from_ext_fields(ext)




@header
class SendMessageResponseHeader(Header):
    msg_id: str = w("msgId")
    queue_id: int = w("queueId")
    queue_offset: int = w("queueOffset", int64=True)
    transaction_id: str | None = w("transactionId", default=None)


@header
class EndTransactionRequestHeader(Header):
    producer_group: str = w("producerGroup")
    tran_state_table_offset: int = w("tranStateTableOffset", int64=True)
    commit_log_offset: int = w("commitLogOffset", int64=True)
    commit_or_rollback: int = w("commitOrRollback")  # MessageSysFlag.TRANSACTION_*_TYPE
    from_transaction_check: bool = w("fromTransactionCheck", default=False)
    msg_id: str = w("msgId")
    transaction_id: str | None = w("transactionId", default=None)


@header
class CheckTransactionStateRequestHeader(Header):
    tran_state_table_offset: int = w("tranStateTableOffset", int64=True)
    commit_log_offset: int = w("commitLogOffset", int64=True)
    msg_id: str | None = w("msgId", default=None)
    transaction_id: str | None = w("transactionId", default=None)
    offset_msg_id: str | None = w("offsetMsgId", default=None)


# ============================================================================ consumer


@header
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11). ``sys_flag``: 1 commit offset, 2 suspend, 4 subscription, 8 class filter."""

    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    queue_offset: int = w("queueOffset", int64=True)
    max_msg_nums: int = w("maxMsgNums")
    sys_flag: int = w("sysFlag")
    commit_offset: int = w("commitOffset", default=0, int64=True)
    suspend_timeout_millis: int = w("suspendTimeoutMillis", default=0, int64=True)
    subscription: str | None = w("subscription", default=None)
    sub_version: int = w("subVersion", default=0, int64=True)
    expression_type: str | None = w("expressionType", default=None)


@header
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int = w("suggestWhichBrokerId", int64=True)
    next_begin_offset: int = w("nextBeginOffset", int64=True)
    min_offset: int = w("minOffset", int64=True)
    max_offset: int = w("maxOffset", int64=True)


@header
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")


@header
class QueryConsumerOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    commit_offset: int = w("commitOffset", int64=True)


@header
class GetMaxOffsetRequestHeader(Header):
    topic: str = w("topic")
    queue_id: int = w("queueId")


@header
class GetMaxOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class GetMinOffsetRequestHeader(Header):
    topic: str = w("topic")
    queue_id: int = w("queueId")


@header
class GetMinOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29); ``timestamp`` in ms."""

    topic: str = w("topic")
    queue_id: int = w("queueId")
    timestamp: int = w("timestamp", int64=True)


@header
class SearchOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class GetConsumerListByGroupRequestHeader(Header):
    consumer_group: str = w("consumerGroup")


@header
class UnregisterClientRequestHeader(Header):
    client_id: str = w("clientID")
    producer_group: str | None = w("producerGroup", default=None)
    consumer_group: str | None = w("consumerGroup", default=None)


@header
class ConsumerSendMsgBackRequestHeader(Header):
    """CONSUMER_SEND_MSG_BACK (36); ``offset`` is the message's commit-log offset."""

    offset: int = w("offset", int64=True)
    group: str = w("group")
    delay_level: int = w("delayLevel", default=0)
    origin_msg_id: str | None = w("originMsgId", default=None)
    origin_topic: str | None = w("originTopic", default=None)
    unit_mode: bool = w("unitMode", default=False)
    max_reconsume_times: int | None = w("maxReconsumeTimes", default=None)


@header
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str = w("consumerGroup")


# ============================================================================ admin / broker → client


@header
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17). ``perm``: 2 write, 4 read, 6 both."""

    topic: str = w("topic")
    default_topic: str = w("defaultTopic", default=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC)
    read_queue_nums: int = w("readQueueNums")
    write_queue_nums: int = w("writeQueueNums")
    perm: int = w("perm", default=PermName.READ_WRITE, lo=0, hi=PermName.ALL)
    topic_filter_type: str = w("topicFilterType", default="SINGLE_TAG")
    topic_sys_flag: int | None = w("topicSysFlag", default=None)
    order: bool = w("order", default=False)


@header
class DeleteTopicRequestHeader(Header):
    topic: str = w("topic")


@header
class GetRouteInfoRequestHeader(Header):
    topic: str = w("topic")
    accept_standard_json_only: bool | None = w("acceptStandardJsonOnly", default=None)


@header
class GetConsumeStatsRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    topic: str | None = w("topic", default=None)


@header
class GetTopicStatsInfoRequestHeader(Header):
    topic: str = w("topic")


@header
class ResetOffsetRequestHeader(Header):
    """RESET_CONSUMER_CLIENT_OFFSET (220) / INVOKE_BROKER_TO_RESET_OFFSET (222)."""

    topic: str = w("topic")
    group: str = w("group")
    timestamp: int = w("timestamp", int64=True)
    is_force: bool = w("isForce", default=False)


@header
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    client_id: str = w("clientId")
    jstack_enable: bool = w("jstackEnable", default=False)


@header
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str = w("consumerGroup")
    client_id: str | None = w("clientId", default=None)
    msg_id: str | None = w("msgId", default=None)
    broker_name: str | None = w("brokerName", default=None)


@header
class GetConsumerStatusRequestHeader(Header):
    topic: str = w("topic")
    group: str = w("group")
    client_addr: str | None = w("clientAddr", default=None)


@header
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the commit-log offset from the offsetMsgId."""

    offset: int = w("offset", int64=True)


@header
class QueryMessageRequestHeader(Header):
    topic: str = w("topic")
    key: str = w("key")
    max_num: int = w("maxNum")
    begin_timestamp: int = w("beginTimestamp", int64=True)
    end_timestamp: int = w("endTimestamp", int64=True)


# ============================================================================ name server


@header
class RegisterBrokerRequestHeader(Header):
    broker_name: str = w("brokerName")
    broker_addr: str = w("brokerAddr")
    cluster_name: str = w("clusterName")
    ha_server_addr: str = w("haServerAddr", default="")
    broker_id: int = w("brokerId", int64=True)
    compressed: bool = w("compressed", default=False)


@header
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = w("haServerAddr", default=None)
    master_addr: str | None = w("masterAddr", default=None)


@header
class UnRegisterBrokerRequestHeader(Header):
    broker_name: str = w("brokerName")
    broker_addr: str = w("brokerAddr")
    cluster_name: str = w("clusterName")
    broker_id: int = w("brokerId", int64=True)


@header
class GetKVConfigRequestHeader(Header):
    """GET_KV_CONFIG (101) / GET_KV_CONFIG_BY_VALUE (217, sent by ali-ons)."""

    namespace: str = w("namespace")
    key: str = w("key")


# ---------------------------------------------------------------------------- topics
# Admin headers: topics, clusters, sendMessage/consumeMessage/printMsg, allocateMQ.


@header
class GetTopicsByClusterRequestHeader(Header):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = w("cluster")


__all__ += ["GetTopicsByClusterRequestHeader"]


# ---------------------------------------------------------------------------- index
# Admin headers: QUERY_MESSAGE 12, VIEW_MESSAGE_BY_ID 33, QUERY_TOPIC_CONSUME_BY_WHO 300.
# (the index engineer adds here)


@header
class QueryMessageResponseHeader(Header):
    """QUERY_MESSAGE (12) reply: where the index ended when it answered."""

    index_last_update_timestamp: int = w("indexLastUpdateTimestamp", int64=True)
    index_last_update_phyoffset: int = w("indexLastUpdatePhyoffset", int64=True)


@header
class QueryTopicConsumeByWhoRequestHeader(Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str = w("topic")


# ---------------------------------------------------------------------------- conns
# Admin headers: connections, consumer status, offset resets (203, 204, 220-223, 307, 309).
# (the conns engineer adds here)


@header
class GetConsumerConnectionListRequestHeader(Header):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str = w("consumerGroup")


@header
class GetProducerConnectionListRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str = w("producerGroup")


__all__ += ["GetConsumerConnectionListRequestHeader", "GetProducerConnectionListRequestHeader"]


# ---------------------------------------------------------------------------- stats
# Admin headers: broker statistics and configuration (25, 315, 317).


@header
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): one stats item (``TOPIC_PUT_NUMS`` / ``topic``,
    ``GROUP_GET_NUMS`` / ``topic@group``, ...)."""
    stats_name: str = w("statsName")
    stats_key: str = w("statsKey")


@header
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317): ``isOrder`` keeps only orderly topics."""
    is_order: bool = w("isOrder", default=False)


__all__ += ["GetConsumeStatsInBrokerHeader", "ViewBrokerStatsDataRequestHeader"]


# ---------------------------------------------------------------------------- ops
# Admin headers: name-server config, write perm, KV config, store maintenance
# (43, 45, 100-102, 205, 207, 306, 318, 319, 321, 327, 329).
# (the ops engineer adds here)


@header
class WipeWritePermOfBrokerRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327; Java
    ``AddWritePermOfBrokerRequestHeader``, the same single field), to a name server."""

    broker_name: str = w("brokerName")


@header
class WipeWritePermOfBrokerResponseHeader(Header):
    """The topics whose queue data of that broker lost write permission."""

    wipe_topic_count: int = w("wipeTopicCount", default=0)


@header
class AddWritePermOfBrokerResponseHeader(Header):
    """The topics whose queue data of that broker got read + write permission back."""

    add_topic_count: int = w("addTopicCount", default=0)


@header
class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (100)."""

    namespace: str = w("namespace")
    key: str = w("key")
    value: str = w("value")


@header
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207): ``remove_offset`` also drops the group's committed
    offsets (Java 4.9.8's field; default false)."""

    group_name: str = w("groupName")
    remove_offset: bool = w("removeOffset", default=False)


@header
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (321): ``count`` units of ``topic``/``queue_id`` from ``index``;
    ``consumer_group`` adds the group's subscription."""

    topic: str = w("topic")
    queue_id: int = w("queueId")
    index: int = w("index", int64=True)
    count: int = w("count")
    consumer_group: str | None = w("consumerGroup", default=None)


__all__ += ["AddWritePermOfBrokerResponseHeader", "DeleteSubscriptionGroupRequestHeader", "PutKVConfigRequestHeader",
            "QueryConsumeQueueRequestHeader", "WipeWritePermOfBrokerRequestHeader",
            "WipeWritePermOfBrokerResponseHeader"]
# ---------------------------------------------------------------------------- acl
# ACL admin headers: UPDATE_AND_CREATE_ACL_CONFIG 50, DELETE_ACL_CONFIG 51,
# GET_BROKER_CLUSTER_ACL_INFO 52, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53.


@header
class CreateAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50): one account; the perm lists are comma-separated."""

    access_key: str = w("accessKey")
    secret_key: str | None = w("secretKey", default=None)
    white_remote_address: str | None = w("whiteRemoteAddress", default=None)
    admin: bool = w("admin", default=False)
    default_topic_perm: str | None = w("defaultTopicPerm", default=None)
    default_group_perm: str | None = w("defaultGroupPerm", default=None)
    topic_perms: str | None = w("topicPerms", default=None)
    group_perms: str | None = w("groupPerms", default=None)


@header
class DeleteAccessConfigRequestHeader(Header):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str = w("accessKey")


@header
class GetBrokerAclConfigResponseHeader(Header):
    """GET_BROKER_CLUSTER_ACL_INFO (52) reply: the data versions of the ACL files."""

    version: str = w("version")
    all_acl_file_version: str | None = w("allAclFileVersion", default=None)
    broker_name: str = w("brokerName")
    broker_addr: str = w("brokerAddr")
    cluster_name: str = w("clusterName")


@header
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): comma-separated addresses; an empty file path
    means the default plain_acl.yml."""

    global_white_addrs: str = w("globalWhiteAddrs")
    acl_file_full_path: str | None = w("aclFileFullPath", default=None)


# ---------------------------------------------------------------------------- ha


# ---------------------------------------------------------------------------- slave


# ---------------------------------------------------------------------------- sql92


# ---------------------------------------------------------------------------- reqreply


@header
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker → requesting client (Java
    ``ReplyMessageRequestHeader``): the reply's send header plus where it was born and stored.
    ``properties`` carry CORRELATION_ID, which the requester matches to its waiting request."""

    producer_group: str = w("producerGroup")
    topic: str = w("topic")
    default_topic: str = w("defaultTopic")
    default_topic_queue_nums: int = w("defaultTopicQueueNums")
    queue_id: int = w("queueId")
    sys_flag: int = w("sysFlag")
    born_timestamp: int = w("bornTimestamp", int64=True)
    flag: int = w("flag")
    properties: str | None = w("properties", default=None)
    reconsume_times: int | None = w("reconsumeTimes", default=None)
    unit_mode: bool = w("unitMode", default=False)
    born_host: str = w("bornHost")
    store_host: str = w("storeHost")
    store_timestamp: int = w("storeTimestamp", int64=True)


__all__ += ["ReplyMessageRequestHeader"]


# ---------------------------------------------------------------------------- sdk


# ---------------------------------------------------------------------------- metrics


# ---------------------------------------------------------------------------- console


# ---------------------------------------------------------------------------- sendpath
