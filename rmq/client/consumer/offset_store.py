"""Consume-offset stores: on the broker for clustering, in a local file for broadcasting.

An offset is the *next* queue offset to consume. The in-memory table is the truth while the
consumer runs; ``persist*`` copies it out (every 5 s from the client instance, and when a queue
is dropped or the consumer closes).
"""

from __future__ import annotations

import abc
import asyncio
import enum
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rmq.errors import ClientError, RMQError
from rmq.types import MessageQueue

if TYPE_CHECKING:
    from rmq.client.instance import ClientInstance

__all__ = ["ReadOffsetType", "OffsetStore", "RemoteBrokerOffsetStore", "LocalFileOffsetStore"]

log = logging.getLogger("rmq.client")


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(abc.ABC):
    """Base: the in-memory table and the read/update rules shared by both stores."""

    def __init__(self) -> None:
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        """Read persisted offsets at start (local store only)."""

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if offset < 0:
            return
        old = self.offset_table.get(mq)
        if old is None or not increase_only or offset > old:
            self.offset_table[mq] = offset

    async def read(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        """The offset, -1 when none is known; raises RMQError when the store cannot be asked."""
        if kind is not ReadOffsetType.READ_FROM_STORE:
            off = self.offset_table.get(mq)
            if off is not None:
                return off
            if kind is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        off = await self._read_from_store(mq)
        if off >= 0:
            self.update(mq, off)
        return off

    @abc.abstractmethod
    async def _read_from_store(self, mq: MessageQueue) -> int:
        """The offset held by the backing store (broker or local file), -1 when none."""

    @abc.abstractmethod
    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of ``mqs`` to the backing store."""

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    def remove(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def clone_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.offset_table.items() if topic is None or mq.topic == topic}


class RemoteBrokerOffsetStore(OffsetStore):
    """Clustering: offsets live on the broker of each queue (QUERY/UPDATE_CONSUMER_OFFSET)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self._instance = instance
        self.group = group

    async def _addr(self, mq: MessageQueue) -> str:
        inst = self._instance
        addr = await inst.find_broker_addr_refreshing(mq, publish=False)
        if addr is None:
            raise ClientError(f"the broker {mq.broker_name} of {mq} is not in any route")
        return addr

    async def _read_from_store(self, mq: MessageQueue) -> int:
        return await self._instance.api.query_consumer_offset(await self._addr(mq), self.group, mq)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        async def one(mq: MessageQueue, off: int) -> None:
            try:
                await self._instance.api.update_consumer_offset(await self._addr(mq), self.group, mq, off)
            except RMQError as e:
                log.warning("group %s: persisting offset %d of %s failed: %r", self.group, off, mq, e)

        work = [(mq, self.offset_table[mq]) for mq in mqs if mq in self.offset_table]
        await asyncio.gather(*(one(mq, off) for mq, off in work))


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting: offsets in ``<dir>/<client id>/<group>/offsets.json`` (written atomically:
    a temporary file renamed over the old one, so a crash leaves the old or the new table).

    The default directory is ``$RMQ_CLIENT_OFFSET_DIR`` or ``~/.rmq_offsets``.
    """

    def __init__(self, base_dir: str | None, client_id: str, group: str) -> None:
        super().__init__()
        base = (
            base_dir or os.environ.get("RMQ_CLIENT_OFFSET_DIR") or os.path.join(os.path.expanduser("~"), ".rmq_offsets")
        )
        safe_cid = client_id.replace("@", "_").replace("#", "_").replace(":", "_")
        self.path = os.path.join(base, safe_cid, group, "offsets.json")

    async def load(self) -> None:
        self.offset_table.update(await asyncio.to_thread(self._read_file))

    def _read_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path + ".bak"):
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:
                log.warning("offset file %s is unreadable (%r); trying the backup", path, e)
                continue
            return {
                MessageQueue(d["topic"], d["brokerName"], int(d["queueId"])): int(d["offset"])
                for d in data.get("offsetTable", [])
            }
        return {}

    async def _read_from_store(self, mq: MessageQueue) -> int:
        return (await asyncio.to_thread(self._read_file)).get(mq, -1)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        # The file is read and replaced in a worker thread: a slow disk must not stall the loop.
        held = {mq: self.offset_table[mq] for mq in mqs if mq in self.offset_table}
        await asyncio.to_thread(self._write_file, held)

    def _write_file(self, held: dict[MessageQueue, int]) -> None:
        # Keep entries of queues we no longer hold: another start may own them again.
        table = self._read_file()
        table.update(held)
        data = {"offsetTable": [dict(mq.to_json(), offset=off) for mq, off in sorted(table.items())]}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), prefix=".offsets.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            if os.path.exists(self.path):
                os.replace(self.path, self.path + ".bak")
            os.replace(tmp, self.path)
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
