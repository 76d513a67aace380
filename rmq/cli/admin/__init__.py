"""``rmq admin``: Apache RocketMQ's ``mqadmin`` commands, with mqadmin's names, flags and output
columns, built on :class:`rmq.client.admin.Admin`. They speak only the protocol, so they work
against Apache RocketMQ brokers too::

    rmq admin updateTopic   -n 127.0.0.1:9876 -t TopicTest [-c DefaultCluster | -b 127.0.0.1:10911]
                            [-r 8] [-w 8] [-p 6] [-o true]
    rmq admin topicList     -n 127.0.0.1:9876
    rmq admin --help        every command; rmq admin <command> --help for its flags

The name server is ``-n``, else ``$NAMESRV_ADDR`` (as Java's tools), else 127.0.0.1:9876 (what
``make run`` starts). ``-c`` (cluster) sends a broker write to the master of every broker of the
cluster, ``-b`` to one broker; with neither, to every master the name server knows.

Exit status: 0 done, 1 a broker or name server refused (its code and remark are printed), 2 bad
arguments or an unreachable peer. Every flag is checked before anything is sent, and a bad one
exits 2 naming the flag and the allowed values: topic and group names as Java's
``TopicValidator`` / ``Validators.checkGroup`` (``[%|a-zA-Z0-9_-]``, at most 127 / 255
characters), queue counts 1..1024, ``-p`` one of 2, 4, 6 (``PermName``), booleans
``true``/``false``, addresses ``host:port``. Unknown flags are errors.

Against brokers with ACL on, ``--aclAccessKey``/``--aclSecretKey`` (or Java's
``$ROCKETMQ_HOME/conf/tools.yml``) sign every request (see :mod:`rmq.cli.admin.acl`).
"""

from __future__ import annotations

import argparse
import sys

from rmq.cli.connection import DEFAULT_NAMESRV, add_cluster_flags, client_tls, credentials, namesrv_of
from rmq.errors import RMQError

from ._cmd import COMMANDS

__all__ = ["DEFAULT_NAMESRV", "HELP", "add_parser", "run"]

#: ``rmq admin``'s line in ``rmq --help``.
HELP = "mqadmin commands: updateTopic, topicList, queryMsgByKey, …"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], command: str | None = None) -> None:
    """Register ``rmq admin <command>`` on the top-level subparsers.

    Args:
        command: the command being run (``rmq`` passes it): only its parser is built, so a
            run imports only its area module and builds one parser, not 60 (docs/design.md
            "Start-up time"); a name that is not a command (``--help``, a typo): every command
            listed with its help line, without flags. Default None: every command's parser
            with its flags.
    """
    admin = sub.add_parser("admin", help=HELP, allow_abbrev=False)
    # "<command>" rather than argparse's {a,b,...}: with every mqadmin command that set is
    # longer than a screen; the list below names each with its help line.
    cmds = admin.add_subparsers(dest="admin_command", metavar="<command>", title="commands")
    chosen = COMMANDS.get(command) if command is not None else None
    for c in COMMANDS.values() if chosen is None else (chosen,):
        p = cmds.add_parser(c.name, help=c.help, description=c.help, allow_abbrev=False)
        if command is not None and chosen is None:
            continue
        add_cluster_flags(p)
        flags = c.flags
        if flags is not None:
            flags(p)


def run(args: argparse.Namespace) -> int:
    """Run one admin command; returns the exit status."""
    if args.admin_command is None:
        print("rmq admin: a command is required (see rmq admin --help)", file=sys.stderr)
        return 2
    try:
        namesrv = namesrv_of(args)
    except ValueError as e:
        print(f"rmq admin {args.admin_command}: {e}", file=sys.stderr)
        return 2
    import asyncio

    from rmq.client.admin import AdminError

    try:
        return asyncio.run(_run(args, namesrv))
    except KeyboardInterrupt:  # e.g. Ctrl-C ending startMonitoring: the shell's 128 + SIGINT
        return 130
    except AdminError as e:
        print(f"rmq admin {args.admin_command}: {e}", file=sys.stderr)
        return 1
    except (RMQError, OSError, ValueError) as e:
        print(f"rmq admin {args.admin_command}: {e}", file=sys.stderr)
        return 2


async def _run(args: argparse.Namespace, namesrv: str) -> int:
    from rmq.client.admin import Admin

    access_key, secret_key = credentials(args)
    async with Admin(namesrv, access_key=access_key, secret_key=secret_key, tls=client_tls(args)) as admin:
        status = await COMMANDS[args.admin_command].run(admin, args)
        return 0 if status is None else status
