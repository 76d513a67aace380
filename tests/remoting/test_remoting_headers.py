"""Typed headers read what real clients send (mixed JSON types, V1 and V2 send names)."""

import dataclasses
import functools
import typing

import pytest
from remoting_golden import client_requests, quickstart, serialize_frames

from rmq.errors import RemotingCommandError
from rmq.protocol import _codec
from rmq.protocol.codes import RequestCode
from rmq.protocol.headers import _base_type, _bool, _check_text, _int, _missing, _out_of_range, _str, header_classes
from rmq.protocol.headers.client import NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader
from rmq.protocol.headers.consumer import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq.protocol.headers.message import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    read_send_header,
    send_wire_names,
)
from rmq.protocol.headers.namesrv import (
    GetKVConfigRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.remoting.codec import decode_frame

REQUEST_HEADERS = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeader,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.GET_KV_CONFIG_BY_VALUE: GetKVConfigRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
}

CLIENT_ROWS = client_requests()


def _wire_value(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


@pytest.mark.parametrize(
    "name,row",
    CLIENT_ROWS,
    ids=[f"{n.split('-')[0]}-{i}-{r['header']['code']}" for i, (n, r) in enumerate(CLIENT_ROWS)],
)
def test_client_captures_parse(name, row):
    header = row["header"]
    cls = REQUEST_HEADERS.get(header["code"])
    if cls is None:
        assert header["code"] == RequestCode.HEART_BEAT  # the only header-less request captured
        return
    ext = header.get("extFields", {})
    if cls is SendMessageRequestHeader:
        h = read_send_header(header["code"], ext)
        names = send_wire_names(header["code"])
    else:
        h = cls.from_ext_fields(ext)
        names = h.WIRE_NAMES
    # every field the client sent is read with the value it meant, whatever its JSON type
    for attr, wire in names.items():
        if wire in ext and ext[wire] is not None:
            got = getattr(h, attr)
            sent = ext[wire]
            if isinstance(got, bool):
                assert got == (_wire_value(sent).lower() in ("true", "1")), (wire, sent)
            else:
                assert _wire_value(got) == _wire_value(sent), (wire, sent, got)


def test_v1_and_v2_send_headers_map_to_one_class():
    cpp = next(r["header"] for n, r in CLIENT_ROWS if r["header"]["code"] == 10)
    ons = next(r["header"] for n, r in CLIENT_ROWS if r["header"]["code"] == 310)
    h1 = read_send_header(10, cpp["extFields"])
    h2 = read_send_header(310, ons["extFields"])
    assert type(h1) is type(h2) is SendMessageRequestHeader
    assert h1.topic == h2.topic == "TopicTest"
    assert h1.default_topic_queue_nums == 4 and isinstance(h1.born_timestamp, int)
    assert h1.batch is False and h2.unit_mode is False  # "0" and false
    assert h1.properties.startswith("KEYS\u0001")
    # and back: V2 names with string values
    v2 = h2.to_ext_fields_v2()
    assert v2["b"] == "TopicTest" and v2["d"] == "4" and v2["k"] == "false"
    assert read_send_header(310, v2) == h2
    assert read_send_header(10, h1.to_ext_fields()) == h1
    # the code alone picks the naming (Java parseRequestHeader): never the names present
    with pytest.raises(RemotingCommandError, match="'a'"):
        read_send_header(310, h1.to_ext_fields())
    with pytest.raises(RemotingCommandError, match="'producerGroup'"):
        read_send_header(10, v2)
    assert read_send_header(10, {**h1.to_ext_fields(), "b": "Other"}).topic == "TopicTest"
    assert read_send_header(320, {**v2, "topic": "Other"}).topic == "TopicTest"


def test_java_binary_send_v2_parses():
    rows = [r for r in serialize_frames() if r["serialize"] == 1 and r["code"] == RequestCode.SEND_MESSAGE_V2]
    assert rows
    for row in rows:
        h = read_send_header(row["code"], decode_frame(row["frame"]).ext_fields)
        assert h.topic == "TopicTest" and h.producer_group


def test_java_json_pull_and_replies_parse():
    pulls = [
        decode_frame(r["frame"]) for r in quickstart() if r["code"] == RequestCode.PULL_MESSAGE and not r["flag"] & 1
    ]
    assert pulls
    for cmd in pulls:
        h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        assert h.max_msg_nums == 32 and h.topic
    replies = [
        decode_frame(r["frame"])
        for r in quickstart()
        if r.get("request_code") == RequestCode.PULL_MESSAGE and r["code"] == 0
    ]
    for cmd in replies:
        h = PullMessageResponseHeader.from_ext_fields(cmd.ext_fields)
        assert h.next_begin_offset > 0 and h.max_offset >= h.min_offset
    sends = [
        decode_frame(r["frame"])
        for r in quickstart()
        if r.get("request_code") == RequestCode.SEND_MESSAGE_V2 and r["code"] == 0
    ]
    for cmd in sends:
        h = SendMessageResponseHeader.from_ext_fields(cmd.ext_fields)
        assert len(h.msg_id) == 32


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("0", False),
        ("1", True),
        ("true", True),
        ("false", False),
        ("TRUE", True),
        (True, True),
        (False, False),
        (0, False),
        (1, True),
    ],
)
def test_lenient_booleans(raw, expected):
    h = SendMessageRequestHeader.from_ext_fields({"producerGroup": "g", "topic": "t", "queueId": 0, "batch": raw})
    assert h.batch is expected


@pytest.mark.parametrize("raw", [" 42", "42", 42, 42.0])
def test_lenient_integers(raw):
    assert GetMaxOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": raw}).queue_id == 42


def test_strings_from_numbers_and_unknown_keys_ignored():
    h = GetRouteInfoRequestHeader.from_ext_fields({"topic": 123, "Signature": "x", "AccessKey": ""})
    assert h.topic == "123"


@pytest.mark.parametrize(
    "ext, message",
    [
        ({"topic": "t"}, "missing required field 'queueId'"),
        ({"topic": "t", "queueId": None}, "missing required field 'queueId'"),
        ({"topic": "t", "queueId": "x1"}, "field 'queueId' is not an integer"),
        ({"topic": "t", "queueId": 1.5}, "field 'queueId' is not an integer"),
        ({"topic": ["t"], "queueId": 1}, "field 'topic' is not a string"),
    ],
)
def test_bad_fields_name_the_field(ext, message):
    with pytest.raises(RemotingCommandError) as info:
        GetMaxOffsetRequestHeader.from_ext_fields(ext)
    assert message in str(info.value) and "GetMaxOffsetRequestHeader" in str(info.value)


def test_bad_boolean_names_the_field():
    with pytest.raises(RemotingCommandError, match="'batch' is not a boolean"):
        SendMessageRequestHeader.from_ext_fields({"producerGroup": "g", "topic": "t", "queueId": 0, "batch": "yes"})


def test_to_ext_fields_writes_strings_only_and_omits_none():
    for cls in header_classes():
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.default is dataclasses.MISSING:
                kwargs[f.name] = 7 if "int" in str(f.type) else ("x" if "str" in str(f.type) else True)
        h = cls(**kwargs)
        ext = h.to_ext_fields()
        assert all(type(v) is str for v in ext.values()), cls
        assert None not in ext.values()
        assert cls.from_ext_fields(ext) == h, cls


def test_create_topic_header_fields():
    h = CreateTopicRequestHeader(topic="T", read_queue_nums=8, write_queue_nums=8)
    assert h.to_ext_fields() == {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
    }


def test_pull_response_header_to_ext_fields():
    h = PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=33, min_offset=0, max_offset=100)
    assert h.to_ext_fields() == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "33",
        "minOffset": "0",
        "maxOffset": "100",
    }


# --------------------------------------------------------------------------- generated readers
# The generated from_ext_fields inlines the common conversions ("3" → 3, "false" → False) and
# builds the instance without __init__; an interpreted reference of the documented rules must
# give the same header or the same error for any input.


@functools.cache
def _field_types(cls) -> dict[str, type]:
    """Each field's base type (get_type_hints evaluates the annotations anew at each call)."""
    hints = typing.get_type_hints(cls)
    return {f.name: _base_type(hints[f.name]) for f in dataclasses.fields(cls)}


def _reference_read(cls, ext, names):
    kw = {}
    types = _field_types(cls)
    for f in dataclasses.fields(cls):
        wire = names[f.name]
        tp = types[f.name]
        v = ext.get(wire)
        if v is None:
            if f.default is dataclasses.MISSING:
                raise _missing(cls.__name__, wire)
            kw[f.name] = f.default
        elif type(v) is tp:
            kw[f.name] = v
        else:
            kw[f.name] = {int: _int, bool: _bool, str: _str}[tp](v, cls.__name__, wire)
        v = kw[f.name]
        if tp is int and v is not None:  # Java's Integer / Long (or a narrower declared) range
            lo, hi = f.metadata["range"]
            if not lo <= v <= hi:
                raise _out_of_range(cls.__name__, wire, v, lo, hi)
        if tp is str and v is not None:  # text that UTF-8 can carry
            _check_text(v, cls.__name__, wire)
    return cls(**kw)


class _DictSub(dict):
    pass


class _StrSub(str):
    pass


_COMMON = {
    str: ["GID_x", "TopicTest", "", "中文"],
    int: ["0", "3", "-1", "1763769600000", 7, 0],
    bool: ["true", "false", True, False],
}
_ODD_VALUES = [
    _StrSub("false"),
    _StrSub("12"),
    None,
    0,
    1,
    -7,
    2**70,
    True,
    False,
    1.0,
    2.5,
    "",
    " ",
    "3",
    " 12 ",
    "-4",
    "1_000",
    "１２",
    "0x1f",
    "x",
    "true",
    "false",
    "TRUE",
    " False ",
    "0",
    "1",
    "2",
    "null",
    "tópic",
    [1],
    {"a": 1},
    2**31,
    -(2**31) - 1,
    str(2**31 - 1),
    str(2**63),
    -(2**63),
    str(2**64),
    "\ud800",
    "a\udfff",
    2.0**40,
    # range edges (int32, int64, perm 0..15) and text of each width, with and without a
    # lone surrogate: the Cython reader must refuse exactly what the reference refuses
    2**31 - 1,
    str(-(2**31)),
    str(2**63 - 1),
    -(2**63) - 1,
    str(-(2**63)),
    2**64,
    "15",
    "16",
    16,
    -1,
    "é\ud800",
    "中\udbff",
    "\U0001f600",
    "\U0001f600\udc00",
    "\ud83d\ude00",
]


@pytest.mark.parametrize(
    "cls",
    [
        SendMessageRequestHeader,
        PullMessageRequestHeader,
        EndTransactionRequestHeader,
        ConsumerSendMsgBackRequestHeader,
        QueryConsumerOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader,
        CreateTopicRequestHeader,
    ],
    ids=lambda c: c.__name__,
)
def test_generated_reader_matches_the_interpreted_rules(cls, depth):
    import random

    rng = random.Random(cls.__name__)
    variants = []
    for attr, names in (
        ("from_ext_fields", cls.WIRE_NAMES),
        ("from_ext_fields_v2", getattr(cls, "WIRE_NAMES_V2", None)),
    ):
        if names is None:
            continue
        reader = vars(cls)[attr].__func__
        variants.append((functools.partial(reader, cls), names))
        if hasattr(reader, "fallback"):  # the Cython reader (rmq/protocol/_codec.pyx) and its reference
            variants.append((functools.partial(reader.fallback, cls), names))
    hints = typing.get_type_hints(cls)
    for read, names in variants:
        wires = list(names.values())
        kinds = {names[a]: _base_type(hints[a]) for a in names}
        for _ in range(int(3000 * depth)):
            if rng.random() < 0.5:
                ext = {w: rng.choice(_ODD_VALUES) for w in wires if rng.random() < 0.9}
            else:  # what clients send, with now and then one odd value
                ext = {w: rng.choice(_COMMON[kinds[w]]) for w in wires if rng.random() < 0.95}
                if rng.random() < 0.3:
                    ext[rng.choice(wires)] = rng.choice(_ODD_VALUES)
            ext["unrelated"] = "x"
            if rng.random() < 0.05:
                ext = _DictSub(ext)  # not a plain dict: the Cython reader leaves it to the reference
            try:
                expected = ("ok", _reference_read(cls, ext, names))
            except RemotingCommandError as exc:
                expected = ("error", str(exc))
            try:
                got = ("ok", read(ext))
            except RemotingCommandError as exc:
                got = ("error", str(exc))
            assert got == expected, ext
            if got[0] == "ok":
                assert all(type(getattr(got[1], f)) is type(getattr(expected[1], f)) for f in names)


def test_a_header_class_without_the_decorator_says_so():
    from rmq.protocol.headers import Header

    class Forgotten(Header):
        __slots__ = ()

    with pytest.raises(TypeError, match="Forgotten is not decorated with @header"):
        Forgotten.from_ext_fields({})
    with pytest.raises(TypeError, match="Forgotten is not decorated with @header"):
        Forgotten().to_ext_fields()


# --------------------------------------------------------------------------- ranges and text


@pytest.mark.parametrize("path", ["generated", "cython"])
def test_ranges_and_text_are_checked_on_both_reader_paths(path):
    """Java's parsers refuse an Integer past int32 and a Long past int64; a declared narrower
    range (perm 0..15) and text with a lone surrogate are refused too, whichever reader runs."""

    def read(cls, ext):
        f = vars(cls)["from_ext_fields"].__func__
        if path == "generated":
            f = getattr(f, "fallback", f)
        else:
            # every install builds the extension; RMQ_NO_EXTENSIONS=1 is an A/B switch for
            # measurements, not a mode this suite runs in
            assert isinstance(f, _codec.HeaderReader), "the headers are not read by the Cython reader"
        return f(cls, ext)

    base = {"consumerGroup": "G", "topic": "T", "queueId": "1", "commitOffset": "5"}
    assert read(UpdateConsumerOffsetRequestHeader, base).commit_offset == 5
    for key, bad in (
        ("commitOffset", str(2**64)),
        ("commitOffset", 2**63),
        ("queueId", str(2**31)),
        ("queueId", -(2**31) - 1),
        ("consumerGroup", "\ud800"),
    ):
        with pytest.raises(RemotingCommandError, match=key):
            read(UpdateConsumerOffsetRequestHeader, {**base, key: bad})
    top = read(UpdateConsumerOffsetRequestHeader, {**base, "commitOffset": str(2**63 - 1)})
    assert top.commit_offset == 2**63 - 1
    topic = {"topic": "T", "readQueueNums": "4", "writeQueueNums": "4"}
    for perm in (str(2**70), "16", "-1", 16, 2**64):
        with pytest.raises(RemotingCommandError, match="perm"):
            read(CreateTopicRequestHeader, {**topic, "perm": perm})
    assert read(CreateTopicRequestHeader, {**topic, "perm": "15"}).perm == 15


def test_cython_reader_checks_ranges_itself_and_leaves_refusals_to_the_reference():
    """The Cython reader takes in-range values and clean text without the reference, and hands
    anything out of range (or with a lone surrogate) to it, so the error is worded once."""
    calls = []

    def reference(cls, ext):
        calls.append(dict(ext))
        raise RemotingCommandError("refused")

    class Box:
        __slots__ = ("n", "s")

    read = _codec.HeaderReader([("n", "n", 1, True, None, -5, 15), ("s", "s", 0, False, "", 0, 0)], reference)
    for ok in ({"n": "15"}, {"n": -5}, {"n": "0", "s": "中\U0001f600é"}):
        box = read(Box, ok)
        assert box.n == int(ok["n"]) and calls == []
    for bad in (
        {"n": "16"},
        {"n": -6},
        {"n": 2**63},
        {"n": str(-(2**64))},
        {"n": "1", "s": "a\ud800"},
        {"n": "1", "s": "\U0001f600\udfff"},
    ):
        with pytest.raises(RemotingCommandError):
            read(Box, bad)
        assert calls[-1] == bad


@pytest.mark.parametrize(
    "text",
    [
        "0",
        "-0",
        "007",
        "-000",
        "9" * 18,
        "-" + "9" * 18,
        "9" * 19,
        str(2**63 - 1),
        str(-(2**63)),
        str(-(2**63) - 1),
        "-",
        "",
        "+5",
        " 5",
        "5 ",
        "1_0",
        "٣",
        "5-",
        "--5",
    ],
)
def test_cython_reader_reads_decimal_text_as_int_does(text):
    """The Cython reader reads ``-?[0-9]{1,18}`` itself and hands every other text to int()
    (or, refused, to the reference): either way the value is int(text)'s."""

    def reference(cls, ext):
        raise RemotingCommandError("refused")

    class Box:
        __slots__ = ("n",)

    read = _codec.HeaderReader([("n", "n", 1, True, None, -(2**63), 2**63 - 1)], reference)
    try:
        want = int(text)
    except ValueError:
        want = None
    if want is None or not -(2**63) <= want < 2**63:
        with pytest.raises(RemotingCommandError):
            read(Box, {"n": text})
    else:
        got = read(Box, {"n": text}).n
        assert type(got) is int and got == want
