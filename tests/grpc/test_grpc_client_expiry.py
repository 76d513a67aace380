"""A 5.x consumer that stops heartbeating leaves the broker's consumer table by the broker's
expiry scan (``channelExpiredSeconds``), which also ends its Telemetry stream (in-process
broker, a grpc.aio client over TCP)."""

from __future__ import annotations

import asyncio

import grpc
from grpc_support import Stub

from rmq._testing import free_port, run_broker, wait_until
from rmq.broker.grpc.schema import pb


async def test_a_silent_consumer_expires_and_its_stream_ends(tmp_path):
    port = free_port()
    async with run_broker(tmp_path / "store", grpc_server_port=port, channel_expired_seconds=1.0) as broker:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = Stub(channel, "silent-consumer")
            cmd = pb.TelemetryCommand()
            cmd.settings.client_type = pb.ClientType.PUSH_CONSUMER
            cmd.settings.subscription.group.name = "GID_silent"
            entry = cmd.settings.subscription.subscriptions.add()
            entry.topic.name = "TopicSilent"
            entry.expression.expression = "*"
            stop = asyncio.Event()

            async def requests():
                yield cmd
                await stop.wait()

            call = stub.Telemetry(requests(), metadata=stub.metadata)
            try:
                first = await call.read()
                assert first.status.code == pb.Code.OK
                info = broker.consumer_manager.get_consumer_group_info("GID_silent")
                assert info is not None
                assert [ch.client_id for ch in info.channels.values()] == ["silent-consumer"]
                assert info.consume_type.name == "CONSUME_PASSIVELY"
                # no heartbeat: the scan drops it and closes its stream
                await wait_until(
                    lambda: broker.consumer_manager.get_consumer_group_info("GID_silent") is None,
                    30,
                    what="the silent consumer to expire",
                )
                ended = await asyncio.wait_for(call.read(), 30)
                assert ended is grpc.aio.EOF
            finally:
                stop.set()
                call.cancel()
