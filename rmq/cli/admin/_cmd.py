"""What every ``rmq admin`` command shares: the command registry, the flag checkers (argparse
``type=`` functions: a bad value exits 2 naming the flag and the allowed values, before anything
is sent) and the output helpers.

A command is an async function registered with :func:`command`; its ``flags`` function adds
its options to the command's parser (``-n`` is added for every command)::

    def _flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("-t", "--topic", required=True, type=topic_name)

    @command("topicRoute", "print a topic's route", flags=_flags)
    async def topic_route(admin: Admin, args: argparse.Namespace) -> int | None:
        ...   # print the result; return None or 0 for success

A refusal (:class:`~rmq.client.admin.AdminError`) exits 1 with its text; a bad flag, a missing
name server or an unreachable peer exits 2.
"""

from __future__ import annotations

import argparse
import codecs
import datetime
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from rmq.cli.connection import addr as addr  # the commands' address flags, shared
from rmq.cli.connection import addr_list as addr_list
from rmq.client.admin import Admin
from rmq.common.constants import TopicValidator

Runner = Callable[[Admin, argparse.Namespace], Awaitable[int | None]]


@dataclass(frozen=True)
class Command:
    """One ``rmq admin`` command: mqadmin's name, its help line, its flags and its body."""

    name: str
    help: str
    flags: Callable[[argparse.ArgumentParser], None] | None
    run: Runner


#: Every registered command by name, in registration order (the area modules' import order).
COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    help: str,
    *,
    flags: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Callable[[Runner], Runner]:
    """Register ``rmq admin <name>``; mqadmin's command names are case-sensitive, as here."""

    def register(run: Runner) -> Runner:
        if name in COMMANDS:
            raise ValueError(f"rmq admin {name} is registered twice")
        COMMANDS[name] = Command(name, help, flags, run)
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
