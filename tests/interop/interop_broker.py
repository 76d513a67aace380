"""The interop tests' handle on a running ``rmq standalone`` (a module of its own, not the
conftest: several test directories have a ``conftest.py``, and ``from conftest import`` gets
whichever was imported first)."""

import asyncio
import json

import _common as bench_common  # bench/ (on pytest's pythonpath): protocol helpers shared with the bench harness
import pytest

from rmq._testing import StandaloneProcess, wait_until, wait_until_sync
from rmq.remoting.client import RemotingClient


class Broker:
    """A running ``rmq standalone`` (``rmq._testing.StandaloneProcess``); clients get ``namesrv``."""

    def __init__(self, proc: StandaloneProcess):
        self.proc = proc
        self.namesrv = proc.namesrv_addr
        self.broker_addr = proc.broker_addr
        self.pid = proc.pid

    def check_alive(self) -> None:
        if self.proc.proc.poll() is not None:
            pytest.fail(f"rmq standalone died (exit {self.proc.proc.returncode}):\n{self.log_tail(60)}", pytrace=False)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.proc.log_text().splitlines()[-lines:])

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """UPDATE_AND_CREATE_TOPIC through the protocol (ali-ons has no TBW102 fallback)."""

        async def go():
            client = RemotingClient([self.namesrv])
            try:
                await bench_common.ensure_topic(client, topic, queues)
            finally:
                await client.close()

        asyncio.run(go())

    def wait_for_members(self, group: str, count: int, timeout: float = 20.0) -> list[str]:
        """Poll GET_CONSUMER_LIST_BY_GROUP (38) until ``group`` has ``count`` members; return their ids."""
        from rmq.protocol.codes import RequestCode
        from rmq.protocol.command import RemotingCommand

        async def go():
            client = RemotingClient([self.namesrv])
            ids: list[str] = []

            async def enough():
                nonlocal ids
                resp = await client.invoke(
                    self.broker_addr,
                    RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}),
                    timeout=3.0,
                )
                if resp.code == 0 and resp.body:
                    ids = json.loads(resp.body_bytes()).get("consumerIdList") or []
                return len(ids) >= count

            try:
                await wait_until(enough, timeout=timeout, interval=0.2, what=f"{count} members of {group}")
                return ids
            except AssertionError:
                pytest.fail(
                    f"group {group} has members {ids} after {timeout:.0f}s, expected {count}:\n{self.log_tail()}",
                    pytrace=False,
                )
            finally:
                await client.close()

        return asyncio.run(go())

    def held_pulls(self) -> int:
        """Pulls the broker holds right now (GET_BROKER_RUNTIME_INFO ``pullHoldRequestCount``):
        a consumer that is long-polling a queue shows here."""
        from rmq.protocol.codes import RequestCode
        from rmq.protocol.command import RemotingCommand

        async def go():
            client = RemotingClient([self.namesrv])
            try:
                resp = await client.invoke(
                    self.broker_addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=3.0
                )
                return int(json.loads(resp.body_bytes())["table"]["pullHoldRequestCount"])
            finally:
                await client.close()

        return asyncio.run(go())

    def wait_pulls_held(self, count: int, timeout: float = 20.0) -> None:
        """Until at least ``count`` pulls are held (consumers started, rebalanced and polling)."""
        try:
            wait_until_sync(
                lambda: self.held_pulls() >= count, timeout=timeout, interval=0.2, what=f"{count} held pulls"
            )
        except AssertionError:
            pytest.fail(
                f"the broker holds {self.held_pulls()} pulls after {timeout:.0f}s, expected {count}:\n"
                f"{self.log_tail()}",
                pytrace=False,
            )

    def wait_registered(self, timeout: float = 20.0) -> None:
        """Until the name server routes TBW102, i.e. the broker has registered (the C++ client
        falls back to TBW102 for new topics)."""

        async def go():
            client = RemotingClient([self.namesrv])
            last: object = None

            async def routed():
                nonlocal last
                try:
                    if await bench_common.get_route(client, "TBW102", timeout=1.0) is not None:
                        return True
                except Exception as exc:  # not up yet
                    last = exc
                else:
                    last = "TOPIC_NOT_EXIST"
                return False

            try:
                await wait_until(routed, timeout=timeout, interval=0.1, what="TBW102 routed")
            except AssertionError:
                pytest.fail(
                    f"broker not registered with the name server after {timeout:.0f}s ({last}):\n{self.log_tail()}",
                    pytrace=False,
                )
            finally:
                await client.close()

        asyncio.run(go())
