"""Reset a group's offsets while its consumers run: live C++ (PyPI rocketmq==0.4.4), ali-ons and
rmq SDK consumers all go back and receive the messages again; the connections listing shows
each client with its language (INVOKE_BROKER_TO_RESET_OFFSET, GET_CONSUMER_CONNECTION_LIST).

The C++ core reads the reset from RESET_CONSUMER_CLIENT_OFFSET in Java's ResetOffsetBodyForC
form; ali-ons has no handler for that request, so it is moved by the broker's answer to its
next pull of each queue (PULL_OFFSET_MOVED to the reset offset)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading

import interop_support as support
import pytest

import rmq
from rmq._testing import wait_until_sync
from rmq.client.admin import Admin
from rmq.errors import RMQError

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

QUEUES = 4
OLD = 8


class Lines:
    """Reads a driver's stdout as it comes (the test waits on deliveries while it runs)."""

    def __init__(self, driver: support.Driver):
        self.driver = driver
        self.events: list[dict] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.driver.proc.stdout is not None
        for line in self.driver.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    pass

    def bodies(self) -> list[str]:
        return [e.get("body") or "" for e in list(self.events) if e.get("event") == "recv"]

    def finish(self, timeout: float = 60) -> str:
        try:
            self.driver.proc.wait(timeout)
        except subprocess.TimeoutExpired:  # a driver that hangs is killed and reported
            self.driver.proc.kill()
        self._thread.join(10)
        err = self.driver.proc.stderr.read() if self.driver.proc.stderr else ""
        return f"$ {' '.join(self.driver.argv)}\nexit {self.driver.proc.returncode}\n{err[-3000:]}"


class SdkConsumer:
    """An rmq SDK push consumer on its own event loop in a thread."""

    def __init__(self, namesrv: str, group: str, topic: str):
        self.bodies: list[str] = []
        self.client_id: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()  # the loop and its stop event exist
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(namesrv, group, topic),), daemon=True)
        self._thread.start()

    async def _main(self, namesrv: str, group: str, topic: str) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()

        async def handler(msg):
            self.bodies.append(msg.body.decode())

        c = rmq.PushConsumer(
            namesrv, group, handler=handler, consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        c.subscribe(topic, "*")
        async with c:
            self.client_id = c.client_id
            await self._stopping.wait()

    def stop(self) -> None:
        if self._ready.wait(30):
            assert self._loop is not None and self._stopping is not None
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(30)


def wait_for(pred, timeout: float, what: str, detail=lambda: "") -> None:
    """``wait_until_sync`` with the broker's log (``detail()``) in the failure."""
    try:
        wait_until_sync(pred, timeout, interval=0.2, what=what)
    except AssertionError as e:
        pytest.fail(f"{e}\n{detail()}", pytrace=False)


def produce(namesrv: str, topic: str, bodies: list[str]) -> None:
    async def go():
        async with rmq.Producer(namesrv, "PID_reset_interop") as p:
            for i, body in enumerate(bodies):
                await p.send(rmq.Message(topic, body.encode()), queue=rmq.MessageQueue(topic, "broker-a", i % QUEUES))

    asyncio.run(go())


def admin_call(namesrv: str, fn):
    async def go():
        async with Admin(namesrv, timeout=10) as admin:
            return await fn(admin)

    return asyncio.run(go())


def test_reset_offset_moves_live_cpp_ons_and_sdk_consumers(real_clients, broker, names, tmp_path):
    topic = names.topic
    broker.create_topic(topic, QUEUES)
    old = [f"{names.marker}old-{i}" for i in range(OLD)]
    produce(broker.namesrv, topic, old)
    groups = {"cpp": names.group + "_cpp", "ons": names.group + "_ons", "sdk": names.group + "_sdk"}
    expect = str(OLD + 1)  # the old messages and one final one (distinct bodies), then the drivers stop
    cpp = Lines(
        support.cpp(
            real_clients,
            tmp_path / "cpp",
            "push",
            "--namesrv",
            broker.namesrv,
            "--group",
            groups["cpp"],
            "--topic",
            topic,
            "--expect",
            expect,
            "--marker",
            names.marker,
            "--timeout",
            "150",
            timeout=170,
        )
    )
    ons = Lines(
        support.ons(
            real_clients,
            tmp_path / "ons",
            "consume",
            "--namesrv",
            broker.namesrv,
            "--group",
            groups["ons"],
            "--topic",
            topic,
            "--expect",
            expect,
            "--marker",
            names.marker,
            "--from-first",
            "--timeout",
            "150",
            timeout=170,
        )
    )
    sdk = SdkConsumer(broker.namesrv, groups["sdk"], topic)
    received = {"cpp": cpp.bodies, "ons": ons.bodies, "sdk": lambda: list(sdk.bodies)}
    try:
        for name, bodies in received.items():
            wait_for(
                lambda b=bodies: set(old) <= set(b()),
                60,
                f"the {name} consumer to get the {OLD} messages",
                broker.log_tail,
            )

        def committed(group: str) -> int:
            async def go(admin: Admin) -> int:
                stats = await admin.examine_consume_stats(group, topic)
                return sum(w.consumer_offset for mq, w in stats.offset_table.items() if mq.topic == topic)

            try:
                return admin_call(broker.namesrv, go)
            except RMQError:  # no offsets yet
                return -1

        for name, group in groups.items():
            wait_for(
                lambda g=group: committed(g) == OLD, 60, f"the {name} consumer's offsets committed", broker.log_tail
            )

        # who is connected: each client with its own language
        conns = {
            name: admin_call(broker.namesrv, lambda a, g=group: a.examine_consumer_connection_info(g))
            for name, group in groups.items()
        }
        assert [c.language for c in conns["cpp"].connection_set] == ["CPP"]
        assert [c.language for c in conns["ons"].connection_set] == ["JAVA"]  # ali-ons says JAVA
        assert [c.client_id for c in conns["sdk"].connection_set] == [sdk.client_id]
        # the C++ core answers GET_CONSUMER_RUNNING_INFO through the broker's relay
        cpp_id = conns["cpp"].connection_set[0].client_id
        info = admin_call(broker.namesrv, lambda a: a.get_consumer_running_info(groups["cpp"], cpp_id))
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert sorted(
            (mq.queue_id, int(q["commitOffset"])) for mq, q in info.mq_table.items() if mq.topic == topic
        ) == [(q, OLD // QUEUES) for q in range(QUEUES)]
        assert "#Consumer Offset#" in info.format_string()  # C++ writes numbers as strings: still prints

        # back to the beginning, every group while its consumer runs
        for name, group in groups.items():
            table = admin_call(broker.namesrv, lambda a, g=group: a.reset_offset_by_timestamp(topic, g, 0))
            assert sorted(table.values()) == [0] * QUEUES, (name, table)

        for name, bodies in received.items():
            wait_for(
                lambda b=bodies: all(b().count(body) >= 2 for body in old),
                90,
                f"the {name} consumer to get the {OLD} messages again after the reset",
                lambda n=name: f"{n} got {received[n]()}\n{broker.log_tail()}",
            )
        produce(broker.namesrv, topic, [f"{names.marker}final"])
        # the drivers stop by themselves once they have it; the SDK consumer is stopped by the
        # test, so wait for its delivery first
        wait_for(
            lambda: f"{names.marker}final" in sdk.bodies,
            60,
            "the sdk consumer to get the final message",
            broker.log_tail,
        )
    finally:
        sdk.stop()
        cpp_report, ons_report = cpp.finish(), ons.finish()
    assert cpp.driver.proc.returncode == 0, cpp_report
    assert ons.driver.proc.returncode == 0, ons_report
    for name, bodies in received.items():
        assert f"{names.marker}final" in bodies(), name
