"""Brokers in controller mode (rmq.broker.replicas) against a real etcd and ``rmq controller``:
registration, election, the SyncStateSet the master reports, and a failover the name server's
routes follow. In-process brokers and name server; etcd and the controller are processes."""

import asyncio
import contextlib

import pytest

import rmq
from rmq._testing import run_broker, run_namesrv, wait_until
from rmq._testing.controller import ControllerProcess
from rmq._testing.etcd import EtcdProcess, etcd_missing
from rmq.protocol.body.controller import EpochEntryCache
from rmq.protocol.codes import ResponseCode
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests.controller import get_broker_epoch_cache, get_replica_info, parse_replica_info
from rmq.protocol.requests.topic import create_topic as create_topic_request
from rmq.remoting.client import RemotingClient

pytestmark = pytest.mark.skipif(etcd_missing() is not None, reason=str(etcd_missing()))

NAME = "bc"
TOPIC = "TopicFailover"


@pytest.fixture
def controller(tmp_path, request):
    with EtcdProcess(tmp_path / "etcd") as etcd:
        ctl = ControllerProcess(
            tmp_path / "ctl",
            etcd.endpoint,
            scanNotActiveBrokerInterval=100,
            controllerHeartBeatTimeoutMills=1500,
            **getattr(request, "param", {}),
        )
        with ctl:
            yield ctl


def broker_settings(controller_addr: str, **kw):
    base = dict(
        broker_name=NAME,
        enable_controller_mode=True,
        controller_addr=controller_addr,
        broker_role="SYNC_MASTER",
        all_ack_in_sync_state_set=True,
        sync_broker_metadata_period=200,
        check_sync_state_set_period=200,
        broker_heartbeat_interval=200,
        controller_heart_beat_timeout_mills=1500,
        slave_sync_interval_ms=200,
        ha_send_heartbeat_interval=200,
        register_name_server_period=1000,
    )
    base.update(kw)
    return base


async def create_topic(addr: str, topic: str, queues: int = 4) -> None:
    async with RemotingClient() as rc:
        header = CreateTopicRequestHeader(
            topic=topic, read_queue_nums=queues, write_queue_nums=queues, topic_sys_flag=0
        )
        resp = await rc.invoke(addr, create_topic_request(header), timeout=5.0)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def test_election_sync_state_set_and_failover(tmp_path, controller):
    async with contextlib.AsyncExitStack() as stack:
        ns = await stack.enter_async_context(run_namesrv())
        settings = broker_settings(controller.addr)
        a = await stack.enter_async_context(run_broker(tmp_path / "a", ns, **settings))
        await wait_until(lambda: a.replicas.is_master, what="a elected master")
        assert a.broker_config.broker_id == 0 and a.store_role == "SYNC_MASTER"
        b_ctx = run_broker(tmp_path / "b", ns, **settings)
        b = await b_ctx.__aenter__()
        try:
            await wait_until(lambda: b.replicas.running and not b.replicas.is_master, what="b a slave")
            assert b.broker_config.broker_id == b.replicas.broker_controller_id != 0
            # b catches up, joins the SyncStateSet, and the controller agrees
            await wait_until(lambda: a.replicas.sync_state_set == {1, 2}, what="the controller's SyncStateSet {1, 2}")
            async with RemotingClient() as rc:
                h, sss = parse_replica_info(await rc.invoke(controller.addr, get_replica_info(NAME)))
                assert h.master_broker_id == 1 and sss.sync_state_set == {1, 2}
                cache = EpochEntryCache.decode((await rc.invoke(a.broker_addr, get_broker_epoch_cache())).body_bytes())
                assert [e.epoch for e in cache.epoch_list] == [h.master_epoch]
            await create_topic(a.broker_addr, TOPIC)
            async with rmq.Producer(f"127.0.0.1:{ns.port}", "PID_failover", send_timeout=10) as p:
                acked = []
                for i in range(20):
                    r = await p.send(rmq.Message(TOPIC, b"before-%d" % i))
                    assert r.status == rmq.SendStatus.SEND_OK
                    acked.append(r)
                # every SYNC acknowledgement waited for b (allAckInSyncStateSet)
                assert b.message_store.max_phy_offset >= a.message_store.max_phy_offset
                await wait_until(lambda: TOPIC in b.topic_config_manager.topic_config_table, what="topic copied")
                # the master goes away: b is elected, registers as brokerId 0, and sends go on
                await a.shutdown()
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                await wait_until(lambda: b.replicas.is_master, timeout=30, what="b elected master")
                failover = loop.time() - t0
                print(f"failover (in-process, clean stop of the master): {failover:.2f}s")
                assert b.broker_config.broker_id == 0
                for i in range(20):
                    r = await p.send(rmq.Message(TOPIC, b"after-%d" % i))
                    assert r.status == rmq.SendStatus.SEND_OK, r
        finally:
            await b_ctx.__aexit__(None, None, None)


@pytest.mark.parametrize("controller", [{"notifyBrokerRoleChanged": "false"}], indirect=True)
async def test_a_master_deposed_without_notice_stops_writing_when_it_polls(tmp_path, controller):
    """The controller elects b while a still runs (the admin's electMaster) and tells nobody:
    a, a zombie, learns the newer epoch from its GET_REPLICA_INFO poll, stops taking writes and
    follows b; b re-registers as brokerId 0 and a's id-0 route is gone."""
    from rmq.protocol.requests.controller import elect_master, parse_elect_master
    from rmq.store import MessageInner, PutMessageStatus

    async with contextlib.AsyncExitStack() as stack:
        ns = await stack.enter_async_context(run_namesrv())
        settings = broker_settings(controller.addr, sync_broker_metadata_period=300)
        a = await stack.enter_async_context(run_broker(tmp_path / "a", ns, **settings))
        await wait_until(lambda: a.replicas.is_master, what="a elected master")
        b = await stack.enter_async_context(run_broker(tmp_path / "b", ns, **settings))
        await wait_until(lambda: a.replicas.sync_state_set == {1, 2}, what="b in the SyncStateSet")
        await create_topic(a.broker_addr, TOPIC)
        async with RemotingClient() as rc:
            h, _body, elected = parse_elect_master(
                await rc.invoke(controller.addr, elect_master(NAME, 2, cluster_name="DefaultCluster", designate=True))
            )
            assert elected and h.master_broker_id == 2
        await wait_until(lambda: a.store_role == "SLAVE", timeout=20, what="the zombie a to stop writing")
        r = await a.message_store.put_message(MessageInner(TOPIC, 0, b"zombie"))
        assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
        await wait_until(lambda: b.replicas.is_master and b.broker_config.broker_id == 0, what="b master")
        await wait_until(lambda: a.broker_config.broker_id == 1, what="a registered as broker 1")

        def routes():
            bd = ns.route_info_manager.broker_addr_table.get(NAME)
            return bd is not None and bd.broker_addrs == {0: b.broker_addr, 1: a.broker_addr}

        await wait_until(routes, timeout=20, what="the name server's route: b id 0, a id 1")
        await wait_until(lambda: a.message_store.ha_client.connected, timeout=20, what="a following b")
        async with rmq.Producer(f"127.0.0.1:{ns.port}", "PID_zombie", send_timeout=10) as p:
            r = await p.send(rmq.Message(TOPIC, b"to-b"))
            assert r.status == rmq.SendStatus.SEND_OK and r.message_queue.broker_name == NAME
        await wait_until(lambda: a.message_store.max_phy_offset == b.message_store.max_phy_offset, what="a caught up")


async def test_a_master_cut_off_from_the_controller_is_replaced_and_rejoins(tmp_path, controller):
    """a stops reaching the controller (no heartbeat, no poll) but stays up and registered with
    the name server: the controller elects b, whose registration with the newer epoch takes
    brokerId 0 over from a, so clients write to b; once a reaches the controller again it
    learns the epoch, stops taking writes and follows b."""
    from rmq.store import MessageInner, PutMessageStatus

    async with contextlib.AsyncExitStack() as stack:
        ns = await stack.enter_async_context(run_namesrv())
        settings = broker_settings(controller.addr)
        a = await stack.enter_async_context(run_broker(tmp_path / "a", ns, **settings))
        await wait_until(lambda: a.replicas.is_master, what="a elected master")
        b = await stack.enter_async_context(run_broker(tmp_path / "b", ns, **settings))
        await wait_until(lambda: a.replicas.sync_state_set == {1, 2}, what="b in the SyncStateSet")
        await create_topic(a.broker_addr, TOPIC)
        a.replicas.controller_addrs = []  # cut off: its heartbeats and polls reach nobody
        a.replicas.leader = None
        await wait_until(lambda: b.replicas.is_master, timeout=30, what="b elected")

        def b_routed():
            bd = ns.route_info_manager.broker_addr_table.get(NAME)
            return bd is not None and bd.broker_addrs.get(0) == b.broker_addr

        await wait_until(b_routed, timeout=20, what="b taking brokerId 0 over from the live a")
        async with rmq.Producer(f"127.0.0.1:{ns.port}", "PID_cutoff", send_timeout=10) as p:
            r = await p.send(rmq.Message(TOPIC, b"to-b"))
            assert r.status == rmq.SendStatus.SEND_OK
        a.replicas.controller_addrs = [controller.addr]
        await wait_until(lambda: a.store_role == "SLAVE", timeout=20, what="a demoted")
        r = await a.message_store.put_message(MessageInner(TOPIC, 0, b"late"))
        assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
        await wait_until(lambda: a.message_store.max_phy_offset == b.message_store.max_phy_offset, what="a following b")


async def test_controller_mode_metrics_follow_a_failover(tmp_path):
    """The brokers' /metrics (rmq.broker.replicas.ReplicasManager.metrics) and the controller's
    in a real cluster: role, master epoch, SyncStateSet and its epoch, confirm offset, role
    changes; the master goes away and the survivor's series show the new epoch and its role."""
    from metrics_support import scrape, value

    from rmq._testing import free_port

    ctl_metrics = free_port()
    with (
        EtcdProcess(tmp_path / "etcd") as etcd,
        ControllerProcess(
            tmp_path / "ctl",
            etcd.endpoint,
            scanNotActiveBrokerInterval=100,
            controllerHeartBeatTimeoutMills=1500,
            metricsPort=ctl_metrics,
        ) as ctl,
    ):
        async with contextlib.AsyncExitStack() as stack:
            ns = await stack.enter_async_context(run_namesrv())
            a = await stack.enter_async_context(
                run_broker(tmp_path / "a", ns, **broker_settings(ctl.addr, metrics_port=free_port()))
            )
            await wait_until(lambda: a.replicas.is_master, what="a elected master")
            b_ctx = run_broker(tmp_path / "b", ns, **broker_settings(ctl.addr, metrics_port=free_port()))
            b = await b_ctx.__aenter__()
            try:
                await wait_until(lambda: a.replicas.sync_state_set == {1, 2}, what="the SyncStateSet {1, 2}")
                await create_topic(a.broker_addr, TOPIC)
                async with rmq.Producer(f"127.0.0.1:{ns.port}", "PID_metrics", send_timeout=10) as p:
                    for i in range(10):
                        assert (await p.send(rmq.Message(TOPIC, b"m-%d" % i))).status == rmq.SendStatus.SEND_OK
                end = a.message_store.max_phy_offset
                epoch = a.replicas.master_epoch
                labels_a = dict(cluster=a.broker_config.broker_cluster_name, brokerIP=a.broker_addr, broker=NAME)
                labels_b = dict(labels_a, brokerIP=b.broker_addr)

                async def b_confirmed() -> bool:
                    return value(await scrape(b.metrics.port), "rocketmq_broker_confirm_offset", **labels_b) == end

                await wait_until(b_confirmed, what="b's confirm offset at the master's end")
                sa = await scrape(a.metrics.port)
                assert value(sa, "rocketmq_broker_role", role="master", **labels_a) == 1
                assert value(sa, "rocketmq_broker_role", role="slave", **labels_a) == 0
                assert value(sa, "rocketmq_broker_master_epoch", **labels_a) == epoch
                assert value(sa, "rocketmq_broker_sync_state_set_size", **labels_a) == 2
                assert value(sa, "rocketmq_broker_sync_state_set_epoch", **labels_a) == a.replicas.sync_state_set_epoch
                assert value(sa, "rocketmq_broker_confirm_offset", **labels_a) == end
                assert value(sa, "rocketmq_broker_role_changes_total", **labels_a) == 1
                assert value(sa, "rocketmq_broker_controller_heartbeat_failures_total", controller_addr=ctl.addr) == 0
                sb = await scrape(b.metrics.port)
                assert value(sb, "rocketmq_broker_role", role="slave", **labels_b) == 1
                assert value(sb, "rocketmq_broker_role", role="master", **labels_b) == 0
                assert value(sb, "rocketmq_broker_master_epoch", **labels_b) == epoch
                assert "rocketmq_broker_sync_state_set_size" not in sb  # only the master knows it
                sc = await scrape(ctl_metrics)
                assert value(sc, "rocketmq_controller_role", address=ctl.addr) == 1
                assert value(sc, "rocketmq_controller_active_broker_num", broker_set=NAME) == 2
                assert value(sc, "rocketmq_controller_master_epoch", broker_set=NAME) == epoch
                assert (
                    value(
                        sc, "rocketmq_controller_election_total", broker_set=NAME, election_result="new_master_elected"
                    )
                    >= 1
                )
                assert value(sc, "rocketmq_controller_leader_changes_total") >= 1
                assert (
                    value(
                        sc, "rocketmq_controller_etcd_op_total", etcd_operation="put", etcd_operation_status="success"
                    )
                    >= 2
                )
                assert (
                    value(sc, "rocketmq_controller_request_latency_count", request_type="controller_elect_master") >= 1
                )
                # the master goes away: b is elected, and its series say so
                await a.shutdown()
                await wait_until(lambda: b.replicas.is_master, timeout=30, what="b elected master")

                async def b_master() -> bool:
                    s = await scrape(b.metrics.port)
                    return value(s, "rocketmq_broker_role", role="master", **labels_b) == 1

                await wait_until(b_master, what="b's role series to say master")
                sb = await scrape(b.metrics.port)
                assert value(sb, "rocketmq_broker_role", role="slave", **labels_b) == 0
                assert value(sb, "rocketmq_broker_master_epoch", **labels_b) > epoch
                assert value(sb, "rocketmq_broker_role_changes_total", **labels_b) == 2
                assert value(sb, "rocketmq_broker_sync_state_set_size", **labels_b) >= 1
                sc = await scrape(ctl_metrics)
                assert value(sc, "rocketmq_controller_master_epoch", broker_set=NAME) == b.replicas.master_epoch
            finally:
                await b_ctx.__aexit__(None, None, None)
