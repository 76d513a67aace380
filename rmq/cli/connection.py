"""How a tool reaches a cluster: the flags ``rmq admin``, ``rmq exporter`` and ``rmq console``
share (one definition, :func:`add_cluster_flags`) and what they resolve to.

* ``-n/--namesrvAddr/--namesrv``: the name server(s), ``host:port[;host:port]``; default
  ``$NAMESRV_ADDR``, else 127.0.0.1:9876 (what ``make run`` starts).
* ``--aclAccessKey/--access-key`` and ``--aclSecretKey/--secret-key``: sign every request
  (brokers with ``aclEnable``); default ``$ROCKETMQ_HOME/conf/tools.yml``, where Java's mqadmin
  reads them (``MQAdminStartup``, ``AclUtils.getAclRPCHook``); with neither, unsigned.
* ``--tls`` (Java ``-Dtls.enable=true``) and ``--tls-config FILE`` (Java ``-Dtls.config.file``;
  implies ``--tls``).
"""

from __future__ import annotations

import argparse
import os
import re
from typing import TYPE_CHECKING

from rmq.common.constants import MixAll

if TYPE_CHECKING:
    import ssl

# Every `rmq` command builds these flags (the console's and the exporter's parsers too), so
# this module imports nothing heavy: yaml and the TLS settings are loaded where they are used
# (docs/design.md "Start-up time").
NAMESRV_ADDR_ENV = MixAll.NAMESRV_ADDR_ENV

__all__ = ["DEFAULT_NAMESRV", "add_cluster_flags", "addr", "addr_list", "client_tls", "credentials", "namesrv_of"]

#: The name server a tool talks to when neither ``-n`` nor ``$NAMESRV_ADDR`` names one.
DEFAULT_NAMESRV = "127.0.0.1:9876"
ADDR_RE = re.compile(r"[^\s:;,]+:\d{1,5}")


def addr(text: str) -> str:
    """argparse type: one ``host:port``."""
    if not ADDR_RE.fullmatch(text.strip()) or not 0 < int(text.strip().rsplit(":", 1)[1]) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not an address (expected host:port)")
    return text.strip()


def addr_list(text: str) -> str:
    """argparse type: ``host:port[;host:port...]``, normalised."""
    addrs = [a for a in text.split(";") if a.strip()]
    if not addrs:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} names no name server (expected host:port[;host:port...])")
    for a in addrs:
        addr(a)
    return ";".join(a.strip() for a in addrs)


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """Add the name server, ACL signing and TLS flags (see the module docstring) to ``p``;
    they land in ``args.namesrv``, ``args.aclAccessKey``, ``args.aclSecretKey``, ``args.tls``,
    ``args.tls_config``."""
    p.add_argument(
        "-n",
        "--namesrvAddr",
        "--namesrv",
        dest="namesrv",
        default=None,
        type=addr_list,
        help=f"name server address(es), ';'-separated (default ${NAMESRV_ADDR_ENV}, else {DEFAULT_NAMESRV})",
    )
    p.add_argument(
        "--aclAccessKey",
        "--access-key",
        dest="aclAccessKey",
        default=None,
        metavar="AK",
        help="sign requests with this ACL accessKey (default: $ROCKETMQ_HOME/conf/tools.yml)",
    )
    p.add_argument(
        "--aclSecretKey",
        "--secret-key",
        dest="aclSecretKey",
        default=None,
        metavar="SK",
        help="the secretKey of --aclAccessKey (default: tools.yml's)",
    )
    p.add_argument(
        "--tls",
        action="store_true",
        help="connect over TLS (Java -Dtls.enable=true); servers' certificates are verified "
        "against the system's trust store ($SSL_CERT_FILE) unless --tls-config says otherwise "
        "(default: plain TCP)",
    )
    p.add_argument(
        "--tls-config",
        metavar="FILE",
        default=None,
        help="tls.properties with tls.client.trustCertPath / certPath / keyPath / authServer "
        "(Java -Dtls.config.file); implies --tls (default: none)",
    )


def namesrv_of(args: argparse.Namespace) -> str:
    """``-n``, else ``$NAMESRV_ADDR``, else :data:`DEFAULT_NAMESRV`. ValueError for a bad
    ``$NAMESRV_ADDR``."""
    if args.namesrv:
        return str(args.namesrv)
    env = os.environ.get(NAMESRV_ADDR_ENV, "").strip()
    if not env:
        return DEFAULT_NAMESRV
    try:
        return addr_list(env)
    except argparse.ArgumentTypeError as e:
        raise ValueError(f"${NAMESRV_ADDR_ENV}: {e}") from None


def credentials(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``(access_key, secret_key)`` for signing: the flags, else ``$ROCKETMQ_HOME/conf/tools.yml``.

    Raises:
        ValueError: only one of the two flags, or a tools.yml that cannot be read.
    """
    ak, sk = getattr(args, "aclAccessKey", None), getattr(args, "aclSecretKey", None)
    if ak or sk:
        if not (ak and sk):
            raise ValueError("--aclAccessKey and --aclSecretKey go together")
        return ak, sk
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None, None
    path = os.path.join(home, "conf", "tools.yml")
    import yaml

    try:
        with open(path, "rb") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        return None, None
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: {e}") from None
    if not isinstance(data, dict) or not data.get("accessKey") or not data.get("secretKey"):
        return None, None  # Java: "AccessKey or secretKey is blank, the acl is not enabled."
    return str(data["accessKey"]), str(data["secretKey"])


def client_tls(args: argparse.Namespace) -> bool | ssl.SSLContext:
    """What ``rmq.Admin(tls=...)`` takes for ``--tls`` / ``--tls-config`` (ConfigError for a
    bad file)."""
    if args.tls_config:
        from rmq.remoting.tls import TlsSettings

        return TlsSettings.from_properties({"tls.config.file": args.tls_config}).client_context()
    return bool(args.tls)
