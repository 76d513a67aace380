"""Issue 23, finding 6: anyone could break routing through the name server. UPDATE_NAMESRV_CONFIG
goes through start-up's range checks (the attacker's ``brokerChannelExpiredSeconds=0.001`` is
refused naming the property and its allowed values, nothing changes, nothing is saved), the
broker's UPDATE_BROKER_CONFIG likewise, and an optional ``aclEnable`` on the name server
guards its write codes with the broker's accounts file while reads stay open."""

import asyncio
import pathlib
import textwrap

import pytest
from test_namesrv import register_cmd

from rmq._testing import NoisyNeighbour, invoke_once, run_broker, run_namesrv, wait_until
from rmq.config import ConfigError, NamesrvConfig, apply_properties, check_config
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
from rmq.remoting.client import RemotingClient

ATTACK = b"brokerChannelExpiredSeconds=0.001\n"

PLAIN_ACL = textwrap.dedent("""
    globalWhiteRemoteAddresses:
    accounts:
      - accessKey: nsadmin01
        secretKey: nsadmin-secret
        admin: true
      - accessKey: justauser
        secretKey: user-secret-1
        admin: false
        defaultTopicPerm: PUB|SUB
""")
ADMIN = SessionCredentials("nsadmin01", "nsadmin-secret")
USER = SessionCredentials("justauser", "user-secret-1")


def _home(tmp_path, text: str = PLAIN_ACL) -> str:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "plain_acl.yml").write_text(text)
    return str(home)


async def _signed(addr: str, creds: SessionCredentials | None, code: int, ext=None, body=None):
    client = RemotingClient()
    if creds is not None:
        client.add_rpc_hook(AclClientRPCHook(creds))
    try:
        return await client.invoke(addr, RemotingCommand.request(code, ext, body), timeout=10)
    finally:
        await client.close()


async def test_the_attack_update_is_refused_by_start_ups_range_and_nothing_is_saved(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("maxBrokers=100\n")
    async with run_namesrv(config_store_path=str(conf)) as ns:
        resp = await invoke_once(ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=ATTACK)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "brokerChannelExpiredSeconds" in resp.remark and "60" in resp.remark and "86400" in resp.remark, (
            resp.remark
        )
        assert ns.config.broker_channel_expired_seconds == 120.0
        assert ns.route_info_manager.broker_channel_expired_seconds == 120.0
        assert conf.read_text() == "maxBrokers=100\n"
        resp = await invoke_once(
            ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"scanNotActiveBrokerInterval=0.001\n"
        )
        assert resp.code == ResponseCode.SYSTEM_ERROR and "scanNotActiveBrokerInterval" in resp.remark
        # an update inside the range still applies and is saved
        resp = await invoke_once(
            ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"brokerChannelExpiredSeconds=90\n"
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert ns.route_info_manager.broker_channel_expired_seconds == 90.0
        assert "brokerChannelExpiredSeconds=90" in conf.read_text()


def test_start_up_refuses_the_same_value_naming_the_property():
    with pytest.raises(ConfigError, match=r"brokerChannelExpiredSeconds.*60"):
        cfg = NamesrvConfig()
        apply_properties({"brokerChannelExpiredSeconds": "0.001"}, cfg)
        check_config(cfg)


async def test_update_broker_config_refuses_out_of_range_values_and_saves_nothing(tmp_path):
    async with run_broker(tmp_path / "b") as broker:
        path = pathlib.Path(broker.configuration.path())
        before = path.read_text() if path.exists() else None
        resp = await invoke_once(broker.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"maxMessageSize=0\n")
        assert resp.code == ResponseCode.SYSTEM_ERROR, resp.remark
        assert "bad value for maxMessageSize" in resp.remark and "1..1073741824" in resp.remark, resp.remark
        assert broker.message_store.config.max_message_size == 4 * 1024 * 1024
        assert (path.read_text() if path.exists() else None) == before


async def test_acl_on_the_name_server_guards_writes_and_leaves_reads_open(tmp_path):
    home = _home(tmp_path)
    async with run_namesrv(acl_enable=True, rocketmq_home=home) as ns:
        addr = ns.address
        # the attacker's exact request, unsigned: refused, nothing changed
        resp = await invoke_once(addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"brokerChannelExpiredSeconds=90\n")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in resp.remark
        assert ns.config.broker_channel_expired_seconds == 120.0
        # a KV write, a wipe, a topic deletion unsigned: refused
        for code, ext in (
            (RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"}),
            (RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"}),
            (RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}),
        ):
            resp = await _signed(addr, None, code, ext)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "AclException" in resp.remark, (code, resp.remark)
        # a non-admin account, or a wrong secret: refused
        resp = await _signed(addr, USER, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
        assert resp.code == ResponseCode.SYSTEM_ERROR and "Need admin permission" in resp.remark
        wrong = SessionCredentials(ADMIN.access_key, "not-the-secret")
        resp = await _signed(addr, wrong, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
        assert resp.code == ResponseCode.SYSTEM_ERROR and "Check signature failed" in resp.remark
        assert ns.kv_config_manager.get("N", "k") is None
        # an admin account: accepted
        resp = await _signed(addr, ADMIN, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        resp = await _signed(addr, ADMIN, RequestCode.UPDATE_NAMESRV_CONFIG, None, b"brokerChannelExpiredSeconds=90\n")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        # reads stay open to every client (producers, consumers, Java tools without keys)
        resp = await invoke_once(addr, RequestCode.GET_KV_CONFIG, {"namespace": "N", "key": "k"})
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["value"] == "v"
        resp = await invoke_once(addr, RequestCode.GET_BROKER_CLUSTER_INFO)
        assert resp.code == ResponseCode.SUCCESS


async def test_brokers_register_signed_and_a_spoofed_registration_is_refused(tmp_path):
    home = _home(tmp_path)
    async with run_namesrv(acl_enable=True, rocketmq_home=home) as ns:
        async with run_broker(
            tmp_path / "b",
            ns,
            broker_name="signed",
            namesrv_access_key=ADMIN.access_key,
            namesrv_secret_key=ADMIN.secret_key,
        ):
            await wait_until(
                lambda: "signed" in ns.route_info_manager.broker_addr_table, 30, what="the signed registration"
            )
            # an unsigned REGISTER_BROKER (the attacker's), while a client measures its round trips
            probe = NoisyNeighbour(ns.address, code=RequestCode.GET_BROKER_CLUSTER_INFO, ext_fields={})
            await asyncio.to_thread(probe.start)  # (in-process name server: off this loop)
            try:
                for _ in range(20):
                    cmd = register_cmd("127.0.0.1:1", name="evil", TopicA=4)
                    resp = await _signed(ns.address, None, cmd.code, cmd.ext_fields, cmd.body)
                    assert resp.code == ResponseCode.SYSTEM_ERROR
            finally:
                await asyncio.to_thread(probe.stop)
            assert probe.worst < 2.0, probe.summary()
            assert "evil" not in ns.route_info_manager.broker_addr_table
        # an unsigned broker cannot register
        async with run_broker(tmp_path / "u", ns, broker_name="unsigned"):  # (start awaits a registration)
            resp = await invoke_once(ns.address, RequestCode.GET_BROKER_CLUSTER_INFO)
            assert resp.code == ResponseCode.SUCCESS
            assert "unsigned" not in ns.route_info_manager.broker_addr_table


async def test_a_global_white_address_may_write_unsigned(tmp_path):
    home = _home(
        tmp_path, PLAIN_ACL.replace("globalWhiteRemoteAddresses:", "globalWhiteRemoteAddresses:\n  - 127.0.0.1")
    )
    async with run_namesrv(acl_enable=True, rocketmq_home=home) as ns:
        resp = await invoke_once(ns.address, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def test_acl_enable_without_a_home_stops_start_up_naming_it(monkeypatch):
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    with pytest.raises(ConfigError, match="rocketmqHome"):
        async with run_namesrv(acl_enable=True):
            pass
