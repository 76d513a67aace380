"""The SDK, rmq.Admin and ``rmq admin`` with ACL credentials against a broker with
aclEnable=true: signed clients produce and consume, unsigned or wrongly signed ones are
refused with the broker's (Java's) AclException text."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap

import pytest

import rmq
from rmq._testing import run_standalone
from rmq.client.admin import PlainAccessConfig

SECRET = "12345678"
FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
PLAIN_ACL = textwrap.dedent("""
    globalWhiteRemoteAddresses:
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms:
          - AclTopic=PUB|SUB
          - TBW102=PUB|SUB
      - accessKey: rocketmq2
        secretKey: 12345678
        admin: true
    """)


@pytest.fixture
async def acl_cluster(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    async with run_standalone(tmp_path / "store", acl_enable=True, rocketmq_home=str(home)) as (ns, broker):
        yield f"127.0.0.1:{ns.port}", broker


async def test_producer_and_consumers_with_credentials(acl_cluster, unique):
    ns, _broker = acl_cluster
    topic = "AclTopic"
    async with rmq.Producer(ns, unique("PG"), access_key="RocketMQ", secret_key=SECRET) as p:
        for i in range(4):
            r = await p.send(rmq.Message(topic, b"m%d" % i))
            assert r.status is rmq.SendStatus.SEND_OK
    # a pull consumer of the same (non-admin) account reads them
    async with rmq.PullConsumer(
        ns,
        unique("LG"),
        consume_from_where=FIRST,
        auto_commit=False,
        access_key="RocketMQ",
        secret_key=SECRET,
        instance_name=unique("i"),
    ) as c:
        c.assign(await c.fetch_message_queues(topic))
        got: list[bytes] = []
        for _ in range(40):
            got += [m.body for m in await c.poll(timeout=0.5)]
            if len(got) >= 4:
                break
        assert sorted(got) == [b"m0", b"m1", b"m2", b"m3"]
    # a push consumer of the admin account (heartbeats and pulls signed)
    pc = rmq.PushConsumer(
        ns, unique("CG"), consume_from_where=FIRST, access_key="rocketmq2", secret_key=SECRET, instance_name=unique("i")
    )
    pc.subscribe(topic)
    async with pc:
        bodies = {(await asyncio.wait_for(pc.getone(), 20)).body for _ in range(4)}
        assert bodies == {b"m0", b"m1", b"m2", b"m3"}
    assert SECRET not in repr(pc.options)


async def test_unsigned_and_wrong_secret_producers_are_refused(acl_cluster, unique):
    ns, _ = acl_cluster
    async with rmq.Producer(ns, unique("PG"), retry_times=0) as p:
        with pytest.raises(rmq.errors.BrokerResponseError, match="No accessKey is configured"):
            await p.send(rmq.Message("AclTopic", b"x"))
    async with rmq.Producer(
        ns, unique("PG"), retry_times=0, access_key="RocketMQ", secret_key="wrongwrong", instance_name=unique("i")
    ) as p:
        with pytest.raises(rmq.errors.BrokerResponseError, match="Check signature failed for accessKey=RocketMQ"):
            await p.send(rmq.Message("AclTopic", b"x"))
    # a topic the account may not write (defaultTopicPerm DENY)
    async with rmq.Producer(
        ns, unique("PG"), retry_times=0, access_key="RocketMQ", secret_key=SECRET, instance_name=unique("i")
    ) as p:
        with pytest.raises(rmq.errors.BrokerResponseError, match="No default permission for topic:Elsewhere"):
            await p.send(rmq.Message("Elsewhere", b"x"))


def test_half_credentials_are_a_client_error():
    with pytest.raises(rmq.ClientError, match="give both or neither"):
        rmq.Producer("127.0.0.1:1", "G", access_key="RocketMQ")
    with pytest.raises(rmq.ClientError, match="give both or neither"):
        rmq.PushConsumer("127.0.0.1:1", "G", secret_key=SECRET)


async def test_admin_with_and_without_credentials(acl_cluster):
    ns, broker = acl_cluster
    async with rmq.Admin(ns, access_key="rocketmq2", secret_key=SECRET) as admin:
        await admin.create_and_update_topic_config(
            broker.broker_addr, "AdminTopic", read_queue_nums=2, write_queue_nums=2
        )
        info = await admin.examine_broker_cluster_acl_version_info(broker.broker_addr)
        assert info["brokerAddr"] == broker.broker_addr
        await admin.create_and_update_plain_access_config(
            broker.broker_addr, PlainAccessConfig("sdkuser1", "sdksecret1", default_topic_perm="PUB")
        )
        conf = await admin.examine_broker_cluster_acl_config(broker.broker_addr)
        assert "sdkuser1" in {a["accessKey"] for a in conf["plainAccessConfigs"]}
    async with rmq.Admin(ns, access_key="RocketMQ", secret_key=SECRET) as admin:
        with pytest.raises(rmq.AdminError, match="Need admin permission for request code=17"):
            await admin.create_and_update_topic_config(broker.broker_addr, "NotAllowed")
    async with rmq.Admin(ns) as admin:
        with pytest.raises(rmq.AdminError, match="No accessKey is configured"):
            await admin.create_and_update_topic_config(broker.broker_addr, "NotAllowed")


async def test_admin_sending_tools_sign_their_producer(acl_cluster):
    """sendMessage, checkMsgSendRT and the tools' producer send with a producer of their own:
    it signs with the admin's account (unsigned, the broker refused every send)."""
    ns, broker = acl_cluster
    async with rmq.Admin(ns, access_key="RocketMQ", secret_key=SECRET) as admin:
        sent = await admin.send_message("AclTopic", "from the admin", tags="T")
        assert sent.status is rmq.SendStatus.SEND_OK
        rt = await admin.check_msg_send_rt("AclTopic", amount=3, size=8)
        assert [s.ok for s in rt.sends] == [True, True, True]
        async with admin.tools_producer("PID_SMSC") as producer:
            assert (await producer.send(rmq.Message("AclTopic", b"status"))).status is rmq.SendStatus.SEND_OK
        # the account's own permissions apply: its topics only (defaultTopicPerm DENY)
        with pytest.raises(rmq.errors.BrokerResponseError, match="No default permission for topic:Elsewhere"):
            await admin.send_message("Elsewhere", "x")
    store = broker.message_store
    assert sum(store.get_max_offset_in_queue("AclTopic", q) for q in range(4)) == 5


async def _rmq_admin(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rmq",
        "admin",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_rmq_admin_signs_with_flags_or_tools_yml(acl_cluster, tmp_path):
    ns, broker = acl_cluster
    b = broker.broker_addr
    code, out = await _rmq_admin("updateTopic", "-n", ns, "-b", b, "-t", "CliTopic")
    assert code == 1 and "No accessKey is configured" in out, out
    code, out = await _rmq_admin(
        "updateTopic", "-n", ns, "-b", b, "-t", "CliTopic", "--aclAccessKey", "rocketmq2", "--aclSecretKey", SECRET
    )
    assert code == 0, out
    code, out = await _rmq_admin(
        "updateAclConfig",
        "-n",
        ns,
        "-b",
        b,
        "-a",
        "cliuser1",
        "-s",
        "clisecret1",
        "-t",
        "CliTopic=PUB",
        "--aclAccessKey",
        "rocketmq2",
        "--aclSecretKey",
        SECRET,
    )
    assert code == 0 and f"create or update plain access config to {b} success." in out, out
    # a sending command signs its producer with the same flags
    code, out = await _rmq_admin(
        "sendMessage", "-n", ns, "-t", "CliTopic", "-p", "hi", "--aclAccessKey", "rocketmq2", "--aclSecretKey", SECRET
    )
    assert code == 0 and "SEND_OK" in out, out
    # Java mqadmin's way: $ROCKETMQ_HOME/conf/tools.yml
    tools = tmp_path / "tools-home"
    (tools / "conf").mkdir(parents=True)
    (tools / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    code, out = await _rmq_admin("clusterAclConfigVersion", "-n", ns, "-b", b, env={"ROCKETMQ_HOME": str(tools)})
    assert code == 0 and b in out, out
    code, out = await _rmq_admin(
        "deleteAclConfig", "-n", ns, "-b", b, "-a", "cliuser1", env={"ROCKETMQ_HOME": str(tools)}
    )
    assert code == 0 and "account's accesskey is:cliuser1" in out, out
    code, out = await _rmq_admin(
        "updateGlobalWhiteAddr", "-n", ns, "-b", b, "-g", "10.0.0.*", env={"ROCKETMQ_HOME": str(tools)}
    )
    assert code == 0 and "update global white remote addresses" in out, out
