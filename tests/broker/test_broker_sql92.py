"""SQL92 property filters on the broker: PULL_MESSAGE with expressionType SQL92, the filter
cache, CHECK_CLIENT_CONFIG (46), and Java's answers when an expression is bad or filtering is
off (PullMessageProcessor.processRequest, ClientManageProcessor.checkClientConfig)."""

import json

import pytest
from broker_support import decode_records

from rmq._testing import broker_env
from rmq.protocol.codes import RequestCode, ResponseCode

OFF_REMARK = "The broker does not support consumer to filter message by SQL92"


@pytest.fixture
async def fenv(tmp_path):
    async with broker_env(tmp_path / "store", enable_property_filter=True) as e:
        yield e


async def _pull(env, topic, expr, *, etype="SQL92", offset=0, sys_flag=4, group="CG", sub_version=0, max_nums=32):
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": 0,
        "queueOffset": str(offset),
        "maxMsgNums": max_nums,
        "sysFlag": sys_flag,
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": expr,
        "subVersion": str(sub_version),
        "expressionType": etype,
    }
    return await env.call(RequestCode.PULL_MESSAGE, ext)


async def _fill(env, topic, n):
    await env.create_topic(topic, queues=1)
    for i in range(n):
        props = {"n": str(i), "d": f"{i}.5", "s": "red" if i % 2 else "blue", "b": "true" if i % 3 == 0 else "false"}
        if i % 4 == 0:
            props["opt"] = "x"
        resp = await env.send(topic, b"m%d" % i, tags="A" if i % 5 else "B", props=props, wait_dispatch=(i == n - 1))
        assert resp.code == ResponseCode.SUCCESS, resp.remark


def _numbers(resp):
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return [int(r.properties["n"]) for r in decode_records(resp.body)]


@pytest.mark.parametrize(
    "expr, want",
    [
        ("n >= 15", lambda i: i >= 15),
        ("d > 3.9 AND d < 7.6", lambda i: 4 <= i <= 7),
        ("s = 'red' AND b = TRUE", lambda i: i % 2 == 1 and i % 3 == 0),
        ("opt IS NULL AND n BETWEEN 0 AND 5", lambda i: i % 4 != 0 and i <= 5),
        ("s IN ('blue') OR n NOT BETWEEN 2 AND 18", lambda i: i % 2 == 0 or i < 2 or i > 18),
        ("TAGS = 'B' AND b = FALSE", lambda i: i % 5 == 0 and i % 3 != 0),
        ("missing = 'x'", lambda i: False),
    ],
)
async def test_pull_filters_by_properties(fenv, expr, want):
    await _fill(fenv, "SqlT", 20)
    resp = await _pull(fenv, "SqlT", expr)
    expected = [i for i in range(20) if want(i)]
    if expected:
        assert _numbers(resp) == expected
        assert int(resp.ext_fields["nextBeginOffset"]) == 20
    else:  # nothing matched in the scanned range: Java's NO_MATCHED_MESSAGE → retry at once
        assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY, resp.remark
        assert resp.remark == "NO_MATCHED_MESSAGE" and int(resp.ext_fields["nextBeginOffset"]) == 20


async def test_filter_runs_after_the_scan_budget_and_batch_limits(fenv):
    await _fill(fenv, "SqlB", 20)
    # maxMsgNums bounds the matches returned, nextBeginOffset stops after the last one returned
    resp = await _pull(fenv, "SqlB", "s = 'red'", max_nums=3)
    assert _numbers(resp) == [1, 3, 5] and int(resp.ext_fields["nextBeginOffset"]) == 6
    resp = await _pull(fenv, "SqlB", "s = 'red'", offset=6, max_nums=3)
    assert _numbers(resp) == [7, 9, 11]


async def test_tag_pull_unchanged_beside_sql(fenv):
    await _fill(fenv, "SqlTag", 10)
    resp = await fenv.pull("SqlTag", subscription="B", suspend_ms=0)
    assert _numbers(resp) == [0, 5]


async def test_bad_expression_in_pull_is_subscription_parse_failed(fenv):
    await _fill(fenv, "SqlBad", 2)
    for bad in ("n >", "n = NULL", "x" * 5000):
        resp = await _pull(fenv, "SqlBad", bad)
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (bad, resp.code, resp.remark)
        assert resp.remark == "parse the consumer's subscription failed"
    resp = await _pull(fenv, "SqlBad", "n > 0", etype="CLASS")
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_filter_cache_compiles_once_per_expression_text(fenv):
    """Keyed by the text: a new subVersion (or another group) with the same expression is a
    lookup; Java recompiles per subscription version, which a client can repeat at will."""
    await _fill(fenv, "SqlC", 4)
    mgr = fenv.broker.pull_message_processor.consumer_filter_manager
    before, compiles = len(mgr), mgr.compiles
    for version in range(3):
        assert _numbers(await _pull(fenv, "SqlC", "n > 1", sub_version=7 + version)) == [2, 3]
    assert _numbers(await _pull(fenv, "SqlC", "n > 1", group="OtherGroup")) == [2, 3]
    assert (len(mgr), mgr.compiles) == (before + 1, compiles + 1)
    assert _numbers(await _pull(fenv, "SqlC", "n > 2", sub_version=8)) == [3]
    assert (len(mgr), mgr.compiles) == (before + 2, compiles + 2)


def test_filter_cache_is_bounded():
    from rmq.broker.filter import ConsumerFilterManager
    from rmq.common.sql92 import SelectorError

    mgr = ConsumerFilterManager(capacity=16)
    first = mgr.get("SQL92", "a > 0")
    assert mgr.get("sql92", "a > 0") is first
    for v in range(1, 40):
        mgr.get("SQL92", f"a > {v}")
        with pytest.raises(SelectorError):
            mgr.get("SQL92", f"a > {v} AND")  # failures are cached too, and bounded
    assert len(mgr) == 16
    assert mgr.get("SQL92", "a > 0") is not first  # evicted, compiled again


async def test_filtering_off_answers_as_java(env):
    await _fill(env, "SqlOff", 2)
    resp = await _pull(env, "SqlOff", "n > 0")
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, OFF_REMARK)
    # nothing is compiled while filtering is off (Java compiles first): a bad expression gets the
    # same answer, and the cache stays empty
    resp = await _pull(env, "SqlOff", "n >")
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, OFF_REMARK)
    mgr = env.broker.pull_message_processor.consumer_filter_manager
    assert (len(mgr), mgr.compiles) == (0, 0)
    # TAG pulls are untouched
    assert _numbers(await env.pull("SqlOff", suspend_ms=0)) == [0, 1]
    resp = await _check(env, "SQL92", "n > 0")
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, OFF_REMARK)


async def _check(env, etype, expr):
    body = json.dumps(
        {
            "clientId": "c1",
            "group": "CG",
            "subscriptionData": {
                "topic": "T",
                "subString": expr,
                "expressionType": etype,
                "tagsSet": [],
                "codeSet": [],
                "subVersion": 1,
                "classFilterMode": False,
            },
        }
    ).encode()
    return await env.call(RequestCode.CHECK_CLIENT_CONFIG, None, body)


async def test_check_client_config(fenv):
    assert (await _check(fenv, "TAG", "A || B")).code == ResponseCode.SUCCESS
    assert (await _check(fenv, "SQL92", "a > 5 AND b = 'x'")).code == ResponseCode.SUCCESS
    resp = await _check(fenv, "SQL92", "a > 'x'")
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert resp.remark.startswith("Invalid MessageSelector.") and "cannot be compared" in resp.remark
    # no body, or a body without a subscription: nothing to check (Java answers SUCCESS)
    assert (await fenv.call(RequestCode.CHECK_CLIENT_CONFIG)).code == ResponseCode.SUCCESS
    resp = await fenv.call(RequestCode.CHECK_CLIENT_CONFIG, None, b"{not json")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "not valid JSON" in resp.remark


async def _heartbeat(env, group, topic, expr, version):
    body = json.dumps(
        {
            "clientID": "127.0.0.1@sql",
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {
                            "topic": topic,
                            "subString": expr,
                            "expressionType": "SQL92",
                            "tagsSet": [],
                            "codeSet": [],
                            "subVersion": version,
                            "classFilterMode": False,
                        }
                    ],
                }
            ],
        }
    ).encode()
    resp = await env.call(RequestCode.HEART_BEAT, None, body)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def test_subscription_from_heartbeat(fenv):
    """sysFlag without the subscription bit: the expression registered by the heartbeat is used;
    a bad one answers FILTER_DATA_NOT_EXIST as Java's ConsumerFilterManager lookup does."""
    await _fill(fenv, "SqlHb", 10)
    await _heartbeat(fenv, "HG", "SqlHb", "n >= 8", 100)
    assert _numbers(await _pull(fenv, "SqlHb", "ignored", sys_flag=0, group="HG", sub_version=100)) == [8, 9]
    resp = await _pull(fenv, "SqlHb", "ignored", sys_flag=0, group="HG", sub_version=101)
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    await _heartbeat(fenv, "HG", "SqlHb", "n >=", 102)
    resp = await _pull(fenv, "SqlHb", "ignored", sys_flag=0, group="HG", sub_version=102)
    assert resp.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert resp.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"


async def test_subscription_from_heartbeat_with_filtering_off(env):
    await _fill(env, "SqlHbOff", 1)
    await _heartbeat(env, "HG", "SqlHbOff", "n >= 0", 5)
    resp = await _pull(env, "SqlHbOff", "ignored", sys_flag=0, group="HG", sub_version=5)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, OFF_REMARK)


async def test_held_pull_wakes_and_filters(fenv):
    """A suspended SQL92 pull is woken by any arrival (no tag code to match) and then answers
    with only what matches."""
    import asyncio

    await fenv.create_topic("SqlHold", queues=1)
    ext = {
        "consumerGroup": "CG",
        "topic": "SqlHold",
        "queueId": 0,
        "queueOffset": "0",
        "maxMsgNums": 32,
        "sysFlag": 4 | 2,
        "commitOffset": "0",
        "suspendTimeoutMillis": "10000",
        "subscription": "n = 1",
        "subVersion": "0",
        "expressionType": "SQL92",
    }
    held = asyncio.ensure_future(fenv.call(RequestCode.PULL_MESSAGE, ext, timeout=20))
    await fenv.send("SqlHold", b"m0", props={"n": "0"})
    await fenv.send("SqlHold", b"m1", props={"n": "1"})
    resp = await held
    if resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY:  # woken by m0 alone: nothing matched yet
        resp = await _pull(fenv, "SqlHold", "n = 1", offset=int(resp.ext_fields["nextBeginOffset"]))
    assert _numbers(resp) == [1]


def _long_expression(i: int) -> str:
    """A distinct expression of about 4000 characters (the most accepted): ~50 ms to compile."""
    terms = [f"(n > {k + i * 1000} OR s = 'x{k}')" for k in range(200)]
    return " AND ".join(terms)[:3990].rsplit(" AND ", 1)[0]


async def test_pipelined_sql92_pulls_compile_each_text_once_off_the_loop(fenv):
    """The hostile pipeline of finding 4: many SQL92 pulls on one connection, each with a new
    subVersion. The same text compiles once (Java's cache keyed by version compiled 50 times);
    distinct texts compile a few at a time off the loop, the others answered SYSTEM_BUSY at once."""
    import asyncio

    await _fill(fenv, "SqlP", 4)
    mgr = fenv.broker.pull_message_processor.consumer_filter_manager
    compiles = mgr.compiles
    resps = await asyncio.gather(*(_pull(fenv, "SqlP", "n > 1 AND s = 'red'", sub_version=1000 + v) for v in range(50)))
    assert [_numbers(r) for r in resps] == [[3]] * 50
    assert mgr.compiles == compiles + 1
    resps = await asyncio.gather(*(_pull(fenv, "SqlP", _long_expression(i), sub_version=i) for i in range(200)))
    busy = [r for r in resps if r.code == ResponseCode.SYSTEM_BUSY]
    done = [r for r in resps if r.code != ResponseCode.SYSTEM_BUSY]
    # the first slice of the pipeline (64 frames) alone starts sql92CompilesPerConnection (4)
    assert len(busy) >= 60 and all("SQL92_COMPILE_LIMIT" in r.remark for r in busy)
    assert all(r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY) for r in done), {
        r.code for r in done
    }
    assert mgr.compiles == compiles + 1 + len(done)
    # nothing is left compiling, and the connection's slots are all given back
    assert not mgr._compiling
    resp = await _pull(fenv, "SqlP", _long_expression(999))
    assert resp.code != ResponseCode.SYSTEM_BUSY
