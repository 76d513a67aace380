"""Broker configuration and statistics: brokerStatus, timerStatus, brokerConsumeStats, getBrokerConfig,
updateBrokerConfig, statsAll (Java ``tools/command/broker``, ``stats``), and the runtime-info
columns of clusterList (:func:`cluster_rows`)."""

from __future__ import annotations

import argparse
import datetime
import sys
import time

from rmq.client.admin import Admin, AdminError
from rmq.client.admin._brokers import GROUP_GET_NUMS, TOPIC_PUT_NUMS
from rmq.common.constants import MixAll
from rmq.errors import RMQError
from rmq.protocol.body.stats import BrokerStatsData, ConsumeStats
from rmq.types import Message, SendResult

from ._cmd import addr as addr_flag
from ._cmd import command, int_in, name, targets, topic_name, true_false


async def _all_addrs(admin: Admin, cluster: str) -> list[str]:
    """Every master and slave address of ``cluster`` (Java
    CommandUtil.fetchMasterAndSlaveAddrByClusterName)."""
    info = await admin.examine_broker_cluster_info()
    if cluster not in info.cluster_addr_table:
        raise AdminError(f"cluster [{cluster}] is not known to the name server")
    out: list[str] = []
    for broker in sorted(info.cluster_addr_table[cluster]):
        bd = info.broker_addr_table.get(broker)
        if bd is not None:
            out.extend(addr for _, addr in sorted(bd.broker_addrs.items()))
    return out


# -- brokerStatus -------------------------------------------------------------------------


def _status_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)


@command("brokerStatus", flags=_status_flags)
async def broker_status(admin: Admin, args: argparse.Namespace) -> int | None:
    if args.broker:
        table = await admin.fetch_broker_runtime_stats(args.broker)
        for k, v in sorted(table.items()):
            print(f"{k:<32}: {v}")
        return None
    status = None
    for addr in await _all_addrs(admin, args.cluster):
        try:
            table = await admin.fetch_broker_runtime_stats(addr)
        except (AdminError, RMQError, OSError) as e:  # Java prints the failure and goes on
            print(f"rmq admin brokerStatus: {addr}: {e}", file=sys.stderr)
            status = 1
            continue
        for k, v in sorted(table.items()):
            print(f"{addr:<24} {k:<32}: {v}")
    return status


# -- timerStatus ---------------------------------------------------------------------------


@command("timerStatus", flags=_status_flags)
async def timer_status(admin: Admin, args: argparse.Namespace) -> int | None:
    addrs = [args.broker] if args.broker else await _all_addrs(admin, args.cluster)
    status = None
    for addr in addrs:
        try:
            ck = await admin.get_timer_check_point(addr)
            metrics = await admin.get_timer_metrics(addr)
        except (AdminError, RMQError, OSError) as e:
            print(f"rmq admin timerStatus: {addr}: {e}", file=sys.stderr)
            status = 1
            continue
        for k, v in ck.items():
            print(f"{addr:<24} {k:<32}: {v}")
        for topic, (count, _at) in sorted(metrics.items()):
            print(f"{addr:<24} {'pending ' + topic:<32}: {count}")
    return status


# -- brokerConsumeStats -------------------------------------------------------------------


def _consume_stats_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker", required=True, type=addr_flag, help="Broker address")
    p.add_argument(
        "-t",
        "--timeoutMillis",
        type=int_in(1, 3_600_000),
        default=50_000,
        help="request timeout in ms, 1..3600000 (default 50000)",
    )
    p.add_argument(
        "-l",
        "--level",
        type=int_in(-(2**63), 2**63 - 1),
        default=0,
        help="print only queues whose diff is at least this (default 0)",
    )
    p.add_argument("-o", "--order", type=true_false, default="false", help="orderly topics only: true/false")


def _fmt_time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


@command("brokerConsumeStats", flags=_consume_stats_flags)
async def broker_consume_stats(admin: Admin, args: argparse.Namespace) -> None:
    admin.timeout = args.timeoutMillis / 1000.0
    stats = await admin.fetch_consume_stats_in_broker(args.broker, args.order == "true")
    print(
        f"{'#Topic':<64}  {'#Group':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
        f"{'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime"
    )
    for entry in stats.consume_stats_list:
        for group, lst in entry.items():
            for cs in lst:
                for mq in sorted(cs.offset_table):
                    o = cs.offset_table[mq]
                    diff = o.broker_offset - o.consumer_offset
                    if diff < args.level or o.last_timestamp <= 0:  # Java prints consumed queues only
                        continue
                    print(
                        f"{mq.topic:<64}  {group:<64}  {mq.broker_name:<32}  {mq.queue_id:<4}  "
                        f"{o.broker_offset:<20}  {o.consumer_offset:<20}  {diff:<20}  {_fmt_time(o.last_timestamp)}"
                    )
    print(f"\nDiff Total: {stats.total_diff}")


# -- getBrokerConfig / updateBrokerConfig -------------------------------------------------


def _get_config_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)


async def _print_config(admin: Admin, title: str, addr: str) -> None:
    print(title)
    props = await admin.get_broker_config(addr)
    if not props:
        print(f"Broker[{addr}] has no config property!")
        return
    for k, v in props.items():
        print(f"{k:<50}=  {v}")
    print()


@command("getBrokerConfig", flags=_get_config_flags)
async def get_broker_config(admin: Admin, args: argparse.Namespace) -> None:
    if args.broker:
        await _print_config(admin, f"============{args.broker}============", args.broker)
        return
    info = await admin.examine_broker_cluster_info()
    if args.cluster not in info.cluster_addr_table:
        raise AdminError(f"cluster [{args.cluster}] is not known to the name server")
    for broker in sorted(info.cluster_addr_table[args.cluster]):
        bd = info.broker_addr_table.get(broker)
        if bd is None or MixAll.MASTER_ID not in bd.broker_addrs:
            continue
        master = bd.broker_addrs[MixAll.MASTER_ID]
        await _print_config(admin, f"============Master: {master}============", master)
        for bid, slave in sorted(bd.broker_addrs.items()):
            if bid != MixAll.MASTER_ID:
                await _print_config(admin, f"============My Master: {master}=====Slave: {slave}============", slave)


def _update_config_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)
    p.add_argument("-k", "--key", required=True, type=name, help="config key (camelCase, as in broker.conf)")
    p.add_argument("-v", "--value", required=True, help="config value")


@command("updateBrokerConfig", flags=_update_config_flags)
async def update_broker_config(admin: Admin, args: argparse.Namespace) -> int | None:
    props = {args.key.strip(): args.value.strip()}
    if args.broker:
        await admin.update_broker_config(args.broker, props)
        print(f"update broker config success, {args.broker}")
        return None
    status = None
    for addr in await admin.master_addrs(args.cluster):
        try:
            await admin.update_broker_config(addr, props)
            print(f"update broker config success, {addr}")
        except AdminError as e:  # Java reports each broker and goes on
            print(f"rmq admin updateBrokerConfig: {e}", file=sys.stderr)
            status = 1
    return status


# -- statsAll -----------------------------------------------------------------------------


def _stats_all_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--activeTopic", action="store_true", help="print active topic only")
    p.add_argument("-t", "--topic", type=topic_name, default=None, help="print select topic only")


async def _stats(admin: Admin, addr: str, stats_name: str, key: str) -> BrokerStatsData | None:
    try:
        return await admin.view_broker_stats_data(addr, stats_name, key)
    except AdminError:  # no such item: nothing counted yet (Java skips it)
        return None


@command("statsAll", flags=_stats_all_flags)
async def stats_all(admin: Admin, args: argparse.Namespace) -> None:
    topics = await admin.fetch_all_topic_list()
    print(
        f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} {'#OutTPS':>11} "
        f"{'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}"
    )
    # The groups consuming each topic, and their backlog, from every master's consume stats
    # (Java asks QUERY_TOPIC_CONSUME_BY_WHO then GET_CONSUME_STATS per group; one
    # GET_BROKER_CONSUME_STATS per master answers both).
    consume: dict[str, dict[str, list[ConsumeStats]]] = {}
    masters: dict[str, str] = {}
    info = await admin.examine_broker_cluster_info()
    for broker_name, bd in info.broker_addr_table.items():
        if MixAll.MASTER_ID in bd.broker_addrs:
            masters[broker_name] = bd.broker_addrs[MixAll.MASTER_ID]
    for addr in masters.values():
        try:
            lst = await admin.fetch_consume_stats_in_broker(addr)
        except (AdminError, RMQError, OSError):
            continue
        for group, stats in lst.groups().items():
            for cs in stats:
                for mq in cs.offset_table:
                    consume.setdefault(mq.topic, {}).setdefault(group, []).append(cs)
                    break
    names = info.names()
    for topic in topics:
        if topic.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX)) or topic in names:
            continue
        if args.topic and topic != args.topic:
            continue
        try:
            route = await admin.examine_topic_route_info(topic)
        except (AdminError, RMQError):
            continue
        addrs = [bd.broker_addrs[MixAll.MASTER_ID] for bd in route.broker_datas if MixAll.MASTER_ID in bd.broker_addrs]
        in_tps, in_24h = 0.0, 0
        for addr in addrs:
            bsd = await _stats(admin, addr, TOPIC_PUT_NUMS, topic)
            if bsd is not None:
                in_tps += bsd.stats_minute.tps
                in_24h += bsd.sum_24h()
        groups = consume.get(topic, {})
        if not groups:
            if not args.activeTopic or in_24h > 0:
                print(f"{topic:<64}  {'':<64} {0:>12} {in_tps:>11.2f} {'':>11} {in_24h:>14} {'NO_CONSUMER':>14}")
            continue
        for group in sorted(groups):
            out_tps, out_24h = 0.0, 0
            for addr in addrs:
                bsd = await _stats(admin, addr, GROUP_GET_NUMS, f"{topic}@{group}")
                if bsd is not None:
                    out_tps += bsd.stats_minute.tps
                    out_24h += bsd.sum_24h()
            accumulate = max(0, sum(cs.compute_total_diff() for cs in groups[group]))
            if not args.activeTopic or in_24h > 0 or out_24h > 0:
                print(
                    f"{topic:<64}  {group:<64} {accumulate:>12} {in_tps:>11.2f} {out_tps:>11.2f} "
                    f"{in_24h:>14} {out_24h:>14}"
                )


# -- clusterList's columns ----------------------------------------------------------------


def cluster_row_cells(table: dict[str, str], now_ms: int | None = None) -> tuple[str, str, str, str, str, str]:
    """``(#Version, #InTPS(LOAD), #OutTPS(LOAD), #PCWait(ms), #Hour, #SPACE)`` of mqadmin
    clusterList from one broker's runtime info (Java ClusterListSubCommand.printClusterBaseInfo)."""

    def first_tps(key: str) -> float:
        parts = table.get(key, "").split(" ")
        try:
            return float(parts[0]) if parts and parts[0] else 0.0
        except ValueError:
            return 0.0

    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    hour = 0.0
    earliest = table.get("earliestMessageTimeStamp", "")
    if earliest.isdigit():  # -1: no message yet
        hour = (now_ms - int(earliest)) / 1000.0 / 3600.0
    try:
        space = float(table.get("commitLogDiskRatio") or 0.0)
    except ValueError:
        space = 0.0
    return (
        table.get("brokerVersionDesc", ""),
        f"{first_tps('putTps'):9.2f}({table.get('sendThreadPoolQueueSize', '')},"
        f"{table.get('sendThreadPoolQueueHeadWaitTimeMills', '')}ms)",
        f"{first_tps('getTransferedTps'):9.2f}({table.get('pullThreadPoolQueueSize', '')},"
        f"{table.get('pullThreadPoolQueueHeadWaitTimeMills', '')}ms)",
        table.get("pageCacheLockTimeMills", ""),
        f"{hour:2.2f}",
        f"{space:.4f}",
    )


# -- cleanUnusedTopic, sendMsgStatus ------------------------------------------------------------


def _clean_unused_topic_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker", default=None, type=addr_flag, help="Broker address")
    p.add_argument(
        "-c",
        "--cluster",
        dest="cluster",
        default=None,
        type=name,
        help="cluster name (default with neither: every broker of every cluster)",
    )


@command("cleanUnusedTopic", flags=_clean_unused_topic_flags)
async def clean_unused_topic(admin: Admin, args: argparse.Namespace) -> None:
    # Java CleanUnusedTopicCommand: -b wins over -c; prints "success" (no newline) or "false"
    if args.broker:
        ok = await admin.clean_unused_topic_by_addr(args.broker)
    else:
        ok = await admin.clean_unused_topic(args.cluster)
    print("success" if ok else "false")


def _send_msg_status_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-b",
        "--brokerName",
        dest="broker_name",
        required=True,
        type=name,
        help="Broker Name (the messages go to the topic of that name)",
    )
    p.add_argument(
        "-s",
        "--messageSize",
        dest="size",
        type=int_in(0, 4 * 1024 * 1024),
        default=128,
        help="Message Size (default 128)",
    )
    p.add_argument(
        "-c", "--count", dest="count", type=int_in(1, 1_000_000), default=50, help="send message count (default 50)"
    )


def _send_result_text(r: SendResult) -> str:
    """Java ``SendResult.toString`` (with ``MessageQueue.toString``)."""
    mq = r.message_queue
    return (
        f"SendResult [sendStatus={r.status.name}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
        f"messageQueue=MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}], "
        f"queueOffset={r.queue_offset}]"
    )


@command("sendMsgStatus", flags=_send_msg_status_flags)
async def send_msg_status(admin: Admin, args: argparse.Namespace) -> None:
    def body(size: int) -> bytes:
        # Java SendMsgStatusCommand.buildMessage: "hello jodie" once per 11 bytes asked for
        return b"hello jodie" * ((size + 10) // 11)

    async with admin.tools_producer("PID_SMSC") as producer:
        await producer.send(Message(args.broker_name, body(16)))  # Java's warm-up send
        for _ in range(args.count):
            begin = time.monotonic()
            result = await producer.send(Message(args.broker_name, body(args.size)))
            print(f"rt={int((time.monotonic() - begin) * 1000)}ms, SendResult={_send_result_text(result)}", flush=True)
