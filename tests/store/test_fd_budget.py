"""File descriptors and memory maps: a broker started with a low open file limit refuses new
ConsumeQueues with a clear error before the limit runs out, keeps serving what it acknowledged,
shuts down cleanly and starts again."""

import sys

import pytest

from rmq._testing import StandaloneProcess, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient

pytestmark = pytest.mark.integration  # the store in a subprocess under a low RLIMIT_NOFILE

NOFILE = 256

_LIMITED = (
    "import os, resource, sys; "
    "resource.setrlimit(resource.RLIMIT_NOFILE, ({n}, {n})); "
    "os.execv(sys.executable, sys.argv[1:])"
)


class LimitedStandalone(StandaloneProcess):
    """``rmq standalone`` under ``RLIMIT_NOFILE = (n, n)`` (what ``prlimit --nofile=n`` does)."""

    def __init__(self, *a, nofile=NOFILE, **kw):
        super().__init__(*a, **kw)
        self.nofile = nofile

    def command(self):
        return [sys.executable, "-c", _LIMITED.format(n=self.nofile), *super().command()]


SMALL_FILES = ["--mappedFileSizeCommitLog=1048576", "--mappedFileSizeConsumeQueue=20000", "--flushDiskType=SYNC_FLUSH"]


def _props(d):
    return "".join(f"{k}\x01{v}\x02" for k, v in d.items())


async def _send(client, addr, topic, qid, body):
    ext = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": qid,
        "sysFlag": 0,
        "bornTimestamp": "0",
        "flag": 0,
        "properties": _props({"TAGS": "t", "WAIT": "true"}),
        "reconsumeTimes": "0",
        "unitMode": "0",
        "batch": "0",
    }
    return await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body), timeout=10.0)


async def _pull(client, addr, topic, qid, offset):
    ext = {
        "consumerGroup": "CG",
        "topic": topic,
        "queueId": qid,
        "queueOffset": str(offset),
        "maxMsgNums": 32,
        "sysFlag": 4,
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    return await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), timeout=10.0)


async def _assert_pullable(client, addr, acked):
    for (topic, qid, offset), body in acked.items():

        async def found(topic=topic, qid=qid, offset=offset):
            r = await _pull(client, addr, topic, qid, offset)
            return r if r.code == ResponseCode.SUCCESS else None

        # (dispatch runs right after the flush that acknowledged the send, not before it)
        r = await wait_until(found, timeout=20, what=f"{topic}-{qid}@{offset} pullable")
        assert body in r.body_bytes(), (topic, qid, offset)


async def test_low_fd_limit_refuses_new_queues_and_keeps_acked_messages(tmp_path):
    store_dir = tmp_path / "store"
    acked = {}
    refused = []
    proc = LimitedStandalone(store_dir, SMALL_FILES)
    proc.start()
    client = RemotingClient(name="fd-test")
    try:
        # 4 queues per auto-created topic, one message each, until well past the point where
        # new queues are refused (the budget is about 190 mapped files under 256 descriptors).
        for t in range(70):
            topic = f"FdTopic{t}"
            for qid in range(4):
                body = f"body-{topic}-{qid}".encode()
                r = await _send(client, proc.broker_addr, topic, qid, body)
                if r.code == ResponseCode.SUCCESS:
                    acked[(topic, qid, int(r.ext_fields["queueOffset"]))] = body
                else:
                    refused.append((topic, qid, r.code, r.remark))
        assert len(acked) >= 100, len(acked)  # 256 fds used to allow ~60 queues
        assert refused, "no send was refused under a 256 descriptor limit"
        code, remark = refused[0][2], refused[0][3]
        assert code == ResponseCode.SYSTEM_ERROR and "too many mapped files" in remark, (code, remark)
        # Existing queues keep working after the refusals.
        (topic, qid, _), _ = next(iter(acked.items()))
        r = await _send(client, proc.broker_addr, topic, qid, b"after-the-refusals")
        assert r.code == ResponseCode.SUCCESS, r.remark
        acked[(topic, qid, int(r.ext_fields["queueOffset"]))] = b"after-the-refusals"
        await _assert_pullable(client, proc.broker_addr, acked)
        log = proc.log_text()
        assert "file descriptors: soft limit 256" in log and "budget" in log
        assert "Too many open files" not in log and "Traceback" not in log
    finally:
        await client.close()
        rc = proc.stop()
    assert rc == 0, proc.log_text()[-3000:]

    # The same store starts again under the same limit and still serves every acked message.
    proc = LimitedStandalone(store_dir, SMALL_FILES)
    proc.start()
    client = RemotingClient(name="fd-test-2")
    try:
        await _assert_pullable(client, proc.broker_addr, acked)
    finally:
        await client.close()
        rc = proc.stop()
    assert rc == 0, proc.log_text()[-3000:]


async def test_dispatch_error_is_surfaced_retried_and_loses_nothing(make_store, caplog):
    """A ConsumeQueue that cannot roll into its next file (no mapping left) stops dispatch at
    that record: the error shows in runtime_info and the log (rate-limited), dispatch retries
    with backoff, and once a mapping frees up every message is dispatched, none skipped."""
    import logging

    from rmq.store import GetMessageStatus, MessageInner
    from rmq.store.resources import MAPPINGS

    caplog.set_level(logging.WARNING, "rmq.store")
    base = MAPPINGS.live
    # budget: base + 12 mapped files; new queues keep 4 back for rolls
    # (no index file: this counts ConsumeQueue mappings)
    store = await make_store(
        max_mapped_files=base + 12, mapped_file_size_commitlog=256 * 1024, message_index_enable=False
    )
    for t in range(7):  # 1 CommitLog + 7 queue files
        assert (await store.put_message(MessageInner(f"Q{t}", 0, b"first"))).is_ok
    refused = await store.put_message(MessageInner("Q7", 0, b"one queue too many"))
    assert refused.status.name == "CREATE_MAPEDFILE_FAILED" and "too many mapped files" in refused.remark
    await wait_until(lambda: store.dispatch_behind_bytes() == 0, what="dispatch")

    # Q0's file holds 100 units: each 100 messages need one more mapping; the 5th roll fails.
    for i in range(1, 501):
        r = await store.put_message(MessageInner("Q0", 0, b"m%d" % i))
        assert r.is_ok, (i, r.remark)
    await wait_until(lambda: store.runtime_info()["dispatchError"], what="dispatch error shown")
    info = store.runtime_info()
    assert "MappingBudgetError" in info["dispatchError"] and int(info["dispatchBehindBytes"]) > 0
    assert store.get_max_offset_in_queue("Q0", 0) == 500  # units up to the failed record
    assert "dispatch failed at CommitLog offset" in caplog.text
    # Free two mappings: dispatch resumes by itself (backoff) and nothing was skipped.
    store.delete_topics(["Q5", "Q6"])
    await wait_until(lambda: store.dispatch_behind_bytes() == 0, timeout=30, what="dispatch resumes")
    assert store.runtime_info()["dispatchError"] == ""
    assert store.get_max_offset_in_queue("Q0", 0) == 501
    for offset in (0, 499, 500):
        res = store.get_message("G", "Q0", 0, offset, 1)
        assert res.status == GetMessageStatus.FOUND, (offset, res.status)
        res.release()
    lines = [r for r in caplog.records if "dispatch failed" in r.getMessage()]
    assert len(lines) <= 2, [r.getMessage() for r in lines]  # rate-limited, not one per retry


async def test_restart_with_dispatch_blocked_never_reuses_a_queue_offset(make_store, tmp_path):
    """Records the dispatch could not index before a stop still own their queue offsets after
    the restart: a new message gets the next offset, and both are found once dispatch can run."""
    from rmq.store import GetMessageStatus, MessageInner
    from rmq.store.resources import MAPPINGS

    root = tmp_path / "blocked"
    base = MAPPINGS.live
    cfg = {"mapped_file_size_commitlog": 256 * 1024, "message_index_enable": False}
    # a budget of 8 (the least there is): the CommitLog file + 7 files of 100 units for "B"
    store = await make_store(root=root, max_mapped_files=base + 8, **cfg)
    for i in range(701):  # unit 700 would need an 8th queue file
        assert (await store.put_message(MessageInner("B", 0, b"b%d" % i))).is_ok
    await wait_until(lambda: store.runtime_info()["dispatchError"], what="dispatch blocked")
    await store.shutdown()

    store = await make_store(root=root, max_mapped_files=base + 8, **cfg)
    assert store.get_max_offset_in_queue("B", 0) == 700  # unit 700 still not indexed
    r = await store.put_message(MessageInner("B", 0, b"after the restart"))
    assert r.is_ok and r.append.logics_offset == 701  # not 700: that one is taken
    await store.shutdown()

    store = await make_store(root=root, **cfg)  # budget back: all dispatched
    await wait_until(lambda: store.dispatch_behind_bytes() == 0, what="dispatch")
    assert store.get_max_offset_in_queue("B", 0) == 702
    for offset, body in ((700, b"b700"), (701, b"after the restart")):
        res = store.get_message("G", "B", 0, offset, 1)
        assert res.status == GetMessageStatus.FOUND
        assert next(iter(res.iter_records())).tobytes().find(body) > 0
        res.release()
