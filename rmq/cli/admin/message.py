"""Finding messages: queryMsgByKey, queryMsgByUniqueKey, queryMsgById, queryMsgByOffset (Java
``tools/command/message``), with mqadmin's output layout.

A message is printed as Java's ``QueryMsgByIdSubCommand.printMsg`` prints it (``%-20s`` labels,
times as ``yyyy-MM-dd HH:mm:ss,SSS``), its body written to ``/tmp/rocketmq/msgbodys/<msgId>``
as mqadmin does. Properties print as ``{K=V, ...}`` in stored order (Java's HashMap order is
not reproducible). Message tracks: the consumer groups of the topic are listed; with none,
mqadmin's ``WARN: No Consumer``.
"""

from __future__ import annotations

import argparse
import os
import time

from rmq.client.admin import Admin, AdminError
from rmq.client.admin._messages import LONG_MAX
from rmq.types import MessageExt

from ._cmd import command, group_name, int_in, java_bool, name, topic_name

BODY_DIR = "/tmp/rocketmq/msgbodys"  # Java QueryMsgByIdSubCommand.createBodyFile
_LONG = int_in(0, LONG_MAX)


def _time(ms: int) -> str:
    """Java UtilAll.timeMillisToHumanString2: ``yyyy-MM-dd HH:mm:ss,SSS`` local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000.0)) + f",{ms % 1000:03d}"


def _body_file(msg: MessageExt, index: int = 0) -> str:
    os.makedirs(BODY_DIR, exist_ok=True)
    path = os.path.join(BODY_DIR, msg.msg_id + (f"_{index}" if index > 0 else ""))
    with open(path, "wb") as f:
        f.write(msg.body)
    return path


async def print_msg(admin: Admin, msg: MessageExt | None, *, offset_id: bool = True, index: int = 0) -> None:
    """Java QueryMsgByIdSubCommand.printMsg (``offset_id``) / QueryMsgByUniqueKeySubCommand.showMessage."""
    if msg is None:
        print("\nMessage not found!", end="")
        return
    rows: list[tuple[str, object]] = []
    if offset_id:
        rows.append(("OffsetID:", msg.offset_msg_id))
    rows += [
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags if msg.tags is not None else 'null'}]"),
        ("Keys:", f"[{msg.properties.get('KEYS', 'null')}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", _time(msg.born_timestamp)),
        ("Store Timestamp:", _time(msg.store_timestamp)),
        ("Born Host:", msg.born_host),
        ("Store Host:", msg.store_host),
        ("System Flag:", msg.sys_flag),
        ("Properties:", "{" + ", ".join(f"{k}={v}" for k, v in msg.properties.items()) + "}"),
        ("Message Body Path:", _body_file(msg, index)),
    ]
    for label, value in rows:
        print(f"{label:<20} {value}")
    groups = await admin.query_topic_consume_by_who(msg.topic)
    if not groups:
        print("\n\nWARN: No Consumer", end="")
    else:
        print("\n")
        for g in groups:
            print(f"MessageTrack [consumerGroup={g}]")


def _by_key_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name)
    p.add_argument("-k", "--msgKey", dest="key", required=True, type=name, help="message key")
    p.add_argument(
        "-b",
        "--beginTimestamp",
        dest="begin",
        type=_LONG,
        default=0,
        help="stored at or after, ms since the epoch (default 0)",
    )
    p.add_argument(
        "-e",
        "--endTimestamp",
        dest="end",
        type=_LONG,
        default=LONG_MAX,
        help="stored at or before, ms since the epoch (default Long.MAX_VALUE)",
    )
    p.add_argument(
        "-c",
        "--maxNum",
        dest="max_num",
        type=int_in(1, 64 * 1024),
        default=64,
        help="at most this many per broker, which caps it at maxMsgsNumBatch (default 64)",
    )


@command("queryMsgByKey", flags=_by_key_flags)
async def query_msg_by_key(admin: Admin, args: argparse.Namespace) -> None:
    result = await admin.query_message_by_key(
        args.topic, args.key, max_num=args.max_num, begin=args.begin, end=args.end
    )
    print(f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}")
    for msg in result.messages:
        print(f"{msg.msg_id:<50} {msg.queue_id:>4} {msg.queue_offset:>40}")


def _by_unique_key_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, type=name, help="the client message id (UNIQ_KEY)")
    p.add_argument("-t", "--topic", required=True, type=topic_name)
    _push_flags(p)
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true", help="print all, at most 32")


@command("queryMsgByUniqueKey", flags=_by_unique_key_flags)
async def query_msg_by_unique_key(admin: Admin, args: argparse.Namespace) -> int | None:
    if args.group is not None or args.client_id is not None:
        _check_push_flags(args)
        found = await admin.query_message_by_unique_key(args.topic, args.msg_id)
        if not found.messages:
            raise AdminError(f"no message with unique key {args.msg_id} in topic {args.topic}")
        await _push(admin, args, found.messages[0])
        return None
    result = await admin.query_message_by_unique_key(args.topic, args.msg_id)
    shown = result.messages if args.show_all else result.messages[:1]
    for i, msg in enumerate(shown):
        await print_msg(admin, msg, offset_id=False, index=i)
    return None


def _by_id_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i", "--msgId", dest="msg_ids", required=True, type=name, help="offset message id(s), comma-separated"
    )
    p.add_argument(
        "-t",
        "--topic",
        default=None,
        type=topic_name,
        help="look ids that are not offset ids (or not found) up as unique keys of this topic (default: none)",
    )
    _push_flags(p)


@command("queryMsgById", flags=_by_id_flags)
async def query_msg_by_id(admin: Admin, args: argparse.Namespace) -> None:
    if args.group is not None or args.client_id is not None:
        _check_push_flags(args)
    for msg_id in (m.strip() for m in args.msg_ids.split(",")):
        if msg_id:
            try:
                msg = await admin.view_message(msg_id, args.topic)
            except ValueError:
                if args.topic is not None:
                    raise
                # Not an offset id: most likely the unique key the SDK prints as msg_id. Point
                # to the command that finds it rather than guess a topic to search.
                raise ValueError(
                    f"{msg_id!r} is not an offset message id (the SDK's SendResult.offset_msg_id); "
                    f"it looks like a unique key (SendResult.msg_id): "
                    f"rmq admin queryMsgByUniqueKey -t <topic> -i {msg_id} "
                    f"(or add -t <topic> here)"
                ) from None
            if args.group is None:
                await print_msg(admin, msg)
            elif msg is None:
                raise AdminError(f"no message with id {msg_id}")
            else:
                await _push(admin, args, msg)


def _push_flags(p: argparse.ArgumentParser) -> None:
    # Java QueryMsgByUniqueKeySubCommand / QueryMsgByIdSubCommand -g -d: push the message to
    # one consumer (CONSUME_MESSAGE_DIRECTLY through the broker that stores it).
    p.add_argument(
        "-g",
        "--consumerGroup",
        dest="group",
        default=None,
        type=group_name,
        help="with -d: have this group's consumer -d consume the message again (default: print it)",
    )
    p.add_argument(
        "-d",
        "--clientId",
        dest="client_id",
        default=None,
        type=name,
        help="the consumer's client id, with -g (default: none)",
    )


def _check_push_flags(args: argparse.Namespace) -> None:
    if args.group is None or args.client_id is None:
        raise ValueError("-g and -d go together: the consumer group and the client id to push the message to")


async def _push(admin: Admin, args: argparse.Namespace, msg: MessageExt) -> None:
    """CONSUME_MESSAGE_DIRECTLY of ``msg`` to one consumer; Java prints the result's toString."""
    r = await admin.consume_message_directly(args.group, args.client_id, msg.offset_msg_id)
    print(
        f"ConsumeMessageDirectlyResult [order={java_bool(r.order)}, autoCommit={java_bool(r.auto_commit)}, "
        f"consumeResult={r.consume_result}, remark={r.remark}, spentTimeMills={r.spent_time_mills}]"
    )


def _by_offset_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, type=topic_name)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, type=name)
    p.add_argument("-i", "--queueId", dest="queue_id", required=True, type=int_in(0, 65535))
    p.add_argument("-o", "--offset", required=True, type=_LONG, help="queue offset")


@command("queryMsgByOffset", flags=_by_offset_flags)
async def query_msg_by_offset(admin: Admin, args: argparse.Namespace) -> None:
    msg = await admin.view_message_by_queue_offset(args.topic, args.broker_name, args.queue_id, args.offset)
    if msg is not None:  # Java prints nothing for no message
        await print_msg(admin, msg)
