"""ACL interop: the real C++ core (PyPI rocketmq==0.4.4, ``set_session_credentials``) and ali-ons
(``accessKeyId``/``accessKeySecret``) against ``rmq standalone --aclEnable=true``.

Both sign as Java's AclClientRPCHook does (HMAC-SHA1 over the sorted extFields values and the
body), adding an ``OnsChannel`` field that is signed like any other, so the broker's one
verification accepts them. Without credentials they are refused: the C++ core still signs,
with an empty accessKey ("No acl config for "), ali-ons sends no AccessKey at all.
"""

import asyncio
import os

import _common as bench_common  # bench/ (on pytest's pythonpath)
import interop_support as support
import pytest
from interop_broker import Broker
from test_interop_clients import check_delivered, failure_report, plan_messages

from rmq._testing import StandaloneProcess
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
from rmq.remoting.client import RemotingClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

AK, SK = "interop1", "interopSecret1"
ADMIN = SessionCredentials("interopAdmin", "adminSecret1")
PLAIN_ACL = f"""
globalWhiteRemoteAddresses:
accounts:
  - accessKey: {AK}
    secretKey: {SK}
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: {ADMIN.access_key}
    secretKey: {ADMIN.secret_key}
    admin: true
"""


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("rmq-acl-home")
    os.makedirs(home / "conf")
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    proc = StandaloneProcess(
        tmp_path_factory.mktemp("rmq-acl") / "store", extra_args=["--aclEnable=true", f"--rocketmqHome={home}"]
    )
    try:
        proc.start()
    except RuntimeError as exc:
        pytest.fail(f"rmq standalone with ACL did not start: {exc}", pytrace=False)
    try:
        b = Broker(proc)
        b.wait_registered()  # the name server does no ACL check
        yield b
    finally:
        print(f"rmq standalone stopped with exit code {proc.stop()}")


def create_topic_signed(broker: Broker, topic: str) -> None:
    """UPDATE_AND_CREATE_TOPIC is an admin code: signed by the admin account."""

    async def go():
        client = RemotingClient([broker.namesrv])
        client.add_rpc_hook(AclClientRPCHook(ADMIN))
        try:
            await bench_common.ensure_topic(client, topic, 4)
        finally:
            await client.close()

    asyncio.run(go())


CREDS = ["--access-key", AK, "--secret-key", SK]


def test_cpp_with_credentials_produces_and_consumes(real_clients, acl_broker, names, tmp_path):
    create_topic_signed(acl_broker, names.topic)
    plan = plan_messages(names, 6, big_every=3)
    producer = support.cpp(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        acl_broker.namesrv,
        "--group",
        names.producer_group,
        *CREDS,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    assert producer.returncode == 0 and len(producer.of("sent")) == 6, failure_report(acl_broker, producer)
    consumer = support.cpp(
        real_clients,
        tmp_path / "c",
        "push",
        "--namesrv",
        acl_broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        "6",
        "--marker",
        names.marker,
        "--props",
        "run,idx,note",
        "--timeout",
        "45",
        *CREDS,
    ).result()
    assert consumer.returncode == 0, failure_report(acl_broker, producer, consumer)
    check_delivered(acl_broker, plan, consumer.of("recv"), names.marker, producer, consumer)
    acl_broker.check_alive()


def test_cpp_without_or_with_wrong_credentials_is_refused(real_clients, acl_broker, names, tmp_path):
    create_topic_signed(acl_broker, names.topic)
    plan = plan_messages(names, 1)
    for extra, text in (
        ([], "No acl config for"),
        (["--access-key", AK, "--secret-key", "notTheSecret"], "Check signature failed"),
    ):
        producer = support.cpp(
            real_clients,
            tmp_path / f"p{len(extra)}",
            "produce",
            "--namesrv",
            acl_broker.namesrv,
            "--group",
            names.producer_group,
            *extra,
            "--plan",
            support.write_plan(tmp_path / "plan.json", plan),
        ).result()
        assert producer.returncode != 0 and not producer.of("sent"), failure_report(acl_broker, producer)
        assert producer.of("send_error"), failure_report(acl_broker, producer)
        assert text in acl_broker.proc.log_text(), acl_broker.log_tail()


def test_ons_with_credentials_produces_and_consumes(real_clients, acl_broker, names, tmp_path):
    create_topic_signed(acl_broker, names.topic)
    plan = plan_messages(names, 6, big_every=3)
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        acl_broker.namesrv,
        "--group",
        names.producer_group,
        *CREDS,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan),
    ).result()
    sent = producer.of("sent")
    assert producer.returncode == 0 and len(sent) == 6, failure_report(acl_broker, producer)
    assert {s["status"] for s in sent} == {"SEND_OK"}, sent
    consumer = support.ons(
        real_clients,
        tmp_path / "c",
        "consume",
        "--namesrv",
        acl_broker.namesrv,
        "--group",
        names.group,
        "--topic",
        names.topic,
        "--expect",
        "6",
        "--marker",
        names.marker,
        "--timeout",
        "45",
        *CREDS,
    ).result()
    assert consumer.returncode == 0, failure_report(acl_broker, producer, consumer)
    check_delivered(acl_broker, plan, consumer.of("recv"), names.marker, producer, consumer)


def test_ons_without_credentials_is_refused(real_clients, acl_broker, names, tmp_path):
    create_topic_signed(acl_broker, names.topic)
    producer = support.ons(
        real_clients,
        tmp_path / "p",
        "produce",
        "--namesrv",
        acl_broker.namesrv,
        "--group",
        names.producer_group,
        "--plan",
        support.write_plan(tmp_path / "plan.json", plan_messages(names, 1)),
    ).result()
    assert not producer.of("sent"), failure_report(acl_broker, producer)
    errors = " ".join(e["error"] for e in producer.of("send_error")) + producer.stderr
    assert "No accessKey is configured" in errors, failure_report(acl_broker, producer)
