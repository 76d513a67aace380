"""Replication between two real MessageStores on loopback (rmq.store.ha): a master listening on
an ephemeral HA port and a slave following it; checks offsets, bytes, dispatch, restarts and
SYNC_MASTER answers."""

import asyncio
import os
import socket
import struct

import pytest

from rmq._testing import loop_turn, wait_until
from rmq.store import MessageInner, MessageStore, PutMessageStatus, StoreConfig
from rmq.store.ha import ha_state
from rmq.store.ha.codec import encode_offset_report, encode_transfer_header

HOST = ("127.0.0.1", 10911)
FILE = 64 * 1024


def config(root, **kw) -> StoreConfig:
    base = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commitlog=FILE,
        mapped_file_size_consume_queue=20 * 100,
        max_hash_slot_num=1000,
        max_index_num=4000,
        ha_listen_port=0,
        ha_send_heartbeat_interval=200,
    )
    base.update(kw)
    return StoreConfig(**base)


class Stores:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.open: list[MessageStore] = []

    async def master(self, name="master", **kw) -> MessageStore:
        s = MessageStore(config(self.tmp / name, **kw), HOST)
        s.ha_listen_host = "127.0.0.1"
        await s.start()
        self.open.append(s)
        return s

    async def slave(self, master: MessageStore | str | None, name="slave", **kw) -> MessageStore:
        addr = master if isinstance(master, str) or master is None else f"127.0.0.1:{master.ha.port}"
        s = MessageStore(config(self.tmp / name, broker_role="SLAVE", ha_master_address=addr, **kw), HOST)
        await s.start()
        self.open.append(s)
        return s

    async def stop(self, s: MessageStore) -> None:
        await s.shutdown()
        self.open.remove(s)

    async def close(self):
        for s in reversed(self.open):
            await s.shutdown()


@pytest.fixture
async def stores(tmp_path):
    st = Stores(tmp_path)
    yield st
    await st.close()


def commitlog_bytes(store: MessageStore, start: int, end: int) -> bytes:
    """The CommitLog bytes in [start, end) read from the files on disk."""
    out = bytearray()
    d = store.config.commitlog_dir
    at = start
    while at < end:
        base = at - at % FILE
        with open(os.path.join(d, f"{base:020d}"), "rb") as f:
            f.seek(at - base)
            n = min(end, base + FILE) - at
            out += f.read(n)
        at += n
    return bytes(out)


def mapped_bytes(store: MessageStore, start: int, end: int) -> bytes:
    cl = store.commit_log
    out = bytearray()
    at = start
    while at < end:
        mf = cl.mfq.find_by_offset(at)
        pos = at - mf.file_from_offset
        n = min(end - at, FILE - pos)
        out += mf.mm[pos : pos + n]
        at += n
    return bytes(out)


async def put(store: MessageStore, n: int, topic="HA", size=300, queues=4, start=0):
    results = []
    for i in range(start, start + n):
        r = await store.put_message(
            MessageInner(topic, i % queues, (b"%08d" % i) * (size // 8), properties={"KEYS": f"k{i}"})
        )
        results.append(r)
    return results


async def following(master: MessageStore) -> None:
    """The slave's first report arrived (a new slave starts at the master's last file then)."""
    await wait_until(lambda: master.ha.connections and all(c.next_transfer_from >= 0 for c in master.ha.connections))


async def caught_up(master: MessageStore, slave: MessageStore, timeout=30.0):
    await wait_until(
        lambda: (
            slave.commit_log.max_offset == master.commit_log.max_offset
            and slave.reput_from_offset == slave.commit_log.max_offset
        ),
        timeout,
        what=f"slave at {slave.commit_log.max_offset}, master at {master.commit_log.max_offset}",
    )


async def test_slave_follows_master_byte_identical_with_queues_and_index(stores):
    master = await stores.master()
    slave = await stores.slave(master)
    await following(master)
    rs = await put(master, 600)  # ~190 KiB: several 64 KiB files with BLANK tails
    assert all(r.status == PutMessageStatus.PUT_OK for r in rs)
    assert len(master.commit_log.mfq.files) >= 3
    await caught_up(master, slave)
    end = master.commit_log.max_offset
    assert mapped_bytes(slave, 0, end) == mapped_bytes(master, 0, end)
    # same queue offsets and physical offsets, built by the slave's own dispatch
    for q in range(4):
        assert slave.get_max_offset_in_queue("HA", q) == master.get_max_offset_in_queue("HA", q) == 150
        for off in (0, 77, 149):
            assert slave.get_commit_log_offset_in_queue("HA", q, off) == master.get_commit_log_offset_in_queue(
                "HA", q, off
            )
    m = slave.look_message_by_offset(rs[123].append.wrote_offset)
    assert m is not None and m.body == b"%08d" % 123 * (300 // 8)
    # the index too
    q = slave.query_message("HA", "k321", 10, 0, 2**62)
    assert len(q.buffers) == 1
    # the master knows the slave's ack, the slave what it reported
    await wait_until(lambda: master.ha.push2slave_max_offset == end)
    info = master.runtime_info()
    assert info["haConnectionCount"] == "1" and info["haSlaveFallBehindMuch"] == "0"
    sinfo = slave.runtime_info()
    assert sinfo["haMasterConnected"] == "true" and int(sinfo["haSlaveReportedOffset"]) == end
    ms, ss = ha_state(master), ha_state(slave)
    assert ms.role == "ASYNC_MASTER" and len(ms.slaves) == 1 and ms.fall_behind_bytes == 0
    assert ms.slaves[0].ack_offset == end and ms.slaves[0].lag_bytes == 0 and ms.slaves[0].lag_millis == 0
    assert ss.role == "SLAVE" and ss.connected and ss.reported_offset == end and ss.max_offset == end
    # the slave refuses puts
    r = await slave.put_message(MessageInner("HA", 0, b"x"))
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE


async def test_new_slave_starts_at_the_masters_last_file(stores):
    master = await stores.master()
    await put(master, 500)
    files = master.commit_log.mfq.files
    assert len(files) >= 3
    last_start = files[-1].file_from_offset
    slave = await stores.slave(master)
    await caught_up(master, slave)
    assert slave.commit_log.min_offset == last_start
    end = master.commit_log.max_offset
    assert mapped_bytes(slave, last_start, end) == mapped_bytes(master, last_start, end)
    # more traffic crosses into new files on both
    await put(master, 400, start=500)
    await caught_up(master, slave)
    end = master.commit_log.max_offset
    assert mapped_bytes(slave, last_start, end) == mapped_bytes(master, last_start, end)
    assert len(slave.commit_log.mfq.files) >= 3


async def test_slave_restart_and_master_restart_resume_without_gap(stores, tmp_path):
    master = await stores.master(ha_listen_port=0)
    slave = await stores.slave(master)
    await following(master)

    slave_down = asyncio.Event()

    async def traffic(store_ref, n, start, pause_at=-1):
        for i in range(start, start + n):
            if i == pause_at:
                await slave_down.wait()  # the rest is put while the slave starts again
            r = await store_ref[0].put_message(MessageInner("HA", i % 2, b"m%06d" % i + b"." * 200))
            assert r.status == PutMessageStatus.PUT_OK
            if i % 50 == 0:
                await loop_turn()  # between puts: the restart interleaves with the traffic

    ref = [master]
    task = asyncio.create_task(traffic(ref, 400, 0, pause_at=200))
    await wait_until(lambda: slave.commit_log.max_offset > 20_000)
    await stores.stop(slave)  # slave restart while traffic runs
    slave_down.set()
    slave = await stores.slave(master)
    await task
    await caught_up(master, slave)
    # master restart (same port), then more traffic
    port = master.ha.port
    await stores.stop(master)
    master = await stores.master(ha_listen_port=port)
    ref[0] = master
    await traffic(ref, 300, 400)
    await caught_up(master, slave)
    end = master.commit_log.max_offset
    assert commitlog_bytes(slave, 0, end) == mapped_bytes(master, 0, end)
    for q in range(2):
        assert slave.get_max_offset_in_queue("HA", q) == master.get_max_offset_in_queue("HA", q) == 350
    assert slave.ha_client.connects >= 2


async def test_sync_flush_slave_reports_what_it_flushed(stores):
    master = await stores.master()
    slave = await stores.slave(master, flush_disk_type="SYNC_FLUSH")
    await following(master)
    await put(master, 200)
    await caught_up(master, slave)
    end = master.commit_log.max_offset
    await wait_until(lambda: master.ha.push2slave_max_offset == end)
    assert slave.commit_log.flushed_offset == end


async def test_sync_master_acks_after_the_slave(stores):
    master = await stores.master(broker_role="SYNC_MASTER", slave_timeout=20_000)
    # no slave: stored, answered SLAVE_NOT_AVAILABLE
    r = await master.put_message(MessageInner("S", 0, b"first"))
    assert r.status == PutMessageStatus.SLAVE_NOT_AVAILABLE and r.append is not None
    slave = await stores.slave(master)
    await wait_until(lambda: master.ha.connection_count == 1 and master.ha.push2slave_max_offset > 0)
    rs = await asyncio.gather(*(master.put_message(MessageInner("S", i % 2, b"x" * 100)) for i in range(50)))
    assert [r.status for r in rs] == [PutMessageStatus.PUT_OK] * 50
    # every acknowledged message is on the slave at that moment
    last = max(r.append.wrote_offset + r.append.wrote_bytes for r in rs)
    assert master.ha.push2slave_max_offset >= last
    assert slave.commit_log.max_offset >= last
    # WAIT=false: acknowledged at once
    r = await master.put_message(MessageInner("S", 0, b"nowait", properties={"WAIT": "false"}))
    assert r.status == PutMessageStatus.PUT_OK and not r.replica_wait
    # the slave stops: SLAVE_NOT_AVAILABLE again
    await stores.stop(slave)
    await wait_until(lambda: master.ha.connection_count == 0)
    r = await master.put_message(MessageInner("S", 0, b"alone"))
    assert r.status == PutMessageStatus.SLAVE_NOT_AVAILABLE


async def test_sync_master_sync_flush_uses_callbacks(stores):
    master = await stores.master(broker_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH")
    slave = await stores.slave(master)
    await wait_until(
        lambda: (
            master.ha.connection_count == 1
            and master.ha.push2slave_max_offset >= 0
            and slave.ha_client.reported_offset >= 0
        )
    )
    done = asyncio.get_running_loop().create_future()
    r = master.append_message(MessageInner("S", 0, b"cb"))
    assert r.flush_wait and r.replica_wait
    assert master.add_flush_callback(r, lambda res, exc: done.set_result((res.status, exc)))
    status, exc = await asyncio.wait_for(done, 20)
    assert status == PutMessageStatus.PUT_OK and exc is None
    end = r.append.wrote_offset + r.append.wrote_bytes
    assert master.commit_log.flushed_offset >= end and master.ha.push2slave_max_offset >= end


def _fake_slave(port: int, report: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(encode_offset_report(report))
    return s


async def test_stalled_slave_gives_flush_slave_timeout(stores):
    master = await stores.master(broker_role="SYNC_MASTER", slave_timeout=300)
    await put(master, 3)
    # a fake slave (the codec's bytes): reports once, then never acks and never reads
    fake = await asyncio.to_thread(_fake_slave, master.ha.port, master.commit_log.max_offset)
    try:
        await wait_until(lambda: master.ha.connection_count == 1 and master.ha.push2slave_max_offset > 0)
        r = await master.put_message(MessageInner("S", 0, b"stalled"))
        assert r.status == PutMessageStatus.FLUSH_SLAVE_TIMEOUT and r.append is not None
        assert master.runtime_info()["haSlaveTimeoutTimes"] == "1"
        # what was sent and never acknowledged shows as lag in bytes and in time
        [state] = ha_state(master).slaves
        assert state.lag_bytes > 0 and state.lag_millis >= 200
        # callbacks too (the SEND path's way)
        done = asyncio.get_running_loop().create_future()
        r = master.append_message(MessageInner("S", 0, b"stalled2"))
        assert master.add_flush_callback(r, lambda res, exc: done.set_result(res.status))
        assert await asyncio.wait_for(done, 10) == PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    finally:
        fake.close()


async def test_slave_too_far_behind_is_not_available(stores):
    master = await stores.master(broker_role="SYNC_MASTER", ha_slave_fallbehind_max=10_000)
    await put(master, 100)  # ~32 KiB
    fake = await asyncio.to_thread(_fake_slave, master.ha.port, 0)  # reports 0 forever: far behind
    try:
        await wait_until(lambda: master.ha.connection_count == 1)
        r = await master.put_message(MessageInner("S", 0, b"behind"))
        assert r.status == PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert "behind" in r.remark
    finally:
        fake.close()


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


async def test_master_serves_a_raw_slave_java_style(stores):
    """A slave speaking only the bytes (as Java's HAClient): report 0, get the last file from its
    start, transfers of at most haTransferBatchSize, heartbeats when idle."""
    master = await stores.master(ha_transfer_batch_size=4096)
    await put(master, 300)
    last_start = master.commit_log.mfq.files[-1].file_from_offset
    end = master.commit_log.max_offset

    def client():
        s = _fake_slave(master.ha.port, 0)
        got = bytearray()
        at = last_start
        while at < end:
            off, size = struct.unpack(">qi", _recv_exact(s, 12))
            assert off == at and 0 < size <= 4096
            got += _recv_exact(s, size)
            at += size
        s.sendall(encode_offset_report(at))
        off, size = struct.unpack(">qi", _recv_exact(s, 12))  # idle: a heartbeat at our end
        s.close()
        return bytes(got), (off, size)

    got, heartbeat = await asyncio.to_thread(client)
    assert got == mapped_bytes(master, last_start, end)
    assert heartbeat == (end, 0)


async def test_slave_refuses_data_not_at_its_end_and_reconnects(stores):
    """A fake master sends a transfer past the slave's end: the slave closes and connects again."""
    accepted = []
    reports = []

    async def handle(reader, writer):
        accepted.append(writer)
        reports.append(struct.unpack(">q", await reader.readexactly(8))[0])
        writer.write(encode_transfer_header(FILE * 5, 3) + b"abc")  # not the slave's end (0)
        await writer.drain()
        try:
            await reader.read()  # until the slave closes
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        # a slave with data: its end is not 5 files in
        master = await stores.master()
        await put(master, 10)
        slave = await stores.slave(master)
        await caught_up(master, slave)
        slave.update_ha_master_address(f"127.0.0.1:{port}")
        await wait_until(lambda: len(accepted) >= 2, 30)
        assert reports[0] == slave.commit_log.max_offset
        assert "ends at" in slave.ha_client.last_error
        assert slave.ha_client.diverged is None
        assert slave.commit_log.max_offset == master.commit_log.max_offset  # nothing appended
    finally:
        server.close()


async def test_slave_longer_than_master_stops_replicating(stores):
    master = await stores.master()
    slave = await stores.slave(master)
    await following(master)
    await put(master, 50)
    await caught_up(master, slave)
    await stores.stop(slave)
    # the master loses its data (a new, empty store on another port), the slave comes back
    fresh = await stores.master(name="fresh")
    await put(fresh, 5)
    slave = await stores.slave(fresh)
    await wait_until(lambda: slave.ha_client.diverged is not None, 30)
    assert "before this slave's end" in slave.ha_client.diverged
    assert slave.runtime_info()["haDiverged"]
    # the slave's data is kept as it was
    assert slave.commit_log.max_offset == master.commit_log.max_offset


async def test_slave_follows_the_golden_java_master_stream(stores):
    """The bytes a Java 4.9.8 master sent its slave, replayed by a fake master one transfer at a
    time: our slave stores the records at the same offsets, reports what Java's slave reported,
    and dispatches the 200 messages."""
    from remoting_golden import ha_stream

    g = ha_stream()
    raw = g["master_to_slave"]
    transfers = []
    pos = 0
    for t in g["master_transfers"]:
        transfers.append(raw[pos : pos + 12 + t["size"]])
        pos += 12 + t["size"]
    reports = []

    async def handle(reader, writer):
        reports.append(struct.unpack(">q", await reader.readexactly(8))[0])
        for t in transfers[:3]:  # heartbeat at 0, then the two data transfers
            writer.write(t)
            await writer.drain()
            if len(t) > 12:
                reports.append(struct.unpack(">q", await reader.readexactly(8))[0])
        await reader.read()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        # no periodic report (haSendHeartbeatInterval) between the transfers: on a slow machine
        # one came between the second transfer and its report and was read as that report
        slave = await stores.slave(
            f"127.0.0.1:{server.sockets[0].getsockname()[1]}",
            mapped_file_size_commitlog=FILE,
            ha_send_heartbeat_interval=3_600_000,
        )
        end = g["master_transfers"][2]["phy_offset"] + g["master_transfers"][2]["size"]
        await wait_until(lambda: slave.commit_log.max_offset == end and slave.reput_from_offset == end)
        assert reports == g["slave_reports"][:3] == [0, 32768, end]
        body = b"".join(t[12:] for t in transfers)
        assert mapped_bytes(slave, 0, end) == body
        queues = slave.consume_queue_table["HaTopic"]
        assert sum(cq.get_max_offset_in_queue() for cq in queues.values()) == 200
    finally:
        server.close()


async def test_slave_refuses_a_master_announcing_a_huge_transfer(stores):
    """A bad "master" announcing a 2 GiB transfer: the slave closes before buffering it and
    tries again later (with backoff), appending nothing."""
    accepted = []

    async def handle(reader, writer):
        accepted.append(1)
        try:
            await reader.readexactly(8)
            writer.write(struct.pack(">qi", 0, 0x7FFFFFFF) + b"\x00" * 1000)
            await writer.drain()
            await reader.read()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the slave closing with our bytes unread resets the connection (RST, not FIN)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        slave = await stores.slave(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        await wait_until(lambda: len(accepted) >= 2, 30)
        assert "transfer size" in slave.ha_client.last_error
        assert slave.ha_client._decoder.buffered == 0 or slave.ha_client._decoder.buffered <= 12
        assert slave.commit_log.max_offset == 0
    finally:
        server.close()


async def test_silent_peers_cannot_lock_a_slave_out(stores):
    """haMaxConnections peers that connect and say nothing: a real slave still gets in (a peer
    that has not proven itself does not count toward the limit)."""
    master = await stores.master(ha_max_connections=3)
    await put(master, 20)
    peers = [await asyncio.to_thread(socket.create_connection, ("127.0.0.1", master.ha.port), 10) for _ in range(3)]
    try:
        await wait_until(lambda: len(master.ha.pending) == 3)
        assert master.ha.connection_count == 0
        slave = await stores.slave(master)
        await caught_up(master, slave)
        assert master.ha.connection_count == 1 and len(master.ha.pending) == 3
    finally:
        for p in peers:
            p.close()


async def test_a_silent_peer_is_not_a_slave_for_sync_master(stores):
    master = await stores.master(broker_role="SYNC_MASTER", slave_timeout=20_000)
    peer = await asyncio.to_thread(socket.create_connection, ("127.0.0.1", master.ha.port), 10)
    try:
        await wait_until(lambda: len(master.ha.pending) == 1)
        r = await asyncio.wait_for(master.put_message(MessageInner("S", 0, b"x")), 15)  # < slave_timeout
        assert r.status == PutMessageStatus.SLAVE_NOT_AVAILABLE and r.remark == "no slave connected"
    finally:
        peer.close()
