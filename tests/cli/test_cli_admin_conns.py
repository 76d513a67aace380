"""``rmq admin`` consumer and connection commands (consumerProgress, consumerConnection,
producerConnection, consumerStatus, resetOffsetByTime, skipAccumulatedMessage,
cloneGroupOffset, setConsumeMode) as a real CLI process against a real daemon, with real SDK producers and
consumers connected (they run in the test's loop while the CLI runs, so the broker's relays
to them are answered)."""

from __future__ import annotations

import pytest
from cli_support import admin_async as admin

import rmq
from rmq._testing import wait_until

pytestmark = pytest.mark.slow

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_connections_progress_status_and_resets(daemon):
    ns = daemon.namesrv_addr
    rc, out, err = await admin("updateTopic", "-n", ns, "-t", "CliConnsT", "-r", "2", "-w", "2")
    assert rc == 0, err
    got: list[bytes] = []

    async def handler(msg):
        got.append(msg.body)

    async with rmq.Producer(ns, "PID_cli_conns") as producer:
        for i in range(6):
            await producer.send(rmq.Message("CliConnsT", f"m{i}".encode()))
        consumer = rmq.PushConsumer(ns, "GID_cli_conns", handler=handler, consume_from_where=FIRST)
        consumer.subscribe("CliConnsT", "*")
        async with consumer:
            await wait_until(lambda: len(got) == 6, what="6 messages consumed")

            rc, out, err = await admin("consumerConnection", "-n", ns, "-g", "GID_cli_conns")
            assert rc == 0, err
            assert out.splitlines()[0].split() == ["#ClientId", "#ClientAddr", "#Language", "#Version"]
            assert out.splitlines()[1].split()[0] == consumer.client_id
            assert out.splitlines()[1].split()[2:] == ["PYTHON", "V4_9_8"]
            assert "ConsumeType: CONSUME_PASSIVELY" in out and "MessageModel: CLUSTERING" in out
            assert "CliConnsT            *" in out.splitlines()  # Java's %-20s %s

            rc, out2, err = await admin("consumerConnection", "-n", ns, "-g", "GID_cli_conns", "-b", daemon.broker_addr)
            assert rc == 0 and out2 == out, err

            rc, out, err = await admin("getConsumerConfig", "-n", ns, "-g", "GID_cli_conns")
            assert rc == 0, err
            assert out.splitlines()[0] == "=" * 29 + "DefaultCluster:broker-a" + "=" * 29
            assert [line.split("=  ")[0].strip() for line in out.splitlines()[1:]][:3] == [
                "groupName",
                "consumeEnable",
                "consumeFromMinEnable",
            ]
            assert "retryMaxTimes                           =  16" in out.splitlines()
            rc, out, err = await admin("getConsumerConfig", "-n", ns, "-g", "GID_no_such_group")
            assert rc == 0 and out == "", err

            rc, out, err = await admin("producerConnection", "-n", ns, "-g", "PID_cli_conns", "-t", "CliConnsT")
            assert rc == 0, err
            assert out.split()[0] == "0001" and out.split()[3:5] == ["PYTHON", "V4_9_8"]

            async def progress_done():
                rc, out, _err = await admin("consumerProgress", "-n", ns, "-g", "GID_cli_conns")
                return out if rc == 0 and "Diff Total: 0" in out else None

            out = await wait_until(progress_done, timeout=30, interval=0.5, what="the group's progress at diff 0")
            lines = out.splitlines()
            assert [c.strip() for c in lines[0].split("  ") if c.strip()] == [
                "#Topic",
                "#Broker Name",
                "#QID",
                "#Broker Offset",
                "#Consumer Offset",
                "#Diff",
                "#LastTime",
            ]
            rows = [line.split() for line in lines[1:] if line.startswith("CliConnsT")]
            assert sorted((r[2], r[3], r[4], r[5]) for r in rows) == [("0", "3", "3", "0"), ("1", "3", "3", "0")]
            assert "Consume TPS:" in out

            rc, out, err = await admin("consumerProgress", "-n", ns, "-g", "GID_cli_conns", "-s", "true")
            assert rc == 0 and "#Client IP" in out, err
            ip = consumer.client_id.split("@")[0]
            assert all(line.split()[5] == ip for line in out.splitlines() if line.startswith("CliConnsT"))

            rc, out, err = await admin("consumerProgress", "-n", ns)
            assert rc == 0, err
            row = next(line.split() for line in out.splitlines() if line.startswith("GID_cli_conns "))
            assert row == ["GID_cli_conns", "1", "V4_9_8", "PUSH", "CLUSTERING", "0", "0"]

            rc, out, err = await admin("consumerStatus", "-n", ns, "-g", "GID_cli_conns", "-i", consumer.client_id)
            assert rc == 0, err
            assert out.startswith("#Consumer Properties#\n") and "#Consumer RT&TPS#" in out
            assert any(
                line.split()[0] == "PROP_CLIENT_VERSION" and line.split()[-1] == "V4_9_8"
                for line in out.splitlines()
                if line.strip()
            )
            offsets = [
                line.split()
                for line in out.split("#Consumer Offset#")[1].split("#Consumer MQ")[0].splitlines()
                if line.startswith("CliConnsT")
            ]
            assert sorted((r[2], r[3]) for r in offsets) == [("0", "3"), ("1", "3")]
            rc, out, err = await admin("consumerStatus", "-n", ns, "-g", "GID_cli_conns")
            assert rc == 0, err
            assert out.splitlines()[1].split()[:3] == ["1", consumer.client_id, "V4_9_8"]
            assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out

            # back to the start: the live consumer gets every message again
            rc, out, err = await admin(
                "resetOffsetByTime", "-n", ns, "-g", "GID_cli_conns", "-t", "CliConnsT", "-s", "0"
            )
            assert rc == 0, err
            assert "rollback consumer offset by specified group[GID_cli_conns], topic[CliConnsT], force[true]" in out
            assert sorted(line.split()[1:] for line in out.splitlines()[2:]) == [["0", "0"], ["1", "0"]]
            await wait_until(lambda: len(got) == 12, what="the 6 messages consumed again")

            rc, out, err = await admin("skipAccumulatedMessage", "-n", ns, "-g", "GID_cli_conns", "-t", "CliConnsT")
            assert rc == 0, err
            assert sorted(line.split()[1:] for line in out.splitlines()[2:]) == [["0", "3"], ["1", "3"]]

            rc, out, err = await admin(
                "cloneGroupOffset", "-n", ns, "-s", "GID_cli_conns", "-d", "GID_cli_clone", "-t", "CliConnsT"
            )
            assert rc == 0 and "clone group offset success" in out, err

    # nobody online: consumerConnection refuses, resetOffsetByTime sets the offsets itself
    async def offline():
        rc, _out, err = await admin("consumerConnection", "-n", ns, "-g", "GID_cli_conns")
        return rc == 1 and "not online" in err

    await wait_until(offline, timeout=30, interval=0.5, what="the group offline")
    rc, out, err = await admin("resetOffsetByTime", "-n", ns, "-g", "GID_cli_clone", "-t", "CliConnsT", "-s", "0")
    assert rc == 0, err
    assert out.splitlines()[1].split() == [
        "#brokerName",
        "#queueId",
        "#brokerOffset",
        "#consumerOffset",
        "#timestampOffset",
        "#rollbackOffset",
    ]
    assert sorted(line.split()[1:] for line in out.splitlines()[2:]) == [
        ["0", "3", "3", "0", "0"],
        ["1", "3", "3", "0", "0"],
    ]


async def test_bad_flags_exit_2(daemon):
    ns = daemon.namesrv_addr
    rc, _out, err = await admin("resetOffsetByTime", "-n", ns, "-g", "G", "-t", "T", "-s", "yesterday")
    assert rc == 2 and "-s/--timestamp" in err
    rc, _out, err = await admin("consumerConnection", "-n", ns)
    assert rc == 2 and "-g" in err
    rc, _out, err = await admin("producerConnection", "-n", ns, "-g", "bad group!", "-t", "T")
    assert rc == 2 and "-g/--producerGroup" in err


async def test_set_consume_mode_then_query_assignment_answers_pop(daemon):
    import json

    from rmq.protocol.codes import RequestCode
    from rmq.protocol.command import RemotingCommand
    from rmq.protocol.requests.assignment import parse_query_assignment, query_assignment
    from rmq.remoting import RemotingClient

    ns, broker = daemon.namesrv_addr, daemon.broker_addr
    rc, _out, err = await admin("updateTopic", "-n", ns, "-t", "CliModeT", "-r", "2", "-w", "2")
    assert rc == 0, err
    rc, _out, err = await admin("updateSubGroup", "-n", ns, "-g", "GID_cli_mode")
    assert rc == 0, err
    rc, out, err = await admin(
        "setConsumeMode", "-n", ns, "-c", "DefaultCluster", "-t", "CliModeT", "-g", "GID_cli_mode", "-m", "POP"
    )
    assert rc == 0, err
    assert out.splitlines() == [
        f"set consume mode to {broker} success.",
        "topic[CliModeT] group[GID_cli_mode] consume mode[POP] popShareQueueNum[0]",
    ]
    client = RemotingClient([ns])
    try:
        hb = {"clientID": "cli@1", "consumerDataSet": [{"groupName": "GID_cli_mode", "subscriptionDataSet": []}]}
        await client.invoke(broker, RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(hb).encode()), 5)
        got = parse_query_assignment(
            await client.invoke(broker, query_assignment("CliModeT", "GID_cli_mode", "cli@1"), 10)
        )
        assert got == [(rmq.MessageQueue("CliModeT", "broker-a", -1), "POP")]
    finally:
        await client.close()
    # -b and a bad mode; neither -c nor -b
    rc, out, err = await admin(
        "setConsumeMode", "-n", ns, "-b", broker, "-t", "CliModeT", "-g", "GID_cli_mode", "-m", "PULL", "-q", "2"
    )
    assert rc == 0 and out.splitlines()[-1].endswith("consume mode[PULL] popShareQueueNum[2]"), err
    rc, _out, err = await admin(
        "setConsumeMode", "-n", ns, "-b", broker, "-t", "CliModeT", "-g", "GID_cli_mode", "-m", "PUSH"
    )
    assert rc == 2 and "PULL" in err and "POP" in err
    rc, _out, err = await admin("setConsumeMode", "-n", ns, "-t", "CliModeT", "-g", "GID_cli_mode", "-m", "POP")
    assert rc == 2 and "-c" in err
    # a topic the broker does not have: the broker's answer, as an error
    rc, _out, err = await admin(
        "setConsumeMode", "-n", ns, "-b", broker, "-t", "NoSuchT", "-g", "GID_cli_mode", "-m", "POP"
    )
    assert rc != 0 and "topic[NoSuchT] not exist" in err
