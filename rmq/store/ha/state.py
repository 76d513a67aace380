"""One read of a store's replication state, typed, for admin answers and metrics gauges."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmq.store.ha.service import SlaveState

if TYPE_CHECKING:
    from rmq.store.message_store import MessageStore

__all__ = ["HAState", "ha_state"]


@dataclass(frozen=True)
class HAState:
    """Replication as one store sees it.

    Master (``role`` ASYNC_MASTER / SYNC_MASTER): ``ha_port``, ``slaves`` (one
    :class:`SlaveState` per connection: address, ack offset, lag in bytes and ms),
    ``push2slave_max_offset`` (the highest ack) and ``fall_behind_bytes`` (CommitLog end − that,
    Java ``slaveFallBehindMuch``).

    Slave (``role`` SLAVE): ``master_address``, ``connected``, ``reported_offset`` (what the
    master was last told), ``last_transfer_ms_ago`` (-1: none yet), ``diverged`` (the reason
    replication stopped, or "").

    Both: ``max_offset``, the store's CommitLog end.
    """

    role: str
    max_offset: int
    ha_port: int = 0
    slaves: list[SlaveState] = field(default_factory=list)
    push2slave_max_offset: int = 0
    fall_behind_bytes: int = 0
    master_address: str = ""
    connected: bool = False
    reported_offset: int = -1
    last_transfer_ms_ago: int = -1
    diverged: str = ""


def ha_state(store: MessageStore) -> HAState:
    """The replication state of ``store`` now (cheap: no I/O)."""
    end = store.commit_log.max_offset
    role = store.config.broker_role
    ha = store.ha
    if ha is not None:
        return HAState(
            role, end, ha.port, ha.slaves(), ha.push2slave_max_offset, max(0, end - ha.push2slave_max_offset)
        )
    client = store.ha_client
    if client is not None:
        ago = int((time.monotonic() - client.last_transfer_at) * 1000) if client.last_transfer_at else -1
        return HAState(
            role,
            end,
            master_address=client.master_address or "",
            connected=client.connected,
            reported_offset=client.reported_offset,
            last_transfer_ms_ago=ago,
            diverged=client.diverged or "",
        )
    return HAState(role, end)
