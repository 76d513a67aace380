"""A real RemotingServer and RemotingClient on ephemeral ports, talking over TCP."""

import asyncio
import logging
import socket

import pytest

from rmq._testing import wait_until
from rmq.errors import (
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import ConnectionEvent, ProcessorPool, RemotingClient, RemotingServer
from rmq.remoting.codec import FrameDecoder, encode

pytestmark = pytest.mark.integration  # remoting servers

ECHO = 1001
SLOW = 1002
HOLD = 1003
BOOM = 1004
ASYNC_BOOM = 1005
BLOCK = 1006
BIG = 1007
BAD_BODY = 1008


class Echo:
    """Synchronous: answers inline with the request's fields and body."""

    def __init__(self):
        self.seen = []

    def process_request(self, conn, cmd):
        self.seen.append(cmd)
        return cmd.response(ext_fields=dict(cmd.ext_fields, echoed="yes"), body=cmd.body)


class Slow:
    """Asynchronous: sleeps ext 'delay' seconds (the processing time under test), then answers."""

    def __init__(self):
        self.started = 0

    async def process_request(self, conn, cmd):
        self.started += 1
        await asyncio.sleep(float(cmd.ext_fields["delay"]))
        return cmd.response(ext_fields={"n": cmd.ext_fields["n"]})


class Hold:
    """Answers later: keeps (conn, cmd) like long polling."""

    def __init__(self):
        self.held = []
        self.arrived = asyncio.Event()

    def process_request(self, conn, cmd):
        self.held.append((conn, cmd))
        self.arrived.set()
        return None


class Boom:
    def process_request(self, conn, cmd):
        raise ValueError("boom: bad thing")


class AsyncBoom:
    async def process_request(self, conn, cmd):
        await asyncio.sleep(0)  # fail after a real suspension, on the asynchronous path
        raise KeyError("async-boom")


class Block:
    """Async and stuck until released; with a small pool, shows SYSTEM_BUSY."""

    def __init__(self):
        self.release = asyncio.Event()
        self.started = 0

    async def process_request(self, conn, cmd):
        self.started += 1
        await self.release.wait()
        return cmd.response()


class Big:
    """A pull-shaped reply: header plus a body of many memoryview slices."""

    def __init__(self, size):
        self.backing = bytes(range(256)) * (size // 256)
        self.count = 0

    def process_request(self, conn, cmd):
        self.count += 1
        mv = memoryview(self.backing)
        step = len(self.backing) // 8
        return cmd.response(
            ext_fields={"nextBeginOffset": self.count}, body=[mv[i : i + step] for i in range(0, len(mv), step)]
        )


class BadBody:
    def process_request(self, conn, cmd):
        return cmd.response(body="text is not bytes")


class Rejecting:
    def process_request(self, conn, cmd):  # pragma: no cover - must not be called
        raise AssertionError("called although reject_request() was true")

    def reject_request(self):
        return True


@pytest.fixture
async def env():
    events = []
    server = RemotingServer(name="test-server")
    procs = {
        "echo": Echo(),
        "hold": Hold(),
        "block": Block(),
    }
    server.register_processor(ECHO, procs["echo"])
    server.register_processor(SLOW, Slow())
    server.register_processor(HOLD, procs["hold"])
    server.register_processor(BOOM, Boom())
    server.register_processor(ASYNC_BOOM, AsyncBoom())
    procs["block_pool"] = ProcessorPool("block", max_in_flight=1, max_queue=1)
    server.register_processor(BLOCK, procs["block"], procs["block_pool"])
    server.register_processor(RequestCode.HEART_BEAT, Rejecting())
    server.register_processor(BAD_BODY, BadBody())
    server.add_connection_listener(lambda ev, conn, exc=None: events.append((ev, conn)))
    await server.start()
    client = RemotingClient()
    try:
        yield server, client, procs, events
    finally:
        procs["block"].release.set()
        await client.close()
        await server.close()


def req(code, body=None, **ext):
    return RemotingCommand.request(code, {k: str(v) for k, v in ext.items()}, body)


async def test_sync_invoke(env):
    server, client, procs, _ = env
    resp = await client.invoke(server.address, req(ECHO, b"payload", topic="T", queueId=3))
    assert resp.is_response and resp.code == ResponseCode.SUCCESS
    assert resp.ext_fields == {"topic": "T", "queueId": "3", "echoed": "yes"}
    assert resp.body == b"payload"
    assert procs["echo"].seen[0].ext_fields["topic"] == "T"
    assert client.pending_count == 0


async def test_async_invoke_callback(env):
    server, client, _, _ = env
    loop = asyncio.get_running_loop()
    results = [loop.create_future() for _ in range(3)]
    for i, fut in enumerate(results):
        client.invoke_async(server.address, req(ECHO, n=i), 3.0, lambda r, e, fut=fut: fut.set_result((r, e)))
    got = await asyncio.gather(*results)
    assert [r.ext_fields["n"] for r, e in got] == ["0", "1", "2"]
    assert all(e is None for _, e in got)
    assert client.async_in_flight == 0 and client.pending_count == 0


async def test_oneway_gets_no_reply(env):
    server, client, procs, _ = env
    cmd = req(ECHO, n=1)
    await client.invoke_oneway(server.address, cmd)
    # the next sync call goes over the same connection, so the oneway was processed first
    resp = await client.invoke(server.address, req(ECHO, n=2))
    assert resp.ext_fields["n"] == "2"
    assert [c.ext_fields["n"] for c in procs["echo"].seen] == ["1", "2"]
    assert procs["echo"].seen[0].is_oneway
    await asyncio.sleep(0.05)  # the behaviour under test: nothing answers the oneway meanwhile
    assert client.pending_count == 0


async def test_out_of_order_responses(env):
    server, client, _, _ = env
    delays = [0.3, 0.2, 0.1, 0.0]
    order = []

    async def call(i):
        r = await client.invoke(server.address, req(SLOW, n=i, delay=delays[i]))
        order.append(int(r.ext_fields["n"]))
        return int(r.ext_fields["n"])

    assert await asyncio.gather(*(call(i) for i in range(4))) == [0, 1, 2, 3]
    assert order == [3, 2, 1, 0]


async def test_timeout_raises_and_empties_table(env):
    server, client, procs, _ = env
    with pytest.raises(RemotingTimeoutError) as info:
        await client.invoke(server.address, req(HOLD), timeout=0.2)
    assert info.value.retriable
    assert client.pending_count == 0
    # a late answer to the timed-out request is dropped quietly, the connection keeps working
    conn, cmd = procs["hold"].held[0]
    conn.send_response(cmd.response())
    assert (await client.invoke(server.address, req(ECHO))).code == 0


async def test_async_timeout_by_scan(env):
    server, client, _, _ = env
    fut = asyncio.get_running_loop().create_future()
    client.invoke_async(server.address, req(HOLD), 0.1, lambda r, e: fut.set_result((r, e)))
    r, e = await asyncio.wait_for(fut, 3.0)
    assert r is None and isinstance(e, RemotingTimeoutError)
    assert client.pending_count == 0 and client.async_in_flight == 0


async def test_async_semaphore(env):
    server, _, _, _ = env
    client = RemotingClient(max_async_in_flight=2)
    try:
        client.invoke_async(server.address, req(HOLD), 5.0, lambda r, e: None)
        client.invoke_async(server.address, req(HOLD), 5.0, lambda r, e: None)
        with pytest.raises(RemotingTooMuchRequestError):
            client.invoke_async(server.address, req(HOLD), 5.0, lambda r, e: None)
    finally:
        await client.close()  # the two held calls fail with RemotingConnectError
    assert client.async_in_flight == 0


async def test_dropped_connection_fails_all_waiters(env):
    server, client, procs, _ = env
    hold = procs["hold"]
    loop = asyncio.get_running_loop()
    async_result = loop.create_future()
    waiters = [asyncio.ensure_future(client.invoke(server.address, req(HOLD), timeout=10)) for _ in range(3)]
    await wait_until(lambda: len(hold.held) == 3, what="3 held requests")
    client.invoke_async(server.address, req(HOLD), 10, lambda r, e: async_result.set_result(e))
    await wait_until(lambda: len(hold.held) == 4, what="4 held requests")
    hold.held[0][0].abort()  # the server drops the connection
    for w in waiters:
        with pytest.raises(RemotingConnectError) as info:
            await w
        assert info.value.__cause__ is not None
    exc = await async_result
    assert isinstance(exc, RemotingConnectError) and exc.__cause__ is not None
    assert client.pending_count == 0
    # the next call reconnects
    assert (await client.invoke(server.address, req(ECHO))).code == 0


async def test_system_busy_when_pool_full(env):
    server, client, procs, _ = env
    block = procs["block"]
    first = asyncio.ensure_future(client.invoke(server.address, req(BLOCK), timeout=5))
    second = asyncio.ensure_future(client.invoke(server.address, req(BLOCK), timeout=5))  # queued
    await wait_until(lambda: procs["block_pool"].in_flight == 2, what="one running, one queued")
    busy = await client.invoke(server.address, req(BLOCK), timeout=5)
    assert busy.code == ResponseCode.SYSTEM_BUSY and "block" in busy.remark
    assert block.started == 1
    block.release.set()
    assert (await first).code == 0 and (await second).code == 0


async def test_reject_request_is_system_busy(env):
    server, client, _, _ = env
    resp = await client.invoke(server.address, req(RequestCode.HEART_BEAT))
    assert resp.code == ResponseCode.SYSTEM_BUSY


async def test_request_code_not_supported(env, caplog):
    server, client, _, _ = env
    resp = await client.invoke(server.address, req(4242))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "4242" in resp.remark


@pytest.mark.parametrize("code, text", [(BOOM, "boom: bad thing"), (ASYNC_BOOM, "async-boom")])
async def test_processor_error_is_system_error(env, caplog, code, text):
    server, client, _, _ = env
    with caplog.at_level(logging.ERROR, logger="rmq.remoting"):
        resp = await client.invoke(server.address, req(code))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert text in resp.remark
    # one line with the error and its stack (innermost frames), not exc_info's full message
    assert any(text in r.getMessage() and "process_request" in r.getMessage() for r in caplog.records)
    assert (await client.invoke(server.address, req(ECHO))).code == 0  # connection unharmed


async def test_deferred_response(env):
    server, client, procs, _ = env
    hold = procs["hold"]
    call = asyncio.ensure_future(client.invoke(server.address, req(HOLD, k="v"), timeout=5))
    await asyncio.wait_for(hold.arrived.wait(), 5)
    assert not call.done()
    conn, cmd = hold.held[0]
    conn.send_response(cmd.response(ResponseCode.PULL_NOT_FOUND, ext_fields={"nextBeginOffset": 7}))
    resp = await call
    assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.ext_fields == {"nextBeginOffset": "7"}


async def test_connection_events_reach_listeners(env):
    server, client, _, events = env
    await client.invoke(server.address, req(ECHO))
    assert [e for e, _ in events] == [ConnectionEvent.CONNECT]
    conn = events[0][1]
    assert conn.remote_addr.startswith("127.0.0.1:") and conn.local_addr == server.address
    await client.close()
    await wait_until(lambda: len(events) == 2, what="the CLOSE event")
    assert [e for e, _ in events] == [ConnectionEvent.CONNECT, ConnectionEvent.CLOSE]
    assert events[1][1] is conn and conn.closed


async def test_idle_connection_closed():
    events = []
    server = RemotingServer(idle_timeout=0.5)
    server.register_processor(ECHO, Echo())
    server.add_connection_listener(lambda ev, conn, exc=None: events.append(ev))
    await server.start()
    client = RemotingClient()
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(8):  # 0.8 s of activity, longer than the idle time: reads reset the timer
            assert (await client.invoke(server.address, req(ECHO))).code == 0
            await asyncio.sleep(0.1)  # the behaviour under test: activity spread over time
        assert ConnectionEvent.IDLE not in events
        await wait_until(lambda: ConnectionEvent.CLOSE in events, what="the idle connection closed")
        assert events == [ConnectionEvent.CONNECT, ConnectionEvent.IDLE, ConnectionEvent.CLOSE]
        assert loop.time() - start >= 1.2  # closed only after 0.5 s of silence
        await wait_until(lambda: not client.connection_manager.connections, what="the client to see the close")
        assert (await client.invoke(server.address, req(ECHO))).code == 0  # and reconnects
    finally:
        await client.close()
        await server.close()


async def test_server_to_client_invoke(env):
    server, _, _, events = env
    client = RemotingClient()
    got = []

    class CheckTransaction:
        def process_request(self, conn, cmd):
            got.append(cmd)
            return cmd.response(ext_fields={"state": "COMMIT"})

    class Notify:
        def process_request(self, conn, cmd):
            got.append(cmd)
            return cmd.response()  # oneway: must not be sent

    client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, CheckTransaction())
    client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, Notify())
    try:
        await client.invoke(server.address, req(ECHO))
        conn = events[0][1]
        resp = await conn.invoke(req(RequestCode.CHECK_TRANSACTION_STATE, commitLogOffset=5), timeout=3)
        assert resp.code == 0 and resp.ext_fields == {"state": "COMMIT"}
        assert got[0].ext_fields == {"commitLogOffset": "5"}
        conn.invoke_oneway(req(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, consumerGroup="G"))
        await wait_until(lambda: len(got) == 2, what="the oneway notification")
        assert got[1].is_oneway and got[1].ext_fields == {"consumerGroup": "G"}
        assert conn.pending_count == 0
    finally:
        await client.close()


async def test_server_invoke_to_client_without_processor_gets_not_supported(env):
    server, client, _, events = env
    await client.invoke(server.address, req(ECHO))
    resp = await events[0][1].invoke(req(RequestCode.GET_CONSUMER_RUNNING_INFO), timeout=3)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_binary_request_gets_binary_reply(env):
    server, client, _, _ = env
    cmd = req(ECHO, b"b", topic="T")
    cmd.serialize_type = 1
    resp = await client.invoke(server.address, cmd)
    assert resp.serialize_type == 1 and resp.ext_fields["topic"] == "T" and resp.body == b"b"


async def test_concurrent_callers_share_one_connect(env):
    server, _, _, events = env
    client = RemotingClient()
    try:
        resps = await asyncio.gather(*(client.invoke(server.address, req(ECHO, n=i)) for i in range(20)))
        assert [r.ext_fields["n"] for r in resps] == [str(i) for i in range(20)]
        assert [e for e, _ in events] == [ConnectionEvent.CONNECT]
    finally:
        await client.close()


async def test_connect_error_and_namesrv_failover(env):
    server, _, _, _ = env
    # a port nobody listens on: bind, note the port, close
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    dead = f"127.0.0.1:{probe.sockets[0].getsockname()[1]}"
    probe.close()
    await probe.wait_closed()
    client = RemotingClient(f"{dead};{server.address}", connect_timeout=1.0)
    try:
        with pytest.raises(RemotingConnectError) as info:
            await client.invoke(dead, req(ECHO))
        assert info.value.retriable and dead in str(info.value)
        resp = await client.invoke_namesrv(req(ECHO, n=1))
        assert resp.ext_fields["n"] == "1"
        resp = await client.invoke_namesrv(req(ECHO, n=2))  # sticks to the good one
        assert resp.ext_fields["n"] == "2"
        only_dead = RemotingClient([dead])
        with pytest.raises(RemotingConnectError):
            await only_dead.invoke_namesrv(req(ECHO))
        await only_dead.close()
    finally:
        await client.close()


async def test_rpc_hooks(env):
    server, client, procs, _ = env
    calls = []

    class Hook:
        def before(self, addr, cmd):
            calls.append(("before", addr, cmd.code))
            cmd.ext_fields["AccessKey"] = "ak"

        def after(self, addr, cmd, response):
            calls.append(("after", addr, response.code))

    client.add_rpc_hook(Hook())
    await client.invoke(server.address, req(ECHO))
    assert calls == [("before", server.address, ECHO), ("after", server.address, 0)]
    assert procs["echo"].seen[-1].ext_fields["AccessKey"] == "ak"


async def test_replies_of_one_read_go_out_in_one_writelines(env):
    server, _, _, _events = env
    writes = []

    class Spy:
        def __init__(self, transport):
            self._t = transport

        def writelines(self, parts):
            writes.append(len(parts))
            self._t.writelines(parts)

        def __getattr__(self, name):
            return getattr(self._t, name)

    server.add_connection_listener(
        lambda ev, conn, exc=None: ev is ConnectionEvent.CONNECT and setattr(conn, "_transport", Spy(conn._transport))
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    frames = b"".join(b"".join(encode(req(ECHO, n=i))) for i in range(10))
    writer.write(frames)
    dec = FrameDecoder()
    got = []
    while len(got) < 10:
        dec.feed(await asyncio.wait_for(reader.read(65536), 5))
        got.extend(dec)
    assert [c.ext_fields["n"] for c in got] == [str(i) for i in range(10)]
    assert writes == [10]  # ten replies, one vectored write
    writer.close()
    await writer.wait_closed()


async def test_slow_reader_pauses_reading(caplog):
    """A client that does not read its replies makes the server stop reading its requests."""
    big = Big(1024 * 1024)
    server = RemotingServer(write_buffer_high=256 * 1024)
    server.register_processor(BIG, big)
    server.register_processor(ECHO, Echo())
    await server.start()
    client = RemotingClient()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        n = 200
        writer.write(b"".join(b"".join(encode(req(BIG, n=i))) for i in range(n)))
        # wait until the server stops making progress (it paused), however loaded the machine is
        processed, stable_since = -1, None
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(10):
            while stable_since is None or loop.time() - stable_since < 0.3:
                await asyncio.sleep(0.05)  # sampling: the state under test is "no progress for 0.3 s"
                if big.count != processed:
                    processed, stable_since = big.count, loop.time()
        assert 0 < processed < n  # reading stopped while ~1 MiB replies piled up unread
        # another client is unaffected
        assert (await client.invoke(server.address, req(ECHO))).code == 0
        # now read everything: all replies arrive, complete and in order
        dec = FrameDecoder(max_frame_length=4 * 1024 * 1024)
        got = 0
        while got < n:
            dec.feed(await asyncio.wait_for(reader.read(1 << 20), 10))
            for cmd in dec:
                assert cmd.ext_fields["nextBeginOffset"] == str(got + 1)
                assert len(cmd.body) == len(big.backing)
                got += 1
        assert big.count == n
    finally:
        writer.close()
        await client.close()
        await server.close()


async def test_unencodable_response_becomes_system_error(env, caplog):
    server, client, _, _ = env
    resp = await client.invoke(server.address, req(BAD_BODY))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "body must be bytes" in resp.remark
    assert any("cannot encode response" in r.getMessage() for r in caplog.records)


async def test_tcp_nodelay_on_both_sides(env):
    import socket

    server, client, _, events = env
    await client.invoke(server.address, req(ECHO))
    server_conn = events[0][1]
    client_conn = next(iter(client.connection_manager.connections))
    for conn in (server_conn, client_conn):
        sock = conn._transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


async def test_close_answers_in_flight_requests():
    server = RemotingServer()
    slow = Slow()
    server.register_processor(SLOW, slow)
    await server.start()
    client = RemotingClient()
    try:
        call = asyncio.ensure_future(client.invoke(server.address, req(SLOW, n=1, delay=0.3), timeout=5))
        await wait_until(lambda: slow.started == 1, what="the slow request to start")
        await server.close()
        resp = await call
        assert resp.code == 0 and resp.ext_fields == {"n": "1"}
        with pytest.raises(RemotingConnectError):
            await client.invoke(server.address, req(SLOW, n=2, delay=0), timeout=2)
    finally:
        await client.close()


async def test_connection_cap():
    server = RemotingServer(max_connections=1)
    server.register_processor(ECHO, Echo())
    await server.start()
    first, second = RemotingClient(), RemotingClient()
    try:
        assert (await first.invoke(server.address, req(ECHO))).code == 0
        # refused right after accept: seen as a failed write or a dropped connection
        with pytest.raises((RemotingConnectError, RemotingSendRequestError)):
            await second.invoke(server.address, req(ECHO), timeout=2)
        assert (await first.invoke(server.address, req(ECHO))).code == 0
    finally:
        await first.close()
        await second.close()
        await server.close()


async def test_pool_run_blocking_in_threads():
    import threading

    pool = ProcessorPool("io", threads=2)
    try:
        main = threading.get_ident()
        ident = await pool.run_blocking(threading.get_ident)
        assert ident != main
        assert await pool.run_blocking(sum, [1, 2, 3]) == 6
    finally:
        await pool.close()


async def test_async_and_oneway_to_a_dead_address():
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    dead = f"127.0.0.1:{probe.sockets[0].getsockname()[1]}"
    probe.close()
    await probe.wait_closed()
    client = RemotingClient(connect_timeout=1.0)
    try:
        fut = asyncio.get_running_loop().create_future()
        client.invoke_async(dead, req(ECHO), 2.0, lambda r, e: fut.set_result((r, e)))
        r, e = await asyncio.wait_for(fut, 5)
        assert r is None and isinstance(e, RemotingConnectError)
        assert client.async_in_flight == 0
        with pytest.raises(RemotingConnectError):
            await client.invoke_oneway(dead, req(ECHO))
    finally:
        await client.close()


async def test_request_with_typed_header(env):
    from rmq.protocol.headers.consumer import GetMaxOffsetRequestHeader

    server, client, procs, _ = env
    cmd = RemotingCommand.request(ECHO, GetMaxOffsetRequestHeader(topic="T", queue_id=2))
    resp = await client.invoke(server.address, cmd)
    assert procs["echo"].seen[-1].decode_header(GetMaxOffsetRequestHeader) == GetMaxOffsetRequestHeader(
        topic="T", queue_id=2
    )
    assert resp.ext_fields["queueId"] == "2"


class _WriteSpy:
    """Wraps a live transport and records each writelines (how many parts it carried)."""

    def __init__(self, transport, writes):
        self._t = transport
        self._writes = writes

    def writelines(self, parts):
        self._writes.append(len(parts))
        self._t.writelines(parts)

    def __getattr__(self, name):
        return getattr(self._t, name)


async def test_writes_of_one_loop_turn_go_out_in_one_writelines(env):
    """Pipelined requests written in one loop turn (outside a read) leave in one vectored write."""
    server, client, _procs, _ = env
    await client.invoke(server.address, req(ECHO))  # connect
    conn = client._conns[server.address]
    writes = []
    conn._transport = _WriteSpy(conn._transport, writes)
    replies = await asyncio.gather(*(client.invoke(server.address, req(ECHO, n=i)) for i in range(8)))
    assert [r.ext_fields["n"] for r in replies] == [str(i) for i in range(8)]
    assert writes == [8]  # 8 header-only requests, one writelines


async def test_replies_finished_by_tasks_are_coalesced(env):
    """Replies that async processors finish in the same loop turn share one writelines."""
    server, _client, _, _events = env
    writes = []
    server.add_connection_listener(
        lambda ev, conn, exc=None: (
            ev is ConnectionEvent.CONNECT and setattr(conn, "_transport", _WriteSpy(conn._transport, writes))
        )
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"".join(b"".join(encode(req(SLOW, n=i, delay="0"))) for i in range(6)))
    dec, got = FrameDecoder(), []
    while len(got) < 6:
        dec.feed(await asyncio.wait_for(reader.read(65536), 5))
        got.extend(dec)
    assert sorted(int(c.ext_fields["n"]) for c in got) == list(range(6))
    assert len(writes) < 6, writes  # not one syscall per reply
    writer.close()
    await writer.wait_closed()


async def test_when_written_waits_for_a_peer_that_does_not_read():
    """when_written fires only once the transport has handed everything to the kernel."""
    size = 8 * 1024 * 1024
    big = Big(size)
    server = RemotingServer()
    server.register_processor(BIG, big)
    conns = []
    server.add_connection_listener(lambda ev, conn, exc=None: ev is ConnectionEvent.CONNECT and conns.append(conn))
    await server.start()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # keep loopback autotuning from absorbing it all
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        writer.write(b"".join(encode(req(BIG, n=0))))
        await wait_until(lambda: big.count > 0, what="the big request processed")
        fired = asyncio.Event()
        conns[0].when_written(fired.set)
        await asyncio.sleep(0.3)  # the behaviour under test: for a while, the reply stays unwritten
        assert not fired.is_set()  # 8 MiB cannot all sit in the socket buffers of a peer that reads nothing
        dec, got = FrameDecoder(), []
        async with asyncio.timeout(10):
            while not got:
                dec.feed(await reader.read(1 << 20))
                got.extend(dec)
            await fired.wait()
        assert len(got[0].body) == size
    finally:
        writer.close()
        await writer.wait_closed()
        await server.close()


async def test_when_written_fires_when_the_connection_closes(env):
    server, client, _procs, _ = env
    await client.invoke(server.address, req(ECHO))
    conn = client._conns[server.address]
    fired = asyncio.Event()
    conn.abort()
    conn.when_written(fired.set)
    await asyncio.wait_for(fired.wait(), 2)
