"""Who may follow a master (issue 23, finding 5): peers that neither prove ``haAuthSecret`` nor
connect from an address of ``haAllowedSlaves`` are closed at once, never count toward
``haMaxConnections``, never get CommitLog bytes and never acknowledge a SYNC_MASTER put; the
real slave (an rmq slave with the secret, or a Java-style slave from an allowed address) keeps
replicating while they try."""

import asyncio
import socket
import struct

import pytest
from test_ha_store import Stores, _recv_exact, caught_up, put

from rmq._testing import NoisyNeighbour, run_broker, run_namesrv, wait_until
from rmq._testing.env import BrokerEnv
from rmq.config import ConfigError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient
from rmq.store import MessageInner, PutMessageStatus
from rmq.store.ha.codec import AUTH_HELLO, AUTH_NONCE_SIZE, auth_mac, encode_offset_report

SECRET = "ha-secret-of-the-test"


@pytest.fixture
async def stores(tmp_path):
    st = Stores(tmp_path)
    yield st
    await st.close()


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), 10)
    s.settimeout(20)
    return s


def _read_to_eof(s: socket.socket) -> bytes:
    """Everything the master sends until it closes (a reset counts as a close)."""
    got = bytearray()
    try:
        while chunk := s.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return bytes(got)


def _reader(port: int, first: bytes) -> bytes:
    s = _connect(port)
    try:
        s.sendall(first)
        return _read_to_eof(s)
    finally:
        s.close()


async def test_a_peer_from_a_disallowed_address_gets_nothing(stores):
    """No secret on the master and the peer's address not allowed: closed at once, no byte of
    the CommitLog, whatever it reports (Java hands it the whole log)."""
    master = await stores.master(ha_allowed_slaves="10.255.255.0/24")
    await put(master, 50)
    for first in (encode_offset_report(0), encode_offset_report(master.commit_log.max_offset), AUTH_HELLO):
        assert await asyncio.to_thread(_reader, master.ha.port, first) == b""
    assert master.ha.connection_count == 0 and master.ha.refused >= 3
    assert master.ha.runtime_info()["haRefusedPeers"] == str(master.ha.refused)


async def test_wrong_secret_and_no_secret_are_refused_the_right_one_replicates(stores):
    master = await stores.master(ha_auth_secret=SECRET, ha_allowed_slaves="")
    await put(master, 50)
    port = master.ha.port

    def wrong_answer() -> tuple[int, bytes]:
        s = _connect(port)
        try:
            s.sendall(AUTH_HELLO)
            nonce = _recv_exact(s, AUTH_NONCE_SIZE)
            s.sendall(auth_mac("not-the-secret", nonce) + encode_offset_report(0))
            return len(nonce), _read_to_eof(s)
        finally:
            s.close()

    n, rest = await asyncio.to_thread(wrong_answer)
    assert n == AUTH_NONCE_SIZE and rest == b""
    # a Java-style slave (a plain report) from loopback, which this master does not allow
    assert await asyncio.to_thread(_reader, port, encode_offset_report(0)) == b""
    # an rmq slave without the secret: refused, says why
    bare = await stores.slave(master, name="bare")
    await wait_until(lambda: master.ha.refused >= 3)
    assert bare.commit_log.max_offset == 0 and master.ha.connection_count == 0
    await stores.stop(bare)
    # a slave with another secret: refused too, and its error names the property
    other = await stores.slave(master, name="other", ha_auth_secret="another-secret")
    await wait_until(lambda: "haAuthSecret" in (other.ha_client.last_error or ""), what="the refused slave's error")
    assert other.commit_log.max_offset == 0
    await stores.stop(other)
    # the slave with the secret follows
    slave = await stores.slave(master, ha_auth_secret=SECRET)
    await caught_up(master, slave)
    assert [c.proven for c in master.ha.connections] == ["secret"]


async def test_the_proven_answer_is_not_the_secret_and_not_replayable(stores):
    """The same answer on a second connection is refused: each gets its own nonce."""
    master = await stores.master(ha_auth_secret=SECRET, ha_allowed_slaves="")
    await put(master, 10)
    port = master.ha.port

    def session(answer: bytes | None) -> tuple[bytes, bytes]:
        s = _connect(port)
        try:
            s.sendall(AUTH_HELLO)
            nonce = _recv_exact(s, AUTH_NONCE_SIZE)
            mac = answer if answer is not None else auth_mac(SECRET, nonce)
            s.sendall(mac + encode_offset_report(0))
            header = _recv_exact(s, 12) if answer is None else _read_to_eof(s)
            return mac, header
        finally:
            s.close()

    mac, header = await asyncio.to_thread(session, None)
    assert SECRET.encode() not in mac and struct.unpack(">qi", header)[1] > 0  # a transfer came
    _mac, rest = await asyncio.to_thread(session, mac)
    assert rest == b""


async def test_a_java_style_slave_from_an_allowed_address_follows_a_master_with_a_secret(stores):
    """A Java 4.9.8 slave cannot authenticate: its address in haAllowedSlaves lets it follow."""
    master = await stores.master(ha_auth_secret=SECRET, ha_allowed_slaves="127.0.0.1")
    await put(master, 30)
    slave = await stores.slave(master)  # reports at once, as Java's HAClient, no secret
    await caught_up(master, slave)
    assert [c.proven for c in master.ha.connections] == ["address"]


async def test_unproven_peers_never_acknowledge_a_sync_master_put(stores):
    """Before: a fake peer reporting the master's end made SYNC_MASTER puts answer PUT_OK."""
    master = await stores.master(
        broker_role="SYNC_MASTER", slave_timeout=20_000, ha_auth_secret=SECRET, ha_allowed_slaves=""
    )
    await put(master, 1)
    fake = await asyncio.to_thread(_connect, master.ha.port)
    try:
        fake.sendall(encode_offset_report(1 << 40))
        assert await asyncio.to_thread(_read_to_eof, fake) == b""
        assert master.ha.push2slave_max_offset == 0
        r = await asyncio.wait_for(master.put_message(MessageInner("S", 0, b"x")), 15)  # < slave_timeout
        assert r.status == PutMessageStatus.SLAVE_NOT_AVAILABLE
    finally:
        fake.close()


async def test_a_peer_that_never_authenticates_is_evicted(stores):
    master = await stores.master(ha_auth_secret=SECRET, ha_allowed_slaves="", ha_housekeeping_interval=300)
    peer = await asyncio.to_thread(_connect, master.ha.port)
    try:
        assert await asyncio.to_thread(_read_to_eof, peer) == b""  # closed by the master, not by us
        assert master.ha.pending == [] and master.ha.refused == 1
    finally:
        peer.close()


def test_bad_allowed_slaves_stops_start_up_naming_the_property():
    from rmq.config import apply_properties, check_config
    from rmq.store import StoreConfig

    sc = StoreConfig()
    with pytest.raises(ConfigError, match=r"haAllowedSlaves.*not an IP address"):
        apply_properties({"haAllowedSlaves": "10.0.0.1,example.com"}, sc)
        check_config(sc)


# ---------------------------------------------------------------------------------- the attack


async def test_the_attack_on_the_ha_port_while_the_real_slave_replicates(tmp_path):
    """The finding's exact input against a SYNC_MASTER with a secret: haMaxConnections (8)
    silent peers, 8 peers reporting the master's end (fake acks), and a peer reading the log
    from 0. The real slave (same secret) replicates, every put is acknowledged by it alone, a
    client's round trips stay short, and the attackers get no byte."""
    # (housekeeping at its 20 s default, so a busy machine never drops the real slave; the
    # silent peers are evicted at the 5 s authentication deadline)
    ha = dict(ha_auth_secret=SECRET, ha_allowed_slaves="", ha_send_heartbeat_interval=200)
    client = RemotingClient()
    try:
        async with (
            run_namesrv() as ns,
            run_broker(tmp_path / "m", ns, broker_name="b1", broker_role="SYNC_MASTER", **ha) as master,
            run_broker(tmp_path / "s", ns, broker_name="b1", broker_id=1, broker_role="SLAVE", **ha) as slave,
        ):
            ms, ss = master.message_store, slave.message_store
            env = BrokerEnv(ns, master, client)
            await env.create_topic("HA_ATTACK", 1)
            await wait_until(lambda: ms.ha.connection_count == 1, 30, what="the real slave admitted")
            port = ms.ha.port
            end = ms.commit_log.max_offset
            silent = [await asyncio.to_thread(_connect, port) for _ in range(8)]
            fakes = [await asyncio.to_thread(_connect, port) for _ in range(8)]
            try:
                reading = asyncio.create_task(asyncio.to_thread(_reader, port, encode_offset_report(0)))
                # in-process broker: the probe's blocking start and stop run off this loop
                probe = NoisyNeighbour(master.broker_addr)
                await asyncio.to_thread(probe.start)
                try:
                    for f in fakes:
                        await asyncio.to_thread(f.sendall, encode_offset_report(end + (1 << 30)))
                    for i in range(100):
                        r = await env.send("HA_ATTACK", b"m%d" % i + b"." * 200)
                        assert r.code == ResponseCode.SUCCESS, r.remark  # acknowledged by the real slave
                        assert ms.ha.push2slave_max_offset <= ss.commit_log.max_offset
                    assert await reading == b""
                    fake_reads = await asyncio.gather(*(asyncio.to_thread(_read_to_eof, f) for f in fakes))
                    assert fake_reads == [b""] * 8
                    silent_reads = await asyncio.gather(*(asyncio.to_thread(_read_to_eof, s) for s in silent))
                    assert silent_reads == [b""] * 8  # evicted: they never authenticated
                finally:
                    await asyncio.to_thread(probe.stop)
                assert probe.worst < 2.0, probe.summary()
                assert [c.proven for c in ms.ha.connections] == ["secret"]
                assert ss.ha_client.connects == 1  # the real slave was never dropped
                assert ms.ha.refused >= 17 and ms.ha.pending == []
                # the secret is never shown to a client asking for the broker's config
                resp = await client.invoke(master.broker_addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG))
                text = resp.body.decode()
                assert "haAuthSecret=******" in text and SECRET not in text
            finally:
                for s in silent + fakes:
                    s.close()
    finally:
        await client.close()
