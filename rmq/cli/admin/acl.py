"""ACL accounts and white lists: updateAclConfig, deleteAclConfig, clusterAclConfigVersion,
updateGlobalWhiteAddr (Java ``tools/command/acl``), and how ``rmq admin`` signs its own requests.

``rmq admin`` signs with the credentials of ``--aclAccessKey`` / ``--aclSecretKey``, else of
``$ROCKETMQ_HOME/conf/tools.yml`` (``accessKey:`` / ``secretKey:``), which is where Java's
mqadmin reads them (``MQAdminStartup``, ``AclUtils.getAclRPCHook``); without either it does not
sign (:mod:`rmq.cli.connection`, shared with ``rmq exporter`` and ``rmq console``). (mqadmin's
``-a``/``-s`` are the account that updateAclConfig creates, not the signer.)
"""

from __future__ import annotations

import argparse

from rmq.client.admin import Admin, PlainAccessConfig

from ._cmd import command, print_table, targets

_PERMS = ("PUB", "SUB", "PUB|SUB", "SUB|PUB", "DENY")


def _perm(text: str) -> str:
    if text.strip() not in _PERMS:
        raise argparse.ArgumentTypeError(f"one of {', '.join(_PERMS)}, not {text!r}")
    return text.strip()


def _update_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)
    p.add_argument("-a", "--accessKey", required=True, help="the account's accessKey (longer than 6 characters)")
    p.add_argument("-s", "--secretKey", required=True, help="its secretKey (longer than 6 characters)")
    p.add_argument("-w", "--whiteRemoteAddress", default=None, help="white address of the account")
    p.add_argument("-i", "--defaultTopicPerm", default=None, type=_perm, help="PUB, SUB, PUB|SUB or DENY")
    p.add_argument("-u", "--defaultGroupPerm", default=None, type=_perm, help="PUB, SUB, PUB|SUB or DENY")
    p.add_argument("-t", "--topicPerms", default=None, help="topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", default=None, help="groupD=DENY,groupD=SUB")
    p.add_argument("-m", "--admin", default="false", choices=("true", "false"), help="admin account (default false)")


@command("updateAclConfig", flags=_update_flags)
async def update_acl_config(admin: Admin, args: argparse.Namespace) -> None:
    config = PlainAccessConfig(
        args.accessKey,
        args.secretKey,
        white_remote_address=args.whiteRemoteAddress,
        admin=args.admin == "true",
        default_topic_perm=args.defaultTopicPerm,
        default_group_perm=args.defaultGroupPerm,
        topic_perms=None if args.topicPerms is None else args.topicPerms.split(","),
        group_perms=None if args.groupPerms is None else args.groupPerms.split(","),
    )
    for addr in await admin.master_addrs(args.cluster, args.broker):
        await admin.create_and_update_plain_access_config(addr, config)
        print(f"create or update plain access config to {addr} success.")


def _delete_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)
    p.add_argument("-a", "--accessKey", required=True, help="the account to delete")


@command("deleteAclConfig", flags=_delete_flags)
async def delete_acl_config(admin: Admin, args: argparse.Namespace) -> None:
    for addr in await admin.master_addrs(args.cluster, args.broker):
        await admin.delete_plain_access_config(addr, args.accessKey)
        print(f"delete plain access config account from {addr} success.")
    print(f"account's accesskey is:{args.accessKey}")


def _version_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)


@command("clusterAclConfigVersion", flags=_version_flags)
async def cluster_acl_config_version(admin: Admin, args: argparse.Namespace) -> None:
    rows = []
    for addr in await admin.master_addrs(args.cluster, args.broker):
        info = await admin.examine_broker_cluster_acl_version_info(addr)
        v = info["version"]
        rows.append((info["clusterName"], info["brokerName"], info["brokerAddr"], v.get("counter"), v.get("timestamp")))
    print_table(
        ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclConfigVersionNum", "#AclLastUpdateTime"),
        rows,
        (16, 22, 22, 20, 22),
    )


def _white_flags(p: argparse.ArgumentParser) -> None:
    targets(p, required=True)
    p.add_argument("-g", "--globalWhiteRemoteAddresses", required=True, help="10.10.103.*,192.168.0.*")
    p.add_argument("-p", "--aclFileFullPath", default=None, help="an ACL file under the broker's home")


@command("updateGlobalWhiteAddr", flags=_white_flags)
async def update_global_white_addr(admin: Admin, args: argparse.Namespace) -> None:
    for addr in await admin.master_addrs(args.cluster, args.broker):
        await admin.update_global_white_addr_config(
            addr, args.globalWhiteRemoteAddresses.split(","), args.aclFileFullPath
        )
        print(f"update global white remote addresses to {addr} success.")
