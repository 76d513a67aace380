"""One connection's pipeline gets a bounded share of the loop (frames and bytes per turn, async
requests in flight), in process on both event loops. Counted by order on the server, not by
wall time: a second client's request, made readable while the first client's long read is being
handled, is handled within a few slices of that read, not after the whole of it."""

from __future__ import annotations

import asyncio
import socket

import pytest

from rmq._testing import loop_turn, wait_until
from rmq.protocol.command import RemotingCommand
from rmq.remoting.codec import FrameDecoder, encode
from rmq.remoting.server import RemotingServer

pytestmark = pytest.mark.integration  # remoting servers

FLOOD = 1201
PROBE = 1202
HOLD = 1203
TRIGGER_AT = 100  # the flood frame whose handling makes the probe's request readable


def _frames(cmds) -> bytes:
    return b"".join(bytes(p) for c in cmds for p in encode(c))


class Recorder:
    """Answers at once and records the order of the codes it handled; while handling flood
    frame TRIGGER_AT it sends the probe's request on the other connection (a loopback send:
    in the server's socket when ``send`` returns)."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self.floods = 0
        self.probe: socket.socket | None = None

    def process_request(self, conn, cmd):
        self.order.append(cmd.code)
        if cmd.code == FLOOD:
            self.floods += 1
        if cmd.code == FLOOD and self.floods == TRIGGER_AT:
            assert self.probe is not None
            self.probe.sendall(_frames([RemotingCommand.request(PROBE, {})]))
        return cmd.response()


def _read_answers(sock: socket.socket, n: int) -> int:
    decoder = FrameDecoder()
    answers = 0
    while answers < n:
        cmd = decoder.next_frame()
        if cmd is None:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            decoder.feed(chunk)
            continue
        assert cmd.flag & 1 and cmd.code == 0
        answers += 1
    return answers


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    return sock


@pytest.mark.parametrize(
    "limits,body,per_turn",
    [
        ({"max_frames_per_turn": 64}, b"", 64),
        # 1 KiB bodies, 8 KiB per turn: about 8 frames a turn
        ({"max_frames_per_turn": 1_000_000, "max_bytes_per_turn": 8 * 1024}, b"x" * 1024, 8),
    ],
)
async def test_a_pipeline_is_handled_in_slices_so_another_client_gets_in(limits, body, per_turn):
    recorder = Recorder()
    server = RemotingServer(**limits)
    server.register_processor(FLOOD, recorder)
    server.register_processor(PROBE, recorder)
    await server.start()
    flood, probe = _connect(server.port), _connect(server.port)
    recorder.probe = probe
    n = 20_000 if not body else 2_000
    data = _frames(RemotingCommand.request(FLOOD, {"i": str(i)}, body or None) for i in range(n))
    try:
        await asyncio.to_thread(flood.sendall, data)
        await wait_until(lambda: len(recorder.order) == n + 1, what="every request handled")
        where = recorder.order.index(PROBE)
        # The probe became readable while flood frame TRIGGER_AT was handled: it waits for the
        # rest of that slice and at most the next one or two, not the rest of the flood's read
        # (thousands of frames before the bound).
        assert TRIGGER_AT <= where <= TRIGGER_AT + 3 * per_turn + 1, where
    finally:
        flood.close()
        probe.close()
        await server.close()


class Slow:
    """An async processor that waits until released; counts how many run at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.running = 0
        self.most = 0
        self.calls = 0

    async def _run(self, cmd):
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return cmd.response()

    def process_request(self, conn, cmd):
        self.calls += 1
        return self._run(cmd)


async def test_requests_in_flight_pause_reading_until_half_are_answered():
    slow = Slow()
    server = RemotingServer(max_requests_in_flight=16)
    server.register_processor(HOLD, slow)
    await server.start()
    sock = _connect(server.port)
    try:
        sock.sendall(_frames(RemotingCommand.request(HOLD, {"i": str(i)}) for i in range(200)))
        await wait_until(lambda: slow.running == 16, what="16 requests running")
        (conn,) = server.connections
        assert conn.requests_in_flight == 16
        for _ in range(5):  # the other 184 stay unread while 16 are in flight
            await loop_turn()
        assert slow.calls == 16
        slow.release.set()
        await wait_until(lambda: slow.calls == 200 and slow.running == 0, what="all 200 handled")
        assert slow.most <= 16
        assert conn.requests_in_flight == 0
        # every request was answered
        assert await asyncio.to_thread(_read_answers, sock, 200) == 200
    finally:
        sock.close()
        await server.close()
