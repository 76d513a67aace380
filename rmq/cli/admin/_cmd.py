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
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

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


def command(name: str, help: str, *, flags: Callable[[argparse.ArgumentParser], None] | None = None,
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
    g.add_argument("-c", "--clusterName", dest="cluster", default=None, type=name, help="every master of this cluster")
    g.add_argument("-b", "--brokerAddr", dest="broker", default=None, type=addr, help="one broker ip:port")


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]], widths: Sequence[int]) -> None:
    """Left-aligned columns as mqadmin prints them (``%-32s %-32s ...``): each cell padded to
    its width (the last column is not padded)."""
    def fmt_row(cells: Sequence[object]) -> str:
        last = len(cells) - 1
        return "".join(f"{str(c):<{w}} " if i < last else str(c)
                       for i, (c, w) in enumerate(zip(cells, widths, strict=False)))

    print(fmt_row(header))
    for row in rows:
        print(fmt_row(row))


def java_bool(value: object) -> str:
    """``true``/``false`` as Java prints booleans (Python's str() would print True/False)."""
    return "true" if value else "false"


# -- flag checks --------------------------------------------------------------------------

MAX_QUEUE_NUMS = 1024          # the broker's cap on a topic's queues
GROUP_MAX_LENGTH = 255         # Java Validators.CHARACTER_MAX_LENGTH
PERMS = (2, 4, 6)              # write only, read only, read + write (PermName)
ADDR_RE = re.compile(r"[^\s:;,]+:\d{1,5}")


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
        raise argparse.ArgumentTypeError(f"{text!r} is not a permission (expected 2 write only, 4 read only, "
                                         f"or 6 read and write)")
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
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not a group name (expected 1..{GROUP_MAX_LENGTH} "
                                         f"characters of [%|a-zA-Z0-9_-])")
    return text


def name(text: str) -> str:
    if not text.strip() or len(text) > GROUP_MAX_LENGTH or not text.isprintable():
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not a name (expected 1..{GROUP_MAX_LENGTH} printable "
                                         f"characters)")
    return text


def addr(text: str) -> str:
    if not ADDR_RE.fullmatch(text.strip()) or not 0 < int(text.strip().rsplit(":", 1)[1]) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not an address (expected host:port)")
    return text.strip()


def addr_list(text: str) -> str:
    addrs = [a for a in text.split(";") if a.strip()]
    if not addrs:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} names no name server (expected host:port[;host:port...])")
    for a in addrs:
        addr(a)
    return ";".join(a.strip() for a in addrs)
