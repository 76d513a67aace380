"""The SDK over TLS against a name server and broker in each TLS mode (in-process, real TCP)."""

from __future__ import annotations

import ssl

import pytest
from sdk_support import create_topic, drain
from tls_support import Pki, make_pki

import rmq
from rmq._testing import run_standalone
from rmq.errors import ClientError, RMQError
from rmq.remoting.tls import TlsSettings


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def _settings(pki: Pki, mode: str, **kw: str) -> TlsSettings:
    props = pki.server_props(mode, **kw)
    props["tls.client.trustCertPath"] = pki.ca_pem  # the broker's registrations trust our CA
    return TlsSettings.from_properties(props)


async def _round_trip(namesrv_addr: str, topic: str, group: str, tls: bool | ssl.SSLContext | None) -> list:
    async with rmq.Producer(namesrv_addr, group, instance_name=group, tls=tls) as p:
        for i in range(5):
            r = await p.send(rmq.Message(topic, f"m{i}".encode()))
            assert r.status is rmq.SendStatus.SEND_OK
    c = rmq.PullConsumer(
        namesrv_addr,
        group + "_c",
        instance_name=group + "_c",
        auto_commit=False,
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        tls=tls,
    )
    out: list = []
    async with c:
        c.assign(await c.fetch_message_queues(topic))
        while len(out) < 5:
            batch = await c.poll(timeout=5)
            assert batch, f"nothing more to poll after {len(out)} messages"
            out.extend(batch)
    return sorted(m.body for m in out)


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
async def test_sdk_over_tls(pki, tmp_path, mode):
    tls = pki.client_context()
    async with run_standalone(tmp_path / "store", tls=_settings(pki, mode)) as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with rmq.Admin(ns_addr, tls=tls) as admin:
            await admin.create_and_update_topic_config(
                broker.server.address, "TlsT", read_queue_nums=2, write_queue_nums=2
            )
            assert "TlsT" in await admin.fetch_all_topic_list()
            assert await _round_trip(ns_addr, "TlsT", f"G_{mode}", tls) == [b"m0", b"m1", b"m2", b"m3", b"m4"]
            # the admin's connections are TLS; when enforcing, every connection is (the broker's
            # registration with the name server included: tls.enable follows the mode)
            for server in (ns.server, broker.server):
                tls_flags = [c.transport_info("ssl_object") is not None for c in server.connections]
                assert any(tls_flags), f"no TLS connection to {server.address}"
                assert all(tls_flags) or mode == "permissive", tls_flags


async def test_admin_sending_tools_use_the_admins_tls(pki, tmp_path):
    """sendMessage and checkMsgSendRT make a producer of their own: against an enforcing broker
    it speaks TLS as the admin does (a plain producer was refused)."""
    tls = pki.client_context()
    async with run_standalone(tmp_path / "store", tls=_settings(pki, "enforcing")) as (ns, broker):
        async with rmq.Admin(f"127.0.0.1:{ns.port}", tls=tls, timeout=10) as admin:
            await admin.create_and_update_topic_config(
                broker.server.address, "TlsToolT", read_queue_nums=1, write_queue_nums=1
            )
            sent = await admin.send_message("TlsToolT", "over tls")
            assert sent.status is rmq.SendStatus.SEND_OK
            rt = await admin.check_msg_send_rt("TlsToolT", amount=2, size=8)
            assert [s.ok for s in rt.sends] == [True, True]
        assert broker.message_store.get_max_offset_in_queue("TlsToolT", 0) == 3


async def test_plain_sdk_in_permissive_and_refused_in_enforcing(pki, tmp_path):
    async with run_standalone(tmp_path / "p", tls=_settings(pki, "permissive")) as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        await create_topic(broker.server.address, "PlainT", queues=2)  # plain admin request
        assert await _round_trip(ns_addr, "PlainT", "G_plain", None) == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        assert len(await drain(ns_addr, "PlainT", 5, group="G_drain")) == 5
    async with run_standalone(tmp_path / "e", tls=_settings(pki, "enforcing")) as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with rmq.Producer(ns_addr, "G_refused", send_timeout=2) as p:
            with pytest.raises(RMQError):
                await p.send(rmq.Message("TBW102x", b"x"))


async def test_tls_sdk_refused_by_a_plain_broker(pki, tmp_path):
    async with run_standalone(tmp_path / "d") as (ns, _):
        async with rmq.Producer(
            f"127.0.0.1:{ns.port}", "G_tls_on_plain", send_timeout=2, tls=pki.client_context()
        ) as p:
            with pytest.raises(RMQError):
                await p.send(rmq.Message("AnyT", b"x"))


async def test_client_certificate_required(pki, tmp_path):
    settings = _settings(pki, "enforcing", need_client_auth="require")
    # the broker's registrations need a client certificate too
    settings.client_cert_path, settings.client_key_path = pki.client_cert, pki.client_key
    async with run_standalone(tmp_path / "s", tls=settings) as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with rmq.Admin(ns_addr, tls=pki.client_context()) as anonymous:
            with pytest.raises(RMQError):
                await anonymous.fetch_all_topic_list()
            with pytest.raises(RMQError):
                await anonymous.create_and_update_topic_config(broker.server.address, "CertT")
        known = pki.client_context(with_cert=True)
        async with rmq.Admin(ns_addr, tls=known) as admin:
            assert "DefaultCluster" in await admin.fetch_all_topic_list()
            await admin.create_and_update_topic_config(
                broker.server.address, "CertT", read_queue_nums=1, write_queue_nums=1
            )
        assert await _round_trip(ns_addr, "CertT", "G_cert", known) == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_tls_argument_is_checked():
    with pytest.raises(ClientError, match="tls: must be"):
        rmq.Producer("127.0.0.1:1", "G", tls="yes")  # type: ignore[arg-type]
    with pytest.raises(ClientError, match="tls: must be"):
        rmq.PullConsumer("127.0.0.1:1", "G", tls=1.5)  # type: ignore[arg-type]
    assert rmq.PushConsumer("127.0.0.1:1", "G", tls=True).options.tls is True


async def test_clients_sharing_an_instance_must_agree_on_tls(pki):
    async with rmq.Producer("127.0.0.1:1", "G_a", instance_name="shared", tls=pki.client_context()):
        p = rmq.Producer("127.0.0.1:1", "G_b", instance_name="shared")
        with pytest.raises(ClientError, match="another instance_name"):
            await p.start()
