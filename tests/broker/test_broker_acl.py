"""Plain ACL 1.0 on a real broker (aclEnable=true): every rule of Java 4.9.8's
PlainAccessValidator / PlainPermissionManager, Java's refusal remarks, hot reload of
plain_acl.yml, and the ACL admin codes 50-54. Requests go over TCP from a RemotingClient that
signs with rmq.remoting.acl (the Java AclClientRPCHook scheme)."""

from __future__ import annotations

import logging
import os
import textwrap

import pytest
import yaml

from rmq._testing import run_standalone, wait_until
from rmq.broker.acl import AclConfigError, Permission, remote_address_strategy
from rmq.common.constants import TopicValidator
from rmq.common.log import RateLimitedLog
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests.acl import (
    PlainAccessConfig,
    delete_acl_config,
    get_broker_acl_config,
    get_broker_acl_info,
    parse_broker_acl_config,
    parse_broker_acl_info,
    update_acl_config,
    update_global_white_addrs,
)
from rmq.protocol.requests.client import get_all_producer_info, parse_all_producer_info
from rmq.protocol.requests.consumer import consumer_send_msg_back, get_max_offset, pull_message, update_consumer_offset
from rmq.protocol.requests.message import send_message, send_reply_message
from rmq.protocol.requests.namesrv import get_route_info, parse_topic_list
from rmq.protocol.requests.topic import clean_unused_topic, create_topic, get_system_topic_list_from_broker
from rmq.remoting import plain_acl
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials, sign_request
from rmq.remoting.client import RemotingClient

SECRET = "12345678"
EXC = "org.apache.rocketmq.acl.common.AclException: "
VALIDATE = "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:{})"
CHECK_PERM = "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:{})"

# The golden capture's plain_acl.yml plus a SUB-only account and one with a DENY group.
PLAIN_ACL = textwrap.dedent("""
    globalWhiteRemoteAddresses:
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress:
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms:
          - AclTopic=PUB|SUB
          - TBW102=PUB|SUB
          - SubOnly=SUB
        groupPerms:
          - benchmark_producer=PUB|SUB
          - deniedGroup=DENY
      - accessKey: rocketmq2
        secretKey: 12345678
        whiteRemoteAddress:
        admin: true
    """)

USER = SessionCredentials("RocketMQ", SECRET)
ADMIN = SessionCredentials("rocketmq2", SECRET)


def write_acl(home, text: str) -> str:
    path = os.path.join(home, "conf", "plain_acl.yml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


@pytest.fixture
async def acl_broker(tmp_path):
    home = tmp_path / "home"
    write_acl(home, PLAIN_ACL)
    async with run_standalone(
        tmp_path / "store", acl_enable=True, rocketmq_home=str(home), acl_watch_interval_ms=50
    ) as (ns, broker):
        clients: list[RemotingClient] = []

        def client(creds: SessionCredentials | None) -> RemotingClient:
            c = RemotingClient([f"127.0.0.1:{ns.port}"])
            if creds is not None:
                c.add_rpc_hook(AclClientRPCHook(creds))
            clients.append(c)
            return c

        broker.test_client = client  # type: ignore[attr-defined]
        broker.test_home = str(home)  # type: ignore[attr-defined]
        try:
            yield broker
        finally:
            for c in clients:
                await c.close()


def send_cmd(topic: str, body: bytes = b"hello", group: str = "benchmark_producer") -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=1,
        flag=0,
        properties="",
        reconsume_times=0,
    )
    return send_message(header, body)


def refusal(message: str, origin: str) -> str:
    return f"{EXC}{message}, {origin}"


async def test_signed_send_is_accepted_and_stored(acl_broker):
    c = acl_broker.test_client(USER)
    resp = await c.invoke(acl_broker.broker_addr, send_cmd("AclTopic"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    off = await c.invoke(acl_broker.broker_addr, get_max_offset("AclTopic", 0))
    assert int(off.ext_fields["offset"]) == 1


async def test_refusals_carry_java_remarks_in_json(acl_broker):
    addr = acl_broker.broker_addr
    cases = [
        (None, send_cmd("AclTopic"), refusal("No accessKey is configured", VALIDATE.format(664))),
        (
            SessionCredentials("RocketMQ", "wrongsecret"),
            send_cmd("AclTopic"),
            refusal("Check signature failed for accessKey=RocketMQ", VALIDATE.format(684)),
        ),
        (
            SessionCredentials("nobody99", SECRET),
            send_cmd("AclTopic"),
            refusal("No acl config for nobody99", VALIDATE.format(668)),
        ),
        # defaultTopicPerm DENY: a topic not listed is refused (the capture's DENY topic).
        (USER, send_cmd("DeniedTopic"), refusal("No default permission for topic:DeniedTopic", CHECK_PERM.format(606))),
        # listed SUB only: sending needs PUB.
        (USER, send_cmd("SubOnly"), refusal("No default permission for topic:SubOnly", CHECK_PERM.format(611))),
        # admin-only code (Java Permission.ADMIN_CODE) from a non-admin account.
        (
            USER,
            create_topic(CreateTopicRequestHeader(topic="NewT", read_queue_nums=1, write_queue_nums=1, perm=6)),
            refusal(
                f"Need admin permission for request code={RequestCode.UPDATE_AND_CREATE_TOPIC}, "
                "but accessKey=RocketMQ is not",
                CHECK_PERM.format(581),
            ),
        ),
    ]
    for creds, cmd, remark in cases:
        cmd.serialize_type = 1  # a ROCKETMQ binary request: Java still answers in JSON
        resp = await acl_broker.test_client(creds).invoke(addr, cmd)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark), (creds, cmd)
        assert resp.serialize_type == 0 and resp.ext_fields == {}


async def test_group_permissions_through_retry_topics(acl_broker):
    c = acl_broker.test_client(USER)
    addr = acl_broker.broker_addr
    assert (await c.invoke(addr, send_cmd("AclTopic"))).code == ResponseCode.SUCCESS  # creates the topic
    # defaultGroupPerm SUB: any group may commit offsets of a readable topic ...
    ok = await c.invoke(addr, update_consumer_offset("anyGroup", "AclTopic", 0, 0))
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    # ... but not one whose group is DENY (groups are checked as their %RETRY% topic).
    bad = await c.invoke(addr, update_consumer_offset("deniedGroup", "AclTopic", 0, 0))
    assert bad.remark == refusal("No default permission for group:deniedGroup", CHECK_PERM.format(611))
    # PULL needs SUB on the topic: DENY by default.
    pull = pull_message(
        PullMessageRequestHeader(
            consumer_group="anyGroup",
            topic="DeniedTopic",
            queue_id=0,
            queue_offset=0,
            max_msg_nums=1,
            sys_flag=0,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
        )
    )
    resp = await c.invoke(addr, pull)
    assert resp.remark == refusal("No default permission for topic:DeniedTopic", CHECK_PERM.format(606))


async def test_admin_account_passes_admin_codes_and_everything(acl_broker):
    c = acl_broker.test_client(ADMIN)
    resp = await c.invoke(
        acl_broker.broker_addr,
        create_topic(CreateTopicRequestHeader(topic="AdminMade", read_queue_nums=1, write_queue_nums=1, perm=6)),
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    # admin with no perms listed: every topic (Java checkPerm's "ownedPermMap null and admin").
    resp = await c.invoke(acl_broker.broker_addr, send_cmd("DeniedTopic"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def test_clean_unused_topic_needs_an_admin_account(acl_broker):
    """CLEAN_UNUSED_TOPIC (316) destroys the consume queues of every topic the broker has no
    config for: an admin code here (Java 4.9.8 leaves it open). The two other codes rmq admin's
    exports send, 305 and 328, stay open to any account, as in Java."""
    addr, store = acl_broker.broker_addr, acl_broker.message_store
    admin, user = acl_broker.test_client(ADMIN), acl_broker.test_client(USER)
    assert (await admin.invoke(addr, send_cmd("OrphanT"))).code == ResponseCode.SUCCESS  # auto-created
    await wait_until(lambda: "OrphanT" in store.consume_queue_table, what="OrphanT's consume queue")
    acl_broker.topic_config_manager.delete_topic_config("OrphanT")  # a config lost, its queues left behind
    refused = await user.invoke(addr, clean_unused_topic())
    assert (refused.code, refused.remark) == (
        ResponseCode.SYSTEM_ERROR,
        refusal(
            f"Need admin permission for request code={RequestCode.CLEAN_UNUSED_TOPIC}, but accessKey=RocketMQ is not",
            CHECK_PERM.format(581),
        ),
    )
    assert "OrphanT" in store.consume_queue_table
    # the refused account's connection goes on serving it, and the read-only codes stay open
    topics = parse_topic_list(await user.invoke(addr, get_system_topic_list_from_broker()))
    assert "TBW102" in topics
    producers = parse_all_producer_info(await user.invoke(addr, get_all_producer_info()))
    assert isinstance(producers.data, dict)
    assert (await admin.invoke(addr, clean_unused_topic())).code == ResponseCode.SUCCESS
    assert "OrphanT" not in store.consume_queue_table


async def test_replayed_request_with_changed_body_or_field_is_refused(acl_broker):
    addr = acl_broker.broker_addr
    plain = acl_broker.test_client(None)  # sends as given: the signature is ours to forge
    cmd = send_cmd("AclTopic", b"original")
    sign_request(cmd, USER)
    ext = dict(cmd.ext_fields)
    assert (await plain.invoke(addr, cmd)).code == ResponseCode.SUCCESS
    replay = RemotingCommand.request(cmd.code, dict(ext), b"tampered")
    resp = await plain.invoke(addr, replay)
    assert resp.remark == refusal("Check signature failed for accessKey=RocketMQ", VALIDATE.format(684))
    moved = RemotingCommand.request(cmd.code, {**ext, "b": "TBW102"}, b"original")
    resp = await plain.invoke(addr, moved)
    assert resp.remark == refusal("Check signature failed for accessKey=RocketMQ", VALIDATE.format(684))
    unsigned = RemotingCommand.request(cmd.code, {k: v for k, v in ext.items() if k != "Signature"}, b"original")
    resp = await plain.invoke(addr, unsigned)
    assert resp.remark == refusal("Check signature failed for accessKey=RocketMQ", VALIDATE.format(684))


async def test_secret_never_logged_and_refusals_rate_limited(acl_broker, caplog, monkeypatch):
    monkeypatch.setattr(plain_acl, "_rlog", RateLimitedLog(plain_acl.log))  # a fresh 10 s window
    caplog.set_level(logging.INFO)
    c = acl_broker.test_client(SessionCredentials("RocketMQ", "topsecret-wrong"))
    for _ in range(20):
        resp = await c.invoke(acl_broker.broker_addr, send_cmd("AclTopic"))
        assert resp.code == ResponseCode.SYSTEM_ERROR
    lines = [r.getMessage() for r in caplog.records if "ACL refused" in r.getMessage()]
    assert len(lines) == 1, lines
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "topsecret-wrong" not in text and SECRET not in text


async def test_hot_reload_rewrite_then_bad_file_keeps_last_good(acl_broker, caplog):
    addr = acl_broker.broker_addr
    home = acl_broker.test_home
    c = acl_broker.test_client(USER)
    assert (await c.invoke(addr, send_cmd("DeniedTopic"))).code == ResponseCode.SYSTEM_ERROR
    # Grant the topic: the watcher picks the new file up.
    write_acl(home, PLAIN_ACL.replace("- SubOnly=SUB", "- SubOnly=SUB\n      - DeniedTopic=PUB"))

    async def accepted() -> bool:
        return (await c.invoke(addr, send_cmd("DeniedTopic"))).code == ResponseCode.SUCCESS

    await wait_until(accepted, timeout=20, what="the rewritten plain_acl.yml in force")
    # A file that does not parse: reported once, the previous configuration stays.
    caplog.set_level(logging.ERROR, logger="rmq.acl")
    write_acl(home, "accounts: [ {accessKey: RocketMQ, secretKey: 1\n")
    await wait_until(
        lambda: any("previous one stays" in r.getMessage() for r in caplog.records),
        timeout=20,
        what="the bad file reported",
    )
    assert await accepted()
    reports = [r for r in caplog.records if "previous one stays" in r.getMessage()]
    assert len(reports) == 1
    # An account removed: its requests are refused from then on.
    write_acl(home, PLAIN_ACL.replace("accessKey: RocketMQ", "accessKey: Renamed1"))

    async def refused() -> bool:
        r = await c.invoke(addr, send_cmd("AclTopic"))
        return r.remark == refusal("No acl config for RocketMQ", VALIDATE.format(668))

    await wait_until(refused, timeout=20, what="the removed account refused")


async def test_global_and_account_white_addresses_skip_the_signature(acl_broker):
    addr = acl_broker.broker_addr
    home = acl_broker.test_home
    unsigned = acl_broker.test_client(None)
    forged = acl_broker.test_client(SessionCredentials("RocketMQ", "not-the-secret"))
    assert (await forged.invoke(addr, send_cmd("AclTopic"))).code == ResponseCode.SYSTEM_ERROR
    # The account's white address (a range that holds 127.0.0.1): no signature check ...
    write_acl(
        home,
        PLAIN_ACL.replace(
            "whiteRemoteAddress:\n    admin: false", "whiteRemoteAddress: 127.0.0.1-5\n    admin: false", 1
        ),
    )

    async def forged_ok() -> bool:
        return (await forged.invoke(addr, send_cmd("DeniedTopic"))).code == ResponseCode.SUCCESS

    await wait_until(forged_ok, timeout=20, what="the account white address in force")
    # ... and the global white list lets even unsigned requests through.
    assert (await unsigned.invoke(addr, send_cmd("AclTopic"))).code == ResponseCode.SYSTEM_ERROR
    write_acl(home, PLAIN_ACL.replace("globalWhiteRemoteAddresses:", "globalWhiteRemoteAddresses:\n  - 127.0.*.*"))

    async def unsigned_ok() -> bool:
        return (await unsigned.invoke(addr, send_cmd("AclTopic"))).code == ResponseCode.SUCCESS

    await wait_until(unsigned_ok, timeout=20, what="the global white list in force")


@pytest.mark.parametrize(
    "expr, host, match",
    [
        ("*", "10.1.2.3", True),
        ("*.*.*.*", "10.1.2.3", True),
        ("", "127.0.0.1", False),
        (None, "127.0.0.1", False),
        ("192.168.0.*", "192.168.0.77", True),
        ("192.168.0.*", "192.168.1.77", False),
        ("192.168.1.1-100", "192.168.1.100", True),
        ("192.168.1.1-100", "192.168.1.101", False),
        ("192.168.*.*", "192.168.250.3", True),
        ("10.10.1-3.*", "10.10.2.200", True),
        ("10.10.1-3.*", "10.10.4.1", False),
        ("192.168.1.2,192.168.1.3", "192.168.1.3", True),
        ("192.168.1.2,192.168.1.3", "192.168.1.4", False),
        ("192.168.1.{1,2,3}", "192.168.1.2", True),
        ("192.168.1.{1,2,3}", "192.168.1.4", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "127.0.0.2", False),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("1050:0:0:0:5:600:300c:326b", "1050::5:600:300c:326b", True),
        ("1050::0005:0600:300c:1-ff", "1050::5:600:300c:ff", True),
        ("1050::0005:0600:300c:1-ff", "1050::5:600:300c:100", False),
        ("1050::0005:0600:300c:*", "1050::5:600:300c:abcd", True),
        ("1050::0005:0600:{1,2}", "1050::5:600:2", True),
        ("1050::0005:0600:{1,2}", "1050::5:600:3", False),
        ("*:*:*:*:*:*:*:*", "::1", True),
        ("192.168.0.*", "::1", False),
    ],
)
def test_white_address_forms(expr, host, match):
    assert remote_address_strategy(expr)(host) is match


@pytest.mark.parametrize(
    "expr", ["192.168.1.300-400", "1.2.3", "not-an-ip", "192.168.1.-5", "10.0.0.{1,x}", "1050::*:1"]
)
def test_bad_white_addresses_are_refused(expr):
    with pytest.raises(AclConfigError):
        remote_address_strategy(expr)


def test_permission_rules():
    assert Permission.check(Permission.PUB, Permission.PUB | Permission.SUB)
    assert not Permission.check(Permission.PUB, Permission.SUB)
    assert not Permission.check(Permission.SUB, Permission.DENY)
    assert Permission.check(Permission.ANY, Permission.SUB)
    assert not Permission.check(Permission.ANY, Permission.DENY)
    assert Permission.parse("SUB|PUB") == Permission.PUB | Permission.SUB
    assert Permission.parse(None) == Permission.parse("whatever") == Permission.DENY


async def test_bad_plain_acl_at_start_fails_the_broker(tmp_path):
    home = tmp_path / "home"
    write_acl(home, "accounts:\n  - accessKey: short\n    secretKey: 12345678\n")
    with pytest.raises(AclConfigError, match="longer than 6"):
        async with run_standalone(tmp_path / "store", acl_enable=True, rocketmq_home=str(home)):
            pass


async def test_acl_admin_codes_write_the_yml(acl_broker):
    addr = acl_broker.broker_addr
    home = acl_broker.test_home
    path = os.path.join(home, "conf", "plain_acl.yml")
    admin = acl_broker.test_client(ADMIN)
    user = acl_broker.test_client(USER)

    info = parse_broker_acl_info(await admin.invoke(addr, get_broker_acl_info()))
    assert info["brokerAddr"] == addr and path in info["allAclFileVersion"]
    counter0 = info["version"]["counter"]

    # A non-admin account cannot create accounts (nor read secrets).
    resp = await user.invoke(addr, update_acl_config(PlainAccessConfig("newuser1", "newsecret1", admin=True)))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "Need admin permission" in resp.remark
    resp = await user.invoke(addr, get_broker_acl_config())
    assert resp.code == ResponseCode.SYSTEM_ERROR

    # Create an account; it works at once, and the file holds it with a bumped dataVersion.
    resp = await admin.invoke(
        addr,
        update_acl_config(
            PlainAccessConfig("newuser1", "newsecret1", default_topic_perm="PUB", topic_perms=["AclTopic=SUB"])
        ),
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    with open(path) as f:
        data = yaml.safe_load(f)
    acct = next(a for a in data["accounts"] if a["accessKey"] == "newuser1")
    assert acct["topicPerms"] == ["AclTopic=SUB"] and acct["defaultTopicPerm"] == "PUB"
    assert data["dataVersion"][0]["counter"] == counter0 + 1
    new = acl_broker.test_client(SessionCredentials("newuser1", "newsecret1"))
    assert (await new.invoke(addr, send_cmd("Anything"))).code == ResponseCode.SUCCESS
    assert (await new.invoke(addr, send_cmd("AclTopic"))).code == ResponseCode.SYSTEM_ERROR

    # Bad inputs get Java's failure codes and texts.
    resp = await admin.invoke(addr, update_acl_config(PlainAccessConfig("short", "12345678")))
    assert resp.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    assert "cannot be null and length should longer than 6" in resp.remark
    resp = await admin.invoke(
        addr, update_acl_config(PlainAccessConfig("newuser1", "newsecret1", topic_perms=["T=ALL"]))
    )
    assert resp.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    assert "Parse resource permission error for T=ALL" in resp.remark

    # GET_BROKER_CLUSTER_ACL_CONFIG lists every account.
    conf = parse_broker_acl_config(await admin.invoke(addr, get_broker_acl_config()))
    assert {a["accessKey"] for a in conf["plainAccessConfigs"]} == {"RocketMQ", "rocketmq2", "newuser1"}

    # Global white list, then delete the account.
    resp = await admin.invoke(addr, update_global_white_addrs(["10.10.103.*", "192.168.0.*"]))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    with open(path) as f:
        assert yaml.safe_load(f)["globalWhiteRemoteAddresses"] == ["10.10.103.*", "192.168.0.*"]
    resp = await admin.invoke(addr, update_global_white_addrs(["300.1.1.1-2"]))
    assert resp.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
    resp = await admin.invoke(addr, update_global_white_addrs(["1.1.1.1"], "/etc/passwd"))
    assert (resp.code, resp.remark) == (
        ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
        "The globalWhiteAddresses[1.1.1.1] has been updated failed.",
    )
    resp = await admin.invoke(addr, delete_acl_config("newuser1"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert (await new.invoke(addr, send_cmd("Anything"))).remark == refusal(
        "No acl config for newuser1", VALIDATE.format(668)
    )
    resp = await admin.invoke(addr, delete_acl_config("newuser1"))
    assert (resp.code, resp.remark) == (
        ResponseCode.DELETE_ACL_CONFIG_FAILED,
        "The accesskey[newuser1] corresponding to accessConfig has been deleted failed.",
    )
    info = parse_broker_acl_info(await admin.invoke(addr, get_broker_acl_info()))
    assert info["version"]["counter"] == counter0 + 3


async def test_acl_admin_codes_without_acl_say_so(tmp_path):
    async with run_standalone(tmp_path / "store") as (_ns, broker):
        async with RemotingClient() as c:
            resp = await c.invoke(broker.broker_addr, delete_acl_config("whoever1"))
            assert resp.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
            assert "aclEnable=false" in resp.remark
            # and no ACL check: unsigned requests work
            assert (await c.invoke(broker.broker_addr, send_cmd("Plain"))).code == ResponseCode.SUCCESS


async def test_namesrv_does_no_acl_check(acl_broker):
    c = acl_broker.test_client(None)
    route = await c.invoke_namesrv(get_route_info("TBW102"))
    assert route.code == ResponseCode.SUCCESS


async def test_big_bodies_are_checked_off_the_loop_with_the_same_outcome(acl_broker):
    from rmq.broker.acl import OFF_LOOP_BODY_BYTES

    body = os.urandom(OFF_LOOP_BODY_BYTES + 1000)
    addr = acl_broker.broker_addr
    ok = await acl_broker.test_client(USER).invoke(addr, send_cmd("AclTopic", body))
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    bad = await acl_broker.test_client(SessionCredentials("RocketMQ", "wrongwrong")).invoke(
        addr, send_cmd("AclTopic", body)
    )
    assert bad.remark == refusal("Check signature failed for accessKey=RocketMQ", VALIDATE.format(684))
    denied = await acl_broker.test_client(USER).invoke(addr, send_cmd("DeniedTopic", body))
    assert denied.remark == refusal("No default permission for topic:DeniedTopic", CHECK_PERM.format(606))


def _golden_acl_rows() -> list[dict]:
    import base64
    import json
    from pathlib import Path

    from rmq.remoting.codec import decode_frame

    path = Path(__file__).resolve().parent.parent / "golden" / "remoting" / "rocketmq-4.9.8-acl-frames.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        row["cmd"] = decode_frame(base64.b64decode(row["frame_b64"]))
    return rows


async def test_java_clients_golden_requests_get_the_java_brokers_answers(acl_broker):
    """Replay the Java benchmark clients' signed requests (same accounts and secrets as the
    capture): where the Java broker refused, we answer its exact remark; where it accepted,
    we accept."""
    rows = _golden_acl_rows()
    answers: dict[tuple[int, int], list[RemotingCommand]] = {}
    for r in rows:
        if r["stream"] == "broker->client" and r.get("request_code"):
            answers.setdefault((r["cmd"].opaque, r["request_code"]), []).append(r["cmd"])
    plain = acl_broker.test_client(None)
    checked = {"refused": 0, "accepted": 0}
    for row in rows:
        req = row["cmd"]
        if row["stream"] != "client->broker" or row["flag"] & 2 or "Signature" not in req.ext_fields:
            continue
        found = answers.get((req.opaque, req.code), [])
        if len(found) != 1:
            continue  # not captured, or opaques of two connections collide
        java = found[0]
        replay = RemotingCommand(
            req.code,
            language=req.language,
            version=req.version,
            flag=0,
            ext_fields=dict(req.ext_fields),
            body=req.body,
            serialize_type=req.serialize_type,
        )
        replay.opaque = RemotingCommand.request(0).opaque
        ours = await plain.invoke(acl_broker.broker_addr, replay)
        if java.code == ResponseCode.SYSTEM_ERROR and (java.remark or "").startswith(EXC):
            assert (ours.code, ours.remark, ours.serialize_type) == (java.code, java.remark, java.serialize_type)
            checked["refused"] += 1
        else:
            assert not (ours.remark or "").startswith(EXC), (req.code, ours.remark)
            checked["accepted"] += 1
    assert checked["refused"] >= 1 and checked["accepted"] >= 5, checked


# ---------------------------------------------------------------- mixed header forms (issue 23, finding 1)


def _v1_fields(topic: str) -> dict[str, str]:
    header = SendMessageRequestHeader(
        producer_group="benchmark_producer",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=1,
        flag=0,
        properties="",
        reconsume_times=0,
    )
    return header.to_ext_fields()


async def _count(c: RemotingClient, addr: str, topic: str) -> int:
    resp = await c.invoke(addr, get_max_offset(topic, 0))
    return int(resp.ext_fields["offset"]) if resp.code == ResponseCode.SUCCESS else 0


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "python-path"])
async def test_mixed_header_forms_cannot_send_past_the_acl(tmp_path, fast_path):
    """The attacker's exact requests: an account allowed PUB only on AclTopic names AclTopic
    under one naming and Secret under the other. Java reads the naming of the request code only
    (PlainAccessValidator.parse and parseRequestHeader alike): the 10 lands in AclTopic, the
    310 and 320 with long names have no topic and are refused; Secret stays empty."""
    home = tmp_path / "home"
    write_acl(home, PLAIN_ACL)
    async with run_standalone(
        tmp_path / "store", acl_enable=True, rocketmq_home=str(home), send_fast_path=fast_path
    ) as (ns, broker):
        addr = broker.broker_addr
        admin = RemotingClient([f"127.0.0.1:{ns.port}"])
        admin.add_rpc_hook(AclClientRPCHook(ADMIN))
        user = RemotingClient([f"127.0.0.1:{ns.port}"])
        user.add_rpc_hook(AclClientRPCHook(USER))
        try:
            for topic in ("Secret", "AclTopic"):
                made = await admin.invoke(
                    addr,
                    create_topic(CreateTopicRequestHeader(topic=topic, read_queue_nums=1, write_queue_nums=1, perm=6)),
                )
                assert made.code == ResponseCode.SUCCESS, made.remark
            # the account may not send to Secret in either naming when asked plainly
            for cmd in (
                send_cmd("Secret"),
                RemotingCommand.request(RequestCode.SEND_MESSAGE, _v1_fields("Secret"), b"x"),
            ):
                resp = await user.invoke(addr, cmd)
                assert resp.code == ResponseCode.SYSTEM_ERROR and "topic:Secret" in (resp.remark or "")
            # attack 1: SEND_MESSAGE (10) with topic=AclTopic and b=Secret -> stored in AclTopic
            resp = await user.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.SEND_MESSAGE,
                    {**_v1_fields("AclTopic"), "b": "Secret", "a": "benchmark_producer", "e": "0"},
                    b"attack-1",
                ),
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert await _count(admin, addr, "AclTopic") == 1
            # attacks 2 and 3: 310 and 320 with the long names (topic=Secret) -> no topic: refused
            for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
                resp = await user.invoke(addr, RemotingCommand.request(code, _v1_fields("Secret"), b"attack"))
                assert resp.code == ResponseCode.SYSTEM_ERROR, (code, resp.remark)
                assert "missing required field 'a'" in (resp.remark or ""), resp.remark
            # a 310 with both namings: the short names are read (AclTopic), the long ones ignored
            resp = await user.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.SEND_MESSAGE_V2, {**_v1_fields("Secret"), **send_cmd("AclTopic").ext_fields}, b"both"
                ),
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert await _count(admin, addr, "Secret") == 0
            assert await _count(admin, addr, "AclTopic") == 2
        finally:
            await admin.close()
            await user.close()


async def test_view_and_query_answer_only_topics_the_account_may_read(acl_broker):
    """VIEW_MESSAGE_BY_ID names an offset, not a topic, so Java's ACL checks nothing and any
    account reads any topic's bodies: here the record's topic needs SUB (issue 23, finding 10).
    QUERY_MESSAGE needs SUB on its topic (Java) and answers only that topic's records."""
    addr = acl_broker.broker_addr
    admin, user = acl_broker.test_client(ADMIN), acl_broker.test_client(USER)
    ids = {}
    for topic in ("DeniedTopic", "AclTopic"):
        cmd = send_cmd(topic, b"body of " + topic.encode())
        cmd.ext_fields["i"] = "KEYS\x01k1\x02"
        resp = await admin.invoke(addr, cmd)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        ids[topic] = int(resp.ext_fields["msgId"][-16:], 16)
    view = lambda off: RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(off)})  # noqa: E731
    resp = await user.invoke(addr, view(ids["DeniedTopic"]))
    assert resp.code == ResponseCode.SYSTEM_ERROR and not resp.body
    assert resp.remark == refusal("No default permission for topic:DeniedTopic", CHECK_PERM.format(606))
    resp = await user.invoke(addr, view(ids["AclTopic"]))
    assert resp.code == ResponseCode.SUCCESS and b"body of AclTopic" in resp.body_bytes()
    resp = await admin.invoke(addr, view(ids["DeniedTopic"]))  # an admin reads everything
    assert resp.code == ResponseCode.SUCCESS and b"body of DeniedTopic" in resp.body_bytes()

    def query(topic: str) -> RemotingCommand:
        return RemotingCommand.request(
            RequestCode.QUERY_MESSAGE,
            {"topic": topic, "key": "k1", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(1 << 62)},
        )

    resp = await user.invoke(addr, query("DeniedTopic"))
    assert resp.remark == refusal("No default permission for topic:DeniedTopic", CHECK_PERM.format(606))
    resp = await user.invoke(addr, query("AclTopic"))
    assert resp.code == ResponseCode.SUCCESS and b"body of DeniedTopic" not in resp.body_bytes()


async def test_replies_need_pub_and_the_trace_topic_can_be_denied_per_account(tmp_path):
    """Java's ACL checks neither 324/325 (a reply could be stored into any topic) nor PUB on
    RMQ_SYS_TRACE_TOPIC (every account writes it). Replies now need PUB on their topic; the
    trace topic keeps Java's free pass unless the account lists it (issue 23, finding 10)."""
    home = tmp_path / "home"
    write_acl(
        home,
        PLAIN_ACL
        + "\n".join(
            [
                "  - accessKey: notrace1",
                "    secretKey: 12345678",
                "    defaultTopicPerm: DENY",
                "    defaultGroupPerm: SUB",
                "    topicPerms:",
                "      - AclTopic=PUB|SUB",
                "      - RMQ_SYS_TRACE_TOPIC=DENY",
                "",
            ]
        ),
    )
    async with run_standalone(tmp_path / "store", acl_enable=True, rocketmq_home=str(home)) as (ns, broker):
        addr = broker.broker_addr
        clients = []

        def client(creds: SessionCredentials) -> RemotingClient:
            c = RemotingClient([f"127.0.0.1:{ns.port}"])
            c.add_rpc_hook(AclClientRPCHook(creds))
            clients.append(c)
            return c

        try:
            user, notrace = client(USER), client(SessionCredentials("notrace1", SECRET))
            reply_topic = "DefaultCluster_REPLY_TOPIC"
            header = SendMessageRequestHeader(
                producer_group="benchmark_producer",
                topic=reply_topic,
                queue_id=0,
                properties="MSG_TYPE\x01reply\x02REPLY_TO_CLIENT\x01nobody\x02",
            )
            resp = await user.invoke(addr, send_reply_message(header, b"r"))
            assert resp.remark == refusal(f"No default permission for topic:{reply_topic}", CHECK_PERM.format(606))
            resp = await user.invoke(addr, send_reply_message(header, b"r", v2=False))
            assert resp.remark == refusal(f"No default permission for topic:{reply_topic}", CHECK_PERM.format(606))
            # the trace topic: Java's free pass for USER, refused for the account that lists it
            resp = await user.invoke(addr, send_cmd(TopicValidator.RMQ_SYS_TRACE_TOPIC, b"Pub\x01..."))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            resp = await notrace.invoke(addr, send_cmd(TopicValidator.RMQ_SYS_TRACE_TOPIC, b"Pub\x01..."))
            assert resp.remark == refusal("No default permission for topic:RMQ_SYS_TRACE_TOPIC", CHECK_PERM.format(611))
            assert (await notrace.invoke(addr, send_cmd("AclTopic"))).code == ResponseCode.SUCCESS
        finally:
            for c in clients:
                await c.close()


async def test_send_back_copies_only_messages_the_account_may_read(acl_broker):
    """CONSUMER_SEND_MSG_BACK names a CommitLog offset and a group: Java copies whatever message
    is there into the group's %RETRY% topic, which the account may then pull. The account must
    now be able to SUB the message's topic (issue 23, finding 10)."""
    from rmq.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader

    addr = acl_broker.broker_addr
    admin, user = acl_broker.test_client(ADMIN), acl_broker.test_client(USER)
    offsets = {}
    for topic in ("DeniedTopic", "AclTopic"):
        resp = await admin.invoke(addr, send_cmd(topic, b"body of " + topic.encode()))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        offsets[topic] = int(resp.ext_fields["msgId"][-16:], 16)

    def back(topic: str) -> RemotingCommand:
        return consumer_send_msg_back(
            ConsumerSendMsgBackRequestHeader(
                offset=offsets[topic], group="anyGroup", delay_level=-1, origin_topic="AclTopic"
            )
        )

    resp = await user.invoke(addr, back("DeniedTopic"))
    assert resp.remark == refusal("No default permission for topic:DeniedTopic", CHECK_PERM.format(606))
    resp = await user.invoke(addr, back("AclTopic"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    # delayLevel -1: straight to the group's DLQ, which holds the one allowed copy only
    dlq = await admin.invoke(addr, get_max_offset("%DLQ%anyGroup", 0))
    assert dlq.code == ResponseCode.SUCCESS and dlq.ext_fields["offset"] == "1", dlq.remark


async def test_pop_codes_need_sub_on_group_and_topic(acl_broker):
    """RocketMQ 5 POP (Java 5.3.3's @RocketMQAction SUB on its headers): a DENY topic or group
    is refused before the POP processor, an allowed one is served."""
    import json as _json
    import time as _time

    from rmq.protocol.headers.pop import PopMessageRequestHeader
    from rmq.protocol.requests import pop as popwire

    c = acl_broker.test_client(USER)
    addr = acl_broker.broker_addr
    assert (await c.invoke(addr, send_cmd("AclTopic"))).code == ResponseCode.SUCCESS

    def pop(group: str, topic: str) -> RemotingCommand:
        return popwire.pop_message(
            PopMessageRequestHeader(
                consumer_group=group,
                topic=topic,
                queue_id=-1,
                max_msg_nums=1,
                invisible_time=60_000,
                poll_time=0,
                born_time=int(_time.time() * 1000),
                init_mode=0,
            )
        )

    resp = await c.invoke(addr, pop("anyGroup", "DeniedTopic"))
    assert resp.remark == refusal("No default permission for topic:DeniedTopic", CHECK_PERM.format(606))
    resp = await c.invoke(addr, pop("deniedGroup", "AclTopic"))
    assert resp.remark == refusal("No default permission for group:deniedGroup", CHECK_PERM.format(611))
    resp = await c.invoke(addr, pop("anyGroup", "AclTopic"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    body = _json.dumps(
        {"acks": [{"c": "deniedGroup", "t": "AclTopic", "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 0, "it": 1, "b": ""}]}
    ).encode()
    resp = await c.invoke(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body))
    assert resp.remark == refusal("No default permission for group:deniedGroup", CHECK_PERM.format(611))


async def test_set_message_request_mode_needs_an_admin_account(acl_broker):
    """SET_MESSAGE_REQUEST_MODE changes how every consumer of a group is assigned queues: an
    admin code (Java 5's ACL checks it as a cluster-level update)."""
    from rmq.protocol.requests.assignment import set_message_request_mode

    addr = acl_broker.broker_addr
    refused = await acl_broker.test_client(USER).invoke(addr, set_message_request_mode("AclTopic", "G1", "POP"))
    assert (refused.code, refused.remark) == (
        ResponseCode.SYSTEM_ERROR,
        refusal(
            f"Need admin permission for request code={RequestCode.SET_MESSAGE_REQUEST_MODE}, "
            "but accessKey=RocketMQ is not",
            CHECK_PERM.format(581),
        ),
    )
    assert acl_broker.message_request_mode_manager.get("AclTopic", "G1") is None
    passed = await acl_broker.test_client(ADMIN).invoke(addr, set_message_request_mode("NoSuchTopicHere", "G1", "POP"))
    assert passed.code == ResponseCode.TOPIC_NOT_EXIST  # past the ACL, answered by the processor
