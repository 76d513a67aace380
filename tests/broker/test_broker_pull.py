"""PULL_MESSAGE (11): status mapping, header, checks, long polling (B1, B2)."""

import asyncio
import time

from broker_support import decode_records

from rmq._testing import wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient


async def test_pull_found_header_and_body(env):
    await env.create_topic("PT", 2)
    ids = []
    for i in range(3):
        r = await env.send("PT", f"body-{i}".encode(), queue_id=1, tags="TagA")
        ids.append(r.ext_fields["msgId"])
    resp = await env.pull("PT", queue_id=1)
    assert resp.code == ResponseCode.SUCCESS
    assert resp.ext_fields == {"nextBeginOffset": "3", "minOffset": "0", "maxOffset": "3", "suggestWhichBrokerId": "0"}
    recs = decode_records(resp.body_bytes())
    assert [r.body for r in recs] == [b"body-0", b"body-1", b"body-2"]
    assert [r.queue_offset for r in recs] == [0, 1, 2]
    assert [r.offset_msg_id for r in recs] == ids
    assert recs[0].store_host == env.broker.broker_addr and recs[0].topic == "PT" and recs[0].queue_id == 1

    resp = await env.pull("PT", queue_id=1, offset=1, max_nums=1)
    assert resp.ext_fields["nextBeginOffset"] == "2"
    assert [r.body for r in decode_records(resp.body_bytes())] == [b"body-1"]


async def test_pull_status_mapping(env):
    await env.create_topic("PS", 2)
    await env.send("PS", b"a", queue_id=0)
    # offset == max, no suspend flag: PULL_NOT_FOUND at once
    t0 = time.monotonic()
    resp = await env.pull("PS", offset=1, sys_flag=4)
    assert resp.code == ResponseCode.PULL_NOT_FOUND and time.monotonic() - t0 < 1.0
    assert resp.ext_fields["nextBeginOffset"] == "1"
    # far beyond max: PULL_OFFSET_MOVED, corrected offset
    resp = await env.pull("PS", offset=100, sys_flag=4)
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED
    assert resp.ext_fields["nextBeginOffset"] in ("0", "1")
    # empty queue, offset 0: PULL_NOT_FOUND; offset 5: PULL_OFFSET_MOVED
    assert (await env.pull("PS", queue_id=1, offset=0, sys_flag=4)).code == ResponseCode.PULL_NOT_FOUND
    resp = await env.pull("PS", queue_id=1, offset=5, sys_flag=4)
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED and resp.ext_fields["nextBeginOffset"] == "0"


async def test_pull_filtered_by_tag(env):
    await env.create_topic("PF", 1)
    await env.send("PF", b"a", tags="TagA")
    await env.send("PF", b"b", tags="TagB")
    await env.send("PF", b"c", tags="TagA")
    resp = await env.pull("PF", subscription="TagB")
    assert [r.body for r in decode_records(resp.body_bytes())] == [b"b"]
    resp = await env.pull("PF", subscription="TagA || TagB")
    assert len(decode_records(resp.body_bytes())) == 3
    resp = await env.pull("PF", subscription="TagC")
    assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY and resp.ext_fields["nextBeginOffset"] == "3"


async def test_pull_error_paths(env):
    await env.create_topic("PE", 2)
    resp = await env.pull("NoSuchTopic")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and resp.ext_fields == {}
    resp = await env.pull("PE", queue_id=2)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId[2] is illegal" in resp.remark
    resp = await env.pull("PE", queue_id=-1)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    resp = await env.call(RequestCode.PULL_MESSAGE, {"consumerGroup": "CG", "topic": "PE", "queueId": 0})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueOffset" in resp.remark
    # no subscription in the request and no heartbeat from the group
    resp = await env.pull("PE", group="Nobody", sys_flag=0)
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    await env.create_topic("PW", 1, perm=2)  # write-only
    resp = await env.pull("PW")
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await env.pull("PE", sys_flag=4, subscription="a", max_nums=1, timeout=5)
    assert resp.code == ResponseCode.PULL_NOT_FOUND


async def test_long_poll_answered_on_arrival(env):
    await env.create_topic("LP", 1)
    t0 = time.monotonic()
    pull = asyncio.ensure_future(env.pull("LP", sys_flag=6, suspend_ms=15000))
    await wait_until(lambda: env.broker.pull_request_hold_service.held_count == 1, what="the pull to be held")
    assert not pull.done()
    await env.send("LP", b"wake-up")
    resp = await asyncio.wait_for(pull, 5)
    assert resp.code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(resp.body_bytes())] == [b"wake-up"]
    assert time.monotonic() - t0 < 10.0  # on arrival, not at the 15 s suspend (room for a busy machine)
    assert env.broker.pull_request_hold_service.held_count == 0


async def test_long_poll_times_out_with_pull_not_found(env):
    await env.create_topic("LT", 1)
    t0 = time.monotonic()
    resp = await env.pull("LT", sys_flag=6, suspend_ms=600)
    took = time.monotonic() - t0
    assert resp.code == ResponseCode.PULL_NOT_FOUND
    assert 0.5 <= took < 10.0  # held about the 600 ms asked (the upper bound: room for a busy machine)
    assert resp.ext_fields["nextBeginOffset"] == "0"


async def test_long_poll_ignores_non_matching_tags(env):
    await env.create_topic("LF", 1)
    pull = asyncio.ensure_future(env.pull("LF", sys_flag=6, subscription="TagB", suspend_ms=15000))
    await wait_until(lambda: env.broker.pull_request_hold_service.held_count == 1, what="the pull to be held")
    await env.send("LF", b"a", tags="TagA")
    await asyncio.sleep(0.5)  # the behaviour under test: for a while, a non-matching arrival wakes nothing
    assert not pull.done() and env.broker.pull_request_hold_service.held_count == 1
    await env.send("LF", b"b", tags="TagB")
    resp = await asyncio.wait_for(pull, 5)
    assert [r.body for r in decode_records(resp.body_bytes())] == [b"b"]


async def test_consumer_vanishing_mid_long_poll(env):
    await env.create_topic("LV", 1)
    other = RemotingClient()
    cmd = RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "CG",
            "topic": "LV",
            "queueId": 0,
            "queueOffset": "0",
            "maxMsgNums": 32,
            "sysFlag": 6,
            "commitOffset": "0",
            "suspendTimeoutMillis": "15000",
            "subscription": "*",
            "subVersion": "0",
        },
    )
    pending = asyncio.ensure_future(other.invoke(env.addr, cmd, timeout=20))
    hold = env.broker.pull_request_hold_service
    await wait_until(lambda: hold.held_count == 1, what="the pull to be held")
    await other.close()
    try:
        await pending
    except Exception:
        pass
    await wait_until(lambda: hold.held_count == 0, what="the vanished consumer's pull to be dropped")
    # the message that arrives later is served normally to someone else
    await env.send("LV", b"after")
    resp = await env.pull("LV")
    assert [r.body for r in decode_records(resp.body_bytes())] == [b"after"]


async def test_pull_commits_carried_offset(env):
    await env.create_topic("PC", 1)
    for _i in range(3):
        await env.send("PC", b"x")
    await env.pull("PC", offset=2, sys_flag=5, commit_offset=2, group="GC")
    resp = await env.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "GC", "topic": "PC", "queueId": 0})
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "2"


async def test_pipelined_pulls_on_one_connection(env):
    await env.create_topic("PP", 4)
    for q in range(4):
        for i in range(5):
            await env.send("PP", f"{q}-{i}".encode(), queue_id=q)
    resps = await asyncio.gather(*(env.pull("PP", queue_id=q) for q in range(4) for _ in range(3)))
    for i, resp in enumerate(resps):
        q = i // 3
        assert [r.body for r in decode_records(resp.body_bytes())] == [f"{q}-{j}".encode() for j in range(5)]


async def test_pull_bodies_release_the_mapped_files_once_written(env):
    """Pull bodies are views of the mapped CommitLog; once written, every hold is dropped."""
    await env.create_topic("RH", 2)
    for i in range(50):
        await env.send("RH", b"r" * 2000, queue_id=i % 2)
    woken = asyncio.ensure_future(env.pull("RH", queue_id=1, offset=25, sys_flag=6))
    resps = await asyncio.gather(
        *(env.pull("RH", queue_id=q, offset=o, max_nums=8) for q in range(2) for o in range(0, 25, 5))
    )
    assert all(r.code == ResponseCode.SUCCESS for r in resps)
    await env.send("RH", b"late", queue_id=1)
    assert (await asyncio.wait_for(woken, 5)).code == ResponseCode.SUCCESS
    files = env.broker.message_store.commit_log.mfq.files
    await wait_until(
        lambda: all(f.hold_count == 0 for f in files),
        what=f"every mapped file released, holds {[f.hold_count for f in files]}",
    )
