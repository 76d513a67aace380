"""What a migration needs, written to files as Java's mqadmin writes them (Java
``tools/command/export``): exportMetadata (``metadata.json``, or ``topic.json`` /
``subscriptionGroup.json``), exportConfigs (``configs.json``) and exportMetrics
(``metrics.json``), each under ``-f`` (default ``/tmp/rocketmq/export``, created if missing).

The JSON has Java's shape and names, pretty-printed as fastjson's ``toJSONString(o, true)``
(tab indents, ``"key":value``): the topic and subscription-group entries are the brokers' own
``TopicConfig`` / ``SubscriptionGroupConfig`` objects (what ``GET_ALL_TOPIC_CONFIG`` /
``GET_ALL_SUBSCRIPTIONGROUP_CONFIG`` return), broker properties are strings as in a Java
``Properties``. Apache RocketMQ's and rmq's ``updateTopic`` / ``updateSubGroup`` take them back.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from rmq.client.admin import Admin, AdminError
from rmq.client.admin._brokers import TOPIC_PUT_NUMS
from rmq.common.constants import TopicValidator
from rmq.protocol.body.conns import version_desc
from rmq.protocol.body.stats import BrokerStatsData
from rmq.protocol.command import DEFAULT_VERSION

from ._cmd import command, name, targets

DEFAULT_DIR = "/tmp/rocketmq/export"  # Java ExportMetadataCommand.DEFAULT_FILE_PATH

#: The broker properties exportConfigs keeps (Java ExportConfigsCommand.needBrokerProprties).
CONFIG_KEYS = (
    "brokerClusterName",
    "brokerId",
    "brokerName",
    "brokerRole",
    "fileReservedTime",
    "filterServerNums",
    "flushDiskType",
    "maxMessageSize",
    "messageDelayLevel",
    "msgTraceTopicName",
    "slaveReadEnable",
    "traceOn",
    "traceTopicEnable",
    "useTLS",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
)


def write_json(directory: str, file_name: str, data: Any) -> str:
    """``directory/file_name`` with ``data`` as fastjson pretty-prints it (Java
    ``MixAll.string2FileNotSafe(JSON.toJSONString(data, true), path)``); returns the path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, file_name)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent="\t", separators=(",", ":"), ensure_ascii=False))
    os.replace(tmp, path)
    return path


async def _masters_and_slaves(admin: Admin, cluster: str) -> dict[str, dict[int, str]]:
    """``{brokerName: {brokerId: addr}}`` of ``cluster``; AdminError when it is unknown (Java
    CommandUtil.fetchMasterAndSlaveDistinguish prints an error and exports nothing)."""
    info = await admin.examine_broker_cluster_info()
    if cluster not in info.cluster_addr_table:
        raise AdminError(f"cluster [{cluster}] is not known to the name server")
    out: dict[str, dict[int, str]] = {}
    for broker in sorted(info.cluster_addr_table[cluster]):
        bd = info.broker_addr_table.get(broker)
        if bd is not None:
            out[broker] = dict(bd.broker_addrs)
    return out


def _file_flag(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "-f",
        "--filePath",
        dest="file_path",
        default=DEFAULT_DIR,
        help=f"the directory {what} is written to (default {DEFAULT_DIR})",
    )


# -- exportMetadata -------------------------------------------------------------------------


def _metadata_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)
    _file_flag(p, "metadata.json (topic.json with -t, subscriptionGroup.json with -g)")
    only = p.add_mutually_exclusive_group()
    only.add_argument("-t", "--topic", dest="only_topics", action="store_true", help="only export topic metadata")
    only.add_argument(
        "-g",
        "--subscriptionGroup",
        dest="only_groups",
        action="store_true",
        help="only export subscriptionGroup metadata",
    )
    p.add_argument(
        "-s",
        "--specialTopic",
        dest="special",
        action="store_true",
        help="also export %%RETRY%% and %%DLQ%% topics (default: left out)",
    )


@command("exportMetadata", flags=_metadata_flags)
async def export_metadata(admin: Admin, args: argparse.Namespace) -> None:
    if args.broker is not None:
        # Java -b: one broker's tables as the broker answers them, with their dataVersion;
        # without -t or -g Java writes nothing, we write both (metadata.json).
        if args.only_topics:
            topics = await admin.get_user_topic_config(args.broker, args.special)
            path = write_json(
                args.file_path,
                "topic.json",
                {"dataVersion": topics.data_version.to_json(), "topicConfigTable": topics.topic_config_table},
            )
        elif args.only_groups:
            groups = await admin.get_user_subscription_group(args.broker)
            path = write_json(
                args.file_path,
                "subscriptionGroup.json",
                {
                    "dataVersion": groups.data_version.to_json(),
                    "subscriptionGroupTable": groups.subscription_group_table,
                },
            )
        else:
            topics = await admin.get_user_topic_config(args.broker, args.special)
            groups = await admin.get_user_subscription_group(args.broker)
            path = write_json(
                args.file_path,
                "metadata.json",
                {
                    "exportTime": int(time.time() * 1000),
                    "subscriptionGroupTable": groups.subscription_group_table,
                    "topicConfigTable": topics.topic_config_table,
                },
            )
        print(f"export {path} success")
        return
    # Java -c: every master of the cluster; a topic (group) on several masters is one entry
    # with the queue counts (retry queue counts) added up.
    topic_table: dict[str, dict[str, Any]] = {}
    group_table: dict[str, dict[str, Any]] = {}
    for addrs in (await _masters_and_slaves(admin, args.cluster)).values():
        master = addrs.get(0)
        if master is None:
            continue
        for topic, cfg in (await admin.get_user_topic_config(master, args.special)).topic_config_table.items():
            entry = dict(cfg)
            if topic in topic_table:
                for k in ("readQueueNums", "writeQueueNums"):
                    entry[k] = int(entry.get(k, 0)) + int(topic_table[topic].get(k, 0))
            topic_table[topic] = entry
        for group, gcfg in (await admin.get_user_subscription_group(master)).subscription_group_table.items():
            entry = dict(gcfg)
            if group in group_table:
                entry["retryQueueNums"] = int(entry.get("retryQueueNums", 0)) + int(
                    group_table[group].get("retryQueueNums", 0)
                )
            group_table[group] = entry
    result: dict[str, Any] = {"exportTime": int(time.time() * 1000)}
    if args.only_topics:
        result["topicConfigTable"] = topic_table
        file_name = "topic.json"
    elif args.only_groups:
        result["subscriptionGroupTable"] = group_table
        file_name = "subscriptionGroup.json"
    else:
        result["topicConfigTable"] = topic_table
        result["subscriptionGroupTable"] = group_table
        file_name = "metadata.json"
    print(f"export {write_json(args.file_path, file_name, result)} success")


# -- exportConfigs --------------------------------------------------------------------------


def _cluster_flags(what: str) -> Any:
    def flags(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "-c", "--clusterName", dest="cluster", required=True, type=name, help="choose a cluster to export"
        )
        _file_flag(p, what)

    return flags


@command("exportConfigs", flags=_cluster_flags("configs.json"))
async def export_configs(admin: Admin, args: argparse.Namespace) -> None:
    broker_configs: dict[str, dict[str, str | None]] = {}
    masters = slaves = 0
    for broker, addrs in (await _masters_and_slaves(admin, args.cluster)).items():
        master = addrs.get(0)
        if master is None:  # Java: only brokers with a master are counted
            continue
        props = await admin.get_broker_config(master)
        masters += 1
        slaves += len(addrs) - 1
        broker_configs[props.get("brokerName", broker)] = {k: props.get(k) for k in CONFIG_KEYS}
    result = {
        "brokerConfigs": broker_configs,
        "clusterScale": {
            "namesrvSize": len(admin.namesrv_addrs),
            "masterBrokerSize": masters,
            "slaveBrokerSize": slaves,
        },
    }
    print(f"export {write_json(args.file_path, 'configs.json', result)} success")


# -- exportMetrics --------------------------------------------------------------------------


def _first_number(text: str | None) -> float:
    """The first figure of a ``putTps``-style value (``"12.5 11.0 10.2"``), 0 when absent."""
    try:
        return float((text or "0").split(" ")[0])
    except ValueError:
        return 0.0


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


async def _stats(admin: Admin, addr: str, topic: str) -> BrokerStatsData | None:
    try:
        return await admin.view_broker_stats_data(addr, TOPIC_PUT_NUMS, topic)
    except AdminError:  # nothing counted for it yet (Java catches and uses 0)
        return None


@command("exportMetrics", flags=_cluster_flags("metrics.json"))
async def export_metrics(admin: Admin, args: argparse.Namespace) -> None:
    total_tps = {"totalNormalInTps": 0.0, "totalNormalOutTps": 0.0, "totalTransInTps": 0.0, "totalScheduleInTps": 0.0}
    total_day = {"normalOneDayInNum": 0, "normalOneDayOutNum": 0, "transOneDayInNum": 0, "scheduleOneDayInNum": 0}
    report: dict[str, Any] = {}
    for broker, addrs in (await _masters_and_slaves(admin, args.cluster)).items():
        addr = addrs.get(0)
        if addr is None:
            continue
        kv = await admin.fetch_broker_runtime_stats(addr)
        props = await admin.get_broker_config(addr)
        groups = (await admin.get_user_subscription_group(addr)).subscription_group_table
        topics = (await admin.get_user_topic_config(addr, False)).topic_config_table
        trans = await _stats(admin, addr, TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC)
        sched = await _stats(admin, addr, TopicValidator.RMQ_SYS_SCHEDULE_TOPIC)
        tps = {
            "normalInTps": _first_number(kv.get("putTps")),
            "normalOutTps": _first_number(kv.get("getTransferedTps")),
            "transInTps": trans.stats_minute.tps if trans else 0.0,
            "scheduleInTps": sched.stats_minute.tps if sched else 0.0,
        }
        day = {
            "normalOneDayInNum": _int(kv.get("msgPutTotalTodayMorning")) - _int(kv.get("msgPutTotalYesterdayMorning")),
            "normalOneDayOutNum": _int(kv.get("msgGetTotalTodayMorning")) - _int(kv.get("msgGetTotalYesterdayMorning")),
            "transOneDayInNum": trans.sum_24h() if trans else 0,
            "scheduleOneDayInNum": sched.sum_24h() if sched else 0,
        }
        for (tk, tv), (dk, dv) in zip(tps.items(), day.items(), strict=True):
            total_tps["total" + tk[0].upper() + tk[1:]] += tv
            total_day[dk] += dv
        clients: set[str] = set()
        for group in groups:
            try:
                cc = await admin.examine_consumer_connection_info(group)
            except AdminError:  # no member online (Java skips the group)
                continue
            clients.update(f"{c.language}%{version_desc(c.version)}" for c in cc.connection_set)
        report[broker] = {
            # Java reads the CPU count from clientCallbackExecutorThreads (its default is the CPU count)
            "runtimeEnv": {
                "cpuNum": props.get("clientCallbackExecutorThreads"),
                "totalMemKBytes": kv.get("totalMemKBytes"),
            },
            "runtimeQuota": {
                "diskRatio": {
                    "commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                    "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio"),
                },
                "tps": tps,
                "oneDayNum": day,
                "messageAverageSize": kv.get("putMessageAverageSize"),
                "topicSize": len(topics),
                "groupSize": len(groups),
            },
            "runtimeVersion": {"rocketmqVersion": version_desc(DEFAULT_VERSION), "clientInfo": sorted(clients)},
        }
    result = {"evaluateReport": report, "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day}}
    print(f"export {write_json(args.file_path, 'metrics.json', result)} success")
