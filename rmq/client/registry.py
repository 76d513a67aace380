"""The running client instances, one per (event loop, client id) (Java ``MQClientManager``'s
factory table). Its own module so that ``rmq.client.request_reply`` (imported by the instance
for the reply processor) finds the instances of its loop without importing ``instance``."""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .instance import ClientInstance

__all__ = ["forget", "instances_of", "live_instances"]

_instances: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ClientInstance]] = (
    weakref.WeakKeyDictionary()
)


def instances_of(loop: asyncio.AbstractEventLoop) -> dict[str, ClientInstance]:
    """``{client id: instance}`` of ``loop`` (created empty on first use)."""
    return _instances.setdefault(loop, {})


def live_instances() -> list[ClientInstance]:
    """The instances of the running loop that are not closed."""
    return [i for i in _instances.get(asyncio.get_running_loop(), {}).values() if not i.closed]


def forget(inst: ClientInstance) -> None:
    """Drop ``inst`` from its loop's table (it closed)."""
    for table in _instances.values():
        if table.get(inst.client_id) is inst:
            del table[inst.client_id]
