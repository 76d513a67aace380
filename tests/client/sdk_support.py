"""Helpers for the SDK tests (imported by the test modules). ``wait_until`` is rmq._testing's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rmq._testing import wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

__all__ = ["create_topic", "wait_until", "holds", "drain", "SilentServer", "RequestCounter"]


async def create_topic(broker_addr: str, topic: str, queues: int = 4, perm: int = 6) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker (it re-registers with the name server at once)."""
    async with RemotingClient() as rc:
        resp = await rc.invoke(
            broker_addr,
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {
                    "topic": topic,
                    "defaultTopic": "TBW102",
                    "readQueueNums": str(queues),
                    "writeQueueNums": str(queues),
                    "perm": str(perm),
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0",
                    "order": "false",
                },
            ),
            timeout=5.0,
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def holds(pred: Callable[[], object], duration: float, what: str, interval: float = 0.02) -> None:
    """Assert that ``pred`` stays true for ``duration`` seconds: the observation window of a
    "nothing more happens" check (a state wait is :func:`wait_until`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration
    while loop.time() < deadline:
        assert pred(), f"{what} stopped holding"
        await asyncio.sleep(interval)
    assert pred(), f"{what} stopped holding"


async def drain(namesrv_addr: str, topic: str, expected: int, *, group: str, timeout: float = 20.0) -> list:
    """Read ``expected`` messages of every queue of ``topic`` from offset 0 with a lite pull
    consumer (assign mode); returns them sorted by (broker, queue, offset)."""
    import rmq

    c = rmq.PullConsumer(
        namesrv_addr,
        group,
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit=False,
        instance_name=group,
    )
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


class RequestCounter:
    """Counts the requests of ``code`` a broker serves, by wrapping the processor registered
    for it (the real one still answers): ``RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)``."""

    def __init__(self, broker, code: int):
        entry = broker.server.dispatcher.processor_for(code)
        assert entry is not None, f"no processor for {code}"
        inner, pool = entry
        self.count = 0
        counter = self

        class _Counting:
            def process_request(self, conn, cmd):
                counter.count += 1
                return inner.process_request(conn, cmd)

            def reject_request(self):
                reject = getattr(inner, "reject_request", None)
                return bool(reject and reject())

        broker.server.register_processor(code, _Counting(), pool)
