"""Message trace: queryMsgTraceById (Java ``QueryMsgTraceByIdSubCommand``), with mqadmin's
columns: one ``Pub`` table per publish record, then one ``Sub`` table per consumer group of
the SubAfter records (``#Type #ProducerGroup|#ConsumerGroup #ClientHost #SendTime|#ConsumerTime
#CostTimes #Status``, times as ``yyyy-MM-dd HH:mm:ss`` local time)."""

from __future__ import annotations

import argparse
import time

from rmq.client.admin import Admin
from rmq.client.trace import TraceType, TraceView
from rmq.common.constants import TopicValidator

from ._cmd import command, name, topic_name

_ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"


def _time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000.0))


def format_trace(views: list[TraceView]) -> str:
    """Java ``QueryMsgTraceByIdSubCommand.printMessageTrace``."""
    lines: list[str] = []
    by_group: dict[str, list[TraceView]] = {}
    for v in views:
        if v.msg_type == TraceType.PUB:
            lines.append(_ROW.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"))
            lines.append(
                _ROW.format("Pub", v.group_name, v.client_host, _time(v.time_stamp), f"{v.cost_time}ms", v.status)
            )
            lines.append("")
        elif v.msg_type == TraceType.SUB_AFTER:
            by_group.setdefault(v.group_name, []).append(v)
    for group_views in by_group.values():
        lines.append(_ROW.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"))
        for v in group_views:
            lines.append(
                _ROW.format("Sub", v.group_name, v.client_host, _time(v.time_stamp), f"{v.cost_time}ms", v.status)
            )
        lines.append("")
    return "\n".join(lines)


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, type=name, help="Message Id")
    p.add_argument(
        "-t",
        "--traceTopic",
        dest="trace_topic",
        default=TopicValidator.RMQ_SYS_TRACE_TOPIC,
        type=topic_name,
        help="The name value of message trace topic (default RMQ_SYS_TRACE_TOPIC)",
    )


@command("queryMsgTraceById", flags=_flags)
async def query_msg_trace_by_id(admin: Admin, args: argparse.Namespace) -> None:
    views = await admin.query_msg_trace_by_id(args.msg_id.strip(), args.trace_topic)
    text = format_trace(views)
    if text:
        print(text)
