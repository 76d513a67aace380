"""Typed topics through ``rmq admin`` as real CLI processes against a real daemon:
``updateTopic -a`` (Java 5 mqadmin's option), its refusals, ``topicList -m``, ``topicStatus``'s
message-type line and ``updateSubGroup -o`` (consumeMessageOrderly)."""

from __future__ import annotations

import asyncio
import json

import pytest
from cli_support import admin

from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

pytestmark = pytest.mark.slow


def _broker_call(daemon, code: int) -> dict:
    async def go() -> dict:
        async with RemotingClient() as rc:
            resp = await rc.invoke(daemon.broker_addr, RemotingCommand.request(code))
            return json.loads(resp.body_bytes())

    return asyncio.run(go())


def test_update_topic_with_attributes_and_the_listings(daemon):
    ns, b = daemon.namesrv_addr, daemon.broker_addr
    r = admin("updateTopic", "-n", ns, "-b", b, "-t", "CliFifo", "-r", "2", "-w", "2", "-a", "+message.type=FIFO")
    assert r.returncode == 0, r.stderr
    assert f"create topic to {b} success." in r.stdout
    table = _broker_call(daemon, RequestCode.GET_ALL_TOPIC_CONFIG)["topicConfigTable"]
    assert table["CliFifo"]["attributes"] == {"message.type": "FIFO"}
    # the broker's refusal reaches the user with its reason; nothing changes
    r = admin("updateTopic", "-n", ns, "-b", b, "-t", "CliFifo", "-a", "+message.type=WRONG")
    assert r.returncode != 0 and "value is not in set" in r.stderr
    # a malformed text is refused before anything is sent
    r = admin("updateTopic", "-n", ns, "-b", b, "-t", "CliFifo", "-a", "message.type=FIFO")
    assert r.returncode == 2 and "add/alter attribute format is wrong" in r.stderr
    r = admin("updateTopic", "-n", ns, "-b", b, "-t", "CliPlain", "-r", "1", "-w", "1")
    assert r.returncode == 0, r.stderr

    r = admin("topicList", "-n", ns, "-m")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines()[1:] if line.strip()}
    assert rows["CliFifo"] == "FIFO" and rows["CliPlain"] == "UNTYPED"
    assert r.stdout.splitlines()[0].split() == ["#Topic", "#Message", "Type"]

    r = admin("topicStatus", "-n", ns, "-t", "CliFifo")
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().splitlines()[-1] == "Topic Message Type: FIFO"
    r = admin("topicStatus", "-n", ns, "-t", "CliPlain")
    assert r.returncode == 0 and "Message Type" not in r.stdout  # as mqadmin 4.9.8 prints it


def test_update_sub_group_orderly(daemon):
    ns, b = daemon.namesrv_addr, daemon.broker_addr
    r = admin("updateSubGroup", "-n", ns, "-b", b, "-g", "CliOrderlyG", "-o", "true")
    assert r.returncode == 0, r.stderr
    r = admin("updateSubGroup", "-n", ns, "-b", b, "-g", "CliPlainG")
    assert r.returncode == 0, r.stderr
    table = _broker_call(daemon, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)["subscriptionGroupTable"]
    assert table["CliOrderlyG"]["consumeMessageOrderly"] is True
    assert "consumeMessageOrderly" not in table["CliPlainG"]  # false: left out, as Java 4.9.8 writes a group
