"""What every ``rmq admin`` command shares: the command index, the flag checkers (argparse
``type=`` functions: a bad value exits 2 naming the flag and the allowed values, before anything
is sent) and the output helpers.

Every command is named in :data:`_INDEX` with its area module and its help line (the one place
the help line is written: ``rmq admin --help`` lists the commands from there without importing
any area module). The area module registers the body, an async function, with :func:`command`;
its ``flags`` function adds its options to the command's parser (``-n`` is added for every
command)::

    def _flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("-t", "--topic", required=True, type=topic_name)

    @command("topicRoute", flags=_flags)
    async def topic_route(admin: Admin, args: argparse.Namespace) -> int | None:
        ...   # print the result; return None or 0 for success

A refusal (:class:`~rmq.client.admin.AdminError`) exits 1 with its text; a bad flag, a missing
name server or an unreachable peer exits 2.

This module is imported by every ``rmq admin`` run, so it imports nothing heavy: the admin
client only for typing (docs/design.md "Start-up time").
"""

from __future__ import annotations

import argparse
import codecs
import datetime
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmq.cli.connection import addr as addr  # the commands' address flags, shared
from rmq.cli.connection import addr_list as addr_list
from rmq.common.constants import TopicValidator

if TYPE_CHECKING:
    from rmq.client.admin import Admin

Runner = Callable[["Admin", argparse.Namespace], Awaitable["int | None"]]
Flags = Callable[[argparse.ArgumentParser], None]

#: Every command: (mqadmin's name, its area module under rmq.cli.admin, its help line), in
#: ``rmq admin --help`` order.
_INDEX: tuple[tuple[str, str, str], ...] = (
    # rmq.cli.admin.acl
    ("updateAclConfig", "acl", "create or update an ACL account on brokers"),
    ("deleteAclConfig", "acl", "delete an ACL account from brokers"),
    ("clusterAclConfigVersion", "acl", "list the ACL config versions of brokers"),
    ("updateGlobalWhiteAddr", "acl", "replace the global ACL white addresses of brokers"),
    # rmq.cli.admin.broker
    ("brokerStatus", "broker", "print a broker's runtime figures (brokerStatus keys: TPS, totals, latency, disk)"),
    (
        "timerStatus",
        "broker",
        "rmq's own (Java 5's mqadmin has none): a broker's timer checkpoint (GET_TIMER_CHECK_POINT) "
        "and pending timers per topic (GET_TIMER_METRICS)",
    ),
    ("brokerConsumeStats", "broker", "print every group's per-queue progress on a broker, with the total lag"),
    ("getBrokerConfig", "broker", "print the configuration of one broker or of every master of a cluster"),
    (
        "updateBrokerConfig",
        "broker",
        "change a runtime property of brokers (applied live and written to their config file)",
    ),
    ("statsAll", "broker", "per topic and consumer group: lag, in/out TPS and 24-hour totals"),
    ("cleanUnusedTopic", "broker", "drop the consume queues of topics a broker has no config for"),
    ("sendMsgStatus", "broker", "send messages to a broker's own topic, printing each send's response time"),
    # rmq.cli.admin.consumer
    ("consumerProgress", "consumer", "query a consumer group's progress (every group without -g)"),
    ("consumerConnection", "consumer", "query a consumer group's connections, client versions and subscriptions"),
    ("producerConnection", "consumer", "query a producer group's connections and client versions"),
    ("consumerStatus", "consumer", "query a consumer's running status (its settings, queues and statistics)"),
    ("resetOffsetByTime", "consumer", "reset a group's offsets of a topic to a timestamp (without client restart)"),
    ("skipAccumulatedMessage", "consumer", "skip every message not consumed yet (offsets to each queue's end)"),
    ("cloneGroupOffset", "consumer", "copy a group's offsets of a topic to another group"),
    ("getConsumerConfig", "consumer", "print a subscription group's configuration on every broker"),
    ("producer", "consumer", "print a broker's producer instances by group (client id, address, language, version)"),
    (
        "setConsumeMode",
        "consumer",
        "set a group's consume mode on a topic, PULL or POP, for Java 5 push consumers (Java setConsumeMode)",
    ),
    # rmq.cli.admin.export
    ("exportMetadata", "export", "export topics and subscription groups (metadata.json) for a migration"),
    ("exportConfigs", "export", "export the cluster's scale and each broker's main properties (configs.json)"),
    ("exportMetrics", "export", "export each broker's load, quotas and client versions (metrics.json)"),
    # rmq.cli.admin.message
    ("queryMsgByKey", "message", "query messages by key"),
    ("queryMsgByUniqueKey", "message", "query a message by its unique key (client message id)"),
    ("queryMsgById", "message", "query messages by offset message id"),
    ("queryMsgByOffset", "message", "query a message by its queue offset"),
    # rmq.cli.admin.monitor
    ("startMonitoring", "monitor", "report every consumer group's undelivered messages and delay, round after round"),
    # rmq.cli.admin.topic
    ("updateTopic", "topic", "create or update a topic on brokers"),
    ("deleteTopic", "topic", "delete a topic from brokers and the name server"),
    ("updateSubGroup", "topic", "create or update a subscription group on brokers"),
    ("topicList", "topic", "list the topics the name server knows"),
    ("topicRoute", "topic", "print a topic's route as the name server answers it"),
    ("clusterList", "topic", "list clusters and brokers with their load, page-cache wait and disk use"),
    ("updateTopicPerm", "topic", "update a topic's permission on one broker or a cluster"),
    ("topicStatus", "topic", "print each queue's min and max offset and last update time"),
    ("topicClusterList", "topic", "print the clusters a topic is on"),
    ("allocateMQ", "topic", "show how AllocateMessageQueueAveragely shares a topic's queues among clients"),
    ("sendMessage", "topic", "send one message"),
    ("consumeMessage", "topic", "pull and print a topic's (or one queue's) messages"),
    ("printMsg", "topic", "print every message of a topic (or those in a time range)"),
    ("printMsgByQueue", "topic", "print or count by tag the messages of one queue"),
    ("checkMsgSendRT", "topic", "send messages one at a time and print each send's response time"),
    ("clusterRT", "topic", "send to every broker of every (or one) cluster each interval and print the send RT"),
    (
        "updateOrderConf",
        "topic",
        "create, print or delete a topic's order conf (ORDER_TOPIC_CONFIG on the name servers)",
    ),
    # rmq.cli.admin.trace
    ("queryMsgTraceById", "trace", "query a message trace"),
    # rmq.cli.admin.controller
    ("getControllerMetaData", "controller", "Get controller cluster's metadata."),
    ("getSyncStateSet", "controller", "Fetch syncStateSet for target brokers."),
    ("electMaster", "controller", "Re-elect the specified broker as master."),
    ("getBrokerEpoch", "controller", "Fetch broker epoch entries."),
    # rmq.cli.admin.namesrv
    ("getNamesrvConfig", "namesrv", "print the configuration of every name server"),
    ("updateNamesrvConfig", "namesrv", "update a configuration property of every name server"),
    ("wipeWritePerm", "namesrv", "wipe the write permission of a broker in every name server of -n"),
    ("addWritePerm", "namesrv", "add the write permission of a broker in every name server of -n"),
    ("updateKvConfig", "namesrv", "create or update a KV config item"),
    ("deleteKvConfig", "namesrv", "delete a KV config item"),
    ("deleteSubGroup", "namesrv", "delete a subscription group from brokers"),
    ("cleanExpiredCQ", "namesrv", "destroy consume queues whose messages all left the CommitLog"),
    ("deleteExpiredCommitLog", "namesrv", "delete expired CommitLog files now, whatever deleteWhen says"),
    ("queryCq", "namesrv", "print ConsumeQueue units of a queue"),
)


@dataclass(frozen=True)
class Command:
    """One ``rmq admin`` command: mqadmin's name, its help line and its area module, whose
    import registers its flags and its body (``flags`` and ``run`` import it on first use)."""

    name: str
    help: str
    module: str

    @property
    def flags(self) -> Flags | None:
        return self._registered()[0]

    @property
    def run(self) -> Runner:
        return self._registered()[1]

    def _registered(self) -> tuple[Flags | None, Runner]:
        if self.name not in _BODIES:
            # __import__, not importlib.import_module: `python -X importtime` reports only the former
            __import__(f"{__package__}.{self.module}")
        try:
            return _BODIES[self.name]
        except KeyError:
            raise LookupError(f"rmq admin {self.name}: rmq.cli.admin.{self.module} does not register it") from None


#: Every command by name, in ``rmq admin --help`` order.
COMMANDS: dict[str, Command] = {name: Command(name, help, module) for name, module, help in _INDEX}

# name → (flags, body), filled by @command as the area modules are imported.
_BODIES: dict[str, tuple[Flags | None, Runner]] = {}


def command(name: str, *, flags: Flags | None = None) -> Callable[[Runner], Runner]:
    """Register the body of ``rmq admin <name>`` (named in :data:`_INDEX`, in the module that
    registers it); mqadmin's command names are case-sensitive, as here."""

    def register(run: Runner) -> Runner:
        c = COMMANDS.get(name)
        if c is None or run.__module__ != f"{__package__}.{c.module}":
            raise ValueError(f"rmq admin {name} is not in rmq.cli.admin._cmd._INDEX under {run.__module__}")
        if name in _BODIES:
            raise ValueError(f"rmq admin {name} is registered twice")
        _BODIES[name] = (flags, run)
        return run

    return register


def targets(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """mqadmin's ``-c clusterName`` / ``-b brokerAddr`` pair (one or the other)."""
    g = p.add_mutually_exclusive_group(required=required)
    either = "one of -c and -b is required" if required else "default with neither: every master"
    g.add_argument(
        "-c", "--clusterName", dest="cluster", default=None, type=name, help=f"every master of this cluster ({either})"
    )
    g.add_argument("-b", "--brokerAddr", dest="broker", default=None, type=addr, help=f"one broker ip:port ({either})")


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]], widths: Sequence[int]) -> None:
    """Left-aligned columns as mqadmin prints them (``%-32s %-32s ...``): each cell padded to
    its width (the last column is not padded)."""

    def fmt_row(cells: Sequence[object]) -> str:
        last = len(cells) - 1
        return "".join(
            f"{c!s:<{w}} " if i < last else str(c) for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        )

    print(fmt_row(header))
    for row in rows:
        print(fmt_row(row))


def java_bool(value: object) -> str:
    """``true``/``false`` as Java prints booleans (Python's str() would print True/False)."""
    return "true" if value else "false"


# -- flag checks --------------------------------------------------------------------------

MAX_QUEUE_NUMS = 1024  # the broker's cap on a topic's queues
GROUP_MAX_LENGTH = 255  # Java Validators.CHARACTER_MAX_LENGTH
PERMS = (2, 4, 6)  # write only, read only, read + write (PermName)


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer (expected {lo}..{hi})") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{n} is out of range (expected {lo}..{hi})")
        return n

    return parse


def perm(text: str) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        n = -1
    if n not in PERMS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a permission (expected 2 write only, 4 read only, or 6 read and write)"
        )
    return n


def true_false(text: str) -> str:
    """``true`` or ``false`` (any case), returned lower-case."""
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (expected true or false)")
    return low


def topic_name(text: str) -> str:
    reason = TopicValidator.check_topic(text)
    if reason is not None:
        raise argparse.ArgumentTypeError(f"{text[:200]!r}: {reason}")
    return text


def group_name(text: str) -> str:
    if not text.strip() or TopicValidator.is_topic_or_group_illegal(text) or len(text) > GROUP_MAX_LENGTH:
        raise argparse.ArgumentTypeError(
            f"{text[:200]!r} is not a group name (expected 1..{GROUP_MAX_LENGTH} characters of [%|a-zA-Z0-9_-])"
        )
    return text


def name(text: str) -> str:
    if not text.strip() or len(text) > GROUP_MAX_LENGTH or not text.isprintable():
        raise argparse.ArgumentTypeError(
            f"{text[:200]!r} is not a name (expected 1..{GROUP_MAX_LENGTH} printable characters)"
        )
    return text


def timestamp_ms(text: str) -> int:
    """Java tools' timestamps (``PrintMessageSubCommand.timestampFormat``): milliseconds since
    the epoch, or local time as ``yyyy-MM-dd#HH:mm:ss:SSS`` (UtilAll.YYYY_MM_DD_HH_MM_SS_SSS)."""
    value = text.strip()
    try:
        ms = int(value)
    except ValueError:
        try:
            ms = int(datetime.datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text[:200]!r} is not a timestamp (expected milliseconds since the epoch or yyyy-MM-dd#HH:mm:ss:SSS)"
            ) from None
    if ms < 0:
        raise argparse.ArgumentTypeError(f"{ms} is not a timestamp (expected >= 0)")
    return ms


def charset(text: str) -> str:
    """A character set name Python knows (UTF-8, GBK, ISO-8859-1, ...)."""
    try:
        return codecs.lookup(text.strip()).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not a known charset (e.g. UTF-8, GBK)") from None


def human_time_ms(ms: int) -> str:
    """Java ``UtilAll.timeMillisToHumanString2``: local ``yyyy-MM-dd HH:mm:ss,SSS``."""
    t = datetime.datetime.fromtimestamp(ms / 1000)
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"
