"""Topics, subscription groups and clusters: updateTopic, deleteTopic, updateSubGroup,
topicList, topicRoute, clusterList (Java ``tools/command/topic``, ``cluster``, ``consumer``)."""
from __future__ import annotations

import argparse
import asyncio
import json
import sys

from rmq.client.admin import Admin, AdminError
from rmq.errors import RMQError

from ._cmd import (
    MAX_QUEUE_NUMS,
    command,
    group_name,
    int_in,
    name,
    perm,
    targets,
    topic_name,
    true_false,
)
from .broker import cluster_row_cells

_queues = int_in(1, MAX_QUEUE_NUMS)


def _update_topic_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name)
    targets(p)
    p.add_argument("-r", "--readQueueNums", type=_queues, default=8, help="read queues, 1..1024 (default 8)")
    p.add_argument("-w", "--writeQueueNums", type=_queues, default=8, help="write queues, 1..1024 (default 8)")
    p.add_argument("-p", "--perm", type=perm, default=6, help="2 write, 4 read, 6 both (default 6)")
    p.add_argument("-o", "--order", type=true_false, default="false", help="orderly topic: true/false (default false)")


@command("updateTopic", "create or update a topic on brokers", flags=_update_topic_flags)
async def update_topic(admin: Admin, args: argparse.Namespace) -> None:
    for addr in await admin.master_addrs(args.cluster, args.broker):
        await admin.create_and_update_topic_config(
            addr, args.topic, read_queue_nums=args.readQueueNums, write_queue_nums=args.writeQueueNums,
            perm=args.perm, order=args.order == "true")
        print(f"create topic to {addr} success.")


def _delete_topic_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name)
    p.add_argument("-c", "--clusterName", dest="cluster", default=None, type=name)


@command("deleteTopic", "delete a topic from brokers and the name server", flags=_delete_topic_flags)
async def delete_topic(admin: Admin, args: argparse.Namespace) -> None:
    for addr in await admin.master_addrs(args.cluster):
        await admin.delete_topic_in_broker(addr, args.topic)
    await admin.delete_topic_in_namesrv(args.topic)
    print(f"delete topic [{args.topic}] from cluster success.")


def _update_sub_group_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True, type=group_name)
    targets(p)
    p.add_argument("-r", "--retryMaxTimes", type=int_in(0, 1000), default=16,
                   help="maxReconsumeTimes, 0..1000 (default 16)")
    p.add_argument("-s", "--consumeEnable", type=true_false, default="true", help="true/false (default true)")
    p.add_argument("-d", "--consumeBroadcastEnable", type=true_false, default="true",
                   help="true/false (default true)")


@command("updateSubGroup", "create or update a subscription group on brokers", flags=_update_sub_group_flags)
async def update_sub_group(admin: Admin, args: argparse.Namespace) -> None:
    for addr in await admin.master_addrs(args.cluster, args.broker):
        await admin.create_and_update_subscription_group_config(
            addr, args.group, consume_enable=args.consumeEnable == "true",
            consume_broadcast_enable=args.consumeBroadcastEnable == "true", retry_max_times=args.retryMaxTimes)
        print(f"create subscription group to {addr} success.")


@command("topicList", "list the topics the name server knows")
async def topic_list(admin: Admin, args: argparse.Namespace) -> None:
    for topic in await admin.fetch_all_topic_list():
        print(topic)


def _topic_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name)


@command("topicRoute", "print a topic's route as the name server answers it", flags=_topic_flag)
async def topic_route(admin: Admin, args: argparse.Namespace) -> None:
    route = await admin.examine_topic_route_info(args.topic)
    print(json.dumps(route.to_json(), indent=2, sort_keys=True))


def _cluster_list_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--moreStats", action="store_true", help="Print more stats")
    p.add_argument("-i", "--interval", type=int_in(1, 86_400), default=None,
                   help="print again every this many seconds, 1..86400 (until interrupted)")


@command("clusterList", "List all of clusters", flags=_cluster_list_flags)
async def cluster_list(admin: Admin, args: argparse.Namespace) -> None:
    # Java ClusterListSubCommand: the brokers with their load (from each broker's runtime info),
    # or with -m their message totals of yesterday and today.
    while True:
        info = await admin.examine_broker_cluster_info()
        if args.moreStats:
            print(f"{'#Cluster Name':<16}  {'#Broker Name':<32} {'#InTotalYest':>14} {'#OutTotalYest':>14} "
                  f"{'#InTotalToday':>14} {'#OutTotalToday':>14}")
        else:
            print(f"{'#Cluster Name':<16}  {'#Broker Name':<22}  {'#BID':<4}  {'#Addr':<22} {'#Version':<16} "
                  f"{'#InTPS(LOAD)':>19} {'#OutTPS(LOAD)':>19} {'#PCWait(ms)':>10} {'#Hour':>5} {'#SPACE':>6}")
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for broker in sorted(names):
                bd = info.broker_addr_table.get(broker)
                for bid, addr in sorted(bd.broker_addrs.items() if bd is not None else ()):
                    try:
                        table = await admin.fetch_broker_runtime_stats(addr)
                    except (AdminError, RMQError, OSError):  # Java prints the row with blanks
                        table = {}
                    if args.moreStats:
                        def n(key: str, t: dict[str, str] = table) -> int:
                            v = t.get(key, "0")
                            return int(v) if v.lstrip("-").isdigit() else 0
                        print(f"{cluster:<16}  {broker:<32} "
                              f"{n('msgPutTotalTodayMorning') - n('msgPutTotalYesterdayMorning'):>14} "
                              f"{n('msgGetTotalTodayMorning') - n('msgGetTotalYesterdayMorning'):>14} "
                              f"{n('msgPutTotalTodayNow') - n('msgPutTotalTodayMorning'):>14} "
                              f"{n('msgGetTotalTodayNow') - n('msgGetTotalTodayMorning'):>14}")
                        continue
                    version, in_tps, out_tps, pc_wait, hour, space = cluster_row_cells(table)
                    print(f"{cluster:<16}  {broker:<22}  {bid:<4}  {addr:<22} {version:<16} {in_tps:>19} "
                          f"{out_tps:>19} {pc_wait:>10} {hour:>5} {space:>6}")
        if args.interval is None:
            return
        sys.stdout.flush()
        await asyncio.sleep(args.interval)
