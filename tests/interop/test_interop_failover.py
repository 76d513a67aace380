"""The real C++ client (PyPI rocketmq==0.4.4) and ali-ons through an automatic failover
(docs/design.md "Controller mode"): etcd, one ``rmq controller``, a name server, and a master
and a slave of one broker name in controller mode with ``allAckInSyncStateSet``
(rmq._testing.jepsen.ControllerGroup on loopback). Each client's producer sends SYNC, one body
after another, and each client's push consumer (a group of its own) consumes the topic, while
the master is ``kill -9``ed: the slave is elected, the clients find it through the name server
without being restarted (sends fail or wait for a while, then are acknowledged again), the old
master restarts and rejoins as a slave, the clients go on, and each consumer has received every
body either producer had acknowledged. Both clients share one cluster and one failover: a
cluster of processes takes most of the test's time.

What the clients do, as seen here (the test prints it):

* the C++ producer's SYNC send in flight when the master dies waits out its send timeout
  (3 s; the core does not fail requests pending on a closed connection), then its retry reads
  the route again and goes to the new master: no send fails;
* the C++ push consumer's held pulls likewise wait out their timeout (about 30 s) before it
  pulls again, from the new master;
* ali-ons' producer fails every send until its next route poll (``pollNameServerInteval``,
  30 s by default, 10 s here), then sends to the new master.

rmq's own SDK through the same failover: tests/ha/test_ha_failover_process.py.
"""

from __future__ import annotations

import asyncio
import json
import time

import interop_support as support
import pytest

from rmq._testing import skip_or_fail, wait_until
from rmq._testing.etcd import etcd_missing
from rmq._testing.faults import Network, kill9
from rmq._testing.jepsen import ControllerGroup
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
QUEUES = 4
#: ali-ons re-reads routes every 30 s by default (pollNameServerInteval), and its producer does
#: not re-read one when a send fails: its sends fail for up to that long after a master's
#: death (29.4 s when measured with the default). 10 s keeps the test shorter.
ONS_POLL_MS = 10_000


async def _route(group: ControllerGroup, topic: str) -> dict[int, str]:
    """brokerId -> address in the name server's route of ``topic`` now."""
    resp = await group.client.invoke(
        group.namesrv_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout=3
    )
    if resp.code != 0:
        return {}
    return {int(k): v for bd in json.loads(resp.body)["brokerDatas"] for k, v in bd["brokerAddrs"].items()}


def _store_host(offset_msg_id: str) -> str:
    """The broker that wrote a message, from its offsetMsgId (Java ``MessageDecoder.decodeMessageId``:
    4 bytes of IPv4, 4 of port, 8 of CommitLog offset, in hex)."""
    ip = ".".join(str(b) for b in bytes.fromhex(offset_msg_id[:8]))
    return f"{ip}:{int(offset_msg_id[8:16], 16)}"


def _bodies(driver: support.LiveDriver, event: str) -> set[str]:
    return {e["body"] for e in driver.events(event)}


def _received(driver: support.LiveDriver, marker: str) -> set[str]:
    return {e["body"] for e in driver.events("recv") if (e.get("body") or "").startswith(marker)}


def _ack_gap(driver: support.LiveDriver) -> float:
    """The longest wait between two acknowledgements (seconds): how long the client took to
    follow the new master."""
    t = [e["t"] for e in driver.events("sent")]
    return max((b - a) / 1000 for a, b in zip(t, t[1:], strict=False))


def _recv_gap(driver: support.LiveDriver) -> float:
    t = [e["t"] for e in driver.events("recv")]
    return max((b - a) / 1000 for a, b in zip(t, t[1:], strict=False))


def _describe(*drivers: support.LiveDriver) -> str:
    out = []
    for d in drivers:
        counts: dict[str, int] = {}
        for e in d.events():
            counts[e.get("event", "?")] = counts.get(e.get("event", "?"), 0) + 1
        out.append(f"$ {' '.join(d.argv)}\n  alive {d.alive()}, events {counts}\n  stderr:\n{d.stderr()[-2000:]}")
        for p in sorted((d.home / "logs" / "rocketmq-cpp").glob("*")):
            out.append(f"--- {p.name} ---\n" + "\n".join(p.read_text(errors="replace").splitlines()[-40:]))
    return "\n".join(out)


async def test_cpp_client_and_ali_ons_produce_and_consume_through_a_failover(real_clients, names, tmp_path):
    why = etcd_missing()
    if why is not None:
        skip_or_fail(why)
    topic, marker = names.topic, names.marker
    seen: dict[str, object] = {}
    t0 = time.monotonic()

    def phase(name: str) -> None:
        seen[f"at_{name}_s"] = round(time.monotonic() - t0, 1)

    def clients(namesrv: str, what: str) -> list[support.LiveDriver]:
        common = ("--namesrv", namesrv, "--topic", topic, "--marker", marker)
        if what == "consumers":
            return [
                support.cpp_live(real_clients, tmp_path / "cpp-c", "push", *common, "--group", f"{names.group}_cpp"),
                support.ons_live(
                    real_clients,
                    tmp_path / "ons-c",
                    "consume",
                    *common,
                    *("--group", f"{names.group}_ons", "--from-first", "--timeout", "600"),
                    *("--poll-namesrv-ms", str(ONS_POLL_MS)),
                ),
            ]
        return [
            support.cpp_live(
                real_clients,
                tmp_path / "cpp-p",
                "stream",
                *("--namesrv", namesrv, "--topic", topic, "--marker", f"{marker}cpp-"),
                *("--group", f"{names.producer_group}_cpp"),
            ),
            support.ons_live(
                real_clients,
                tmp_path / "ons-p",
                "stream",
                *("--namesrv", namesrv, "--topic", topic, "--marker", f"{marker}ons-"),
                *("--group", f"{names.producer_group}_ons", "--poll-namesrv-ms", str(ONS_POLL_MS)),
            ),
        ]

    drivers: list[support.LiveDriver] = []
    with Network.create(isolated=False) as net:
        async with ControllerGroup(tmp_path / "cluster", net, controllers=1, brokers=2, topic=topic) as group:
            phase("cluster_up")
            old, new = group.master(), group.slaves()[0]
            try:
                consumers = clients(group.namesrv_addr, "consumers")
                drivers += consumers

                async def polling() -> bool:
                    # both consumers rebalanced and long-poll every queue (the C++ consumer
                    # starts at the queues' ends: it must poll before the first send)
                    rt = await group.runtime(old)
                    return int(rt.get("pullHoldRequestCount", "0")) >= 2 * QUEUES

                await wait_until(polling, 60, 0.1, "both consumers long-polling the master")
                producers = clients(group.namesrv_addr, "producers")
                drivers += producers
                cpp_p, ons_p = producers

                async def acks(n: int) -> bool:
                    for p in producers:
                        if not p.alive():
                            raise AssertionError(f"a producer ended:\n{_describe(p)}")
                    return all(len(p.events("sent")) >= n for p in producers)

                await wait_until(lambda: acks(30), 60, 0.1, "30 acknowledged sends of each before the kill")
                phase("kill")
                killed_at = time.monotonic()
                kill9(old)

                async def elected() -> bool:
                    info = await group.replica_info()
                    return info is not None and info[0].master_address == new.addr

                await wait_until(elected, 60, 0.1, "the slave elected by the controller")

                async def routed() -> bool:
                    return (await _route(group, topic)).get(0) == new.addr

                await wait_until(routed, 60, 0.1, "the route naming the new master")
                seen["elected_and_routed_s"] = round(time.monotonic() - killed_at, 2)
                # the clients find the new master by themselves: sends are acknowledged again
                counts = [len(p.events("sent")) for p in producers]

                async def acked_again() -> bool:
                    await acks(0)
                    return all(len(p.events("sent")) >= c + 30 for p, c in zip(producers, counts, strict=True))

                await wait_until(acked_again, 120, 0.1, "30 sends of each acknowledged by the new master")
                phase("followed")
                # the old master restarts and rejoins as a slave of the new one
                await old.astart()
                await wait_until(group.whole, 90, 0.1, "the old master back in the SyncStateSet")
                phase("rejoined")
                assert group.master() is new
                assert (await group.runtime(old))["brokerRole"] == "SLAVE"
                route = await _route(group, topic)
                assert route.get(0) == new.addr and old.addr in route.values(), route
                assert [bid for bid, a in route.items() if a == old.addr] != [0], route
                counts = [len(p.events("sent")) for p in producers]
                await wait_until(acked_again, 60, 0.1, "30 more sends of each with the old master a slave")
                # ali-ons reports the offsetMsgId: the writer was the new master, not the old
                writers = {_store_host(e["msg_id"]) for e in ons_p.events("sent")[counts[1] :]}
                assert writers == {new.addr}, writers
                for p in producers:
                    result = await asyncio.to_thread(p.result)
                    assert result.returncode == 0, _describe(p)
                phase("producers_stopped")
                acked = _bodies(cpp_p, "sent") | _bodies(ons_p, "sent")
                seen["cpp_acked"], seen["cpp_failed"] = len(_bodies(cpp_p, "sent")), len(_bodies(cpp_p, "send_error"))
                seen["ons_acked"], seen["ons_failed"] = len(_bodies(ons_p, "sent")), len(_bodies(ons_p, "send_error"))
                errors = ons_p.events("send_error")
                seen["ons_last_error"] = errors[-1]["error"][:120] if errors else None
                seen["cpp_ack_gap_s"], seen["ons_ack_gap_s"] = _ack_gap(cpp_p), _ack_gap(ons_p)
                # every acknowledged body reaches each consumer (a failed one may or may not)

                def missing() -> dict[str, set[str]]:
                    return {c.argv[2]: acked - _received(c, marker) for c in consumers}

                try:
                    await wait_until(
                        lambda: not any(missing().values()), 120, 0.2, "every acknowledged body consumed by both"
                    )
                except AssertionError:
                    lost = {k: (len(v), sorted(v)[:5]) for k, v in missing().items()}
                    raise AssertionError(f"acknowledged bodies never consumed: {lost}\n{_describe(*drivers)}") from None
                phase("consumed")
                seen["cpp_recv_gap_s"], seen["ons_recv_gap_s"] = (_recv_gap(c) for c in consumers)
            finally:
                for d in drivers:
                    if d.alive():
                        await asyncio.to_thread(d.result)
    print(f"\nthe C++ client and ali-ons through a master kill -9: {seen}")
