"""Background services: short polling, periodic offset persistence, late name server."""

import asyncio
import time

import msgpack
import pytest
from broker_support import Env, decode_records

from rmq._testing import free_port, run_broker, run_namesrv, run_standalone, wait_until
from rmq.config import NamesrvConfig
from rmq.namesrv.controller import NamesrvController
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient


async def test_short_polling_holds_one_second(tmp_path):
    async with run_standalone(tmp_path / "s", long_polling_enable=False) as (ns, broker):
        env = Env(ns, broker, RemotingClient())
        try:
            await env.create_topic("SP", 1)
            t0 = time.monotonic()
            resp = await env.pull("SP", sys_flag=6, suspend_ms=15000)
            took = time.monotonic() - t0
            # the short poll's 1 s, not the 15 s asked (the upper bound leaves room for a busy machine)
            assert resp.code == ResponseCode.PULL_NOT_FOUND and 0.9 <= took < 10.0
            # a message arriving during the hold still wakes it early
            pull = asyncio.ensure_future(env.pull("SP", sys_flag=6, suspend_ms=15000))
            await wait_until(lambda: broker.pull_request_hold_service.held_count == 1, what="the pull to be held")
            await env.send("SP", b"m")
            resp = await asyncio.wait_for(pull, 3)
            assert [r.body for r in decode_records(resp.body_bytes())] == [b"m"]
        finally:
            await env.client.close()


async def test_consumer_offsets_persisted_periodically(tmp_path):
    async with run_standalone(tmp_path / "s", flush_consumer_offset_interval=100) as (ns, broker):
        env = Env(ns, broker, RemotingClient())
        try:
            await env.create_topic("T", 4)  # offsets are only kept for existing queues
            await env.call(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "PG", "topic": "T", "queueId": 2, "commitOffset": "42"},
            )
            path = tmp_path / "s" / "config" / "consumerOffset.msgpack"

            def persisted():
                if not path.exists():
                    return False
                data = msgpack.unpackb(path.read_bytes(), strict_map_key=False)
                return data["offsetTable"].get("T@PG", {}).get(2) == 42

            await wait_until(persisted, what="offset 42 of T@PG queue 2 in consumerOffset.msgpack")
        finally:
            await env.client.close()


async def test_broker_started_before_its_name_server_registers_soon(tmp_path, caplog):
    port = free_port()
    async with run_broker(tmp_path / "s", namesrv=f"127.0.0.1:{port}"):
        # first registration fails: nobody listens yet
        await wait_until(
            lambda: any(f"127.0.0.1:{port}" in r.getMessage() for r in caplog.records),
            what="a warning about the failed registration",
        )
        ns = NamesrvController(NamesrvConfig(listen_port=port))
        await ns.start()
        client = RemotingClient()
        try:

            async def routed():
                return (await client.invoke(ns.address, _route("TBW102"))).code == ResponseCode.SUCCESS

            await wait_until(routed, what="the broker's registration with the late name server")
        finally:
            await client.close()
            await ns.shutdown()


async def test_broker_shutdown_unregisters_and_answers_held_pulls(tmp_path):
    async with run_namesrv() as ns:
        client = RemotingClient()
        try:
            async with run_broker(tmp_path / "s", namesrv=ns) as broker:
                env = Env(ns, broker, client)
                await env.create_topic("SD", 1)
                pull = asyncio.ensure_future(env.pull("SD", sys_flag=6, suspend_ms=15000))
                await wait_until(lambda: broker.pull_request_hold_service.held_count == 1, what="the pull to be held")
            resp = await asyncio.wait_for(pull, 3)  # answered at shutdown, not after 15 s
            assert resp.code == ResponseCode.PULL_NOT_FOUND
            resp = await client.invoke(ns.address, _route("SD"))
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()


async def test_second_broker_on_a_locked_store_fails_cleanly(tmp_path):
    from rmq.errors import StoreError

    async with run_broker(tmp_path / "s") as first:
        try:
            async with run_broker(tmp_path / "s"):
                raise AssertionError("a second broker opened a locked store")
        except StoreError as e:
            assert "locked" in str(e)
        # the first one still serves
        env = Env(None, first, RemotingClient())
        try:
            assert (await env.create_topic("StillUp", 1)).code == ResponseCode.SUCCESS
        finally:
            await env.client.close()


def _route(topic):
    from rmq.protocol.command import RemotingCommand

    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


@pytest.mark.slow
async def test_heartbeat_not_delayed_by_a_silent_name_server(tmp_path):
    """A name server that accepts but never answers must not hold the heartbeat reply past
    the C++ client's 3 s timeout (the %RETRY% topic registration runs in the background)."""
    import json

    async def black_hole(reader, writer):
        await reader.read(-1)

    hole = await asyncio.start_server(black_hole, "127.0.0.1", 0)
    port = hole.sockets[0].getsockname()[1]
    try:
        async with run_broker(tmp_path / "s", namesrv=f"127.0.0.1:{port}") as broker:
            env = Env(None, broker, RemotingClient())
            try:
                body = {
                    "clientID": "c1",
                    "consumerDataSet": [
                        {"groupName": "GSilent", "consumeType": 1, "messageModel": 1, "subscriptionDataSet": []}
                    ],
                }
                t0 = time.monotonic()
                resp = await env.call(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())
                assert resp.code == ResponseCode.SUCCESS
                assert time.monotonic() - t0 < 2.9
                assert broker.topic_config_manager.select_topic_config("%RETRY%GSilent") is not None
            finally:
                await env.client.close()
    finally:
        hole.close()
        await hole.wait_closed()


def _awaiting(task: asyncio.Task) -> list[str]:
    """The chain of coroutines ``task`` is suspended in (Task.get_stack shows only the outer one)."""
    names, coro = [], task.get_coro()
    while coro is not None:
        names.append(getattr(coro, "__name__", type(coro).__name__))
        coro = getattr(coro, "cr_await", None)
    return names


async def test_schedule_and_transaction_loops_end_on_a_cancel_that_arrives_with_their_wakeup(tmp_path):
    """Their loops wait for a wake-up or a timeout; a cancel arriving in the same loop iteration
    as the wake-up must end them (Python 3.11's wait_for lost it and the loop ran on, so a stop
    that cancels could wait forever)."""
    async with run_standalone(tmp_path / "s") as (_ns, broker):
        sched, trans = broker.schedule_service, broker.transaction_service
        for task, wake in ((sched._task, sched._wakeup), (trans._task, trans._kick)):
            assert task is not None and not task.done()
            await wait_until(
                lambda t=task: "wait_event" in _awaiting(t), what="the service loop to wait for its wake-up"
            )
            wake.set()
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=10)
            assert task in done and task.cancelled(), task
