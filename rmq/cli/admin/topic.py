"""Topics, subscription groups, clusters and the message tools: updateTopic, deleteTopic,
updateSubGroup, topicList, topicRoute, clusterList, updateTopicPerm, topicStatus,
topicClusterList, allocateMQ, sendMessage, consumeMessage, printMsg, printMsgByQueue,
checkMsgSendRT (Java ``tools/command/topic``, ``cluster``, ``consumer``, ``message``). Output
as mqadmin prints it (its printf formats), booleans as ``true``/``false``."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import decimal
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence

from rmq.client.admin import Admin, AdminError
from rmq.client.admin._topics import topic_sys_flag
from rmq.common.constants import MixAll
from rmq.common.topic_attributes import message_type_of_attributes, parse_attributes
from rmq.errors import RMQError
from rmq.types import MessageExt, MessageQueue, PullResult, PullStatus

from ._cmd import (
    MAX_QUEUE_NUMS,
    charset,
    command,
    group_name,
    human_time_ms,
    int_in,
    name,
    perm,
    targets,
    timestamp_ms,
    topic_name,
    true_false,
)
from .broker import cluster_row_cells

_queues = int_in(1, MAX_QUEUE_NUMS)


def _printf(fmt: str, *values: object) -> None:
    """Java's ``System.out.printf(fmt + "%n", ...)``: mqadmin's column formats kept verbatim."""
    print(fmt % values)


def _update_topic_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic name")
    targets(p)
    p.add_argument("-r", "--readQueueNums", type=_queues, default=8, help="read queues, 1..1024 (default 8)")
    p.add_argument("-w", "--writeQueueNums", type=_queues, default=8, help="write queues, 1..1024 (default 8)")
    p.add_argument("-p", "--perm", type=perm, default=6, help="2 write, 4 read, 6 both (default 6)")
    p.add_argument("-o", "--order", type=true_false, default="false", help="orderly topic: true/false (default false)")
    p.add_argument("-u", "--unit", type=true_false, default="false", help="a unit topic: true/false (default false)")
    p.add_argument(
        "-s", "--hasUnitSub", type=true_false, default="false", help="has unit subscribers: true/false (default false)"
    )
    p.add_argument(
        "-a",
        "--attributes",
        type=_attributes,
        default=None,
        help="Java 5 topic attributes: +name=value adds or changes, -name removes, comma-separated, "
        "e.g. +message.type=FIFO (NORMAL, FIFO, DELAY, TRANSACTION; default: none)",
    )


def _attributes(text: str) -> str:
    """mqadmin updateTopic ``-a`` (Java AttributeParser.parseToMap, checked before sending)."""
    text = text.strip()
    try:
        parse_attributes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


@command("updateTopic", flags=_update_topic_flags)
async def update_topic(admin: Admin, args: argparse.Namespace) -> None:
    sys_flag = topic_sys_flag(args.unit == "true", args.hasUnitSub == "true")
    for addr in await admin.master_addrs(args.cluster, args.broker):
        await admin.create_and_update_topic_config(
            addr,
            args.topic,
            read_queue_nums=args.readQueueNums,
            write_queue_nums=args.writeQueueNums,
            perm=args.perm,
            order=args.order == "true",
            topic_sys_flag=sys_flag,
            attributes=args.attributes,
        )
        print(f"create topic to {addr} success.")


def _delete_topic_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic name")
    p.add_argument(
        "-c",
        "--clusterName",
        dest="cluster",
        default=None,
        type=name,
        help="delete from every master of this cluster (default: every master)",
    )


@command("deleteTopic", flags=_delete_topic_flags)
async def delete_topic(admin: Admin, args: argparse.Namespace) -> None:
    for addr in await admin.master_addrs(args.cluster):
        await admin.delete_topic_in_broker(addr, args.topic)
    await admin.delete_topic_in_namesrv(args.topic)
    print(f"delete topic [{args.topic}] from cluster success.")


def _update_sub_group_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True, type=group_name, help="consumer group name")
    targets(p)
    p.add_argument(
        "-r", "--retryMaxTimes", type=int_in(0, 1000), default=16, help="maxReconsumeTimes, 0..1000 (default 16)"
    )
    p.add_argument("-s", "--consumeEnable", type=true_false, default="true", help="true/false (default true)")
    p.add_argument("-d", "--consumeBroadcastEnable", type=true_false, default="true", help="true/false (default true)")
    p.add_argument(
        "-m",
        "--consumeFromMinEnable",
        type=true_false,
        default="true",
        help="a new group starts from the min offset: true/false (default true)",
    )
    p.add_argument(
        "-q",
        "--retryQueueNums",
        type=int_in(0, MAX_QUEUE_NUMS),
        default=1,
        help=f"retry queues, 0..{MAX_QUEUE_NUMS} (default 1)",
    )
    p.add_argument(
        "-i",
        "--brokerId",
        type=int_in(0, 1 << 30),
        default=MixAll.MASTER_ID,
        help="consume from this broker id (default 0, the master)",
    )
    p.add_argument(
        "-w",
        "--whichBrokerWhenConsumeSlowly",
        type=int_in(0, 1 << 30),
        default=1,
        help="the broker id to consume from when consuming slowly (default 1)",
    )
    p.add_argument(
        "-a",
        "--notifyConsumerIdsChanged",
        dest="notifyConsumerIdsChangedEnable",
        type=true_false,
        default="true",
        help="notify consumers when the group's members change: true/false (default true)",
    )
    p.add_argument(
        "-o",
        "--consumeMessageOrderly",
        type=true_false,
        default="false",
        help="consume FIFO topics in message-group order: true/false (default false; Java 5)",
    )


@command("updateSubGroup", flags=_update_sub_group_flags)
async def update_sub_group(admin: Admin, args: argparse.Namespace) -> None:
    for addr in await admin.master_addrs(args.cluster, args.broker):
        await admin.create_and_update_subscription_group_config(
            addr,
            args.group,
            consume_enable=args.consumeEnable == "true",
            consume_broadcast_enable=args.consumeBroadcastEnable == "true",
            retry_max_times=args.retryMaxTimes,
            consume_from_min_enable=args.consumeFromMinEnable == "true",
            retry_queue_nums=args.retryQueueNums,
            broker_id=args.brokerId,
            which_broker_when_consume_slowly=args.whichBrokerWhenConsumeSlowly,
            notify_consumer_ids_changed_enable=args.notifyConsumerIdsChangedEnable == "true",
            # (Java 5's field; sent only when set, so 4.x frames keep their bytes: absent is false)
            consume_message_orderly=True if args.consumeMessageOrderly == "true" else None,
        )
        print(f"create subscription group to {addr} success.")


def _topic_list_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-c",
        "--clusterModel",
        action="store_true",
        help="print each topic's cluster and consumer groups (default: names only)",
    )
    p.add_argument(
        "-m",
        "--messageType",
        action="store_true",
        help="print each topic's message type as its brokers declare it (message.type; UNTYPED "
        "for none; rmq only, default: names only)",
    )


async def _message_types(admin: Admin) -> dict[str, str]:
    """Topic → its ``message.type`` attribute, from every master's GET_ALL_TOPIC_CONFIG."""
    out: dict[str, str] = {}
    for addr in await admin.master_addrs():
        wrapper = await admin.get_user_topic_config(addr, special_topic=True)
        for topic, tc in wrapper.topic_config_table.items():
            attrs = tc.get("attributes")
            t = message_type_of_attributes(attrs if isinstance(attrs, dict) else None)
            if t is not None:
                out[topic] = t.value
    return out


@command("topicList", flags=_topic_list_flags)
async def topic_list(admin: Admin, args: argparse.Namespace) -> None:
    if args.messageType and not args.clusterModel:
        types = await _message_types(admin)
        _printf("%-64s  %s", "#Topic", "#Message Type")
        for topic in await admin.fetch_all_topic_list():
            _printf("%-64s  %s", topic[:64], types.get(topic, "UNTYPED"))
        return
    if not args.clusterModel:
        for topic in await admin.fetch_all_topic_list():
            print(topic)
        return
    rows = await admin.examine_topic_consumers()
    _printf("%-20s  %-48s  %-48s", "#Cluster Name", "#Topic", "#Consumer Group")
    for row in rows:
        for group in row.groups or ("",):
            _printf("%-20s  %-64s  %-64s", row.cluster[:20], row.topic[:64], group[:64])
    unknown = [r.topic for r in rows if not r.groups_known]
    if unknown:
        print(
            f"rmq admin topicList: consumer groups unknown for {len(unknown)} topic(s) (the broker does not "
            f"answer QUERY_TOPIC_CONSUME_BY_WHO), e.g. {unknown[0]}",
            file=sys.stderr,
        )


def _topic_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic name")


def _topic_route_flags(p: argparse.ArgumentParser) -> None:
    _topic_flag(p)
    p.add_argument("-l", "--list", action="store_true", help="a table instead of JSON (default JSON)")


_ROUTE_FORMAT = "%-45s %-32s %-50s %-10s %-11s %-5s"


@command("topicRoute", flags=_topic_route_flags)
async def topic_route(admin: Admin, args: argparse.Namespace) -> None:
    route = await admin.examine_topic_route_info(args.topic)
    if not args.list:
        print(json.dumps(route.to_json(), indent=2, sort_keys=True))
        return
    # Java TopicRouteSubCommand.printData: one row per broker, its addresses as a Java map
    queues = {q.broker_name: q for q in route.queue_datas}
    _printf(_ROUTE_FORMAT, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    total_read = total_write = 0
    for bd in route.broker_datas:
        q = queues.get(bd.broker_name)
        if q is None:
            continue
        total_read += q.read_queue_nums
        total_write += q.write_queue_nums
        addrs = "{" + ", ".join(f"{bid}={a}" for bid, a in sorted(bd.broker_addrs.items())) + "}"
        _printf(_ROUTE_FORMAT, bd.cluster, bd.broker_name, addrs, q.read_queue_nums, q.write_queue_nums, q.perm)
    print("-" * 158)
    _printf(_ROUTE_FORMAT, "Total:", len(queues), "", total_read, total_write, "")


def _cluster_list_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-m",
        "--moreStats",
        action="store_true",
        help="message totals of yesterday and today instead of the load (default off)",
    )
    p.add_argument(
        "-i",
        "--interval",
        type=int_in(1, 86_400),
        default=None,
        help="print again every this many seconds, 1..86400, until interrupted (default: once)",
    )


@command("clusterList", flags=_cluster_list_flags)
async def cluster_list(admin: Admin, args: argparse.Namespace) -> None:
    # Java ClusterListSubCommand: the brokers with their load (from each broker's runtime info),
    # or with -m their message totals of yesterday and today.
    while True:
        info = await admin.examine_broker_cluster_info()
        if args.moreStats:
            print(
                f"{'#Cluster Name':<16}  {'#Broker Name':<32} {'#InTotalYest':>14} {'#OutTotalYest':>14} "
                f"{'#InTotalToday':>14} {'#OutTotalToday':>14}"
            )
        else:
            print(
                f"{'#Cluster Name':<16}  {'#Broker Name':<22}  {'#BID':<4}  {'#Addr':<22} {'#Version':<16} "
                f"{'#InTPS(LOAD)':>19} {'#OutTPS(LOAD)':>19} {'#PCWait(ms)':>10} {'#Hour':>5} {'#SPACE':>6}"
            )
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

                        print(
                            f"{cluster:<16}  {broker:<32} "
                            f"{n('msgPutTotalTodayMorning') - n('msgPutTotalYesterdayMorning'):>14} "
                            f"{n('msgGetTotalTodayMorning') - n('msgGetTotalYesterdayMorning'):>14} "
                            f"{n('msgPutTotalTodayNow') - n('msgPutTotalTodayMorning'):>14} "
                            f"{n('msgGetTotalTodayNow') - n('msgGetTotalTodayMorning'):>14}"
                        )
                        continue
                    version, in_tps, out_tps, pc_wait, hour, space = cluster_row_cells(table)
                    print(
                        f"{cluster:<16}  {broker:<22}  {bid:<4}  {addr:<22} {version:<16} {in_tps:>19} "
                        f"{out_tps:>19} {pc_wait:>10} {hour:>5} {space:>6}"
                    )
        if args.interval is None:
            return
        sys.stdout.flush()
        await asyncio.sleep(args.interval)


# -- more topic commands (after clusterList, which the stats area extends) ------------------


def _update_topic_perm_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic name")
    p.add_argument("-p", "--perm", required=True, type=perm, help="2 write, 4 read, 6 both")
    targets(p, required=True)


@command("updateTopicPerm", flags=_update_topic_perm_flags)
async def update_topic_perm(admin: Admin, args: argparse.Namespace) -> None:
    for u in await admin.update_topic_perm(args.topic, args.perm, broker_addr=args.broker, cluster=args.cluster):
        if u.changed:
            print(f"update topic perm from {u.old_perm} to {u.new_perm} in {u.addr} success.")
        else:
            print("new perm equals to the old one!")


@command("topicStatus", flags=_topic_flag)
async def topic_status(admin: Admin, args: argparse.Namespace) -> None:
    stats = await admin.examine_topic_stats(args.topic)
    _printf("%-32s  %-4s  %-20s  %-20s    %s", "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
    for mq, off in sorted(stats.offset_table.items()):
        last = human_time_ms(off.last_update_timestamp) if off.last_update_timestamp > 0 else ""
        _printf(
            "%-32s  %-4d  %-20d  %-20d    %s", mq.broker_name[:32], mq.queue_id, off.min_offset, off.max_offset, last
        )
    # a typed topic (Java 5's message.type attribute): one more line; untyped ones print as
    # mqadmin 4.9.8 does
    try:
        mtype = await admin.topic_message_type(args.topic)
    except (AdminError, RMQError, OSError):
        mtype = None
    if mtype is not None:
        print(f"\nTopic Message Type: {mtype.value}")


@command("topicClusterList", flags=_topic_flag)
async def topic_cluster_list(admin: Admin, args: argparse.Namespace) -> None:
    for cluster in await admin.get_topic_cluster_list(args.topic):
        print(cluster)


def _allocate_mq_flags(p: argparse.ArgumentParser) -> None:
    _topic_flag(p)
    p.add_argument("-i", "--ipList", required=True, type=_ip_list, help="client ids/ips, ','-separated")


def _ip_list(text: str) -> list[str]:
    ips = [ip.strip() for ip in text.split(",") if ip.strip()]
    if not ips:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} names no client (expected ip1,ip2,...)")
    if len(set(ips)) != len(ips):
        raise argparse.ArgumentTypeError(f"{text[:200]!r} names a client twice")
    return [name(ip) for ip in ips]


@command("allocateMQ", flags=_allocate_mq_flags)
async def allocate_mq(admin: Admin, args: argparse.Namespace) -> None:
    result = await admin.allocate_mq(args.topic, args.ipList)
    # fastjson's compact form, each MessageQueue's fields sorted as fastjson writes them; the
    # clients in the order given (Java's HashMap order is arbitrary)
    table = {ip: [dict(sorted(q.items())) for q in mqs] for ip, mqs in result.to_json()["result"].items()}
    print(json.dumps({"result": table}, separators=(",", ":")))


def _send_message_flags(p: argparse.ArgumentParser) -> None:
    _topic_flag(p)
    p.add_argument("-p", "--body", required=True, help="the message body (UTF-8)")
    p.add_argument("-k", "--key", default=None, help="message keys, space-separated (default none)")
    p.add_argument("-c", "--tags", default=None, help="message tag (default none)")
    p.add_argument("-b", "--broker", default=None, type=name, help="broker name to send to (default: any)")
    p.add_argument(
        "-i",
        "--qid",
        default=None,
        type=int_in(0, MAX_QUEUE_NUMS - 1),
        help="queue id to send to; needs -b (default: any)",
    )


_SEND_FORMAT = "%-32s  %-4s  %-20s    %s"


@command("sendMessage", flags=_send_message_flags)
async def send_message(admin: Admin, args: argparse.Namespace) -> int | None:
    if args.qid is not None and args.broker is None:
        print("rmq admin sendMessage: Broker name must be set if the queue is chosen (-b with -i)", file=sys.stderr)
        return 2
    result = await admin.send_message(
        args.topic, args.body.strip(), keys=args.key, tags=args.tags, broker_name=args.broker, queue_id=args.qid
    )
    _printf(_SEND_FORMAT, "#Broker Name", "#QID", "#Send Result", "#MsgId")
    _printf(_SEND_FORMAT, result.message_queue.broker_name, result.queue_id, result.status.value, result.msg_id)
    return None


def _mq_text(mq: MessageQueue) -> str:
    """Java ``MessageQueue.toString``."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def _message_text(m: MessageExt) -> str:
    """Close to Java ``MessageExt.toString`` (the body follows separately)."""
    props = "{" + ", ".join(f"{k}={v}" for k, v in m.properties.items()) + "}"
    return (
        f"MessageExt [brokerName={m.broker_name}, queueId={m.queue_id}, queueOffset={m.queue_offset}, "
        f"sysFlag={m.sys_flag}, bornTimestamp={m.born_timestamp}, bornHost=/{m.born_host}, "
        f"storeTimestamp={m.store_timestamp}, storeHost=/{m.store_host}, msgId={m.offset_msg_id}, "
        f"commitLogOffset={m.commit_log_offset}, bodyCRC={m.body_crc}, reconsumeTimes={m.reconsume_times}, "
        f"preparedTransactionOffset={m.prepared_transaction_offset}, toString()=Message{{topic='{m.topic}', "
        f"flag={m.flag}, properties={props}, body=[{len(m.body)} bytes], "
        f"transactionId='{m.transaction_id}'}}]"
    )


def _print_messages(msgs: Sequence[MessageExt], encoding: str, print_body: bool) -> None:
    """Java ``printMessage``: ``MSGID: <id> <message> BODY: <body>``."""
    for m in msgs:
        body = m.body.decode(encoding, "replace") if print_body else "NOT PRINT BODY"
        print(f"MSGID: {m.msg_id} {_message_text(m)} BODY: {body}")


def _in_range(result: PullResult, end: int) -> list[MessageExt]:
    return [m for m in result.messages if m.queue_offset < end]


def _consume_message_flags(p: argparse.ArgumentParser) -> None:
    _topic_flag(p)
    p.add_argument("-b", "--brokerName", default=None, type=name, help="broker name (default: every broker)")
    p.add_argument(
        "-i",
        "--queueId",
        default=None,
        type=int_in(0, MAX_QUEUE_NUMS - 1),
        help="queue id; needs -b (default: every queue)",
    )
    p.add_argument(
        "-o",
        "--offset",
        default=None,
        type=int_in(0, (1 << 63) - 1),
        help="queue offset to start from; needs -i (default: the min offset)",
    )
    p.add_argument(
        "-g",
        "--consumerGroup",
        default=MixAll.TOOLS_CONSUMER_GROUP,
        type=group_name,
        help=f"consumer group the pulls name (default {MixAll.TOOLS_CONSUMER_GROUP})",
    )
    p.add_argument(
        "-s",
        "--beginTimestamp",
        default=None,
        type=timestamp_ms,
        help="begin at [currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS] (default: the min offset)",
    )
    p.add_argument(
        "-e",
        "--endTimestamp",
        default=None,
        type=timestamp_ms,
        help="end at [currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS] (default: the max offset)",
    )
    p.add_argument(
        "-c",
        "--MessageNumber",
        dest="count",
        default=128,
        type=int_in(1, 1 << 31),
        help="how many messages at most (default 128)",
    )


@command("consumeMessage", flags=_consume_message_flags)
async def consume_message(admin: Admin, args: argparse.Namespace) -> int | None:
    # Java ConsumeMessageCommand's checks, as bad arguments (exit 2)
    now_ms = int(time.time() * 1000)
    problem = None
    if args.queueId is not None and args.brokerName is None:
        problem = "Please set the brokerName before queueId!"
    elif args.offset is not None and args.queueId is None:
        problem = "Please set queueId before offset!"
    elif args.beginTimestamp is not None and args.beginTimestamp > now_ms:
        problem = "Please set the beginTimestamp before now!"
    elif args.endTimestamp is not None and args.endTimestamp > now_ms:
        problem = "Please set the endTimestamp before now!"
    elif args.beginTimestamp is not None and args.endTimestamp is not None and args.beginTimestamp > args.endTimestamp:
        problem = "Please make sure that the beginTimestamp is less than or equal to the endTimestamp"
    if problem:
        print(f"rmq admin consumeMessage: {problem}", file=sys.stderr)
        return 2
    if args.queueId is not None:
        mqs = [MessageQueue(args.topic, args.brokerName, args.queueId)]
    else:
        mqs = [
            mq
            for mq in await admin.fetch_subscribe_message_queues(args.topic)
            if args.brokerName is None or mq.broker_name == args.brokerName
        ]
    left = args.count
    for mq in mqs:
        if left <= 0:
            break
        lo = await admin.min_offset(mq)
        hi = await admin.max_offset(mq)
        if args.beginTimestamp is not None:
            lo = await admin.search_offset(mq, args.beginTimestamp)
        if args.endTimestamp is not None:
            hi = await admin.search_offset(mq, args.endTimestamp)
        if args.offset is not None:
            if args.offset > hi:
                print(f"{_mq_text(mq)} no matched msg, offset={args.offset}")
                continue
            lo = max(lo, args.offset)
        if hi - lo > left:
            print(f"The older {left} message of the {mq.queue_id} queue will be provided")
            hi = lo + left
        left -= max(0, hi - lo)
        await _walk(admin, mq, lo, hi, "*", args.consumerGroup, consume_style=True)
    return None


async def _walk(
    admin: Admin,
    mq: MessageQueue,
    lo: int,
    hi: int,
    expression: str,
    group: str,
    *,
    consume_style: bool,
    encoding: str = "utf-8",
    print_body: bool = True,
) -> None:
    """Java's pull loops of consumeMessage / printMsg over ``[lo, hi)``."""
    offset = lo
    async for result in admin.iter_pull(mq, lo, hi, expression=expression, group=group):
        offset = result.next_begin_offset
        if result.status is PullStatus.FOUND:
            if consume_style:
                print("Consume ok")
            _print_messages(_in_range(result, hi), encoding, print_body)
        elif result.status is PullStatus.NO_MATCHED_MSG:
            print(f"{_mq_text(mq)} no matched msg. status={result.status.value}, offset={offset}")
        else:
            print(f"{_mq_text(mq)} print msg finished. status={result.status.value}, offset={offset}")
            return
    if consume_style:
        print(f"{_mq_text(mq)} print msg finished. status={PullStatus.NO_NEW_MSG.value}, offset={max(offset, hi)}")


def _range_flags(p: argparse.ArgumentParser) -> None:
    # printMsg and printMsgByQueue (Java PrintMessageSubCommand / PrintMessageByQueueCommand)
    p.add_argument("-c", "--charsetName", default="utf-8", type=charset, help="body charset (default UTF-8)")
    p.add_argument("-s", "--subExpression", default="*", help="tag expression, e.g. 'TagA || TagB' (default *)")
    p.add_argument(
        "-b",
        "--beginTimestamp",
        default=None,
        type=timestamp_ms,
        help="begin at [currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS] (default: the min offset)",
    )
    p.add_argument(
        "-e",
        "--endTimestamp",
        default=None,
        type=timestamp_ms,
        help="end at [currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS] (default: the max offset)",
    )


def _print_msg_flags(p: argparse.ArgumentParser) -> None:
    _topic_flag(p)
    _range_flags(p)
    p.add_argument("-d", "--printBody", default="true", type=true_false, help="print bodies: true/false (default true)")


async def _offsets(admin: Admin, mq: MessageQueue, begin: int | None, end: int | None) -> tuple[int, int]:
    lo = await admin.search_offset(mq, begin) if begin is not None else await admin.min_offset(mq)
    hi = await admin.search_offset(mq, end) if end is not None else await admin.max_offset(mq)
    return lo, hi


@command("printMsg", flags=_print_msg_flags)
async def print_msg(admin: Admin, args: argparse.Namespace) -> None:
    for mq in await admin.fetch_subscribe_message_queues(args.topic):
        lo, hi = await _offsets(admin, mq, args.beginTimestamp, args.endTimestamp)
        print(f"minOffset={lo}, maxOffset={hi}, {_mq_text(mq)}")
        await _walk(
            admin,
            mq,
            lo,
            hi,
            args.subExpression,
            MixAll.TOOLS_CONSUMER_GROUP,
            consume_style=False,
            encoding=args.charsetName,
            print_body=args.printBody == "true",
        )
        print("-" * 56)


def _print_msg_by_queue_flags(p: argparse.ArgumentParser) -> None:
    _topic_flag(p)
    p.add_argument("-a", "--brokerName", required=True, type=name, help="broker name")
    p.add_argument("-i", "--queueId", required=True, type=int_in(0, MAX_QUEUE_NUMS - 1), help="queue id")
    _range_flags(p)
    p.add_argument(
        "-p", "--printMsg", default="false", type=true_false, help="print the messages: true/false (default false)"
    )
    p.add_argument(
        "-d", "--printBody", default="false", type=true_false, help="print bodies: true/false (default false)"
    )
    p.add_argument(
        "-f", "--calculate", default="false", type=true_false, help="count messages by tag: true/false (default false)"
    )


@command("printMsgByQueue", flags=_print_msg_by_queue_flags)
async def print_msg_by_queue(admin: Admin, args: argparse.Namespace) -> None:
    mq = MessageQueue(args.topic, args.brokerName, args.queueId)
    lo, hi = await _offsets(admin, mq, args.beginTimestamp, args.endTimestamp)
    tags: Counter[str] = Counter()
    async for result in admin.iter_pull(mq, lo, hi, expression=args.subExpression):
        # Java's loop stops at the first NO_MATCHED_MSG, which hides matches after a batch without
        # one; iter_pull goes on past it (to hi, or NO_NEW_MSG / OFFSET_ILLEGAL)
        if result.status is not PullStatus.FOUND:
            continue
        msgs = _in_range(result, hi)
        if args.calculate == "true":
            tags.update(m.tags for m in msgs if m.tags and m.tags.strip())
        if args.printMsg == "true":
            _print_messages(msgs, args.charsetName, args.printBody == "true")
    for tag, count in sorted(tags.items(), key=lambda kv: (-kv[1], kv[0])):
        _printf("Tag: %-30s Count: %s", tag, count)


def _check_msg_send_rt_flags(p: argparse.ArgumentParser) -> None:
    _topic_flag(p)
    p.add_argument("-a", "--amount", default=100, type=int_in(1, 1_000_000), help="messages to send (default 100)")
    p.add_argument("-s", "--size", default=128, type=int_in(0, 4 * 1024 * 1024), help="body bytes (default 128)")


@command("checkMsgSendRT", flags=_check_msg_send_rt_flags)
async def check_msg_send_rt(admin: Admin, args: argparse.Namespace) -> None:
    result = await admin.check_msg_send_rt(args.topic, amount=args.amount, size=args.size)
    _printf(_SEND_FORMAT, "#Broker Name", "#QID", "#Send Result", "#RT")
    for s in result.sends:
        _printf(_SEND_FORMAT, s.broker_name, s.queue_id, "true" if s.ok else "false", f"{s.rt_ms:.0f}")
    print(f"Avg RT: {result.avg_rt_ms:.2f}")


def _cluster_rt_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-a", "--amount", default=100, type=int_in(1, 1_000_000), help="messages per broker each round (default 100)"
    )
    p.add_argument("-s", "--size", default=128, type=int_in(0, 4 * 1024 * 1024), help="body bytes (default 128)")
    p.add_argument("-c", "--cluster", default=None, type=name, help="one cluster (default: every cluster)")
    p.add_argument(
        "-p",
        "--printLog",
        default="false",
        type=true_false,
        help="print as tlog lines time|room|cluster|broker|rt: true/false (default false)",
    )
    p.add_argument("-m", "--machineRoom", default="noname", type=name, help="machine room for -p (default noname)")
    p.add_argument(
        "-i",
        "--interval",
        default=10,
        type=int_in(0, 86_400),
        help="seconds between rounds (default 10); runs until interrupted",
    )


# Java CLusterSendMsgRTCommand.getCurTime formats in GMT+8 whatever the local zone.
_TLOG_ZONE = datetime.timezone(datetime.timedelta(hours=8))


@command("clusterRT", flags=_cluster_rt_flags)
async def cluster_rt(admin: Admin, args: argparse.Namespace) -> None:
    tlog = args.printLog == "true"
    if not tlog:
        _printf("%-24s  %-24s  %-4s  %-8s  %-8s", "#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount")
    while True:
        for r in await admin.cluster_send_msg_rt(args.cluster, amount=args.amount, size=args.size):
            if tlog:
                now = datetime.datetime.now(_TLOG_ZONE).strftime("%Y-%m-%d %H:%M:%S")
                rt = decimal.Decimal(r.rt_ms).quantize(decimal.Decimal(1), decimal.ROUND_HALF_UP)
                print(f"{now}|{args.machineRoom}|{r.cluster}|{r.broker_name}|{rt}", flush=True)
            else:
                _printf(
                    "%-24s  %-24s  %-8s  %-16s  %-16s",
                    r.cluster,
                    r.broker_name,
                    f"{r.rt_ms:.2f}",
                    r.success_count,
                    r.fail_count,
                )
        sys.stdout.flush()
        await asyncio.sleep(args.interval)


# -- updateOrderConf ----------------------------------------------------------------------------

#: Java NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG: the KV namespace of orderly topics' queue layout.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def _update_order_conf_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name, help="topic name")
    p.add_argument(
        "-v",
        "--orderConf",
        dest="order_conf",
        default=None,
        help="set order conf [eg. brokerName1:num;brokerName2:num] (with -m put)",
    )
    p.add_argument(
        "-m", "--method", required=True, choices=("put", "get", "delete"), help="option type: put, get or delete"
    )


@command("updateOrderConf", flags=_update_order_conf_flags)
async def update_order_conf(admin: Admin, args: argparse.Namespace) -> None:
    # Java UpdateOrderConfCommand's messages, each without a newline there
    topic = args.topic.strip()
    if args.method == "get":
        conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG, topic)
        if conf is None:
            raise AdminError(f"no orderConf for topic [{topic}] (namespace {ORDER_TOPIC_CONFIG})")
        print(f"get orderConf success. topic=[{topic}], orderConf=[{conf}] ")
    elif args.method == "put":
        conf = (args.order_conf or "").strip()
        if not conf:
            raise ValueError("please set orderConf with option -v.")
        for item in conf.split(";"):
            broker, _, num = item.partition(":")
            if not broker.strip() or not num.strip().isdigit():
                raise ValueError(f"-v: {item!r} is not brokerName:queueNums (e.g. broker-a:4;broker-b:4)")
        await admin.create_and_update_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
        print(f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")
    else:
        await admin.delete_kv_config(ORDER_TOPIC_CONFIG, topic)
        print(f"delete orderConf success. topic=[{topic}]")
