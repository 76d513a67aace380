"""Helpers for the SDK tests (imported by the test modules)."""
from __future__ import annotations

import asyncio

from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.codes import RequestCode, ResponseCode


async def create_topic(broker_addr: str, topic: str, queues: int = 4, perm: int = 6) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker (it re-registers with the name server at once)."""
    async with RemotingClient() as rc:
        resp = await rc.invoke(broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
            "writeQueueNums": str(queues), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false"}), timeout=5.0)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def wait_until(pred, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    """Poll ``pred`` (sync or async) until true; fail the test with ``what`` on timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        v = pred()
        if asyncio.iscoroutine(v):
            v = await v
        if v:
            return v
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


async def drain(namesrv_addr: str, topic: str, expected: int, *, group: str, timeout: float = 20.0) -> list:
    """Read ``expected`` messages of every queue of ``topic`` from offset 0 with a lite pull
    consumer (assign mode); returns them sorted by (broker, queue, offset)."""
    import rmq

    c = rmq.PullConsumer(namesrv_addr, group, consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         auto_commit=False, instance_name=group)
    out = []
    async with c:
        c.assign(await c.fetch_message_queues(topic))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(out) < expected and loop.time() < deadline:
            out.extend(await c.poll(timeout=0.5))
    return sorted(out, key=lambda m: (m.broker_name, m.queue_id, m.queue_offset))


class SilentServer:
    """Accepts TCP connections and never answers: drives timeouts without a fake broker."""

    def __init__(self):
        self.server = None
        self.port = 0

    async def __aenter__(self):
        async def handle(reader, writer):
            try:
                while await reader.read(65536):
                    pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()
