"""Connection limits in process, on both event loops (asyncio and uvloop report write-buffer
state differently): the write-buffer limit aborts a peer that does not read, a close gives up
after its grace, unfinished frames share the server's budget, a started frame has a deadline."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from rmq._testing import wait_until
from rmq.protocol.command import RemotingCommand
from rmq.remoting.codec import encode
from rmq.remoting.connection import ConnectionEvent
from rmq.remoting.server import RemotingServer

pytestmark = pytest.mark.integration  # remoting servers

HOLD = 1101
BIG = 1102
KiB, MiB = 1024, 1024 * 1024


class Hold:
    """Answers later (like a held pull): keeps (conn, cmd)."""

    def __init__(self) -> None:
        self.held: list[tuple[object, RemotingCommand]] = []

    def process_request(self, conn, cmd):
        self.held.append((conn, cmd))


class Big:
    def process_request(self, conn, cmd):
        return cmd.response(body=b"b" * (2 * MiB))


async def _raw(
    port: int, rcvbuf: int | None = 4096
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, socket.socket]:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    return reader, writer, sock


def _frames(cmds) -> bytes:
    return b"".join(bytes(p) for c in cmds for p in encode(c))


async def test_replies_past_the_write_buffer_limit_abort_a_peer_that_does_not_read():
    hold = Hold()
    server = RemotingServer(write_buffer_high=128 * KiB, write_buffer_limit=1 * MiB)
    server.register_processor(HOLD, hold)
    events: list[ConnectionEvent] = []
    server.add_connection_listener(lambda ev, conn, exc=None: events.append(ev))
    await server.start()
    _, writer, _ = await _raw(server.port)
    try:
        writer.write(_frames(RemotingCommand.request(HOLD, {"n": str(i)}) for i in range(100)))
        await wait_until(lambda: len(hold.held) == 100, what="100 held requests")
        conn = hold.held[0][0]
        released = []
        for _, cmd in hold.held:  # wake-ups: replies the peer did not ask for by reading
            conn.send_response(cmd.response(body=b"r" * (64 * KiB)))
            conn.when_written(lambda: released.append(1))
        await asyncio.wait_for(conn.wait_closed(), 10)
        assert ConnectionEvent.EXCEPTION in events and ConnectionEvent.CLOSE in events
        assert len(released) == 100  # every zero-copy hold released with the connection
    finally:
        writer.close()
        await server.close()


async def test_close_gives_up_on_a_peer_that_does_not_read():
    server = RemotingServer(idle_timeout=0.3, close_grace=0.3)
    server.register_processor(BIG, Big())
    await server.start()
    _, writer, _ = await _raw(server.port)
    try:
        writer.write(_frames(RemotingCommand.request(BIG, {}) for _ in range(4)))  # 8 MiB of replies
        await wait_until(lambda: len(server.connections) == 1, what="the connection")
        # idle after 0.3 s, graceful close cannot finish, aborted 0.3 s later
        await wait_until(lambda: not server.connections, timeout=10, what="the connection gone")
    finally:
        writer.close()
        await server.close()


async def test_unfinished_frames_past_the_budget_close_the_connection_that_read():
    server = RemotingServer(max_partial_frame_bytes=1 * MiB)
    await server.start()
    partial = struct.pack(">iI", 4 * MiB, 2) + b"{}" + b"\0" * (600 * KiB)
    writers = []
    try:
        for _ in range(3):
            _, w, _ = await _raw(server.port, rcvbuf=None)
            writers.append(w)
            w.write(partial)
            await w.drain()
        await wait_until(
            lambda: len(server.connections) == 1 and server.frame_budget.used <= MiB,
            timeout=10,
            what="the connections over the budget closed",
        )
        assert 0 < server.frame_budget.used <= MiB
    finally:
        for w in writers:
            w.close()
        await server.close()
    assert server.frame_budget.used == 0 and not server.frame_budget.holders


async def test_a_started_frame_has_a_read_deadline():
    server = RemotingServer(frame_read_timeout=0.3)
    await server.start()
    _, writer, _ = await _raw(server.port, rcvbuf=None)
    try:
        writer.write(struct.pack(">i", 100))  # a frame starts, the rest never comes
        await wait_until(lambda: len(server.connections) == 1, what="the connection")
        await wait_until(lambda: not server.connections, timeout=10, what="the connection closed at its deadline")
    finally:
        writer.close()
        await server.close()
