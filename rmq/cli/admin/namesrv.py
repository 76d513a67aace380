"""Name servers and store maintenance: getNamesrvConfig, updateNamesrvConfig, wipeWritePerm,
addWritePerm, updateKvConfig, deleteKvConfig, deleteSubGroup, cleanExpiredCQ,
deleteExpiredCommitLog, queryCq (Java ``tools/command/namesrv``, ``broker``, ``queue``,
``consumer/DeleteSubscriptionGroupCommand``), with mqadmin's flags and output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable

from rmq.client.admin import Admin, AdminError
from rmq.common.constants import MixAll
from rmq.errors import RMQError

from ._cmd import addr, command, group_name, int_in, name, topic_name, true_false

_RULE = "======================================"


def _text(limit: int = 65_536) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not text.strip() or len(text) > limit:
            raise argparse.ArgumentTypeError(f"{text[:200]!r} is not a value (expected 1..{limit} characters)")
        return text.strip()

    return parse


def _broker_or_cluster(p: argparse.ArgumentParser) -> None:
    """cleanExpiredCQ / deleteExpiredCommitLog: ``-b brokerAddr`` or ``-c cluster`` (neither:
    every broker of every cluster)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerAddr", dest="broker", default=None, type=addr, help="one broker ip:port")
    g.add_argument("-c", "--cluster", dest="cluster", default=None, type=name, help="every broker of this cluster")


# -- name-server configuration ----------------------------------------------------------------


@command("getNamesrvConfig")
async def get_namesrv_config(admin: Admin, args: argparse.Namespace) -> None:
    for ns, props in (await admin.get_name_server_config()).items():
        print(f"============{ns}============")
        for k, v in props.items():
            print(f"{k:<50}=  {v}")


def _update_namesrv_config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", "--key", required=True, type=_text(1024), help="config key (camelCase, as in namesrv.conf)")
    p.add_argument("-v", "--value", required=True, type=_text(), help="config value")


@command("updateNamesrvConfig", flags=_update_namesrv_config_flags)
async def update_namesrv_config(admin: Admin, args: argparse.Namespace) -> None:
    await admin.update_name_server_config({args.key: args.value})
    print(f"update name server config success![{', '.join(admin.namesrv_addrs)}]\n{args.key} : {args.value}")


# -- write permission -------------------------------------------------------------------------


def _broker_name_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, type=name, help="broker name")


async def _each_namesrv(admin: Admin, args: argparse.Namespace, what: str, wipe: bool) -> int:
    failed = 0
    for ns in admin.namesrv_addrs:
        try:
            if wipe:
                n = await admin.wipe_write_perm_of_broker(ns, args.broker_name)
            else:
                n = await admin.add_write_perm_of_broker(ns, args.broker_name)
            print(f"{what} write perm of broker[{args.broker_name}] in name server[{ns}] OK, {n}")
        except (RMQError, OSError) as e:
            failed += 1
            print(f"{what} write perm of broker[{args.broker_name}] in name server[{ns}] Failed")
            print(f"rmq admin {args.admin_command}: {ns}: {e}", file=sys.stderr)
    return 1 if failed else 0


@command("wipeWritePerm", flags=_broker_name_flag)
async def wipe_write_perm(admin: Admin, args: argparse.Namespace) -> int:
    return await _each_namesrv(admin, args, "wipe", True)


@command("addWritePerm", flags=_broker_name_flag)
async def add_write_perm(admin: Admin, args: argparse.Namespace) -> int:
    return await _each_namesrv(admin, args, "add", False)


# -- KV config --------------------------------------------------------------------------------


def _kv_flags(p: argparse.ArgumentParser, value: bool) -> None:
    p.add_argument("-s", "--namespace", required=True, type=_text(1024), help="the namespace")
    p.add_argument("-k", "--key", required=True, type=_text(1024), help="the key name")
    if value:
        p.add_argument("-v", "--value", required=True, type=_text(), help="the key value")


@command("updateKvConfig", flags=lambda p: _kv_flags(p, True))
async def update_kv_config(admin: Admin, args: argparse.Namespace) -> None:
    await admin.create_and_update_kv_config(args.namespace, args.key, args.value)
    print("create or update kv config to namespace success.")


@command("deleteKvConfig", flags=lambda p: _kv_flags(p, False))
async def delete_kv_config(admin: Admin, args: argparse.Namespace) -> None:
    await admin.delete_kv_config(args.namespace, args.key)
    print("delete kv config from namespace success.")


# -- subscription groups ----------------------------------------------------------------------


def _delete_sub_group_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument(
        "-b",
        "--brokerAddr",
        dest="broker",
        default=None,
        type=addr,
        help="delete the subscription group from this broker",
    )
    g.add_argument(
        "-c",
        "--clusterName",
        dest="cluster",
        default=None,
        type=name,
        help="delete the subscription group from every master of this cluster, and its retry and DLQ topics",
    )
    p.add_argument("-g", "--groupName", dest="group", required=True, type=group_name, help="subscription group name")
    p.add_argument(
        "-r",
        "--removeOffset",
        dest="remove_offset",
        default="false",
        type=true_false,
        help="remove the group's offsets too: true/false (default false)",
    )


@command("deleteSubGroup", flags=_delete_sub_group_flags)
async def delete_sub_group(admin: Admin, args: argparse.Namespace) -> None:
    remove = args.remove_offset == "true"
    if args.broker:
        await admin.delete_subscription_group(args.broker, args.group, remove)
        print(f"delete subscription group [{args.group}] from broker [{args.broker}] success.")
        return
    for master in await admin.master_addrs(args.cluster):
        await admin.delete_subscription_group(master, args.group, remove)
        print(f"delete subscription group [{args.group}] from broker [{master}] in cluster [{args.cluster}] success.")
    # mqadmin then deletes the group's retry and DLQ topics from the cluster (a failure there is
    # reported, not fatal).
    for topic in (MixAll.RETRY_GROUP_TOPIC_PREFIX + args.group, MixAll.DLQ_GROUP_TOPIC_PREFIX + args.group):
        try:
            for master in await admin.master_addrs(args.cluster):
                await admin.delete_topic_in_broker(master, topic)
            await admin.delete_topic_in_namesrv(topic)
        except (AdminError, RMQError, OSError) as e:
            print(f"rmq admin deleteSubGroup: deleting topic {topic}: {e}", file=sys.stderr)


# -- store maintenance ------------------------------------------------------------------------


@command("cleanExpiredCQ", flags=_broker_or_cluster)
async def clean_expired_cq(admin: Admin, args: argparse.Namespace) -> None:
    await _on_broker_or_cluster(args, admin.clean_expired_consumer_queue_by_addr, admin.clean_expired_consumer_queue)


@command("deleteExpiredCommitLog", flags=_broker_or_cluster)
async def delete_expired_commit_log(admin: Admin, args: argparse.Namespace) -> None:
    await _on_broker_or_cluster(args, admin.delete_expired_commit_log_by_addr, admin.delete_expired_commit_log)


async def _on_broker_or_cluster(
    args: argparse.Namespace,
    by_addr: Callable[[str], Awaitable[bool]],
    by_cluster: Callable[[str | None], Awaitable[bool]],
) -> None:
    # mqadmin cleanExpiredCQ / deleteExpiredCommitLog: -b one broker, else every broker of -c
    ok = await (by_addr(args.broker) if args.broker else by_cluster(args.cluster))
    print("success" if ok else "false")


def _query_cq_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic name")
    p.add_argument("-q", "--queue", required=True, type=int_in(0, 65_535), help="queue id, e.g. 1")
    p.add_argument("-i", "--index", required=True, type=int_in(0, 2**63 - 1), help="start queue index")
    p.add_argument("-c", "--count", default=10, type=int_in(1, 10_000), help="how many units, 1..10000 (default 10)")
    p.add_argument(
        "-b", "--broker", default=None, type=addr, help="broker ip:port (default: the topic's first broker's master)"
    )
    p.add_argument("-g", "--consumer", default=None, type=group_name, help="consumer group")


@command("queryCq", flags=_query_cq_flags)
async def query_cq(admin: Admin, args: argparse.Namespace) -> None:
    broker = args.broker
    if broker is None:
        route = await admin.examine_topic_route_info(args.topic)
        masters = [b.broker_addrs[0] for b in route.broker_datas if 0 in b.broker_addrs]
        if not masters:
            raise AdminError("No topic route data!")
        broker = masters[0]
    body = await admin.query_consume_queue(broker, args.topic, args.queue, args.index, args.count, args.consumer)
    if body.subscription_data is not None:
        print(f"Subscription data: \n{json.dumps(body.subscription_data, indent=chr(9), separators=(',', ':'))}")
        print(_RULE)
    if body.filter_data is not None:
        print(f"Filter data: \n{body.filter_data}")
        print(_RULE)
    print(f"Queue data: \nmax: {body.max_queue_index}, min: {body.min_queue_index}")
    print(_RULE)
    for i, unit in enumerate(body.queue_data or (), start=args.index):
        print(f"idx: {i}\n{unit}\n{_RULE}")
