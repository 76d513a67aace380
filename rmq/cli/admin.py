"""``rmq admin``: the mqadmin commands a new user needs first, with mqadmin's names and flags.

ali-ons (and Java clients with ``autoCreateTopicEnable=false``) send only to topics that
exist, so a user of ``make run`` needs a way to create one; these commands speak only the
protocol, so they work against Apache RocketMQ too::

    rmq admin updateTopic   -n 127.0.0.1:9876 -t TopicTest [-c DefaultCluster | -b 127.0.0.1:10911]
                            [-r 8] [-w 8] [-p 6] [-o true]
    rmq admin deleteTopic   -n 127.0.0.1:9876 -t TopicTest [-c DefaultCluster]
    rmq admin updateSubGroup -n 127.0.0.1:9876 -g GID [-c DefaultCluster | -b ADDR] [-r 16]
    rmq admin topicList     -n 127.0.0.1:9876
    rmq admin topicRoute    -n 127.0.0.1:9876 -t TopicTest
    rmq admin clusterList   -n 127.0.0.1:9876

``-c`` (cluster) sends to the master of every broker of the cluster, ``-b`` to one broker;
with neither, to every master the name server knows. Exit status: 0 done, 1 the broker or name
server refused (its code and remark are printed), 2 bad arguments or unreachable.

Every flag is checked before anything is sent, and a bad one exits 2 naming the flag and the
allowed values: topic and group names as Java's ``TopicValidator`` / ``Validators.checkGroup``
(``[%|a-zA-Z0-9_-]``, at most 127 / 255 characters), queue counts 1..1024, ``-p`` one of 2, 4, 6
(``PermName``), booleans ``true``/``false``, addresses ``host:port``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Callable
from typing import TypeVar

from rmq.common.constants import MixAll, TopicValidator
from rmq.common.route import ClusterInfo
from rmq.errors import BrokerResponseError, RMQError
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting import requests as rq
from rmq.remoting.headers import CreateTopicRequestHeader

T = TypeVar("T")

TIMEOUT = 5.0  # seconds per remote call, as mqadmin's default


class AdminError(Exception):
    """A refusal from a broker or the name server (exit status 1)."""


# -- flag checks (argparse ``type=`` functions: a bad value exits 2 with argparse's message) ---

MAX_QUEUE_NUMS = 1024          # the broker's cap on a topic's queues
GROUP_MAX_LENGTH = 255         # Java Validators.CHARACTER_MAX_LENGTH
PERMS = (2, 4, 6)              # write only, read only, read + write (PermName)
_ADDR = re.compile(r"[^\s:;,]+:\d{1,5}")


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer (expected {lo}..{hi})") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{n} is out of range (expected {lo}..{hi})")
        return n

    return parse


def _perm(text: str) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        n = -1
    if n not in PERMS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a permission (expected 2 write only, 4 read only, "
                                         f"or 6 read and write)")
    return n


def _true_false(text: str) -> str:
    """``true`` or ``false`` (any case), returned lower-case."""
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (expected true or false)")
    return low


def _topic(text: str) -> str:
    reason = TopicValidator.check_topic(text)
    if reason is not None:
        raise argparse.ArgumentTypeError(f"{text[:200]!r}: {reason}")
    return text


def _group(text: str) -> str:
    if not text.strip() or TopicValidator.is_topic_or_group_illegal(text) or len(text) > GROUP_MAX_LENGTH:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not a group name (expected 1..{GROUP_MAX_LENGTH} "
                                         f"characters of [%|a-zA-Z0-9_-])")
    return text


def _name(text: str) -> str:
    if not text.strip() or len(text) > GROUP_MAX_LENGTH or not text.isprintable():
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not a name (expected 1..{GROUP_MAX_LENGTH} printable "
                                         f"characters)")
    return text


def _addr(text: str) -> str:
    if not _ADDR.fullmatch(text.strip()) or not 0 < int(text.strip().rsplit(":", 1)[1]) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not an address (expected host:port)")
    return text.strip()


def _addr_list(text: str) -> str:
    addrs = [a for a in text.split(";") if a.strip()]
    if not addrs:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} names no name server (expected host:port[;host:port...])")
    for a in addrs:
        _addr(a)
    return ";".join(a.strip() for a in addrs)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``rmq admin <command>`` on the top-level subparsers."""
    admin = sub.add_parser("admin", help="mqadmin-style commands: updateTopic, topicList, …", allow_abbrev=False)
    cmds = admin.add_subparsers(dest="admin_command", metavar="{updateTopic,deleteTopic,updateSubGroup,"
                                                                "topicList,topicRoute,clusterList}")

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        p = cmds.add_parser(name, help=help_, allow_abbrev=False)
        p.add_argument("-n", "--namesrvAddr", dest="namesrv", default="127.0.0.1:9876", type=_addr_list,
                       help="name server address(es), ';'-separated (default 127.0.0.1:9876)")
        return p

    queues = _int_in(1, MAX_QUEUE_NUMS)
    p = command("updateTopic", "create or update a topic on brokers")
    p.add_argument("-t", "--topic", required=True, type=_topic)
    _targets(p)
    p.add_argument("-r", "--readQueueNums", type=queues, default=8, help="read queues, 1..1024 (default 8)")
    p.add_argument("-w", "--writeQueueNums", type=queues, default=8, help="write queues, 1..1024 (default 8)")
    p.add_argument("-p", "--perm", type=_perm, default=6, help="2 write, 4 read, 6 both (default 6)")
    p.add_argument("-o", "--order", type=_true_false, default="false", help="orderly topic: true/false (default false)")

    p = command("deleteTopic", "delete a topic from brokers and the name server")
    p.add_argument("-t", "--topic", required=True, type=_topic)
    p.add_argument("-c", "--clusterName", dest="cluster", default=None, type=_name)

    p = command("updateSubGroup", "create or update a subscription group on brokers")
    p.add_argument("-g", "--groupName", dest="group", required=True, type=_group)
    _targets(p)
    p.add_argument("-r", "--retryMaxTimes", type=_int_in(0, 1000), default=16,
                   help="maxReconsumeTimes, 0..1000 (default 16)")
    p.add_argument("-s", "--consumeEnable", type=_true_false, default="true", help="true/false (default true)")
    p.add_argument("-d", "--consumeBroadcastEnable", type=_true_false, default="true",
                   help="true/false (default true)")

    command("topicList", "list the topics the name server knows")
    p = command("topicRoute", "print a topic's route as the name server answers it")
    p.add_argument("-t", "--topic", required=True, type=_topic)
    command("clusterList", "list clusters, brokers and their addresses")


def _targets(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-c", "--clusterName", dest="cluster", default=None, type=_name, help="every master of this cluster")
    g.add_argument("-b", "--brokerAddr", dest="broker", default=None, type=_addr, help="one broker ip:port")


def run(args: argparse.Namespace) -> int:
    """Run one admin command; returns the exit status."""
    if args.admin_command is None:
        print("rmq admin: a command is required (see rmq admin --help)", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args))
    except AdminError as e:
        print(f"rmq admin {args.admin_command}: {e}", file=sys.stderr)
        return 1
    except (RMQError, OSError, ValueError) as e:
        print(f"rmq admin {args.admin_command}: {e}", file=sys.stderr)
        return 2


async def _run(args: argparse.Namespace) -> int:
    client = RemotingClient([a for a in args.namesrv.split(";") if a])
    try:
        name = args.admin_command
        if name == "topicList":
            for topic in await _namesrv_call(client, rq.get_all_topic_list(), rq.parse_topic_list):
                print(topic)
        elif name == "topicRoute":
            route = await _namesrv_call(client, rq.get_route_info(args.topic), rq.parse_topic_route)
            if route is None:
                raise AdminError(f"the name server has no route for topic {args.topic}")
            print(json.dumps(route.to_json(), indent=2, sort_keys=True))
        elif name == "clusterList":
            info = await _cluster_info(client)
            print(f"{'#Cluster':<22}{'#Broker':<22}{'#BID':<6}#Addr")
            for cluster, names in sorted(info.cluster_addr_table.items()):
                for broker in sorted(names):
                    bd = info.broker_addr_table.get(broker)
                    for bid, addr in sorted(bd.broker_addrs.items() if bd is not None else ()):
                        print(f"{cluster:<22}{broker:<22}{bid:<6}{addr}")
        elif name == "updateTopic":
            header = CreateTopicRequestHeader(
                topic=args.topic, read_queue_nums=args.readQueueNums, write_queue_nums=args.writeQueueNums,
                perm=args.perm, order=args.order.lower() == "true")
            for addr in await _masters(client, args.cluster, args.broker):
                await _broker_call(client, addr, rq.create_topic(header))
                print(f"create topic to {addr} success.")
        elif name == "deleteTopic":
            for addr in await _masters(client, args.cluster, None):
                await _broker_call(client, addr, rq.delete_topic_in_broker(args.topic))
            for ns in client.namesrv_addrs:
                await _broker_call(client, ns, rq.delete_topic_in_namesrv(args.topic))
            print(f"delete topic [{args.topic}] from cluster success.")
        elif name == "updateSubGroup":
            # Java SubscriptionGroupConfig, with mqadmin updateSubGroup's defaults.
            config = {
                "groupName": args.group, "consumeEnable": _bool(args.consumeEnable),
                "consumeFromMinEnable": True, "consumeBroadcastEnable": _bool(args.consumeBroadcastEnable),
                "retryQueueNums": 1, "retryMaxTimes": args.retryMaxTimes, "brokerId": MixAll.MASTER_ID,
                "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True,
            }
            for addr in await _masters(client, args.cluster, args.broker):
                await _broker_call(client, addr, rq.create_subscription_group(config))
                print(f"create subscription group to {addr} success.")
        return 0
    finally:
        await client.close()


def _bool(text: str) -> bool:
    return text.strip().lower() in ("true", "1", "yes")


async def _namesrv_call(client: RemotingClient, cmd: RemotingCommand, parse: Callable[[RemotingCommand], T]) -> T:
    resp = await client.invoke_namesrv(cmd, timeout=TIMEOUT)
    try:
        return parse(resp)
    except BrokerResponseError as e:
        raise AdminError(f"name server answered code {e.code}: {e.remark}") from None


async def _broker_call(client: RemotingClient, addr: str, cmd: RemotingCommand) -> None:
    resp = await client.invoke(addr, cmd, timeout=TIMEOUT)
    try:
        rq.check_success(resp)
    except BrokerResponseError as e:
        raise AdminError(f"{addr} answered code {e.code}: {e.remark}") from None


async def _cluster_info(client: RemotingClient) -> ClusterInfo:
    return await _namesrv_call(client, rq.get_broker_cluster_info(), rq.parse_cluster_info)


async def _masters(client: RemotingClient, cluster: str | None, broker: str | None) -> list[str]:
    """The broker addresses a write command goes to (masters only, as mqadmin does)."""
    if broker:
        return [broker]
    info = await _cluster_info(client)
    if cluster and cluster not in info.cluster_addr_table:
        raise AdminError(f"cluster [{cluster}] is not known to the name server")
    masters = list(info.master_addrs(cluster or None).values())
    if not masters:
        raise AdminError("no master broker is registered with the name server")
    return masters
