"""StoreConfig: Java ``MessageStoreConfig`` names in snake_case, with Java's defaults."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["StoreConfig", "detect_total_physical_memory", "DEFAULT_MESSAGE_DELAY_LEVEL"]

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def detect_total_physical_memory() -> int:
    """Bytes of physical memory (Java ``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 24 * 1024**3


@dataclass
class StoreConfig:
    """Configuration of a :class:`rmq.store.MessageStore`.

    Defaults are RocketMQ 4.9.8's. Sizes are bytes, intervals milliseconds unless the name says
    otherwise. Tests shrink the file sizes and can force "in disk" with
    ``total_physical_memory`` / ``access_message_in_memory_max_ratio``.
    """

    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    store_path_commit_log: str | None = None          # default <root>/commitlog
    mapped_file_size_commitlog: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = "ASYNC_FLUSH"               # or "SYNC_FLUSH"
    flush_interval_commitlog: int = 500
    flush_commitlog_least_pages: int = 4
    flush_commitlog_thorough_interval: int = 10_000
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    file_reserved_time: int = 72                       # hours
    delete_when: str = "04"                            # hours of day, "04;05" for several
    disk_max_used_space_ratio: int = 75                # percent
    disk_space_warning_level_ratio: int = 90           # percent: refuse writes above
    disk_space_clean_forcibly_ratio: int = 85          # percent: delete immediately above
    clean_resource_interval: int = 10_000
    delete_commitlog_files_interval: int = 100
    destroy_mapped_file_interval_forcibly: int = 120_000
    clean_file_forcibly_enable: bool = True
    access_message_in_memory_max_ratio: int = 40       # percent of total_physical_memory
    total_physical_memory: int = field(default_factory=detect_total_physical_memory)
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    broker_role: str = "ASYNC_MASTER"                  # ASYNC_MASTER, SYNC_MASTER, SLAVE
    offset_check_in_slave: bool = False
    check_crc_on_recover: bool = True
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    # Not in Java: mapped files (CommitLog + ConsumeQueue) the process may hold; 0 derives it
    # from the open file limit and vm.max_map_count (rmq.store.resources).
    max_mapped_files: int = 0

    def __post_init__(self) -> None:
        if self.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ValueError(f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}")
        if self.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"broker_role must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {self.broker_role!r}")
        if self.mapped_file_size_consume_queue % 20:
            raise ValueError("mapped_file_size_consume_queue must be a multiple of 20")
        if self.mapped_file_size_commitlog < 4096:
            raise ValueError("mapped_file_size_commitlog must be at least 4096 bytes")

    @property
    def commitlog_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"

    def delay_level_millis(self) -> list[int]:
        """``message_delay_level`` parsed: index ``level - 1`` → milliseconds."""
        unit = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        out = []
        for item in self.message_delay_level.split():
            out.append(int(item[:-1]) * unit[item[-1]])
        return out
