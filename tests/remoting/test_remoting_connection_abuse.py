"""Connection-level abuse costs only the abuser: a client that never reads is closed when idle
(the graceful close gives up after a grace), unfinished frames share one broker-wide budget,
and a frame once started has a read deadline. Against a real ``rmq standalone`` subprocess,
with a NoisyNeighbour measuring a well-behaved client's round trips meanwhile."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from rmq._testing import NoisyNeighbour, StandaloneProcess, wait_until_sync
from rmq._testing.floods import (
    Wire,
    pull,
    rss_bytes,
    send_message,
    server_side_established,
)

pytestmark = pytest.mark.integration  # a broker subprocess

WORST_ROUND_TRIP = 2.0
MiB = 1024 * 1024


def test_idle_close_completes_for_a_client_that_does_not_read(tmp_path):
    with StandaloneProcess(tmp_path / "store", ["--idleTimeout=1", "--closeGraceSeconds=1"]) as proc:
        setup = Wire(proc.broker_addr)
        assert send_message(setup, "IdleT", b"z" * (256 * 1024)).code == 0
        setup.close()
        # 64 pulls of a 256 KiB message: 16 MiB of replies to a client that reads nothing.
        bad = Wire(proc.broker_addr, rcvbuf=4096)
        try:
            bad.send(*(pull("IdleT", 0, max_msg_nums=1) for _ in range(64)))
            with NoisyNeighbour(proc.broker_addr) as probe:
                # idle after 1 s (the buffer cannot drain), aborted 1 s after the close began
                wait_until_sync(
                    lambda: not server_side_established(proc.broker_port, bad.local_port),
                    timeout=30,
                    what="the broker closing the idle connection",
                )
            assert probe.failures == 0, probe.summary()
            assert probe.worst < WORST_ROUND_TRIP, probe.summary()
            got = bad.drain_until_closed(limit=15 * MiB)  # EOF or reset before all 16 MiB
            assert got < 15 * MiB
        finally:
            bad.close()
        log = proc.log_text()
        assert "idle for" in log and "aborting" in log, log[-2000:]


def _start_of_big_frame(total: int, sent: int) -> bytes:
    """The first ``sent`` bytes of a frame of ``total`` bytes (JSON header of 2 bytes ``{}``)."""
    head = struct.pack(">iI", total - 4, 2) + b"{}"
    return head + b"\0" * (sent - len(head))


@pytest.mark.slow
def test_unfinished_frames_share_one_budget(tmp_path):
    """20 connections each send 15 MiB of a 16 MiB frame: 300 MB if each may buffer its own;
    with the 64 MiB broker-wide budget the largest holders are closed, and a producer sending
    a 2 MiB message meanwhile is not one of them."""
    n, sent = 20, 15 * MiB
    data = _start_of_big_frame(16 * MiB, sent)
    with StandaloneProcess(tmp_path / "store") as proc:
        rss_before = rss_bytes(proc.pid)
        socks: list[socket.socket] = []
        with NoisyNeighbour(proc.broker_addr) as probe:
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", proc.broker_port), timeout=30)
                socks.append(s)
                try:
                    s.sendall(data)
                except (ConnectionResetError, BrokenPipeError):
                    pass  # closed while sending: over the budget
            ports = [s.getsockname()[1] for s in socks]

            def kept() -> int:
                return sum(server_side_established(proc.broker_port, p) for p in ports)

            wait_until_sync(lambda: kept() <= 64 // 15, timeout=30, what="the budget closing the largest holders")
            rss_peak = rss_bytes(proc.pid)
            producer = Wire(proc.broker_addr)
            try:
                assert send_message(producer, "BudgetT", b"m" * (2 * MiB)).code == 0
            finally:
                producer.close()
        try:
            survivors = kept()
            print("neighbour:", probe.summary(), f"kept {survivors}, RSS +{(rss_peak - rss_before) // MiB} MiB")
            assert 1 <= survivors <= 64 // 15, survivors  # the budget holds 4 unfinished 15 MiB frames
            assert rss_peak - rss_before < 160 * MiB
            assert probe.failures == 0, probe.summary()
            assert probe.worst < WORST_ROUND_TRIP, probe.summary()
        finally:
            for s in socks:
                s.close()
        assert "maxPartialFrameBytes" in proc.log_text()


def test_a_producer_mid_message_is_not_the_one_closed_for_the_budget(tmp_path):
    """Five clients park 12.5 MiB unfinished frames (62.5 of the 64 MiB budget); a producer's
    2 MiB message takes the total over: the largest holder is closed, the message is stored."""
    data = _start_of_big_frame(16 * MiB, 12 * MiB + MiB // 2)
    with StandaloneProcess(tmp_path / "store") as proc:
        socks = [socket.create_connection(("127.0.0.1", proc.broker_port), timeout=30) for _ in range(5)]
        try:
            for s in socks:
                s.sendall(data)
            ports = [s.getsockname()[1] for s in socks]
            producer = Wire(proc.broker_addr)
            try:
                assert send_message(producer, "FairT", b"m" * (2 * MiB)).code == 0
            finally:
                producer.close()
            wait_until_sync(
                lambda: sum(server_side_established(proc.broker_port, p) for p in ports) == 4,
                timeout=30,
                what="one parked frame closed for the producer's message",
            )
        finally:
            for s in socks:
                s.close()


def test_a_trickled_frame_is_closed_at_its_read_deadline(tmp_path):
    """One byte every 0.2 s keeps the idle timer happy for ever; the frame deadline does not."""
    with StandaloneProcess(tmp_path / "store", ["--frameReadTimeoutSeconds=2"]) as proc:
        sock = socket.create_connection(("127.0.0.1", proc.broker_port), timeout=10)
        client_port = sock.getsockname()[1]
        stop = threading.Event()
        failed_at: list[float] = []

        def trickle() -> None:
            data = _start_of_big_frame(1024, 1024)
            for i in range(len(data)):
                if stop.wait(0.2):
                    return
                try:
                    sock.send(data[i : i + 1])
                except OSError:
                    failed_at.append(time.monotonic())
                    return

        started = time.monotonic()
        t = threading.Thread(target=trickle, daemon=True)
        with NoisyNeighbour(proc.broker_addr) as probe:
            t.start()
            try:
                wait_until_sync(
                    lambda: not server_side_established(proc.broker_port, client_port),
                    timeout=30,
                    what="the broker closing the trickling connection",
                )
                closed_after = time.monotonic() - started
            finally:
                stop.set()
                t.join(5)
                sock.close()
        assert closed_after >= 2.0  # not before the deadline
        assert probe.failures == 0, probe.summary()
        assert probe.worst < WORST_ROUND_TRIP, probe.summary()
        assert "frameReadTimeoutSeconds" in proc.log_text()
