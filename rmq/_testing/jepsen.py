"""A Jepsen-style checker for a broker group under faults (docs/design.md, "Fault testing").

Several rmq SDK producers send unique payloads to one topic of one broker name whose master
acknowledges only what a slave holds (``brokerRole=SYNC_MASTER``), while a randomized schedule
of faults (``rmq._testing.faults``; the seed is printed) runs against the group. Every send is
one operation of the history (:class:`Op`: payload, status, queue, offset, the broker that
wrote it, when). After the last fault is healed and the group has settled, every queue is read
end to end from offset 0 on every replica the name server's current route lists
(:func:`read_topic`), and :func:`check` compares the reads with the history:

* every acknowledged message (SEND_OK) is readable on the master at the queue and offset its
  acknowledgement gave, and each producer's acknowledged messages stand in its send order;
* no (queue, offset) holds two different messages across the reads;
* per broker name and epoch, one store address acknowledged writes (the writer comes from the
  acknowledgement's offsetMsgId, the store host that wrote it; the epoch of its CommitLog
  offset from the cluster's ``epoch_of``, 0 for a group without epochs);
* how long after each fault that took the master away writes were acknowledged again
  (p50/p99 over the rounds).

:func:`run_rounds` runs a schedule over any :class:`Cluster`: :class:`StaticPair` is a
SYNC_MASTER and its slave (``rmq broker`` processes, each in its own network namespace when the
machine allows) for the faults that need no election (:func:`static_faults`);
:class:`ControllerGroup` is controller mode (etcd, ``rmq controller`` processes and
controller-mode brokers, each in its own namespace) for the faults that need one
(:func:`failover_faults`).
"""

from __future__ import annotations

import abc
import asyncio
import bisect
import contextlib
import itertools
import os
import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from rmq._testing import wait_until
from rmq._testing.controller import ControllerProcess
from rmq._testing.etcd import EtcdProcess
from rmq._testing.faults import Network, Node, SmallDisk, kill9, pause, resume
from rmq._testing.processes import BrokerProcess
from rmq.errors import RMQError

if TYPE_CHECKING:
    from rmq.remoting import RemotingClient

__all__ = [
    "STATIC_FAULTS",
    "Cluster",
    "Fault",
    "FaultEvent",
    "Op",
    "QueueRead",
    "Read",
    "Report",
    "StaticPair",
    "Workload",
    "check",
    "make_schedule",
    "percentile",
    "read_topic",
    "run_rounds",
]

SEND_OK = "SEND_OK"


# ------------------------------------------------------------------------------- the record


@dataclass
class Op:
    """One send of the history.

    Attributes:
        producer / seq: which producer (``<workload name><index>``), its how-manieth send.
        payload: the body.
        start / end: ``time.monotonic()`` when the send began and when it was answered.
        status: ``SEND_OK``, another SendStatus name (stored on the master, not acknowledged
            as replicated), or ``error:<ExceptionType>`` (not known to be stored).
        broker_name / queue_id / queue_offset: from the answer (None without one).
        store_addr / phy_offset: the writer and the CommitLog offset, from the answer's
            offsetMsgId.
    """

    producer: str
    seq: int
    payload: bytes
    start: float
    end: float = 0.0
    status: str = "pending"
    broker_name: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    store_addr: str | None = None
    phy_offset: int | None = None

    @property
    def acked(self) -> bool:
        return self.status == SEND_OK


@dataclass
class QueueRead:
    """One queue of one replica read from offset 0: ``entries`` maps each queue offset read to
    its body; ``min_offset``/``max_offset`` are the replica's bounds (below ``min_offset``
    retention deleted the messages)."""

    min_offset: int = 0
    max_offset: int = 0
    entries: dict[int, bytes] = field(default_factory=dict)


@dataclass
class Read:
    """Every queue of a topic as one replica (``broker_id`` 0 = the master) serves it."""

    broker_name: str
    broker_id: int
    addr: str
    queues: dict[int, QueueRead] = field(default_factory=dict)
    error: str | None = None

    @property
    def count(self) -> int:
        return sum(len(q.entries) for q in self.queues.values())


@dataclass
class FaultEvent:
    """One round: the fault, what it hit, and when (``time.monotonic()``)."""

    round: int
    name: str
    detail: str = ""
    injected_at: float = 0.0
    healed_at: float = 0.0
    resumed_at: float | None = None
    master_death: bool = False
    during: dict[str, int] = field(default_factory=dict)
    """The outcomes of the sends begun between injection and heal (set by :func:`check`)."""
    acked_in_force: int = 0
    """SEND_OK answers to sends begun and answered between injection and heal (set by
    :func:`check`): while an in-sync slave is cut off, a master with ``allAckInSyncStateSet``
    must have none until the controller took the slave out of the set."""

    @property
    def recovery(self) -> float | None:
        """Seconds from the fault until a write was acknowledged again."""
        return None if self.resumed_at is None else self.resumed_at - self.injected_at


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


# ------------------------------------------------------------------------------- the check


@dataclass
class Report:
    """What :func:`check` found; ``str(report)`` is the printed report, ``ok`` the verdict."""

    seed: int | None
    ops: int
    statuses: dict[str, int]
    acked: int
    readable: int
    lost: list[Op]
    misplaced: list[tuple[Op, int]]
    aged_out: list[Op]
    conflicts: list[tuple[str, int, int, list[bytes]]]
    order_violations: list[tuple[Op, Op]]
    masters_per_epoch: dict[tuple[str, int], set[str]]
    duplicates: int
    unacked_stored: int
    reads: list[Read]
    events: list[FaultEvent]
    unread_masters: list[str]
    replica_missing: dict[str, int] = field(default_factory=dict)

    @property
    def split_brain(self) -> dict[tuple[str, int], set[str]]:
        return {k: v for k, v in self.masters_per_epoch.items() if len(v) > 1}

    @property
    def recoveries(self) -> list[float]:
        return [e.recovery for e in self.events if e.master_death and e.recovery is not None]

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.misplaced
            or self.conflicts
            or self.order_violations
            or self.split_brain
            or self.unread_masters
            or self.replica_missing
        )

    def failures(self) -> list[str]:
        out = []
        if self.lost:
            out.append(f"{len(self.lost)} acknowledged message(s) lost")
        if self.misplaced:
            out.append(f"{len(self.misplaced)} acknowledged message(s) at another offset")
        if self.conflicts:
            out.append(f"{len(self.conflicts)} offset(s) holding two different messages")
        if self.order_violations:
            out.append(f"{len(self.order_violations)} producer order violation(s)")
        if self.split_brain:
            out.append(f"two masters in one epoch: {self._masters(self.split_brain)}")
        if self.unread_masters:
            out.append(f"no master read for {', '.join(self.unread_masters)}")
        if self.replica_missing:
            out.append(
                "acknowledged message(s) missing on a replica: "
                + ", ".join(f"{a} {n}" for a, n in sorted(self.replica_missing.items()))
            )
        return out

    @staticmethod
    def _masters(m: dict[tuple[str, int], set[str]]) -> str:
        return "; ".join(f"{name} epoch {epoch}: {', '.join(sorted(a))}" for (name, epoch), a in sorted(m.items()))

    def __str__(self) -> str:
        lines = [
            f"jepsen report (seed {self.seed}): {self.ops} sends, {self.acked} acknowledged; "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        ]
        for e in self.events:
            rec = ""
            if e.master_death and e.recovery is not None:
                rec = f", writes acknowledged again {e.recovery:.2f} s after the fault"
            lines.append(
                f"  round {e.round}: {e.name} ({e.detail}), healed after {e.healed_at - e.injected_at:.2f} s{rec}"
            )
            if e.during:
                lines.append(
                    "    sends begun meanwhile: "
                    + ", ".join(f"{k} {v}" for k, v in sorted(e.during.items()))
                    + (f"; {e.acked_in_force} SEND_OK answered before the heal" if e.acked_in_force else "")
                )
        for r in self.reads:
            what = f"error: {r.error}" if r.error else f"{len(r.queues)} queues, {r.count} messages"
            lines.append(f"  read {r.broker_name} id {r.broker_id} {r.addr}: {what}")

        def mark(bad: object) -> str:
            return "FAIL" if bad else "ok"

        lines += [
            f"  acknowledged and on every replica read: {self.acked - sum(self.replica_missing.values())}"
            f" (missing: {self.replica_missing or 'none'})  {mark(self.replica_missing)}",
            f"  acknowledged and readable at their offset: {self.readable}/{self.acked}"
            f" ({len(self.lost)} lost, {len(self.misplaced)} misplaced, {len(self.aged_out)} aged out)"
            f"  {mark(self.lost or self.misplaced)}",
            f"  offsets holding two different messages: {len(self.conflicts)}  {mark(self.conflicts)}",
            f"  producer order violations: {len(self.order_violations)}  {mark(self.order_violations)}",
            f"  masters acknowledging writes per (broker name, epoch): {self._masters(self.masters_per_epoch) or '-'}"
            f"  {mark(self.split_brain)}",
        ]
        recs = self.recoveries
        if recs:
            lines.append(
                f"  writes acknowledged again after a master fault: n={len(recs)}, p50 {percentile(recs, 50):.2f} s,"
                f" p99 {percentile(recs, 99):.2f} s, max {max(recs):.2f} s"
            )
        lines.append(
            f"  allowed: {self.duplicates} payload(s) stored more than once (retries),"
            f" {self.unacked_stored} stored without an acknowledgement"
        )
        for op in self.lost[:10]:
            lines.append(
                f"  LOST {op.producer}#{op.seq} {op.broker_name} q{op.queue_id}@{op.queue_offset}"
                f" (written by {op.store_addr} at {op.phy_offset})"
            )
        for op, at in self.misplaced[:10]:
            lines.append(
                f"  MISPLACED {op.producer}#{op.seq} acknowledged at q{op.queue_id}@{op.queue_offset}, read at {at}"
            )
        for name, q, off, bodies in self.conflicts[:10]:
            lines.append(f"  CONFLICT {name} q{q}@{off}: {[b[:40] for b in bodies]}")
        for a, b in self.order_violations[:10]:
            lines.append(
                f"  ORDER {a.producer}: #{a.seq}@{a.queue_offset} then #{b.seq}@{b.queue_offset} in q{a.queue_id}"
            )
        lines.append("RESULT: " + ("OK" if self.ok else "FAILED: " + "; ".join(self.failures())))
        return "\n".join(lines)


def check(
    history: Sequence[Op],
    reads: Sequence[Read],
    *,
    events: Sequence[FaultEvent] = (),
    epoch_of: Callable[[Op], int] | None = None,
    seed: int | None = None,
) -> Report:
    """Compare the history with the reads (pure; see the module's docstring).

    Args:
        history: every send.
        reads: the replicas' reads, taken once the group settled; broker id 0 is each broker
            name's master, against which acknowledged messages are checked (lost, misplaced);
            the other replicas must hold them too.
        events: the rounds, for the recovery figures and the report.
        epoch_of: an acknowledged op's epoch (default: 0 for all, a group without epochs).
        seed: printed in the report.
    """
    statuses: dict[str, int] = defaultdict(int)
    for op in history:
        statuses[op.status.split(":")[0] if op.status.startswith("error:") else op.status] += 1
    acked = [op for op in history if op.acked]
    masters = {r.broker_name: r for r in reads if r.broker_id == 0 and r.error is None}
    # where each body stands on each master
    where: dict[tuple[str, int], dict[bytes, list[int]]] = defaultdict(lambda: defaultdict(list))
    for r in masters.values():
        for q, qr in r.queues.items():
            for off, body in qr.entries.items():
                where[(r.broker_name, q)][body].append(off)
    lost: list[Op] = []
    misplaced: list[tuple[Op, int]] = []
    aged: list[Op] = []
    readable = 0
    unread: set[str] = set()
    for op in acked:
        assert op.broker_name is not None and op.queue_id is not None and op.queue_offset is not None
        master = masters.get(op.broker_name)
        if master is None:
            unread.add(op.broker_name)
            continue
        qr = master.queues.get(op.queue_id, QueueRead())
        if qr.entries.get(op.queue_offset) == op.payload:
            readable += 1
        elif op.queue_offset < qr.min_offset:
            aged.append(op)
        elif where[(op.broker_name, op.queue_id)].get(op.payload):
            misplaced.append((op, where[(op.broker_name, op.queue_id)][op.payload][0]))
        else:
            lost.append(op)
    # one message per (broker name, queue, offset) across every read
    seen: dict[tuple[str, int, int], set[bytes]] = defaultdict(set)
    for r in reads:
        for q, qr in r.queues.items():
            for off, body in qr.entries.items():
                seen[(r.broker_name, q, off)].add(body)
    conflicts = [(n, q, off, sorted(b)) for (n, q, off), b in sorted(seen.items()) if len(b) > 1]
    # a settled replica holds every acknowledged message too (another message there is a conflict)
    replica_missing: dict[str, int] = {}
    for r in reads:
        if r.broker_id == 0 or r.error is not None:
            continue
        missing = sum(
            1
            for op in acked
            if op.broker_name == r.broker_name
            and op.queue_id is not None
            and op.queue_offset is not None
            and op.queue_offset >= r.queues.get(op.queue_id, QueueRead()).min_offset
            and op.queue_offset not in r.queues.get(op.queue_id, QueueRead()).entries
        )
        if missing:
            replica_missing[f"{r.broker_name} id {r.broker_id} {r.addr}"] = missing
    # each producer's acknowledged sends stand in its send order within a queue
    order: list[tuple[Op, Op]] = []
    by_queue: dict[tuple[str, str | None, int | None], list[Op]] = defaultdict(list)
    for op in acked:
        by_queue[(op.producer, op.broker_name, op.queue_id)].append(op)
    for ops in by_queue.values():
        ops.sort(key=lambda o: o.seq)
        for a, b in itertools.pairwise(ops):
            assert a.queue_offset is not None and b.queue_offset is not None
            if b.queue_offset <= a.queue_offset:
                order.append((a, b))
    epoch = epoch_of or (lambda op: 0)
    per_epoch: dict[tuple[str, int], set[str]] = defaultdict(set)
    for op in acked:
        assert op.broker_name is not None
        per_epoch[(op.broker_name, epoch(op))].add(op.store_addr or "?")
    dupes = 0
    for bodies in where.values():
        dupes += sum(1 for offs in bodies.values() if len(offs) > 1)
    acked_payloads = {op.payload for op in acked}
    stored = {b for bodies in where.values() for b in bodies}
    events = list(events)
    _resumed(events, history)
    return Report(
        seed=seed,
        ops=len(history),
        statuses=dict(statuses),
        acked=len(acked),
        readable=readable,
        lost=lost,
        misplaced=misplaced,
        aged_out=aged,
        conflicts=conflicts,
        order_violations=order,
        masters_per_epoch=dict(per_epoch),
        duplicates=dupes,
        unacked_stored=len(stored - acked_payloads),
        reads=list(reads),
        events=events,
        unread_masters=sorted(unread),
        replica_missing=replica_missing,
    )


def _resumed(events: list[FaultEvent], history: Sequence[Op]) -> None:
    """Set each event's ``resumed_at`` (the answer to the first acknowledged send begun after
    it) and ``during`` (the outcomes of the sends begun while it was in force)."""
    ends = sorted((op.start, op.end) for op in history if op.acked)
    starts = [s for s, _ in ends]
    for e in events:
        if e.resumed_at is None:
            i = bisect.bisect_left(starts, e.injected_at)
            if i < len(ends):
                e.resumed_at = min(end for _, end in ends[i:])
        if not e.during:
            counts: dict[str, int] = defaultdict(int)
            for op in history:
                if e.injected_at <= op.start < e.healed_at:
                    counts[op.status.split(":")[0] if op.status.startswith("error:") else op.status] += 1
                    if op.acked and op.end < e.healed_at:
                        e.acked_in_force += 1
            e.during = dict(counts)


# ------------------------------------------------------------------------------- workload


class Workload:
    """``producers`` rmq SDK producers, each sending unique payloads one after another to
    ``topic`` and recording each send in :attr:`history`.

    Args:
        namesrv_addr: the name server.
        topic: the topic (created beforehand).
        producers: how many (default 3), each its own client (own connections).
        send_timeout: seconds per send (default 5.0), retries included: longer than the
            master's ``slaveTimeout`` (3 s), so a send waiting for a lost slave is answered
            FLUSH_SLAVE_TIMEOUT rather than timing out in the client.
        retry_times: the SDK's retries (default 2, its default).
        size: the payload's length in bytes (default 64).
        name: the producers' names are ``<name><index>`` in the history (default ``"p"``;
            give two workloads whose histories are checked together different names).
    """

    def __init__(
        self,
        namesrv_addr: str,
        topic: str,
        *,
        producers: int = 3,
        send_timeout: float = 5.0,
        retry_times: int = 2,
        size: int = 64,
        name: str = "p",
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.name = name
        self.topic = topic
        self.n = producers
        self.send_timeout = send_timeout
        self.retry_times = retry_times
        self.size = size
        self.run_id = f"{os.getpid():x}{random.getrandbits(24):06x}"
        self.history: list[Op] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._changed = asyncio.Event()

    async def start(self) -> None:
        import rmq

        for i in range(self.n):
            p: rmq.Producer[Any, Any] = rmq.Producer(
                self.namesrv_addr,
                f"PG_jepsen_{self.run_id}",
                instance_name=f"jepsen-{self.run_id}-{i}",
                send_timeout=self.send_timeout,
                retry_times=self.retry_times,
            )
            await p.start()
            self._tasks.append(asyncio.create_task(self._run(i, p), name=f"jepsen-producer-{i}"))

    async def stop(self) -> None:
        self._stopping = True
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()

    async def _run(self, i: int, producer: Any) -> None:
        from rmq.common.message import decode_offset_msg_id
        from rmq.types import Message

        try:
            for seq in itertools.count():
                if self._stopping:
                    return
                head = f"{self.run_id}-{self.name}{i}-{seq:09d}-".encode()
                op = Op(f"{self.name}{i}", seq, head + b"x" * max(0, self.size - len(head)), time.monotonic())
                self.history.append(op)
                try:
                    r = await producer.send(Message(self.topic, op.payload))
                except Exception as e:  # noqa: BLE001 - any failure is an outcome of the history
                    op.end, op.status = time.monotonic(), f"error:{type(e).__name__}"
                else:
                    op.end, op.status = time.monotonic(), r.status.name
                    op.broker_name, op.queue_id, op.queue_offset = (
                        r.message_queue.broker_name,
                        r.message_queue.queue_id,
                        r.queue_offset,
                    )
                    with contextlib.suppress(ValueError):
                        ip, port, op.phy_offset = decode_offset_msg_id(r.offset_msg_id)
                        op.store_addr = f"{ip}:{port}"
                self._changed.set()
                if not op.acked:
                    # pacing, not synchronization: a refused or unreplicated send comes back at
                    # once, and a producer spinning on it would take the machine's CPU
                    await asyncio.sleep(0.05)
        finally:
            await producer.close()

    def acks_since(self, t: float) -> int:
        return sum(1 for op in self.history if op.acked and op.start >= t)

    def done_since(self, t: float) -> int:
        return sum(1 for op in self.history if op.end and op.start >= t)

    async def wait(self, pred: Callable[[], bool], timeout: float, what: str) -> None:
        """Until ``pred()``; woken by each finished send (and checked every 0.2 s)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not pred():
            if any(t.done() for t in self._tasks):
                for t in self._tasks:
                    if t.done() and t.exception() is not None:
                        raise RuntimeError(f"a producer task died waiting for {what}") from t.exception()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}: {self.summary()}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))

    async def wait_acks(self, n: int, after: float, timeout: float = 120.0, what: str = "") -> None:
        await self.wait(lambda: self.acks_since(after) >= n, timeout, what or f"{n} acknowledged sends")

    async def wait_done(self, n: int, after: float, timeout: float = 120.0, what: str = "") -> None:
        await self.wait(lambda: self.done_since(after) >= n, timeout, what or f"{n} answered sends")

    def summary(self) -> str:
        last = self.history[-self.n * 3 :]
        return f"{len(self.history)} sends so far; the last: " + ", ".join(op.status for op in last)


# ------------------------------------------------------------------------------- reading


async def _call(client: Any, addr: str, cmd: Any, timeout: float = 5.0) -> Any:
    return await client.invoke(addr, cmd, timeout=timeout)


async def read_topic(namesrv_addr: str, topic: str, *, group: str = "CG_jepsen_check") -> list[Read]:
    """Every queue of ``topic`` on every replica of the name server's current route, from
    offset 0 (or the queue's minimum) to its end, with plain PULL_MESSAGE requests (no
    consumer state involved)."""
    from rmq.client._codec import decode_messages
    from rmq.common.message import PullSysFlag
    from rmq.protocol.headers.consumer import PullMessageRequestHeader
    from rmq.protocol.requests.consumer import parse_pull, pull_message
    from rmq.protocol.requests.namesrv import get_route_info, parse_topic_route
    from rmq.remoting import RemotingClient
    from rmq.types import PullStatus

    client = RemotingClient()
    out: list[Read] = []
    try:
        route = parse_topic_route(await _call(client, namesrv_addr, get_route_info(topic)))
        if route is None:
            raise AssertionError(f"the name server has no route for {topic}")
        queues = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
        for bd in route.broker_datas:
            for bid, addr in sorted(bd.broker_addrs.items()):
                r = Read(bd.broker_name, bid, addr)
                out.append(r)
                try:
                    for q in range(queues.get(bd.broker_name, 0)):
                        qr = r.queues[q] = QueueRead()
                        offset = 0
                        while True:
                            h = PullMessageRequestHeader(
                                consumer_group=group,
                                topic=topic,
                                queue_id=q,
                                queue_offset=offset,
                                max_msg_nums=256,
                                sys_flag=PullSysFlag.FLAG_SUBSCRIPTION,
                                subscription="*",
                            )
                            reply = parse_pull(await _call(client, addr, pull_message(h), 10.0))
                            qr.min_offset, qr.max_offset = reply.min_offset, reply.max_offset
                            if reply.status is PullStatus.FOUND:
                                for m in decode_messages(reply.body, bd.broker_name):
                                    qr.entries[m.queue_offset] = m.body
                            elif reply.status is PullStatus.NO_NEW_MSG:
                                break
                            if reply.next_begin_offset >= reply.max_offset:
                                break
                            if reply.next_begin_offset <= offset:
                                raise AssertionError(f"no progress at offset {offset} of queue {q}")
                            offset = reply.next_begin_offset
                except Exception as e:  # noqa: BLE001 - a replica that cannot be read is reported
                    r.error = f"{type(e).__name__}: {e}"
    finally:
        await client.close()
    return out


# ------------------------------------------------------------------------------- faults


class Cluster(Protocol):
    """What the faults and the runner need of the group under test. ``master()`` and
    ``slaves()`` answer from what :meth:`refresh` last learnt (the runner refreshes before
    each injection and heal)."""

    net: Network
    namesrv_addr: str
    topic: str

    def master(self) -> BrokerProcess: ...

    def slaves(self) -> list[BrokerProcess]: ...

    def node_of(self, daemon: object) -> str: ...

    def disk_of(self, broker: BrokerProcess) -> SmallDisk | None: ...

    async def refresh(self) -> None: ...

    async def runtime(self, broker: BrokerProcess) -> dict[str, str]: ...

    async def whole(self) -> bool: ...

    async def settle(self, timeout: float = 120.0) -> None: ...

    def epoch_of(self, op: Op) -> int: ...

    async def describe(self) -> str: ...


@dataclass
class Fault:
    """One kind of fault: ``inject`` it, ``effective`` once the group noticed, ``heal`` it,
    ``healed`` once the group is whole again (default: the cluster's ``whole()``).

    Attributes:
        name: for the report.
        needs: what the machine must provide (``"netns"``, ``"disk"``, ``"controller"``).
        master_death: it takes the master away (the recovery figure counts it).
        during: ``"ops"``: the round lasts for some answered sends, whatever their outcome
            (no election will bring writes back); ``"acks"``: until writes are acknowledged
            again (a failover), the cluster's job to bring about.
    """

    name: str
    inject: Callable[[Cluster], Awaitable[str]]
    heal: Callable[[Cluster], Awaitable[None]]
    effective: Callable[[Cluster], Awaitable[bool]] | None = None
    healed: Callable[[Cluster], Awaitable[bool]] | None = None
    needs: frozenset[str] = frozenset()
    master_death: bool = False
    during: str = "ops"


async def _whole(c: Cluster) -> bool:
    return await c.whole()


def _broker_fault(
    name: str,
    pick: Callable[[Cluster], BrokerProcess],
    verb: str,
    act: Callable[[Cluster, BrokerProcess], Awaitable[None]],
    undo: Callable[[Cluster, BrokerProcess], Awaitable[None]],
    **kw: Any,
) -> Fault:
    """A fault done to one broker (``pick`` chooses it at injection; ``undo`` gets the same)."""
    held: list[BrokerProcess] = []

    async def inject(c: Cluster) -> str:
        b = pick(c)
        held[:] = [b]
        await act(c, b)
        return f"{verb} {b.addr}"

    async def heal(c: Cluster) -> None:
        await undo(c, held[0])

    return Fault(name, inject, heal, **{"healed": _whole, **kw})


def _the_master(c: Cluster) -> BrokerProcess:
    return c.master()


def _a_slave(c: Cluster) -> BrokerProcess:
    return c.slaves()[0]


async def _kill9(c: Cluster, b: BrokerProcess) -> None:
    kill9(b)


async def _pause(c: Cluster, b: BrokerProcess) -> None:
    pause(b)


async def _resume(c: Cluster, b: BrokerProcess) -> None:
    resume(b)


async def _restart(c: Cluster, b: BrokerProcess) -> None:
    await b.astart()


async def _stop(c: Cluster, b: BrokerProcess) -> None:
    await asyncio.to_thread(b.stop)


def _slave_partition() -> Fault:
    held: list[tuple[str, str]] = []

    async def inject(c: Cluster) -> str:
        m, s = c.node_of(c.master()), c.node_of(c.slaves()[0])
        held[:] = [(m, s)]
        c.net.partition(m, s)
        return f"slave {c.slaves()[0].addr} cut off from the master {c.master().addr}"

    async def heal(c: Cluster) -> None:
        c.net.heal(*held[0])

    return Fault("slave partitioned from the master", inject, heal, healed=_whole, needs=frozenset({"netns"}))


def _master_disk_full() -> Fault:
    held: list[BrokerProcess] = []

    async def inject(c: Cluster) -> str:
        m = c.master()
        held[:] = [m]
        disk = c.disk_of(m)
        assert disk is not None, "the master has no SmallDisk"
        disk.fill()
        return f"disk of master {m.addr} filled"

    async def effective(c: Cluster) -> bool:
        return (await c.runtime(held[0])).get("diskFull", "").lower() == "true"

    async def heal(c: Cluster) -> None:
        disk = c.disk_of(held[0])
        assert disk is not None
        disk.drain()

    async def healed(c: Cluster) -> bool:
        return (await c.runtime(held[0])).get("diskFull", "").lower() == "false" and await c.whole()

    return Fault("master disk full", inject, heal, effective, healed, needs=frozenset({"disk"}))


def static_faults() -> list[Fault]:
    """Fresh instances of the faults a static SYNC_MASTER + slave pair survives without an
    election: slave kill -9 + restart, slave SIGSTOP/SIGCONT, slave partitioned from the
    master and rejoining, master clean restart, master disk full."""
    return [
        _broker_fault("slave kill -9 + restart", _a_slave, "kill -9 slave", _kill9, _restart),
        _broker_fault("slave SIGSTOP/SIGCONT", _a_slave, "SIGSTOP slave", _pause, _resume),
        _slave_partition(),
        _broker_fault(
            "master clean restart", _the_master, "clean restart of master", _stop, _restart, master_death=True
        ),
        _master_disk_full(),
    ]


STATIC_FAULTS = [f.name for f in static_faults()]


def make_schedule(faults: Sequence[Fault], rounds: int, rng: random.Random) -> list[Fault]:
    """``rounds`` faults: each kind once in a shuffled order, again and again, so a few rounds
    already cover every kind and many rounds mix them in random orders."""
    out: list[Fault] = []
    while len(out) < rounds:
        batch = list(faults)
        rng.shuffle(batch)
        out.extend(batch)
    return out[:rounds]


async def run_rounds(
    cluster: Cluster,
    faults: Sequence[Fault],
    *,
    rounds: int,
    seed: int | None = None,
    producers: int = 3,
    ops_per_round: tuple[int, int] = (4, 12),
    round_timeout: float = 300.0,
    out: Callable[[str], None] = print,
    shuffle: bool = True,
) -> Report:
    """Run the workload through ``rounds`` faults drawn from ``faults`` (see
    :func:`make_schedule`; with ``shuffle=False`` in the order given, again and again, to
    replay a sequence), then heal, settle, read and :func:`check`. The seed (random when
    None; ``RMQ_JEPSEN_SEED`` replays one) is printed first; the report is printed last and
    returned.

    Each round: wait for writes to be acknowledged, inject, wait until the fault is effective,
    let a random number of sends in ``ops_per_round`` be answered (or, for an ``"acks"``
    fault, acknowledged), heal, wait until healed and until writes are acknowledged again.
    Every wait is for a state (a number of sends, a broker's answer), none for a time."""
    if seed is None:
        env = os.environ.get("RMQ_JEPSEN_SEED")
        seed = int(env) if env else random.randrange(1 << 31)
    rng = random.Random(seed)
    schedule = make_schedule(faults, rounds, rng) if shuffle else [faults[i % len(faults)] for i in range(rounds)]
    out(f"jepsen: seed {seed} (RMQ_JEPSEN_SEED={seed} replays the schedule), {rounds} rounds, {producers} producers")
    wl = Workload(cluster.namesrv_addr, cluster.topic, producers=producers)
    events: list[FaultEvent] = []
    await wl.start()
    try:
        await wl.wait_acks(producers, after=0.0, timeout=round_timeout, what="the first acknowledged sends")
        for i, fault in enumerate(schedule):
            ev = FaultEvent(i + 1, fault.name, master_death=fault.master_death)
            events.append(ev)
            await cluster.refresh()
            _disks_not_filling_up(cluster, ev.round)
            ev.injected_at = time.monotonic()
            ev.detail = await fault.inject(cluster)
            if fault.effective is not None:
                await _explained(
                    cluster,
                    wait_until(partial(fault.effective, cluster), round_timeout, 0.1, f"{fault.name} to take effect"),
                )
            n = rng.randint(*ops_per_round)
            t = time.monotonic()
            if fault.during == "acks":
                await _explained(
                    cluster, wl.wait_acks(n, t, round_timeout, f"{n} acknowledged sends after {fault.name}")
                )
            else:
                await _explained(cluster, wl.wait_done(n, t, round_timeout, f"{n} answered sends during {fault.name}"))
            await cluster.refresh()
            await fault.heal(cluster)
            ev.healed_at = time.monotonic()
            if fault.healed is not None:
                await _explained(
                    cluster,
                    wait_until(partial(fault.healed, cluster), round_timeout, 0.1, f"recovery from {fault.name}"),
                )
            n = rng.randint(*ops_per_round)
            await _explained(
                cluster, wl.wait_acks(n, ev.healed_at, round_timeout, f"{n} writes acknowledged after {fault.name}")
            )
            out(f"round {ev.round}: {ev.name}: {ev.detail}; {len(wl.history)} sends so far")
    finally:
        cluster.net.heal_all()
        await wl.stop()
    await _explained(cluster, cluster.settle())
    reads = await read_topic(cluster.namesrv_addr, cluster.topic)
    report = check(wl.history, reads, events=events, epoch_of=cluster.epoch_of, seed=seed)
    out(str(report))
    return report


#: The most of a store's disk the messages may take before a round (Java's default
#: ``diskMaxUsedSpaceRatio``, 75 %): DISK_GUARD turns retention off, so a long run's stores only
#: grow; past this the next CommitLog file can take a disk above the store's
#: ``diskSpaceWarningLevelRatio`` (90 %) with no fault injected, and every replica refuses
#: writes or replication for good.
DISK_FILLED_UP = 0.75


def _disks_not_filling_up(cluster: Cluster, round_no: int) -> None:
    """Fail, saying so, when the run outgrew the brokers' disks (rather than a later round
    timing out on a cluster that can no longer store anything)."""
    full = []
    for b in (cluster.master(), *cluster.slaves()):
        disk = cluster.disk_of(b)
        if disk is not None and disk.used_ratio() > DISK_FILLED_UP:
            full.append(f"{b.addr} {disk.used_ratio():.0%} of {disk.size >> 20} MiB")
    if full:
        raise AssertionError(
            f"before round {round_no}: the brokers' stores filled up with the run's messages ({', '.join(full)}; "
            f"retention is off): give a run this long bigger disks (jepsen_bench.py --disk-mb)"
        )


async def _explained(cluster: Cluster, wait: Awaitable[object]) -> None:
    """Await ``wait``; when it times out, the AssertionError carries the cluster's state as it
    is then (:meth:`Cluster.describe`), so a long run that stops says why."""
    try:
        await wait
    except AssertionError as e:
        try:
            state = await asyncio.wait_for(cluster.describe(), 60)
        except Exception as d:  # noqa: BLE001 - the state is a diagnosis; its failure must not hide the timeout
            state = f"(the cluster's state could not be read: {type(d).__name__}: {d})"
        raise AssertionError(f"{e}\n{state}") from None


# ------------------------------------------------------------------------------- static pair


#: Store settings of the fault clusters: the disk guard checks every half second, and a full
#: disk only refuses writes. Retention's deletions when the disk fills (above
#: ``diskMaxUsedSpaceRatio``, or ``cleanFileForciblyEnable`` above 85 %) are Java's and
#: legitimate, but they would delete acknowledged messages from under the checker, which
#: could then tell them from lost ones only by the queue's minimum offset.
DISK_GUARD: dict[str, object] = {
    "cleanResourceInterval": 500,
    "diskMaxUsedSpaceRatio": 100,
    "cleanFileForciblyEnable": "false",
}


class _BrokerGroup(abc.ABC):
    """What :class:`StaticPair` and :class:`ControllerGroup` share: the nodes and disks of their
    daemons, the runtime and topic queries to a broker, and entering (``_start``; what it
    started is closed again when it fails) and leaving (everything closed)."""

    def __init__(self, tmp: Path, net: Network, topic: str, queues: int, disk_size: int | None) -> None:
        self.tmp = Path(tmp)
        self.net = net
        self.topic = topic
        self.queues = queues
        self.disk_size = disk_size
        self.namesrv_addr = ""
        self._nodes: dict[int, str] = {}
        self._disks: dict[int, SmallDisk] = {}
        self._client: Any = None
        self._stack = contextlib.AsyncExitStack()
        self.keep = False
        """Set: each tmpfs store is copied to ``<broker dir>/store.kept`` before it is unmounted
        (``jepsen_bench.py --keep``), so a failed run's stores survive with its logs."""

    def node_of(self, daemon: object) -> str:
        return self._nodes[id(daemon)]

    @property
    def client(self) -> RemotingClient:
        """The group's own remoting client (started with the group, closed when it is left),
        for a test's or a bench's queries to its brokers and controllers."""
        assert self._client is not None, "the group is not started"
        client: RemotingClient = self._client
        return client

    def _mount(self, path: Path) -> SmallDisk:
        """A :class:`SmallDisk` of ``disk_size`` at ``path``, unmounted (kept first, when
        :attr:`keep`) when the group is left."""
        assert self.disk_size is not None
        disk = SmallDisk(path, self.disk_size).mount()

        def close() -> None:
            if self.keep:
                import shutil

                with contextlib.suppress(OSError):
                    shutil.copytree(
                        disk.path,
                        disk.path.with_name(disk.path.name + ".kept"),
                        ignore=shutil.ignore_patterns(SmallDisk.FILLER),
                        dirs_exist_ok=True,
                    )
            disk.close()

        self._stack.callback(close)
        return disk

    @abc.abstractmethod
    def _brokers(self) -> list[BrokerProcess]:
        """Every broker of the group (started or not)."""

    async def describe(self) -> str:
        """The group's state for a failed wait's message: the partitions in force, and each
        broker's process, role, epoch, SyncStateSet and CommitLog end by its own account."""
        lines = [f"cluster state (partitions in force: {self.net.cuts or 'none'}):"]
        keys = (
            "brokerRole",
            "controllerBrokerId",
            "masterBrokerId",
            "masterEpoch",
            "syncStateSet",
            "syncStateSetEpoch",
            "controllerLeader",
            "commitLogMaxOffset",
            "dispatchBehindBytes",
            "haConnectionCount",
            "diskFull",
        )
        for b in self._brokers():
            proc = (
                "not started"
                if b.proc is None
                else ("running" if b.proc.poll() is None else f"exited {b.proc.returncode}")
            )
            rt = await self.runtime(b)
            said = ", ".join(f"{k}={rt[k]}" for k in keys if k in rt) if rt else "no answer"
            disk = self.disk_of(b)
            used = f", disk {disk.used_ratio():.0%} of {disk.size >> 20} MiB used" if disk is not None else ""
            lines.append(f"  broker {self.node_of(b)} {b.addr} ({proc}{used}): {said}")
        lines.append(f"  name server {self.namesrv_addr}: {await self._namesrv_view()}")
        return "\n".join(lines)

    async def _namesrv_view(self) -> str:
        """What the clients are told: the name server's route of the topic (each broker name's
        addresses by id, and its write queues), as a line of :meth:`describe`."""
        from rmq.protocol.requests.namesrv import get_route_info, parse_topic_route

        try:
            route = parse_topic_route(await _call(self._client, self.namesrv_addr, get_route_info(self.topic), 3.0))
        except (RMQError, OSError) as e:
            return f"no route of {self.topic} ({type(e).__name__}: {e})"
        if route is None:
            return f"no route of {self.topic}"
        brokers = "; ".join(f"{bd.broker_name} {dict(sorted(bd.broker_addrs.items()))}" for bd in route.broker_datas)
        queues = ", ".join(f"{q.broker_name} w{q.write_queue_nums} perm {q.perm}" for q in route.queue_datas)
        return f"route of {self.topic}: brokers {brokers or 'none'}; queues {queues or 'none'}"

    def disk_of(self, broker: BrokerProcess) -> SmallDisk | None:
        return self._disks.get(id(broker))

    async def runtime(self, broker: BrokerProcess) -> dict[str, str]:
        from rmq.protocol.requests.broker import get_broker_runtime_info, parse_kv_table

        try:
            return parse_kv_table(await _call(self._client, broker.addr, get_broker_runtime_info(), 3.0))
        except (RMQError, OSError):  # a broker down or paused answers nothing: no state
            return {}

    async def _has_topic(self, broker: BrokerProcess) -> bool:
        from rmq.protocol.requests.broker import get_all_topic_config, parse_all_topic_config

        try:
            w = parse_all_topic_config(await _call(self._client, broker.addr, get_all_topic_config()))
        except (RMQError, OSError):
            return False
        return self.topic in w.topic_config_table

    @abc.abstractmethod
    async def _start(self) -> None:
        """Start the group's daemons (each subclass its own: a static pair, or etcd, controllers
        and controller-mode brokers)."""

    async def __aenter__(self) -> Self:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()


class StaticPair(_BrokerGroup):
    """A SYNC_MASTER and its SLAVE (``rmq broker`` processes; brokerName ``broker-a``) with an
    in-process name server, the master's store on a :class:`SmallDisk` when ``disk_size`` is
    given, each broker in its own node of ``net``. An async context manager; the topic
    (``queues`` queues) exists on both when it is entered.

    Args:
        tmp: a directory for the brokers' stores and logs.
        net: the network (``Network.create(isolated=False)`` puts all on 127.0.0.1).
        topic / queues: the topic under test (default ``JepsenT``, 4 queues).
        disk_size: bytes of the master's tmpfs (default None: an ordinary directory).
        props: more broker.conf properties for both.
    """

    def __init__(
        self,
        tmp: Path,
        net: Network,
        *,
        topic: str = "JepsenT",
        queues: int = 4,
        disk_size: int | None = None,
        **props: object,
    ) -> None:
        super().__init__(tmp, net, topic, queues, disk_size)
        self.props = props
        self._master: BrokerProcess | None = None
        self._slave: BrokerProcess | None = None

    def master(self) -> BrokerProcess:
        assert self._master is not None
        return self._master

    def slaves(self) -> list[BrokerProcess]:
        assert self._slave is not None
        return [self._slave]

    def _brokers(self) -> list[BrokerProcess]:
        return [b for b in (self._master, self._slave) if b is not None]

    async def refresh(self) -> None:
        """(The roles never change.)"""

    async def whole(self) -> bool:
        """The slave connected to the master's HA port."""
        return await _following(self)

    def epoch_of(self, op: Op) -> int:
        return 0  # no controller: one epoch for the group's whole life

    def _broker(self, name: str, **props: object) -> BrokerProcess:
        node = self.net.add_node(name)
        d = self.tmp / name
        disk = None
        if name == "m" and self.disk_size:
            disk = self._mount(d / "store")
        conf: dict[str, object] = {
            "brokerName": "broker-a",
            "metricsPort": 0,
            "haAllowedSlaves": self.net.subnet,
            **DISK_GUARD,
            **self.props,
            **props,
        }
        b = BrokerProcess(d, self.namesrv_addr, host=node.ip, netns=node.netns, **conf)
        self._nodes[id(b)] = name
        if disk is not None:
            self._disks[id(b)] = disk
        self._stack.callback(b.kill)
        self._stack.callback(resume, b)  # (a paused broker is woken before it is killed)
        return b

    async def _start(self) -> None:
        from rmq._testing import run_namesrv
        from rmq.remoting import RemotingClient

        ns = await self._stack.enter_async_context(run_namesrv(listen_host=self.net.host_ip))
        self.namesrv_addr = f"{self.net.host_ip}:{ns.port}"
        self._client = RemotingClient()
        self._stack.push_async_callback(self._client.close)
        self._master = self._broker("m", brokerRole="SYNC_MASTER")
        self._slave = self._broker("s", brokerId=1, brokerRole="SLAVE", slaveSyncIntervalMs=300)
        await self._master.astart()
        await self._slave.astart()
        await create_topic(self._client, self._master.addr, self.topic, self.queues)
        await wait_until(lambda: _following(self), 60, 0.1, "the slave following the master")
        await wait_until(lambda: self._has_topic(self.slaves()[0]), 60, 0.1, "the slave's copy of the topic")

    async def settle(self, timeout: float = 120.0) -> None:
        """Until the master answers and every replica holds the master's whole CommitLog,
        dispatched into its queues."""

        async def same() -> bool:
            infos = [await self.runtime(b) for b in (self.master(), *self.slaves())]
            if not all(infos):
                return False
            ends = {i.get("commitLogMaxOffset") for i in infos}
            return len(ends) == 1 and all(i.get("dispatchBehindBytes") == "0" for i in infos)

        await wait_until(same, timeout, 0.1, "every replica holding the master's CommitLog")


async def _following(c: Cluster) -> bool:
    """Every slave connected to the master's HA port."""
    info = await c.runtime(c.master())
    return int(info.get("haConnectionCount", "0")) >= len(c.slaves())


async def create_topic(client: Any, addr: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker at ``addr`` (read and write queues ``queues``)."""
    from rmq.protocol.headers.topic import CreateTopicRequestHeader
    from rmq.protocol.requests.topic import create_topic as create_topic_request

    header = CreateTopicRequestHeader(topic=topic, read_queue_nums=queues, write_queue_nums=queues, topic_sys_flag=0)
    resp = await _call(client, addr, create_topic_request(header))
    if resp.code != 0:
        raise RuntimeError(f"creating {topic} on {addr}: {resp.code} {resp.remark}")


__all__ += ["create_topic", "static_faults"]


@contextlib.asynccontextmanager
async def static_pair(tmp: Path, net: Network, **kw: Any) -> AsyncIterator[StaticPair]:
    """``async with static_pair(tmp, net) as c:`` = ``async with StaticPair(tmp, net) as c:``."""
    async with StaticPair(tmp, net, **kw) as c:
        yield c


__all__ += ["static_pair"]


# ------------------------------------------------------------------------------- controller mode


class _NodeEtcd(EtcdProcess):
    """:class:`~rmq._testing.etcd.EtcdProcess` in a node: its client URL on the node's
    address, the process started with ``ip netns exec``."""

    def __init__(self, directory: Path, node: Node) -> None:
        super().__init__(directory)
        self.node = node

    @property
    def endpoint(self) -> str:
        return f"http://{self.node.ip}:{self.client_port}"

    def command(self) -> list[str]:
        return [*_netns_prefix(self.node), *super().command()]


class _NodeController(ControllerProcess):
    """:class:`~rmq._testing.controller.ControllerProcess` in a node (``listenHost`` = the
    node's address)."""

    def __init__(self, directory: Path, etcd: str, node: Node, **props: object) -> None:
        super().__init__(directory, etcd, listenHost=node.ip, **props)
        self.node = node
        self.host = node.ip

    def command(self) -> list[str]:
        return [*_netns_prefix(self.node), *super().command()]


def _netns_prefix(node: Node) -> list[str]:
    return ["ip", "netns", "exec", node.netns] if node.netns else []


#: Controller settings for tests: a 2 s lease, brokers dead after 1.5 s without a heartbeat,
#: a scan every 100 ms (failovers in seconds, as tests/controller's conftest).
FAST_CONTROLLER: dict[str, object] = {
    "etcdLeaseTtlSeconds": 2,
    "etcdTimeoutMs": 1000,
    "scanNotActiveBrokerInterval": 100,
    "controllerHeartBeatTimeoutMills": 1500,
}

#: Broker settings to match: heartbeats, SyncStateSet checks and metadata polls every 200 ms.
FAST_BROKER: dict[str, object] = {
    "brokerHeartbeatInterval": 200,
    "controllerHeartBeatTimeoutMills": 1500,
    "checkSyncStateSetPeriod": 200,
    "syncControllerMetadataPeriod": 200,
    "slaveSyncIntervalMs": 200,
    "haSendHeartbeatInterval": 200,
    "registerNameServerPeriod": 1000,
}


class ControllerGroup(_BrokerGroup):
    """Controller mode under test: one etcd, ``controllers`` ``rmq controller`` processes and
    ``brokers`` ``rmq broker`` processes of broker name ``broker-a`` with
    ``enableControllerMode=true``, ``brokerRole=SYNC_MASTER`` and
    ``allAckInSyncStateSet=true`` (a write is acknowledged once every in-sync replica has it),
    each in its own node of ``net``; an in-process name server on the clients' side. An async
    context manager; when entered, one master is elected, every broker is in its SyncStateSet
    and the topic exists on all.

    Args:
        tmp: a directory for stores and logs.
        net: the network.
        controllers / brokers: how many (default 2 and 2).
        topic / queues: the topic under test (``JepsenT``, 4 queues).
        disk_size: bytes of each broker's tmpfs store (default None: ordinary directories).
        controller_props / props: more controller / broker properties (over
            :data:`FAST_CONTROLLER` / :data:`FAST_BROKER`).
    """

    def __init__(
        self,
        tmp: Path,
        net: Network,
        *,
        controllers: int = 2,
        brokers: int = 2,
        topic: str = "JepsenT",
        queues: int = 4,
        disk_size: int | None = None,
        controller_props: dict[str, object] | None = None,
        **props: object,
    ) -> None:
        super().__init__(tmp, net, topic, queues, disk_size)
        self.n_controllers = controllers
        self.n_brokers = brokers
        self.controller_props = {**FAST_CONTROLLER, **(controller_props or {})}
        self.props = {**FAST_BROKER, **props}
        self.etcd: _NodeEtcd | None = None
        self.controllers: list[_NodeController] = []
        self.brokers: list[BrokerProcess] = []
        self._master_addr = ""
        self._epochs: list[tuple[int, int, int]] = []

    # ---------------------------------------------------------------- what the faults see

    def master(self) -> BrokerProcess:
        for b in self.brokers:
            if b.addr == self._master_addr:
                return b
        raise AssertionError(f"no broker at the controller's master address {self._master_addr!r}")

    def slaves(self) -> list[BrokerProcess]:
        return [b for b in self.brokers if b.addr != self._master_addr]

    def _brokers(self) -> list[BrokerProcess]:
        return list(self.brokers)

    async def describe(self) -> str:
        """:meth:`_BrokerGroup.describe` plus each controller's account: up or not, leader or
        not; the leader's record of ``broker-a`` (master, epoch, SyncStateSet and which replica
        it counts alive, i.e. heartbeating within its timeout); and the last liveness and
        election lines of each controller's log (when a replica missed its heartbeat timeout)."""
        from rmq.protocol.requests.controller import (
            get_controller_metadata,
            get_sync_state_data,
            parse_controller_metadata,
            parse_sync_state_data,
        )

        lines = [await super().describe()]
        for c in self.controllers:
            if c.proc is None or c.proc.poll() is not None:
                lines.append(f"  controller {self.node_of(c)} {c.addr}: not running")
                continue
            try:
                meta = parse_controller_metadata(await _call(self._client, c.addr, get_controller_metadata(), 2.0))
            except (RMQError, OSError) as e:
                lines.append(f"  controller {self.node_of(c)} {c.addr}: no answer ({type(e).__name__})")
                continue
            lines.append(
                f"  controller {self.node_of(c)} {c.addr}: {'leader' if meta.is_leader else 'follower'}"
                f" (leader {meta.controller_leader_address})"
            )
            if meta.is_leader:
                try:
                    info = parse_sync_state_data(
                        await _call(self._client, c.addr, get_sync_state_data(["broker-a"]), 2.0)
                    ).replicas_info_table.get("broker-a")
                except (RMQError, OSError) as e:
                    lines.append(f"    broker-a: no answer ({type(e).__name__}: {e})")
                    info = None
                if info is not None:

                    def who(rs: Sequence[Any]) -> str:
                        return ", ".join(
                            f"{r.broker_id} {r.broker_address} {'alive' if r.alive else 'NOT alive'}" for r in rs
                        )

                    lines.append(
                        f"    broker-a: master {info.master_broker_id} {info.master_address} epoch {info.master_epoch};"
                        f" SyncStateSet epoch {info.sync_state_set_epoch}: [{who(info.in_sync_replicas)}];"
                        f" not in sync: [{who(info.not_in_sync_replicas)}]"
                    )
            events = [
                ln
                for ln in c.log_text().splitlines()
                if "heartbeat" in ln or "elected" in ln or "master of" in ln or "leader" in ln
            ]
            lines += [f"    log: {ln[-200:]}" for ln in events[-6:]]
        return "\n".join(lines)

    async def replica_info(self) -> tuple[Any, Any] | None:
        """The controller leader's ``(GetReplicaInfoResponseHeader, SyncStateSet)`` of
        ``broker-a``, or None when no controller answers as leader."""
        from rmq.protocol.requests.controller import get_replica_info, parse_replica_info

        for c in self.controllers:
            if c.proc is None or c.proc.poll() is not None:
                continue
            try:
                return parse_replica_info(await _call(self._client, c.addr, get_replica_info("broker-a"), 2.0))
            except (RMQError, OSError):  # not the leader, down, paused, cut off: the next
                continue
        return None

    async def controller_leader(self) -> _NodeController | None:
        from rmq.protocol.requests.controller import get_controller_metadata, parse_controller_metadata

        for c in self.controllers:
            if c.proc is None or c.proc.poll() is not None:
                continue
            try:
                meta = parse_controller_metadata(await _call(self._client, c.addr, get_controller_metadata(), 2.0))
            except (RMQError, OSError):
                continue
            if meta.is_leader:
                return c
        return None

    async def refresh(self) -> None:
        """Learn the master from the controller leader (waits for one to answer)."""

        async def known() -> bool:
            info = await self.replica_info()
            if info is None or not info[0].master_address:
                return False
            self._master_addr = info[0].master_address
            return True

        await wait_until(known, 60, 0.1, "the controller leader naming a master")

    async def whole(self) -> bool:
        """Every broker and controller running, a controller leading, every broker in the
        SyncStateSet, the named master a master by its own account and the others slaves."""
        procs = [b.proc for b in self.brokers] + [c.proc for c in self.controllers]
        if any(p is None or p.poll() is not None for p in procs):
            return False
        info = await self.replica_info()
        if info is None or not info[0].master_address:
            return False
        header, sss = info
        if len(sss.sync_state_set) != len(self.brokers):
            return False
        self._master_addr = header.master_address
        for b in self.brokers:
            rt = await self.runtime(b)
            role = rt.get("brokerRole", "")
            if (role == "SLAVE") == (b.addr == self._master_addr) or not role:
                return False
            # the master's own SyncStateSet (what its SYNC acknowledgements wait for) is the
            # controller's: a smaller one would acknowledge writes a replica the controller
            # counts as in sync does not have
            if b.addr == self._master_addr and rt.get("syncStateSet", "") != ",".join(
                map(str, sorted(sss.sync_state_set))
            ):
                return False
        return True

    async def settle(self, timeout: float = 120.0) -> None:
        """Until the group is :meth:`whole` and every replica holds the master's CommitLog,
        dispatched; then reads the master's epoch file for :meth:`epoch_of`."""
        from rmq.protocol.requests.controller import get_broker_epoch_cache, parse_broker_epoch_cache

        async def same() -> bool:
            if not await self.whole():
                return False
            infos = [await self.runtime(b) for b in self.brokers]
            ends = {i.get("commitLogMaxOffset") for i in infos}
            return len(ends) == 1 and all(i.get("dispatchBehindBytes") == "0" for i in infos)

        await wait_until(same, timeout, 0.1, "every replica holding the master's CommitLog")
        cache = parse_broker_epoch_cache(await _call(self._client, self.master().addr, get_broker_epoch_cache()))
        self._epochs = [(e.epoch, e.start_offset, e.end_offset) for e in cache.epoch_list]

    def epoch_of(self, op: Op) -> int:
        """The epoch whose CommitLog range on the settled master holds the op's offset (from
        GET_BROKER_EPOCH_CACHE, the master's epoch file); -1 when none does (the message is
        not on the master: the check reports it lost)."""
        for epoch, start, end in self._epochs:
            if op.phy_offset is not None and start <= op.phy_offset < end:
                return epoch
        return -1

    # ---------------------------------------------------------------- start and stop

    async def _start(self) -> None:
        from rmq._testing import run_namesrv
        from rmq.remoting import RemotingClient

        self._client = RemotingClient()
        self._stack.push_async_callback(self._client.close)
        etcd_node = self.net.add_node("etcd")
        self.etcd = _NodeEtcd(self.tmp / "etcd", etcd_node)
        self._stack.callback(self.etcd.kill)
        await asyncio.to_thread(self.etcd.start)
        for i in range(self.n_controllers):
            node = self.net.add_node(f"c{i + 1}")
            c = _NodeController(self.tmp / f"c{i + 1}", self.etcd.endpoint, node, **self.controller_props)
            self._nodes[id(c)] = node.name
            self.controllers.append(c)
            self._stack.callback(c.kill)
            await asyncio.to_thread(c.start)
        ns = await self._stack.enter_async_context(run_namesrv(listen_host=self.net.host_ip))
        self.namesrv_addr = f"{self.net.host_ip}:{ns.port}"
        controller_addr = ";".join(c.addr for c in self.controllers)
        for i in range(self.n_brokers):
            name = f"b{i + 1}"
            node = self.net.add_node(name)
            d = self.tmp / name
            if self.disk_size:
                disk = self._mount(d / "store")
            conf: dict[str, object] = {
                "brokerName": "broker-a",
                "brokerRole": "SYNC_MASTER",
                "enableControllerMode": "true",
                "controllerAddr": controller_addr,
                "allAckInSyncStateSet": "true",
                "metricsPort": 0,
                "haAllowedSlaves": self.net.subnet,
                **DISK_GUARD,
                **self.props,
            }
            b = BrokerProcess(d, self.namesrv_addr, host=node.ip, netns=node.netns, **conf)
            self._nodes[id(b)] = name
            if self.disk_size:
                self._disks[id(b)] = disk
            self.brokers.append(b)
            self._stack.callback(b.kill)
            self._stack.callback(resume, b)
            await b.astart()
            if i == 0:
                await self.refresh()
        await wait_until(self.whole, 120, 0.1, "every broker in the SyncStateSet")
        await create_topic(self._client, self.master().addr, self.topic, self.queues)
        for s in self.slaves():
            await wait_until(partial(self._has_topic, s), 60, 0.1, f"{s.addr}'s copy of the topic")


def _master_partitioned_from_controllers() -> Fault:
    held: list[list[tuple[str, str]]] = [[]]
    # the master's address, its controller id and the master epoch when the fault was injected
    old: list[tuple[str, int | None, int]] = [("", None, 0)]

    async def inject(c: Cluster) -> str:
        assert isinstance(c, ControllerGroup)
        m = c.master()
        info = await c.replica_info()
        old[0] = (m.addr, None, 0) if info is None else (m.addr, info[0].master_broker_id, info[0].master_epoch or 0)
        held[0] = [(c.node_of(m), c.node_of(ctl)) for ctl in c.controllers]
        for a, b in held[0]:
            c.net.partition(a, b)
        return f"master {m.addr} cut off from every controller (not from clients or replicas)"

    async def effective(c: Cluster) -> bool:
        assert isinstance(c, ControllerGroup)
        return master_gone_from_controllers(await c.replica_info(), *old[0])

    async def heal(c: Cluster) -> None:
        for a, b in held[0]:
            c.net.heal(a, b)

    # "acks": once another master is elected it registers with the name servers under the
    # higher epoch (DataVersion stateVersion), which route clients to it although the old
    # master, still reaching them, keeps registering; when nobody could be elected, the old
    # master is the SyncStateSet alone and acknowledges writes by itself
    return Fault(
        "master partitioned from the controllers",
        inject,
        heal,
        effective,
        healed=_whole,
        needs=frozenset({"netns", "controller"}),
        during="acks",
    )


def master_gone_from_controllers(info: tuple[Any, Any] | None, old_addr: str, old_id: int | None, epoch: int) -> bool:
    """Whether the controllers have acted on a master that stopped heartbeating (the controller
    leader's ``(GetReplicaInfoResponseHeader, SyncStateSet)`` in ``info``; the master's address,
    id and the master epoch before): another master elected, or nobody, which is right only
    when the SyncStateSet held no other replica (Java ``ReplicasInfoManager.electMaster``:
    ``DefaultElectPolicy`` finds no in-sync replica alive, ``enableElectUncleanMaster`` is off,
    and an ``ElectMasterEvent`` without a master clears it and raises the epoch). A cleared
    master with another in-sync replica is not the end state: that replica, alive, elects
    itself (``ReplicasManager.brokerElect``), so the wait goes on."""
    if info is None:
        return False
    header, sss = info
    if header.master_address not in (None, "", old_addr):
        return True
    if header.master_address or (header.master_epoch or 0) <= epoch:
        return False
    return not (set(sss.sync_state_set) - {old_id})


def _controller_leader_kill() -> Fault:
    held: list[_NodeController] = []

    async def inject(c: Cluster) -> str:
        assert isinstance(c, ControllerGroup)
        leader = await wait_until(c.controller_leader, 60, 0.1, "a controller leader")
        assert leader is not None
        held[:] = [leader]
        kill9(leader)
        return f"kill -9 controller leader {leader.addr}"

    async def heal(c: Cluster) -> None:
        await asyncio.to_thread(held[0].start)

    return Fault("controller leader kill -9 + restart", inject, heal, healed=_whole, needs=frozenset({"controller"}))


def failover_faults() -> list[Fault]:
    """Fresh instances of the faults a :class:`ControllerGroup` must survive by electing:
    master kill -9 (restarted afterwards: it rejoins as a slave), master SIGSTOP/SIGCONT (a
    zombie waking after a new master was elected), master partitioned from the controllers
    but not from clients, controller leader kill -9, a slave partitioned from the master,
    master disk full."""
    return [
        _broker_fault(
            "master kill -9", _the_master, "kill -9 master", _kill9, _restart, master_death=True, during="acks"
        ),
        _broker_fault(
            "master SIGSTOP/SIGCONT (zombie)",
            _the_master,
            "SIGSTOP master",
            _pause,
            _resume,
            master_death=True,
            during="acks",
        ),
        _master_partitioned_from_controllers(),
        _controller_leader_kill(),
        _slave_partition(),
        _master_disk_full(),
    ]


__all__ += [
    "DISK_GUARD",
    "FAST_BROKER",
    "FAST_CONTROLLER",
    "ControllerGroup",
    "failover_faults",
    "master_gone_from_controllers",
]
