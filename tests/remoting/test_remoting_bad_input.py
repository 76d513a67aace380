"""Bad bytes on one connection close only that connection, with one log line saying why."""

import asyncio
import logging
import os
import struct

import pytest

from rmq._testing import wait_until
from rmq.protocol.command import RemotingCommand
from rmq.remoting import ConnectionEvent, RemotingClient, RemotingServer
from rmq.remoting.codec import encode

ECHO = 1001


class Echo:
    def process_request(self, conn, cmd):
        return cmd.response(ext_fields={"n": cmd.ext_fields.get("n", "")})


def _frame(header: bytes, ser: int = 0, hlen: int | None = None) -> bytes:
    return struct.pack(">ii", 4 + len(header), (ser << 24) | (len(header) if hlen is None else hlen)) + header


def _good(n) -> bytes:
    return b"".join(encode(RemotingCommand.request(ECHO, {"n": str(n)})))


BAD = {
    "length-over-max": (struct.pack(">i", 64 * 1024 * 1024) + b"\0" * 12, "over the maximum"),
    "negative-length": (struct.pack(">i", -1) + b"\0" * 12, "negative frame length"),
    "header-beyond-frame": (_frame(b'{"code":1}', hlen=4000), "beyond the frame"),
    "header-not-json": (_frame(b"{code:1,,}"), "not valid JSON"),
    "header-not-object": (_frame(b'"just a string"'), "not an object"),
    "unknown-serialize-type": (_frame(b'{"code":1}', ser=9), "unknown serialize type 9"),
    "wrong-json-types": (_frame(b'{"code":"ten","opaque":1}'), "'code' must be a JSON integer"),
    "wrong-ext-type": (_frame(b'{"code":10,"extFields":"x"}'), "'extFields' must be an object"),
    "random-bytes": (None, "closing connection"),
    "tls-client-hello": (bytes.fromhex("160301020001") + os.urandom(40), "TLS handshake"),
}


@pytest.fixture
async def env():
    events = []
    server = RemotingServer(name="bad-input", max_frame_length=16 * 1024 * 1024)
    server.register_processor(ECHO, Echo())
    server.add_connection_listener(lambda ev, conn, exc=None: events.append((ev, exc)))
    await server.start()
    client = RemotingClient()
    try:
        yield server, client, events
    finally:
        await client.close()
        await server.close()


async def _read_until_eof(reader, timeout=5.0) -> bytes:
    data = b""
    async with asyncio.timeout(timeout):
        while chunk := await reader.read(65536):
            data += chunk
    return data


def _warnings(caplog):
    return [r for r in caplog.records if r.name == "rmq.remoting" and r.levelno >= logging.WARNING]


@pytest.mark.parametrize("case", list(BAD))
async def test_bad_input_closes_only_that_connection(env, caplog, case):
    server, client, events = env
    caplog.set_level(logging.WARNING, logger="rmq.remoting")
    assert (await client.invoke(server.address, RemotingCommand.request(ECHO, {"n": "before"}))).code == 0
    payload, reason = BAD[case]
    if payload is None:
        # random bytes that cannot be a sane frame: the first word is a huge or negative length
        payload = b"\xf3\x9a" + os.urandom(200)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    # a good request first: it is answered before the bad bytes close the connection
    # (TLS is recognised by the connection's very first byte, so it goes alone)
    writer.write(payload if case == "tls-client-hello" else _good("ok") + payload)
    data = await _read_until_eof(reader)  # the server hangs up on us
    writer.close()
    if case == "tls-client-hello":
        assert data == b""
    else:
        assert struct.unpack_from(">i", data)[0] + 4 == len(data)  # exactly the one reply
    warnings = _warnings(caplog)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert reason in warnings[0].getMessage()
    assert any(ev is ConnectionEvent.EXCEPTION for ev, _ in events)
    # the other client was never disturbed
    resp = await client.invoke(server.address, RemotingCommand.request(ECHO, {"n": "after"}))
    assert resp.code == 0 and resp.ext_fields == {"n": "after"}
    assert len(server.connections) == 1


async def test_truncated_frame_then_hang_up(env, caplog):
    server, client, _events = env
    caplog.set_level(logging.WARNING, logger="rmq.remoting")
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    good = _good(1)
    writer.write(good + good[:-5])
    await writer.drain()
    assert await asyncio.wait_for(reader.read(1), 10)  # the good frame was answered
    writer.close()
    await writer.wait_closed()
    warnings = await wait_until(lambda: _warnings(caplog), what="the warning about the incomplete frame")
    assert len(warnings) == 1 and "incomplete frame" in warnings[0].getMessage()
    assert (await client.invoke(server.address, RemotingCommand.request(ECHO, {"n": "x"}))).code == 0


async def test_garbage_to_the_client_side(env, caplog):
    """The client's connections apply the same rules to what a server sends back."""
    _, _, _ = env
    caplog.set_level(logging.WARNING, logger="rmq.remoting")

    async def evil(reader, writer):
        await reader.read(100)
        writer.write(struct.pack(">i", -7) + b"junk")
        await writer.drain()

    evil_server = await asyncio.start_server(evil, "127.0.0.1", 0)
    addr = f"127.0.0.1:{evil_server.sockets[0].getsockname()[1]}"
    client = RemotingClient()
    try:
        from rmq.errors import RemotingConnectError

        with pytest.raises(RemotingConnectError) as info:
            await client.invoke(addr, RemotingCommand.request(ECHO), timeout=3)
        assert info.value.__cause__ is not None
        assert any("negative frame length" in r.getMessage() for r in _warnings(caplog))
    finally:
        await client.close()
        evil_server.close()
        await evil_server.wait_closed()
