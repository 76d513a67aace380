"""``rmq admin`` operations commands as real CLI processes against real daemons (``rmq
standalone``, or ``rmq namesrv -c`` + ``rmq broker`` where a config file is persisted and two
name servers are needed), with SDK producers and consumers: getNamesrvConfig,
updateNamesrvConfig, wipeWritePerm, addWritePerm, updateKvConfig, deleteKvConfig,
deleteSubGroup, cleanExpiredCQ, deleteExpiredCommitLog, queryCq."""

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import RMQ, admin

import rmq
from rmq._testing import StandaloneProcess, free_broker_port, free_port, wait_for_port, wait_until
from rmq.client.admin import Admin
from rmq.protocol.requests.namesrv import get_broker_cluster_info, parse_cluster_info

pytestmark = [pytest.mark.slow, pytest.mark.heavy(60)]

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def aadmin(*args: str) -> subprocess.CompletedProcess:
    """``admin`` off the event loop, so SDK clients in the test keep their heartbeats."""
    return await asyncio.to_thread(admin, *args)


class Daemons:
    """Two ``rmq namesrv`` processes (the first with ``-c``) and one ``rmq broker`` registered
    with both."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.ports = [free_port(), free_port()]
        self.broker_port = free_broker_port()
        self.conf = tmp_path / "namesrv.conf"
        self.conf.write_text(f"# namesrv 1\nlistenPort={self.ports[0]}\nmaxTopics=100000\n")
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def namesrv(self) -> str:
        return ";".join(f"127.0.0.1:{p}" for p in self.ports)

    def start_namesrv(self, i: int) -> None:
        args = ["namesrv", "-c", str(self.conf)] if i == 0 else ["namesrv", "--port", str(self.ports[1])]
        with open(self.tmp / f"ns{i}.log", "a") as log:
            self.procs[f"ns{i}"] = subprocess.Popen(RMQ + args, stdout=log, stderr=subprocess.STDOUT)
        assert wait_for_port("127.0.0.1", self.ports[i])

    def start(self) -> "Daemons":
        self.start_namesrv(0)
        self.start_namesrv(1)
        with open(self.tmp / "broker.log", "a") as log:
            self.procs["broker"] = subprocess.Popen(
                RMQ
                + [
                    "broker",
                    f"--namesrvAddr={self.namesrv}",
                    f"--listenPort={self.broker_port}",
                    f"--storePathRootDir={self.tmp / 'store'}",
                    "--mappedFileSizeCommitLog=4194304",
                    "--mappedFileSizeConsumeQueue=60000",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        assert wait_for_port("127.0.0.1", self.broker_port)
        return self

    def stop(self, name: str) -> int:
        p = self.procs.pop(name)
        p.send_signal(signal.SIGINT)
        return p.wait(20)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)


@pytest.fixture
def daemons(tmp_path):
    d = Daemons(tmp_path).start()
    try:
        yield d
    finally:
        d.stop_all()


async def test_namesrv_config_printed_updated_persisted_and_reread(daemons):
    ns1 = f"127.0.0.1:{daemons.ports[0]}"
    r = await aadmin("getNamesrvConfig", "-n", daemons.namesrv)
    assert r.returncode == 0, r.stderr
    assert f"============{ns1}============" in r.stdout
    assert f"{'maxTopics':<50}=  100000" in r.stdout.splitlines()

    r = await aadmin("updateNamesrvConfig", "-n", ns1, "-k", "maxTopics", "-v", "4321")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"update name server config success![{ns1}]\nmaxTopics : 4321\n"
    assert daemons.conf.read_text() == f"# namesrv 1\nlistenPort={daemons.ports[0]}\nmaxTopics=4321\n"

    r = await aadmin("updateNamesrvConfig", "-n", ns1, "-k", "listenPort", "-v", "1")
    assert r.returncode == 1 and "cannot be changed while the name server runs" in r.stderr
    r = await aadmin("updateNamesrvConfig", "-n", ns1, "-k", "configStorePath", "-v", "/tmp/elsewhere")
    assert r.returncode == 1 and "Can not update config in black list." in r.stderr
    r = await aadmin("updateNamesrvConfig", "-n", ns1, "-k", "maxTopics")
    assert r.returncode == 2 and "-v" in r.stderr

    assert daemons.stop("ns0") == 0
    daemons.start_namesrv(0)  # rereads the file
    r = await aadmin("getNamesrvConfig", "-n", ns1)
    assert f"{'maxTopics':<50}=  4321" in r.stdout.splitlines(), r.stdout


async def test_wipe_and_add_write_perm_on_every_name_server(daemons):
    ns = daemons.namesrv
    broker_addr = f"127.0.0.1:{daemons.broker_port}"
    async with Admin(ns) as a:

        async def registered_with_both():
            for addr in a.namesrv_addrs:
                info = await a._call(addr, get_broker_cluster_info(), parse_cluster_info)
                if "broker-a" not in info.broker_addr_table:
                    return False
            return True

        await wait_until(registered_with_both, what="the broker registered with both name servers", timeout=30)
    r = await aadmin("updateTopic", "-n", ns, "-t", "WipeCli", "-b", broker_addr, "-r", "2", "-w", "2")
    assert r.returncode == 0, r.stderr

    r = await aadmin("wipeWritePerm", "-n", ns, "-b", "broker-a")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.rsplit(",", 1)[0] for line in lines] == [
        f"wipe write perm of broker[broker-a] in name server[127.0.0.1:{p}] OK" for p in daemons.ports
    ]
    assert all(int(line.rsplit(",", 1)[1]) > 1 for line in lines)
    for p in daemons.ports:  # both name servers route WipeCli read-only
        route = json.loads((await aadmin("topicRoute", "-n", f"127.0.0.1:{p}", "-t", "WipeCli")).stdout)
        assert [q["perm"] for q in route["queueDatas"]] == [4]
    async with rmq.Producer(ns, "PG_WipeCli") as producer:
        with pytest.raises(rmq.RMQError):
            await producer.send(rmq.Message("WipeCli", b"refused"))

    r = await aadmin("addWritePerm", "-n", ns, "-b", "broker-a")
    assert r.returncode == 0 and r.stdout.count("OK") == 2, r.stderr
    async with rmq.Producer(ns, "PG_WipeCli2") as producer:
        assert (await producer.send(rmq.Message("WipeCli", b"ok"))).status == rmq.SendStatus.SEND_OK

    # one name server down: reported per name server, exit 1
    assert daemons.stop("ns1") == 0
    r = await aadmin("wipeWritePerm", "-n", ns, "-b", "broker-a")
    assert r.returncode == 1
    assert f"in name server[127.0.0.1:{daemons.ports[0]}] OK" in r.stdout
    assert f"wipe write perm of broker[broker-a] in name server[127.0.0.1:{daemons.ports[1]}] Failed" in r.stdout


async def test_kv_config_commands(daemon):
    ns = daemon.namesrv_addr
    r = await aadmin("updateKvConfig", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "-k", "KvT", "-v", "broker-a:2")
    assert r.returncode == 0 and r.stdout == "create or update kv config to namespace success.\n", r.stderr
    async with Admin(ns) as a:
        assert await a.get_kv_config("ORDER_TOPIC_CONFIG", "KvT") == "broker-a:2"
        r = await aadmin("deleteKvConfig", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "-k", "KvT")
        assert r.returncode == 0 and r.stdout == "delete kv config from namespace success.\n"
        assert await a.get_kv_config("ORDER_TOPIC_CONFIG", "KvT") is None
    # standalone keeps the KV config with its store
    assert json.loads((Path(daemon.store_dir) / "namesrv" / "kvConfig.json").read_text()) == {"configTable": {}}
    r = await aadmin("updateKvConfig", "-n", ns, "-s", "NS", "-k", "k")
    assert r.returncode == 2 and "-v" in r.stderr


async def test_delete_sub_group_from_a_cluster_with_its_offsets_and_topics(daemon):
    ns, addr = daemon.namesrv_addr, daemon.broker_addr
    assert (await aadmin("updateTopic", "-n", ns, "-t", "DelGCli", "-b", addr, "-r", "1", "-w", "1")).returncode == 0
    async with rmq.Producer(ns, "PG_DelGCli") as p:
        for i in range(2):
            await p.send(rmq.Message("DelGCli", b"%d" % i))
    got = []

    async def handler(msg):
        got.append(msg.body)

    c = rmq.PushConsumer(ns, "CG_DelGCli", handler=handler, consume_from_where=FIRST)
    c.subscribe("DelGCli", "*")
    async with c:
        await wait_until(lambda: len(got) == 2, what="2 messages consumed")
    async with Admin(ns) as a:
        await wait_until(lambda: _has_offsets(a, addr), what="the offsets committed")
        assert "%RETRY%CG_DelGCli" in (await aadmin("topicList", "-n", ns)).stdout.split()

        r = await aadmin("deleteSubGroup", "-n", ns, "-g", "CG_DelGCli", "-c", "DefaultCluster", "-r", "true")
        assert r.returncode == 0, r.stderr
        assert r.stdout == (
            f"delete subscription group [CG_DelGCli] from broker [{addr}] in cluster [DefaultCluster] success.\n"
        )
        assert not await _has_offsets(a, addr)
        topics = (await aadmin("topicList", "-n", ns)).stdout.split()
        assert "%RETRY%CG_DelGCli" not in topics and "DelGCli" in topics

    r = await aadmin("deleteSubGroup", "-n", ns, "-g", "CG_other", "-b", addr)
    assert r.returncode == 0 and r.stdout == f"delete subscription group [CG_other] from broker [{addr}] success.\n"
    r = await aadmin("deleteSubGroup", "-n", ns, "-g", "CG_other")
    assert r.returncode == 2 and "-b/--brokerAddr" in r.stderr
    r = await aadmin("deleteSubGroup", "-n", ns, "-g", "CG_other", "-b", addr, "-r", "maybe")
    assert r.returncode == 2 and "-r/--removeOffset" in r.stderr


async def _has_offsets(a: Admin, addr: str) -> bool:
    return any(k.endswith("@CG_DelGCli") for k in await a.get_all_consumer_offset(addr))


async def test_query_cq_prints_the_units_of_sent_messages(daemon):
    ns, addr = daemon.namesrv_addr, daemon.broker_addr
    assert (await aadmin("updateTopic", "-n", ns, "-t", "CqCli", "-b", addr, "-r", "1", "-w", "1")).returncode == 0
    async with rmq.Producer(ns, "PG_CqCli") as p:
        for i in range(4):
            await p.send(rmq.Message("CqCli", b"x" * (10 + i), tags="TagQ"))
    async with Admin(ns) as a:
        body = await wait_until(lambda: _cq(a, addr), what="4 units dispatched")
    r = await aadmin("queryCq", "-n", ns, "-t", "CqCli", "-q", "0", "-i", "1", "-c", "2")
    assert r.returncode == 0, r.stderr
    rule = "======================================"
    u1, u2 = body.queue_data[1], body.queue_data[2]
    assert r.stdout == (
        f"Queue data: \nmax: 4, min: 0\n{rule}\n"
        f"idx: 1\nConsumeQueueData{{physicOffset={u1.physic_offset}, physicSize={u1.physic_size}, "
        f"tagsCode={u1.tags_code}, extendDataJson='null', bitMap='null', eval=false, msg='null'}}\n{rule}\n"
        f"idx: 2\nConsumeQueueData{{physicOffset={u2.physic_offset}, physicSize={u2.physic_size}, "
        f"tagsCode={u2.tags_code}, extendDataJson='null', bitMap='null', eval=false, msg='null'}}\n{rule}\n"
    )
    assert u2.physic_size == u1.physic_size + 1
    r = await aadmin("queryCq", "-n", ns, "-t", "CqCli", "-q", "0", "-i", "0", "-b", addr, "-g", "CG_nobody")
    assert "Filter data: \nCG_nobody@CqCli is not online!" in r.stdout and r.stdout.count("idx: ") == 4
    r = await aadmin("queryCq", "-n", ns, "-t", "CqCli", "-q", "3", "-i", "0", "-b", addr)
    assert r.returncode == 1 and "3@CqCli is not exist!" in r.stderr
    r = await aadmin("queryCq", "-n", ns, "-t", "CqCli", "-q", "0")
    assert r.returncode == 2 and "-i" in r.stderr


async def _cq(a: Admin, addr: str):
    body = await a.query_consume_queue(addr, "CqCli", 0, 0)
    return body if body.queue_data and len(body.queue_data) == 4 else None


async def test_delete_expired_commit_log_and_clean_expired_cq(tmp_path):
    """fileReservedTime=0 and deleteWhen at an hour that is not now: only deleteExpiredCommitLog
    makes the broker's clean runs delete the full CommitLog files; cleanExpiredCQ then drops the
    queue whose messages all went with them."""
    not_now = str((time.localtime().tm_hour + 12) % 24)
    with StandaloneProcess(
        tmp_path / "store",
        [
            "--mappedFileSizeCommitLog=65536",
            "--fileReservedTime=0",
            f"--deleteWhen={not_now}",
            "--cleanResourceInterval=200",
        ],
    ) as d:
        ns, addr = d.namesrv_addr, d.broker_addr
        for t in ("OldCli", "NewCli"):
            assert (await aadmin("updateTopic", "-n", ns, "-t", t, "-b", addr, "-r", "1", "-w", "1")).returncode == 0
        async with rmq.Producer(ns, "PG_Old") as p:
            for _ in range(40):
                await p.send(rmq.Message("OldCli", b"o" * 4000))
            for _ in range(10):
                await p.send(rmq.Message("NewCli", b"n" * 4000))
        commitlog = tmp_path / "store" / "commitlog"
        files = sorted(commitlog.iterdir())
        assert len(files) >= 3
        async with Admin(ns) as a:
            assert (await a.query_consume_queue(addr, "OldCli", 0, 0)).min_queue_index == 0
            r = await aadmin("deleteExpiredCommitLog", "-n", ns)
            assert r.returncode == 0 and r.stdout == "success\n", r.stderr
            await wait_until(lambda: not files[0].exists(), what="the first CommitLog file deleted", timeout=30)

            r = await aadmin("cleanExpiredCQ", "-n", ns, "-b", addr)
            assert r.returncode == 0 and r.stdout == "success\n", r.stderr
            r = await aadmin("queryCq", "-n", ns, "-t", "OldCli", "-q", "0", "-i", "0", "-b", addr)
            assert r.returncode == 1 and "0@OldCli is not exist!" in r.stderr
            assert (await a.query_consume_queue(addr, "NewCli", 0, 0)).max_queue_index == 10
            r = await aadmin("cleanExpiredCQ", "-n", ns, "-c", "NoSuchCluster")
            assert r.returncode == 1 and "NoSuchCluster" in r.stderr
