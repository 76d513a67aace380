"""Consumer groups and connections: consumerProgress, consumerConnection, producerConnection,
consumerStatus, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset, setConsumeMode (Java
``tools/command/consumer``, ``connection``, ``offset``)."""

from __future__ import annotations

import argparse
from datetime import datetime

from rmq.client.admin import Admin, AdminError
from rmq.client.admin._consumers import RollbackStats
from rmq.common.constants import MixAll
from rmq.protocol.body.conns import ConsumerRunningInfo, version_desc
from rmq.protocol.codes import ResponseCode
from rmq.protocol.requests.assignment import MESSAGE_REQUEST_MODES
from rmq.types import MessageQueue

from ._cmd import (
    addr,
    command,
    group_name,
    int_in,
    java_bool,
    name,
    print_table,
    targets,
    timestamp_ms,
    topic_name,
    true_false,
)


def _fmt_time(ms: int) -> str:
    return "N/A" if ms <= 0 else datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def timestamp_arg(text: str) -> int:
    """mqadmin resetOffsetByTime's ``-s``: ``now`` (or -1: each queue's end), else
    :func:`~rmq.cli.admin._cmd.timestamp_ms` (milliseconds since the epoch, or
    ``yyyy-MM-dd#HH:mm:ss:SSS`` local time)."""
    return -1 if text.strip() in ("now", "-1") else timestamp_ms(text)


# -- consumerProgress --------------------------------------------------------------------


def _progress_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", default=None, type=group_name, help="consumer group name")
    p.add_argument(
        "-s",
        "--showClientIP",
        dest="show_ip",
        default="false",
        type=true_false,
        help="show the client each queue is allocated to (true|false)",
    )


@command("consumerProgress", flags=_progress_flags)
async def consumer_progress(admin: Admin, args: argparse.Namespace) -> int | None:
    if args.group:
        stats = await admin.examine_consume_stats(args.group)
        owner: dict[MessageQueue, str] = {}
        if args.show_ip == "true":
            owner = await _allocation(admin, args.group)
        ip = args.show_ip == "true"

        def line(
            topic: object,
            broker: object,
            qid: object,
            b_off: object,
            c_off: object,
            client: object,
            diff: object,
            last: object,
        ) -> str:
            # Java ConsumerProgressSubCommand's printf, with and without the client column
            head = f"{topic!s:<64}  {broker!s:<32}  {qid!s:<4}  {b_off!s:<20}  {c_off!s:<20}  "
            return head + (f"{client!s:<20} {diff!s:<20}  {last}" if ip else f"{diff!s:<20}  {last}")

        print(
            line(
                "#Topic",
                "#Broker Name",
                "#QID",
                "#Broker Offset",
                "#Consumer Offset",
                "#Client IP",
                "#Diff",
                "#LastTime",
            )
        )
        for mq, w in sorted(stats.offset_table.items()):
            print(
                line(
                    mq.topic,
                    mq.broker_name,
                    mq.queue_id,
                    w.broker_offset,
                    w.consumer_offset,
                    owner.get(mq, "N/A"),
                    w.diff,
                    _fmt_time(w.last_timestamp),
                )
            )
        print()
        print(f"Consume TPS: {stats.consume_tps:.2f}")
        print(f"Diff Total: {stats.compute_total_diff()}")
        return None
    groups = sorted(
        t[len(MixAll.RETRY_GROUP_TOPIC_PREFIX) :]
        for t in await admin.fetch_all_topic_list()
        if t.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
    )
    rows: list[list[object]] = []
    for group in groups:
        tps, diff = 0, 0
        try:
            stats = await admin.examine_consume_stats(group)
            tps, diff = int(stats.consume_tps), stats.compute_total_diff()
        except AdminError:
            pass
        count, version, ctype, model = 0, "OFFLINE", "", ""
        try:
            cc = await admin.examine_consumer_connection_info(group)
            count = len(cc.connection_set)
            version = version_desc(cc.compute_min_version())
            ctype = "PULL" if cc.consume_type == "CONSUME_ACTIVELY" else "PUSH"
            model = cc.message_model if cc.consume_type == "CONSUME_PASSIVELY" else ""
        except AdminError:
            pass
        rows.append([group, count, version, ctype, model, tps, diff])
    header: list[object] = ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"]
    for r in [header, *rows]:
        print(f"{r[0]!s:<64}  {r[1]!s:<6}  {r[2]!s:<24} {r[3]!s:<5}  {r[4]!s:<14}  {r[5]!s:<7}  {r[6]}")
    return None


async def _allocation(admin: Admin, group: str) -> dict[MessageQueue, str]:
    """Which client holds each queue (Java ``getMessageQueueAllocationResult``: each member's
    running info lists its queues), as the client id's IP."""
    out: dict[MessageQueue, str] = {}
    try:
        cc = await admin.examine_consumer_connection_info(group)
    except AdminError:
        return out
    for conn in cc.connection_set:
        try:
            info = await admin.get_consumer_running_info(group, conn.client_id)
        except AdminError:
            continue
        for mq in info.mq_table:
            out[mq] = conn.client_id.split("@", 1)[0]
    return out


# -- connections -------------------------------------------------------------------------


def _consumer_connection_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, type=group_name, help="consumer group name")
    p.add_argument("-b", "--brokerAddr", dest="broker", default=None, type=addr, help="ask only this broker")


@command("consumerConnection", flags=_consumer_connection_flags)
async def consumer_connection(admin: Admin, args: argparse.Namespace) -> int | None:
    cc = await admin.examine_consumer_connection_info(args.group, args.broker)
    # Java ConsumerConnectionSubCommand's printf
    print(f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version")
    for c in cc.connection_set:
        print(f"{c.client_id:<36} {c.client_addr:<22} {c.language:<10} {version_desc(c.version)}")
    print()
    print("Below is subscription:")
    print(f"{'#Topic':<20} #SubExpression")
    for topic, sub in sorted(cc.subscription_table.items()):
        print(f"{topic:<20} {sub.sub_string}")
    print()
    print(f"ConsumeType: {cc.consume_type}")
    print(f"MessageModel: {cc.message_model}")
    print(f"ConsumeFromWhere: {cc.consume_from_where}")
    return None


def _producer_connection_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True, type=group_name, help="producer group name")
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic name")


@command("producerConnection", flags=_producer_connection_flags)
async def producer_connection(admin: Admin, args: argparse.Namespace) -> int | None:
    pc = await admin.examine_producer_connection_info(args.group, args.topic)
    for i, c in enumerate(pc.connection_set, 1):
        print(f"{i:04d}  {c.client_id:<32} {c.client_addr:<22} {c.language:<8} {version_desc(c.version)}")
    return None


# -- consumerStatus ----------------------------------------------------------------------


def _status_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, type=group_name, help="consumer group name")
    p.add_argument("-i", "--clientId", dest="client_id", default=None, type=name, help="the consumer's client id")
    p.add_argument(
        "-b", "--brokerAddr", dest="broker", default=None, type=addr, help="list the members this broker knows"
    )
    p.add_argument("-s", "--jstackEnable", dest="jstack", action="store_true", help="ask for a thread dump too")


@command("consumerStatus", flags=_status_flags)
async def consumer_status(admin: Admin, args: argparse.Namespace) -> int | None:
    if args.client_id:
        info = await admin.get_consumer_running_info(args.group, args.client_id, args.jstack)
        print(info.format_string(), end="")
        return None
    cc = await admin.examine_consumer_connection_info(args.group, args.broker)
    # Java ConsumerStatusSubCommand writes each client's formatString to a file; here it is
    # printed after the table instead (no files written where the command runs).
    print(f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile")
    infos: dict[str, ConsumerRunningInfo] = {}
    for i, c in enumerate(cc.connection_set, 1):
        try:
            infos[c.client_id] = await admin.get_consumer_running_info(args.group, c.client_id, args.jstack)
        except AdminError as e:
            print(f"{i:<10d} {c.client_id:<40} {version_desc(c.version):<20} ({e})")
            continue
        print(f"{i:<10d} {c.client_id:<40} {version_desc(c.version):<20} -")
    if infos:
        subs = {tuple(sorted((s.topic, s.sub_string) for s in info.subscription_set)) for info in infos.values()}
        held = [mq for info in infos.values() for mq in info.mq_table]
        if len(subs) == 1:
            print()
            print()
            print("Same subscription in the same group of consumer")
            print()
            print(f"Rebalance {'OK' if len(held) == len(set(held)) else 'Failed'}")
            for cid, info in sorted(infos.items()):
                print()
                print(f"#{cid}")
                print(info.format_string(), end="")
        else:
            print()
            print()
            print("WARN: Different subscription in the same group of consumer!!!")
    return None


# -- offsets -----------------------------------------------------------------------------


def _reset_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, type=group_name, help="consumer group")
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic")
    p.add_argument(
        "-s",
        "--timestamp",
        required=True,
        type=timestamp_arg,
        help="now | currentTimeMillis | yyyy-MM-dd#HH:mm:ss:SSS (now and -1: each queue's end)",
    )
    p.add_argument(
        "-f", "--force", default="true", type=true_false, help="also move offsets forward (true|false, default true)"
    )
    p.add_argument(
        "-c",
        "--cplus",
        action="store_true",
        help="accepted for mqadmin compatibility (C++ members always get the form they read)",
    )


async def _reset(admin: Admin, group: str, topic: str, ts: int, force: bool, ts_text: str) -> None:
    try:
        table = await admin.reset_offset_by_timestamp(topic, group, ts, force)
    except AdminError as e:
        if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        _print_rollback(
            await admin.reset_offset_by_timestamp_old(group, topic, ts, force), group, topic, force, ts_text, ts
        )
        return
    print(
        f"rollback consumer offset by specified group[{group}], topic[{topic}], force[{java_bool(force)}], "
        f"timestamp(string)[{ts_text}], timestamp(long)[{ts}]"
    )
    print_table(
        ["#brokerName", "#queueId", "#offset"],
        [[mq.broker_name, mq.queue_id, off] for mq, off in sorted(table.items())],
        [40, 40, 0],
    )


def _print_rollback(stats: list[RollbackStats], group: str, topic: str, force: bool, ts_text: str, ts: int) -> None:
    print(
        f"rollback consumer offset by specified consumerGroup[{group}], topic[{topic}], force[{java_bool(force)}], "
        f"timestamp(string)[{ts_text}], timestamp(long)[{ts}]"
    )
    print_table(
        ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#rollbackOffset"],
        [
            [r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset, r.timestamp_offset, r.rollback_offset]
            for r in stats
        ],
        [20, 20, 20, 20, 20, 0],
    )


@command("resetOffsetByTime", flags=_reset_flags)
async def reset_offset_by_time(admin: Admin, args: argparse.Namespace) -> int | None:
    text = "now" if args.timestamp == -1 else str(args.timestamp)
    await _reset(admin, args.group, args.topic, args.timestamp, args.force == "true", text)
    return None


def _skip_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, type=group_name, help="consumer group")
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic")
    p.add_argument("-f", "--force", default="true", type=true_false, help="true|false (default true)")
    p.add_argument("-c", "--cluster", default=None, help="accepted for mqadmin compatibility")


@command("skipAccumulatedMessage", flags=_skip_flags)
async def skip_accumulated_message(admin: Admin, args: argparse.Namespace) -> int | None:
    await _reset(admin, args.group, args.topic, -1, args.force == "true", "-1")
    return None


def _clone_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--srcGroup", dest="src", required=True, type=group_name, help="source consumer group")
    p.add_argument("-d", "--destGroup", dest="dest", required=True, type=group_name, help="destination group")
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic")
    p.add_argument("-o", "--offline", default="false", type=true_false, help="accepted for mqadmin compatibility")


@command("cloneGroupOffset", flags=_clone_flags)
async def clone_group_offset(admin: Admin, args: argparse.Namespace) -> int | None:
    await admin.clone_group_offset(args.src, args.dest, args.topic)
    print(f"clone group offset success. srcGroup[{args.src}], destGroup=[{args.dest}], topic[{args.topic}]")
    return None


# -- getConsumerConfig -------------------------------------------------------------------

# Java SubscriptionGroupConfig's fields in declaration order (what mqadmin prints, one a line).
_SUBSCRIPTION_GROUP_FIELDS = (
    "groupName",
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "retryQueueNums",
    "retryMaxTimes",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
)


def _consumer_config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True, type=group_name, help="subscription group name")


@command("getConsumerConfig", flags=_consumer_config_flags)
async def get_consumer_config(admin: Admin, args: argparse.Namespace) -> int | None:
    for info in await admin.get_consumer_config(args.group):
        print(f"============================={info.cluster_name}:{info.broker_name}=============================")
        for key in _SUBSCRIPTION_GROUP_FIELDS:
            value = info.config.get(key)
            text = "" if value is None else java_bool(value) if isinstance(value, bool) else str(value)
            print(f"{key:<40}=  {text}")
    return None


# -- producer -----------------------------------------------------------------------------------


def _producer_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--broker", dest="broker", required=True, type=addr, help="broker address")


@command("producer", flags=_producer_flags)
async def producer(admin: Admin, args: argparse.Namespace) -> None:
    # Java ProducerSubCommand: one line per instance, ProducerInfo.toString
    table = await admin.get_all_producer_info(args.broker)
    for group, instances in table.data.items():
        if not instances:
            print(f"producer group ({group}) instances are empty")
            continue
        for info in instances:
            print(f"producer group ({group}) instance : {info}")


# -- setConsumeMode ----------------------------------------------------------------------


def _set_consume_mode_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)
    p.add_argument("-t", "--topicName", dest="topic", required=True, type=topic_name, help="topic name")
    p.add_argument("-g", "--groupName", dest="group", required=True, type=group_name, help="consumer group name")
    p.add_argument(
        "-m",
        "--mode",
        required=True,
        type=lambda s: s.strip(),
        choices=MESSAGE_REQUEST_MODES,
        help="consume mode: PULL or POP",
    )
    p.add_argument(
        "-q",
        "--popShareQueueNum",
        type=int_in(-(2**31), 2**31 - 1),
        default=0,
        help="in POP mode, how many following consumers' queues each one shares (default 0: every queue)",
    )


@command("setConsumeMode", flags=_set_consume_mode_flags)
async def set_consume_mode(admin: Admin, args: argparse.Namespace) -> None:
    addrs = [args.broker] if args.broker else await admin.master_addrs(args.cluster)
    for a in addrs:
        await admin.set_message_request_mode(a, args.topic, args.group, args.mode, args.popShareQueueNum)
        print(f"set consume mode to {a} success.")
    print(
        f"topic[{args.topic}] group[{args.group}] consume mode[{args.mode}] popShareQueueNum[{args.popShareQueueNum}]"
    )
