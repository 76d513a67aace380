"""TLS on a real RemotingServer and RemotingClient (Java TlsMode: disabled / permissive /
enforcing), client certificates, the handshake bounds, and the tls.* settings' validation."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time

import pytest
from tls_support import Pki, make_pki

from rmq._testing import NoisyNeighbour, wait_until
from rmq.config import ConfigError
from rmq.errors import RemotingConnectError
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient, RemotingServer
from rmq.remoting.tls import TlsMode, TlsServerOptions, TlsSettings

pytestmark = pytest.mark.integration  # TLS remoting servers

ECHO = 1001


class Echo:
    def process_request(self, conn, cmd):
        return cmd.response(body=cmd.body)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def _server(
    pki: Pki, mode: str, *, need_client_auth: str = "none", handshake_timeout: float = 10.0, **kw
) -> RemotingServer:
    props = pki.server_props(mode, need_client_auth=need_client_auth)
    props["tls.server.handshakeTimeoutSeconds"] = str(handshake_timeout)
    options = TlsSettings.from_properties(props).server_options()
    server = RemotingServer("127.0.0.1", 0, name="tls-test", tls=options, **kw)
    server.register_processor(ECHO, Echo())
    return server


async def _echo(client: RemotingClient, addr: str, body: bytes = b"hello") -> bytes | None:
    reply = await client.invoke(addr, RemotingCommand(ECHO, body=body), timeout=10)
    return reply.body


# ------------------------------------------------------------------------------ the three modes


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
async def test_tls_client_is_served_in_permissive_and_enforcing(pki, mode):
    async with _server(pki, mode) as server:
        async with RemotingClient(tls=pki.client_context()) as client:
            big = bytes(range(256)) * 4096  # 1 MiB: many TLS records each way
            assert await _echo(client, server.address, big) == big
            (conn,) = server.connections
            assert conn.transport_info("ssl_object") is not None


async def test_plain_client_is_served_in_permissive(pki):
    async with _server(pki, "permissive") as server:
        async with RemotingClient() as plain, RemotingClient(tls=pki.client_context()) as secure:
            assert await _echo(plain, server.address, b"plain") == b"plain"
            assert await _echo(secure, server.address, b"secure") == b"secure"
            kinds = sorted(c.transport_info("ssl_object") is not None for c in server.connections)
            assert kinds == [False, True]


async def test_plain_client_is_refused_in_enforcing_with_one_log_line(pki, caplog):
    caplog.set_level(logging.WARNING, "rmq.remoting")
    async with _server(pki, "enforcing") as server:
        for _ in range(3):
            async with RemotingClient() as plain:
                with pytest.raises(RemotingConnectError):
                    await _echo(plain, server.address)
        lines = [r.getMessage() for r in caplog.records if "tls.server.mode=enforcing" in r.getMessage()]
        assert len(lines) == 1, lines  # rate-limited: one line for three refusals
        assert not server.connections


async def test_tls_client_is_refused_in_disabled(pki, caplog):
    caplog.set_level(logging.WARNING, "rmq.remoting")
    settings = TlsSettings.from_properties({"tls.server.mode": "disabled"})
    server = RemotingServer("127.0.0.1", 0, name="tls-test", tls=settings.server_options())
    server.register_processor(ECHO, Echo())
    async with server:
        async with RemotingClient(tls=pki.client_context(), connect_timeout=5) as secure:
            with pytest.raises(RemotingConnectError):
                await _echo(secure, server.address)
        async with RemotingClient() as plain:
            assert await _echo(plain, server.address) == b"hello"
    assert any("TLS handshake received" in r.getMessage() for r in caplog.records)


async def test_client_refuses_a_server_it_does_not_trust(pki):
    async with _server(pki, "enforcing") as server:
        async with RemotingClient(tls=ssl.create_default_context()) as client:  # system CAs only
            with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await _echo(client, server.address)


# ------------------------------------------------------------------------------ client certificates


async def test_client_certificate_required_and_missing_is_refused(pki):
    async with _server(pki, "enforcing", need_client_auth="require") as server:
        async with RemotingClient(tls=pki.client_context()) as anonymous:
            with pytest.raises(RemotingConnectError):
                await _echo(anonymous, server.address)
        async with RemotingClient(tls=pki.client_context(other_cert=True)) as stranger:
            with pytest.raises(RemotingConnectError):
                await _echo(stranger, server.address)
        async with RemotingClient(tls=pki.client_context(with_cert=True)) as known:
            assert await _echo(known, server.address) == b"hello"
            (conn,) = server.connections
            peer = conn.transport_info("peercert")
            assert ("commonName", "client.test") in [item for rdn in peer["subject"] for item in rdn] or any(
                "client.test" in str(v) for v in peer.get("subjectAltName", ())
            )


async def test_client_certificate_optional_present_and_absent(pki):
    async with _server(pki, "enforcing", need_client_auth="optional") as server:
        async with (
            RemotingClient(tls=pki.client_context(with_cert=True)) as known,
            RemotingClient(tls=pki.client_context()) as anonymous,
        ):
            assert await _echo(known, server.address, b"k") == b"k"
            assert await _echo(anonymous, server.address, b"a") == b"a"
            certs = sorted(bool(c.transport_info("peercert")) for c in server.connections)
            assert certs == [False, True]
        async with RemotingClient(tls=pki.client_context(other_cert=True)) as stranger:
            with pytest.raises(RemotingConnectError):  # presented, but not from a trusted CA
                await _echo(stranger, server.address)


# ------------------------------------------------------------------------------ bounds


def _stuck_handshakes(addr: str, n: int) -> list[socket.socket]:
    """``n`` sockets that start a TLS record and then say nothing more."""
    host, port = addr.rsplit(":", 1)
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(b"\x16\x03\x01")  # a ClientHello's record header, never finished
        socks.append(s)
    return socks


async def test_stuck_handshake_is_closed_and_does_not_hurt_a_second_client(pki, caplog):
    caplog.set_level(logging.WARNING, "rmq.remoting")
    async with _server(pki, "permissive", handshake_timeout=1.0) as server:
        socks = _stuck_handshakes(server.address, 20)
        try:
            # the probe's thread needs this loop to answer: start and stop it off the loop
            probe = NoisyNeighbour(server.address)
            await asyncio.to_thread(probe.start)
            try:
                async with RemotingClient(tls=pki.client_context()) as client:
                    for _ in range(20):
                        assert await _echo(client, server.address) == b"hello"

                def all_closed() -> bool:  # each stuck socket reads EOF (or a reset)
                    for s in socks:
                        s.settimeout(0)
                        try:
                            if s.recv(1) != b"":
                                return False
                        except BlockingIOError:
                            return False
                        except OSError:
                            pass
                    return True

                await wait_until(all_closed, timeout=30, what="stuck handshakes closed")
            finally:
                await asyncio.to_thread(probe.stop)
            assert probe.worst < 3.0, probe.summary()
        finally:
            for s in socks:
                s.close()
        assert any("TLS handshake with" in r.getMessage() for r in caplog.records)


async def test_sockets_in_handshake_count_against_max_connections(pki):
    async with _server(pki, "enforcing", handshake_timeout=30.0, max_connections=4) as server:
        socks = _stuck_handshakes(server.address, 4)
        try:
            await wait_until(lambda: len(server._admitting) == 4, timeout=20, what="4 handshakes pending")
            extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            try:
                extra.settimeout(10)
                assert await asyncio.to_thread(extra.recv, 1) == b""  # refused at accept: closed at once
            finally:
                extra.close()
        finally:
            for s in socks:
                s.close()
        await wait_until(lambda: not server._admitting, timeout=20, what="handshakes given up")
        async with RemotingClient(tls=pki.client_context()) as client:
            assert await _echo(client, server.address) == b"hello"


async def test_silent_socket_is_closed_at_the_idle_timeout(pki):
    async with _server(pki, "permissive", idle_timeout=0.5) as server:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        try:
            start = time.monotonic()
            assert await asyncio.to_thread(s.recv, 1) == b""
            assert time.monotonic() - start < 9
        finally:
            s.close()


async def test_tls_connection_keeps_the_write_buffer_limits(pki):
    """A TLS peer that does not read is aborted past write_buffer_limit like a plain one."""
    async with _server(pki, "enforcing", write_buffer_high=64 * 1024, write_buffer_limit=256 * 1024) as server:
        async with RemotingClient(tls=pki.client_context()) as client:
            assert await _echo(client, server.address) == b"hello"
            (conn,) = server.connections
            assert conn.transport_info("ssl_object") is not None
            # the server pushes oneway commands the client never reads past the limit
            client_conn = await client.get_connection(server.address)
            client_conn._transport.pause_reading()
            payload = b"x" * 64 * 1024
            for _ in range(1000):  # up to 64 MiB: more than any socket buffers take
                if conn.closed:
                    break
                conn.write(RemotingCommand(ECHO, body=payload))
                await asyncio.sleep(0)  # let the loop flush this write (not a wait for a state)
            await wait_until(lambda: conn.lost, timeout=20, what="server aborted the non-reading TLS peer")


# ------------------------------------------------------------------------------ settings


def test_settings_defaults_follow_the_certificate(pki):
    assert TlsSettings.from_properties({}).mode is TlsMode.DISABLED
    s = TlsSettings.from_properties({"tls.server.certPath": pki.server_cert, "tls.server.keyPath": pki.server_key})
    assert s.mode is TlsMode.PERMISSIVE and not s.client_enabled
    e = TlsSettings.from_properties(pki.server_props("enforcing"))
    assert e.client_enabled  # Java BrokerStartup: tls.enable defaults to mode == enforcing
    assert not TlsSettings.from_properties({**pki.server_props("enforcing"), "tls.enable": "false"}).client_enabled


def test_settings_from_the_config_file_given_values_win(pki, tmp_path):
    f = tmp_path / "tls.properties"
    f.write_text(
        f"tls.server.mode=enforcing\ntls.server.certPath={pki.server_cert}\ntls.server.keyPath={pki.server_key}\n"
    )
    s = TlsSettings.from_properties({"tls.config.file": str(f)})
    assert s.mode is TlsMode.ENFORCING and s.server_options().context is not None
    assert (
        TlsSettings.from_properties({"tls.config.file": str(f), "tls.server.mode": "permissive"}).mode
        is TlsMode.PERMISSIVE
    )


@pytest.mark.parametrize(
    "props, message",
    [
        ({"tls.server.mode": "strict"}, "tls.server.mode"),
        ({"tls.server.need.client.auth": "always"}, "tls.server.need.client.auth"),
        ({"tls.server.mode": "enforcing"}, "needs tls.server.certPath"),
        ({"tls.server.mode": "enforcing", "tls.server.certPath": "/nonexistent/server.pem"}, "tls.server.certPath"),
        ({"tls.config.file": "/nonexistent/tls.properties"}, "tls.config.file"),
        ({"tls.server.certpth": "x"}, "did you mean tls.server.certPath"),
        ({"tls.server.handshakeTimeoutSeconds": "0"}, "handshakeTimeoutSeconds"),
        ({"tls.client.authServer": "maybe"}, "tls.client.authServer"),
    ],
)
def test_bad_settings_name_the_property(props, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        TlsSettings.from_properties(props).server_options()


def test_bad_files_name_the_property(pki):
    with pytest.raises(ConfigError, match=r"tls\.server\.keyPath"):
        TlsSettings.from_properties({**pki.server_props("enforcing"), "tls.server.keyPath": "/no/key"}).server_options()
    with pytest.raises(ConfigError, match="cannot load the certificate and key"):  # key of another cert
        TlsSettings.from_properties(
            {**pki.server_props("enforcing"), "tls.server.keyPath": pki.client_key}
        ).server_options()
    with pytest.raises(ConfigError, match=r"needs tls\.server\.trustCertPath"):
        TlsSettings.from_properties(
            {**pki.server_props("enforcing"), "tls.server.need.client.auth": "require"}
        ).server_options()
    with pytest.raises(ConfigError, match=r"tls\.client\.trustCertPath"):
        TlsSettings.from_properties({"tls.client.trustCertPath": "/no/ca.pem"}).client_context()


def test_options_need_a_context():
    with pytest.raises(ValueError):
        TlsServerOptions(TlsMode.ENFORCING, None)


def test_small_parts_are_joined_for_tls_records():
    from rmq.remoting.connection import _join_small_parts

    big = memoryview(b"B" * 20_000)
    parts = [b"\x00\x00\x00\x10", b"h" * 100, b"b" * 50, big, b"t" * 10, b"x" * 16_000, b"y" * 500]
    out = _join_small_parts(parts)
    assert b"".join(bytes(p) for p in out) == b"".join(bytes(p) for p in parts)  # same bytes, same order
    assert out[1] is big  # a part of a record's size or more is passed on as it is (no copy)
    assert [len(p) for p in out] == [154, 20_000, 16_510]  # runs stop once past 16 KiB
    assert _join_small_parts([b"only"]) == [b"only"]


async def test_permissive_with_required_client_certificate_refuses_plain_clients(pki, caplog):
    """tls.server.need.client.auth=require in permissive mode: a plain client cannot show a
    certificate, so it is refused (issue 23, finding 10; Java serves it); a TLS client with a
    known certificate is served."""
    caplog.set_level(logging.WARNING, "rmq.remoting")
    async with _server(pki, "permissive", need_client_auth="require") as server:
        async with RemotingClient() as plain:
            with pytest.raises(RemotingConnectError):
                await _echo(plain, server.address)
        async with RemotingClient(tls=pki.client_context(with_cert=True)) as known:
            assert await _echo(known, server.address) == b"hello"
            assert [c.transport_info("ssl_object") is not None for c in server.connections] == [True]
    assert any("tls.server.need.client.auth=require" in r.getMessage() for r in caplog.records)
