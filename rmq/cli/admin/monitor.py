"""startMonitoring (Java ``StartMonitoringSubCommand`` → ``MonitorService`` with the
``DefaultMonitorListener``): rounds over every consumer group (every ``%RETRY%<group>`` topic
the name server knows), reporting per group and topic the undelivered messages as Java's
``MonitorService.computeUndoneMsgs`` counts them:

* ``undoneMsgsTotal``: broker offset minus consumer offset, summed over the topic's queues;
* ``undoneMsgsSingleMQ``: the largest of those per queue;
* ``undoneMsgsDelayTimeMills``: the largest, over queues the group has consumed from, of the
  store time of the queue's newest message minus that of the group's last consumed one.

Each round prints Java's listener lines (``[MONITOR] ...beginRound``, ``[MONITOR]
reportUndoneMsgs: UndoneMsgs [consumerGroup=..., ...]``, ``...endRound``) to stdout. Java's
command has no flags and runs until the JVM is stopped, its first round after 20 s; here the
first round runs at once, ``--interval`` (default 60 s, Java ``MonitorConfig.roundInterval``)
spaces the rounds, and ``--rounds N`` stops after N rounds (default 0: until interrupted,
SIGINT ends it with status 130 between or within rounds). Left out: Java's
``OFFSET_MOVED_EVENT`` subscription (reportDeleteMsgsEvent) and the analysis of each client's
running info.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

from rmq.client.admin import Admin, AdminError
from rmq.common.constants import MixAll
from rmq.errors import RMQError
from rmq.protocol.body.stats import ConsumeStats
from rmq.types import MessageQueue, PullStatus

from ._cmd import command

LOG_PREFIX = "[MONITOR] "  # Java DefaultMonitorListener.LOG_PREFIX


@dataclass(frozen=True)
class UndoneMsgs:
    """Java ``UndoneMsgs``: one group's backlog on one topic."""

    consumer_group: str
    topic: str
    undone_msgs_total: int
    undone_msgs_single_mq: int
    undone_msgs_delay_time_mills: int

    def __str__(self) -> str:
        return (
            f"UndoneMsgs [consumerGroup={self.consumer_group}, topic={self.topic}, "
            f"undoneMsgsTotal={self.undone_msgs_total}, undoneMsgsSingleMQ={self.undone_msgs_single_mq}, "
            f"undoneMsgsDelayTimeMills={self.undone_msgs_delay_time_mills}]"
        )


async def _newest_store_time(admin: Admin, mq: MessageQueue) -> int | None:
    """The store time of the queue's newest message (Java: pull one at maxOffset - 1)."""
    max_offset = await admin.max_offset(mq)
    if max_offset <= 0:
        return None
    result = await admin.pull(mq, max_offset - 1, 1)
    if result.status is not PullStatus.FOUND or not result.messages:
        return None
    return result.messages[0].store_timestamp


async def undone_msgs(admin: Admin, group: str) -> list[UndoneMsgs]:
    """Java ``MonitorService.reportUndoneMsgs``: the group's backlog per topic; empty when the
    group has no offsets or no member online (Java reports nothing then)."""
    try:
        stats = await admin.examine_consume_stats(group)
        await admin.examine_consumer_connection_info(group)
    except (AdminError, RMQError, OSError):
        return []
    by_topic: dict[str, ConsumeStats] = {}
    for mq, ow in stats.offset_table.items():
        by_topic.setdefault(mq.topic, ConsumeStats()).offset_table[mq] = ow
    out = []
    for topic, cs in sorted(by_topic.items()):
        total = single_max = delay_max = 0
        for mq, ow in sorted(cs.offset_table.items()):
            diff = ow.broker_offset - ow.consumer_offset
            single_max = max(single_max, diff)
            total += max(diff, 0)
            if ow.last_timestamp > 0:
                try:
                    newest = await _newest_store_time(admin, mq)
                except (AdminError, RMQError, OSError):  # Java ignores a failed pull
                    newest = None
                if newest is not None:
                    delay_max = max(delay_max, newest - ow.last_timestamp)
        out.append(UndoneMsgs(group, topic, total, single_max, delay_max))
    return out


async def monitor_round(admin: Admin) -> None:
    """One ``MonitorService.doMonitorWork``, printed as ``DefaultMonitorListener`` logs it."""
    print(f"{LOG_PREFIX}=========================================beginRound", flush=True)
    for topic in await admin.fetch_all_topic_list():
        if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            for undone in await undone_msgs(admin, topic[len(MixAll.RETRY_GROUP_TOPIC_PREFIX) :]):
                print(f"{LOG_PREFIX}reportUndoneMsgs: {undone}", flush=True)
    print(f"{LOG_PREFIX}=========================================endRound", flush=True)


def _interval(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0.1 <= v <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not an interval (expected 0.1..86400 seconds)")
    return v


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--interval",
        type=_interval,
        default=60.0,
        help="seconds between the starts of two rounds (default 60, Java MonitorConfig.roundInterval)",
    )
    p.add_argument(
        "--rounds", type=int, default=0, help="stop after this many rounds (default 0: until interrupted, e.g. Ctrl-C)"
    )


@command("startMonitoring", flags=_flags)
async def start_monitoring(admin: Admin, args: argparse.Namespace) -> int | None:
    if args.rounds < 0:
        raise ValueError(f"--rounds: {args.rounds} is out of range (expected 0 for no limit, or more)")
    loop = asyncio.get_running_loop()
    n = 0
    while True:
        started = loop.time()
        try:
            await monitor_round(admin)
        except (AdminError, RMQError, OSError) as e:  # Java logs "doMonitorWork Exception" and goes on
            print(f"rmq admin startMonitoring: round failed: {e}", file=sys.stderr, flush=True)
        n += 1
        if args.rounds and n >= args.rounds:
            return None
        # the product's round schedule (Java scheduleAtFixedRate), not a synchronisation
        await asyncio.sleep(max(0.0, args.interval - (loop.time() - started)))
