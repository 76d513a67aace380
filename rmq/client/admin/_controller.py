"""The controller mode's admin calls (Java 5.3.3 ``DefaultMQAdminExt`` getControllerMetaData,
getInSyncStateData, electMaster, getBrokerEpochCache): what ``rmq admin getControllerMetaData``,
``getSyncStateSet``, ``electMaster`` and ``getBrokerEpoch`` print.

A controller address may be any controller of the group (``h:p`` or ``h1:p1;h2:p2``): the
metadata call, which every controller answers, names the leader, and the request goes there
(as Java's ``MQClientAPIImpl`` does)."""

from __future__ import annotations

from collections.abc import Sequence

from rmq.protocol.body.controller import BrokerReplicasInfo, ElectMasterResponseBody, EpochEntryCache
from rmq.protocol.headers.controller import ElectMasterResponseHeader, GetMetaDataResponseHeader
from rmq.protocol.requests.controller import (
    elect_master,
    get_broker_epoch_cache,
    get_controller_metadata,
    get_sync_state_data,
    parse_broker_epoch_cache,
    parse_controller_metadata,
    parse_elect_master,
    parse_sync_state_data,
)

from ._base import AdminBase, AdminError

__all__ = ["ControllerAdmin", "controller_addrs"]


def controller_addrs(text: str | Sequence[str]) -> list[str]:
    """``"h1:p1;h2:p2"`` (Java's ``controllerAddr``, also ``,``-separated) or a list → addresses."""
    parts = text.replace(",", ";").split(";") if isinstance(text, str) else list(text)
    out = [p.strip() for p in parts if p.strip()]
    if not out:
        raise ValueError("no controller address")
    return out


class ControllerAdmin(AdminBase):
    """Controller calls of :class:`rmq.client.admin.Admin`."""

    async def get_controller_metadata(self, controller_addr: str) -> GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO of one controller."""
        return await self._call(controller_addr, get_controller_metadata(), parse_controller_metadata)

    async def controller_leader(self, controllers: str | Sequence[str]) -> str:
        """The leader's address, asking each controller in turn until one knows it."""
        problems = []
        for addr in controller_addrs(controllers):
            try:
                meta = await self.get_controller_metadata(addr)
            except (OSError, Exception) as e:  # noqa: BLE001 - try the next controller
                problems.append(f"{addr}: {e}")
                continue
            if meta.controller_leader_address:
                return meta.controller_leader_address
            problems.append(f"{addr}: no leader known")
        raise AdminError("no controller leader found: " + "; ".join(problems))

    async def get_in_sync_state_data(
        self, controllers: str | Sequence[str], broker_names: Sequence[str]
    ) -> BrokerReplicasInfo:
        """CONTROLLER_GET_SYNC_STATE_DATA from the leader (``getSyncStateSet``)."""
        leader = await self.controller_leader(controllers)
        return await self._call(leader, get_sync_state_data(broker_names), parse_sync_state_data)

    async def elect_master(
        self, controllers: str | Sequence[str], cluster_name: str, broker_name: str, broker_id: int
    ) -> tuple[ElectMasterResponseHeader, ElectMasterResponseBody]:
        """CONTROLLER_ELECT_MASTER with ``designateElect`` (``electMaster``): make ``broker_id``
        the master; AdminError when the controller refuses (not alive, not in sync...). A
        master already in place answers CONTROLLER_MASTER_STILL_EXIST, returned as success."""
        leader = await self.controller_leader(controllers)
        cmd = elect_master(broker_name, broker_id, cluster_name=cluster_name, designate=True)
        header, body, _ = await self._call(leader, cmd, parse_elect_master)
        return header, body

    async def get_broker_epoch_cache(self, broker_addr: str) -> EpochEntryCache:
        """GET_BROKER_EPOCH_CACHE of one broker in controller mode (``getBrokerEpoch``)."""
        return await self._call(broker_addr, get_broker_epoch_cache(), parse_broker_epoch_cache)
