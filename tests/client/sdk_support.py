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
