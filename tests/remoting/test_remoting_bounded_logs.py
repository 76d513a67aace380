"""No request can make the broker's log grow without bound: peer data is clipped in log lines
and repeated warnings are rate-limited. Measured on the log file of a real ``rmq standalone``."""

from __future__ import annotations

import json

import pytest

from rmq._testing import StandaloneProcess, wait_until_sync
from rmq._testing.floods import Wire, log_size, pull, send_message
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand

pytestmark = pytest.mark.integration  # a broker subprocess

KiB = 1024


@pytest.fixture(scope="module")
def proc(tmp_path_factory):
    with StandaloneProcess(tmp_path_factory.mktemp("bounded-logs") / "store") as p:
        w = Wire(p.broker_addr)
        assert send_message(w, "LogT", b"hello").code == 0
        w.close()
        yield p


def _grown_by(proc, before: int) -> int:
    return log_size(proc.log_path) - before


def _warnings_since(proc, before_text_len: int) -> list[str]:
    return [ln for ln in proc.log_text()[before_text_len:].splitlines() if " WARNING " in ln or " ERROR " in ln]


def test_huge_header_values_and_topic_names_are_clipped(proc):
    huge = "v" * 2_000_000
    bad_topic = "bad topic " * 400_000  # 4 MB, illegal (spaces)
    before = log_size(proc.log_path)
    w = Wire(proc.broker_addr)
    try:
        replies = [
            w.call(
                RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {
                        "topic": "LogT2",
                        "readQueueNums": "4",
                        "writeQueueNums": "4",
                        "perm": "6",
                        "topicFilterType": "SINGLE_TAG",
                        "junk": huge,
                    },
                )
            ),
            w.call(
                RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {
                        "topic": bad_topic,
                        "readQueueNums": "4",
                        "writeQueueNums": "4",
                        "perm": "6",
                        "topicFilterType": "SINGLE_TAG",
                    },
                )
            ),
            send_message(w, bad_topic, b"x"),
            w.call(pull(huge, 0)),  # a 2-million-character consumer group
            w.call(
                RemotingCommand.request(
                    RequestCode.PULL_MESSAGE, {"topic": "LogT", "consumerGroup": "g", "queueId": huge}
                )
            ),
            w.call(
                RemotingCommand.request(
                    RequestCode.HEART_BEAT,
                    {},
                    json.dumps(
                        {
                            "clientID": "c",
                            "consumerDataSet": [{"groupName": "bad group " * 200_000}],
                            "producerDataSet": [],
                        }
                    ).encode(),
                )
            ),
        ]
        assert all(r.flag & 1 for r in replies)  # every request was answered
        assert send_message(w, "LogT", b"still fine").code == 0
    finally:
        w.close()
    wait_until_sync(lambda: proc.proc.poll() is None, what="the broker still running")
    grown = _grown_by(proc, before)
    assert grown < 32 * KiB, f"log grew by {grown} bytes"


def test_pull_with_a_huge_max_msg_nums_logs_a_bounded_line(proc):
    before = log_size(proc.log_path)
    w = Wire(proc.broker_addr)
    try:
        reply = w.call(pull("LogT", 0, max_msg_nums=2**40))
        assert reply.flag & 1
        assert send_message(w, "LogT", b"after").code == 0  # the connection is fine
    finally:
        w.close()
    assert _grown_by(proc, before) < 8 * KiB


def test_a_thousand_identical_bad_requests_give_a_handful_of_lines(tmp_path):
    # its own broker: the rate limits must not have seen these kinds of lines yet
    with StandaloneProcess(tmp_path / "store") as proc:
        _thousand_bad_requests(proc)


def _thousand_bad_requests(proc) -> None:
    text_before = len(proc.log_text())
    w = Wire(proc.broker_addr)
    try:
        for _ in range(1000):
            assert send_message(w, "bad topic!", b"x").code != 0
        for _ in range(1000):
            assert w.call(pull("NoSuchTopic", 0)).code != 0
    finally:
        w.close()
    lines = _warnings_since(proc, text_before)
    assert 2 <= len(lines) <= 6, lines  # one per kind (illegal topic, unknown topic), not 2000


def test_reply_remarks_quote_request_data_clipped(proc):
    """A remark quoting the request (a group, a topic, a namespace) is cut to about 1000
    characters per quoted value: a 2-million-character name must not come back as a 2 MB remark."""
    huge_group, huge_topic = "g" * 2_000_000, "T" * 2_000_000
    R = RequestCode
    broker_requests = [
        pull("LogT", 0, group=huge_group),
        pull(huge_topic, 0),
        RemotingCommand.request(
            R.QUERY_CONSUMER_OFFSET, {"consumerGroup": huge_group, "topic": "LogT", "queueId": "0"}
        ),
        RemotingCommand.request(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": huge_group}),
        RemotingCommand.request(
            R.CONSUMER_SEND_MSG_BACK,
            {"group": huge_group, "offset": "0", "delayLevel": "0", "originMsgId": "x", "originTopic": "LogT"},
        ),
        RemotingCommand.request(R.GET_MAX_OFFSET, {"topic": "LogT", "queueId": "x" * 2_000_000}),
    ]
    namesrv_requests = [
        RemotingCommand.request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": huge_topic}),
        RemotingCommand.request(R.GET_KV_CONFIG, {"namespace": huge_group, "key": huge_topic}),
    ]
    for addr, requests in ((proc.broker_addr, broker_requests), (proc.namesrv_addr, namesrv_requests)):
        w = Wire(addr)
        try:
            for req in requests:
                reply = w.call(req)
                assert reply.flag & 1 and len(reply.remark or "") < 2200, (
                    req.code,
                    len(reply.remark),
                    reply.remark[:200],
                )
        finally:
            w.close()
