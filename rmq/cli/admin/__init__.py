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
import asyncio
import os
import ssl
import sys

from rmq.client.admin import NAMESRV_ADDR_ENV, Admin, AdminError
from rmq.errors import RMQError
from rmq.remoting.tls import TlsSettings

# The area modules register their commands on import, in this order (``rmq admin --help``).
from . import acl, broker, consumer, export, message, monitor, topic, trace  # noqa: F401
from . import namesrv as _namesrv  # noqa: F401
from ._cmd import COMMANDS, addr_list

DEFAULT_NAMESRV = "127.0.0.1:9876"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``rmq admin <command>`` on the top-level subparsers."""
    admin = sub.add_parser("admin", help="mqadmin commands: updateTopic, topicList, queryMsgByKey, …",
                           allow_abbrev=False)
    # "<command>" rather than argparse's {a,b,...}: with every mqadmin command that set is
    # longer than a screen; the list below names each with its help line.
    cmds = admin.add_subparsers(dest="admin_command", metavar="<command>", title="commands")
    for c in COMMANDS.values():
        p = cmds.add_parser(c.name, help=c.help, description=c.help, allow_abbrev=False)
        p.add_argument("-n", "--namesrvAddr", dest="namesrv", default=None, type=addr_list,
                       help=f"name server address(es), ';'-separated (default ${NAMESRV_ADDR_ENV}, "
                            f"else {DEFAULT_NAMESRV})")
        acl.add_signing_flags(p)
        _tls_flags(p)
        if c.flags is not None:
            c.flags(p)


def run(args: argparse.Namespace) -> int:
    """Run one admin command; returns the exit status."""
    if args.admin_command is None:
        print("rmq admin: a command is required (see rmq admin --help)", file=sys.stderr)
        return 2
    namesrv = args.namesrv
    if namesrv is None:
        env = os.environ.get(NAMESRV_ADDR_ENV, "").strip()
        try:
            namesrv = addr_list(env) if env else DEFAULT_NAMESRV
        except argparse.ArgumentTypeError as e:
            print(f"rmq admin {args.admin_command}: ${NAMESRV_ADDR_ENV}: {e}", file=sys.stderr)
            return 2
    try:
        return asyncio.run(_run(args, namesrv))
    except KeyboardInterrupt:           # e.g. Ctrl-C ending startMonitoring: the shell's 128 + SIGINT
        return 130
    except AdminError as e:
        print(f"rmq admin {args.admin_command}: {e}", file=sys.stderr)
        return 1
    except (RMQError, OSError, ValueError) as e:
        print(f"rmq admin {args.admin_command}: {e}", file=sys.stderr)
        return 2


def _tls_flags(p: argparse.ArgumentParser) -> None:
    # Java's mqadmin takes -Dtls.enable=true and -Dtls.config.file=... (ClientConfig.useTLS).
    p.add_argument("--tls", action="store_true",
                   help="connect over TLS (Java -Dtls.enable=true); servers' certificates are verified "
                        "against the system's trust store ($SSL_CERT_FILE) unless --tls-config says otherwise "
                        "(default: plain TCP)")
    p.add_argument("--tls-config", metavar="FILE", default=None,
                   help="tls.properties with tls.client.trustCertPath / certPath / keyPath / authServer "
                        "(Java -Dtls.config.file); implies --tls (default: none)")


def _client_tls(args: argparse.Namespace) -> bool | ssl.SSLContext:
    if args.tls_config:
        return TlsSettings.from_properties({"tls.config.file": args.tls_config}).client_context()
    return bool(args.tls)


async def _run(args: argparse.Namespace, namesrv: str) -> int:
    access_key, secret_key = acl.credentials(args)
    async with Admin(namesrv, access_key=access_key, secret_key=secret_key,
                     tls=_client_tls(args)) as admin:
        status = await COMMANDS[args.admin_command].run(admin, args)
        return 0 if status is None else status
