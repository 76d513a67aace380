"""The controller mode: getControllerMetaData, getSyncStateSet, electMaster, getBrokerEpoch
(Java 5.3.3 ``tools/command/controller``, ``ha/GetSyncStateSetSubCommand`` and
``broker/GetBrokerEpochSubCommand``), with mqadmin's flags and output. ``-a`` takes any
controller of the group (``h1:p1;h2:p2`` too): the leader is found through the metadata call.
``-i`` repeats the command every that many seconds until interrupted, as Java's."""

from __future__ import annotations

import argparse
import asyncio

from rmq.client.admin import Admin

from ._cmd import command, int_in, name


def _controller(text: str) -> str:
    parts = [p.strip() for p in text.replace(",", ";").split(";") if p.strip()]
    if not parts or any(":" not in p for p in parts):
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not host:port[;host:port...]")
    return ";".join(parts)


def _controller_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-a",
        "--controllerAddress",
        dest="controller",
        required=True,
        type=_controller,
        help="the address of controller (any of the group; h1:p1;h2:p2)",
    )


async def _repeat(args: argparse.Namespace, once: object) -> None:
    assert callable(once)
    if args.interval is None:
        await once()
        return
    while True:
        await once()
        await asyncio.sleep(args.interval)


# -- getControllerMetaData --------------------------------------------------------------------


@command("getControllerMetaData", flags=_controller_flag)
async def get_controller_metadata(admin: Admin, args: argparse.Namespace) -> None:
    meta = await admin.get_controller_metadata(args.controller.split(";")[0])
    print(f"\n#ControllerGroup\t{meta.group}", end="")
    print(f"\n#ControllerLeaderId\t{meta.controller_leader_id}", end="")
    print(f"\n#ControllerLeaderAddress\t{meta.controller_leader_address}", end="")
    for peer in (meta.peers or "").split(";"):
        if peer:
            print(f"\n#Peer:\t{peer}", end="")
    print()


# -- getSyncStateSet --------------------------------------------------------------------------


def _brokers_and_interval_flags(p: argparse.ArgumentParser) -> None:
    """``-c cluster`` or ``-b brokerName`` (one of them) and ``-i interval``, as Java's
    GetSyncStateSetSubCommand and GetBrokerEpochSubCommand both take them."""
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-c", "--clusterName", dest="cluster", default=None, type=name, help="which cluster")
    g.add_argument("-b", "--brokerName", dest="broker_name", default=None, type=name, help="which broker to fetch")
    p.add_argument(
        "-i",
        "--interval",
        dest="interval",
        default=None,
        type=int_in(1, 86_400),
        help="the interval(second) of get info (default: once)",
    )


def _sync_state_flags(p: argparse.ArgumentParser) -> None:
    _controller_flag(p)
    _brokers_and_interval_flags(p)


@command("getSyncStateSet", flags=_sync_state_flags)
async def get_sync_state_set(admin: Admin, args: argparse.Namespace) -> None:
    async def once() -> None:
        if args.broker_name:
            names = [args.broker_name]
        else:
            info = await admin.examine_broker_cluster_info()
            names = sorted(info.cluster_addr_table.get(args.cluster, []))
        if not names:
            return
        data = await admin.get_in_sync_state_data(args.controller, names)
        for broker_name, r in data.replicas_info_table.items():
            print(
                f"\n#brokerName\t{broker_name}\n#MasterBrokerId\t{r.master_broker_id}\n#MasterAddr\t{r.master_address}"
                f"\n#MasterEpoch\t{r.master_epoch}\n#SyncStateSetEpoch\t{r.sync_state_set_epoch}"
                f"\n#SyncStateSetNums\t{len(r.in_sync_replicas)}"
            )
            for m in r.in_sync_replicas:
                print(f"\nInSyncReplica:\t{m}")
            for m in r.not_in_sync_replicas:
                print(f"\nNotInSyncReplica:\t{m}")

    await _repeat(args, once)


# -- electMaster ------------------------------------------------------------------------------


def _elect_flags(p: argparse.ArgumentParser) -> None:
    _controller_flag(p)
    p.add_argument(
        "-b",
        "--brokerId",
        dest="broker_id",
        required=True,
        type=int_in(1, 1 << 62),
        help="The id of the broker which requires to become master",
    )
    p.add_argument(
        "-bn",
        "--brokerName",
        dest="broker_name",
        required=True,
        type=name,
        help="The broker name of the replicas that require to be manipulated",
    )
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, type=name, help="the clusterName of broker")


@command("electMaster", flags=_elect_flags)
async def elect_master(admin: Admin, args: argparse.Namespace) -> None:
    header, body = await admin.elect_master(args.controller, args.cluster, args.broker_name, args.broker_id)
    print(f"\n#ClusterName\t{args.cluster}", end="")
    print(f"\n#BrokerName\t{args.broker_name}", end="")
    print(f"\n#BrokerMasterAddr\t{header.master_address}", end="")
    print(f"\n#MasterEpoch\t{header.master_epoch}", end="")
    print(f"\n#SyncStateSetEpoch\t{header.sync_state_set_epoch}")
    group = body.broker_member_group
    if group is not None:
        for bid, addr in sorted(group.broker_addrs.items()):
            print(f"\t#Broker\t{bid}\t{addr}")


# -- getBrokerEpoch ---------------------------------------------------------------------------


@command("getBrokerEpoch", flags=_brokers_and_interval_flags)
async def get_broker_epoch(admin: Admin, args: argparse.Namespace) -> None:
    async def once() -> None:
        info = await admin.examine_broker_cluster_info()
        if args.broker_name:
            names = [args.broker_name]
        else:
            names = sorted(info.cluster_addr_table.get(args.cluster, []))
        addrs = sorted(
            {a for n in names if (bd := info.broker_addr_table.get(n)) is not None for a in bd.broker_addrs.values()}
        )
        for addr in addrs:
            cache = await admin.get_broker_epoch_cache(addr)
            print(
                f"\n#clusterName\t{cache.cluster_name}\n#brokerName\t{cache.broker_name}\n#brokerAddr\t{addr}"
                f"\n#brokerId\t{cache.broker_id}",
                end="",
            )
            entries = list(cache.epoch_list)
            for i, e in enumerate(entries):
                if i == len(entries) - 1:
                    # Java prints the open epoch ending at the broker's max offset
                    e = type(e)(e.epoch, e.start_offset, cache.max_offset)
                print(f"\n#Epoch: {e}", end="")
            print()

    await _repeat(args, once)
