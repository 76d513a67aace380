"""StoreConfig: Java ``MessageStoreConfig`` names in snake_case, with Java's defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rmq.common.net import AddressList
from rmq.common.settings import JAVA_INT, check_delay_levels, check_hours_of_day, multiple_of, setting

__all__ = ["StoreConfig", "detect_total_physical_memory", "DEFAULT_MESSAGE_DELAY_LEVEL"]

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def detect_total_physical_memory() -> int:
    """Bytes of physical memory (Java ``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 24 * 1024**3


@dataclass(slots=True)
class StoreConfig:
    """Configuration of a :class:`rmq.store.MessageStore`.

    Defaults are RocketMQ 4.9.8's. Sizes are bytes, intervals milliseconds unless the name says
    otherwise. Tests shrink the file sizes and can force "in disk" with
    ``total_physical_memory`` / ``access_message_in_memory_max_ratio``.

    Each numeric field declares its allowed values where it is declared
    (``setting(default, lo=, hi=)``, :mod:`rmq.common.settings`); the daemons check them at start.

    A dataclass with ``__slots__``: the store's native writer reads ``broker_role``,
    ``flush_disk_type`` and ``max_message_size`` at their slot offsets at every put
    (``Appender.bind_config_type``, rmq/_append.pxi), and no attribute outside the fields can
    be set.
    """

    #: read at their slot offsets by the store's native writer at every put
    #: (Appender.bind_config_type; rmq/common/slots.pxd)
    __native_slots__ = ("broker_role", "flush_disk_type", "max_message_size")

    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    store_path_commit_log: str | None = None  # default <root>/commitlog
    mapped_file_size_commitlog: int = setting(1024 * 1024 * 1024, lo=4096, hi=JAVA_INT.hi, unit="bytes")
    mapped_file_size_consume_queue: int = setting(
        300_000 * 20, lo=20, hi=JAVA_INT.hi, check=multiple_of(20), text="a multiple of 20"
    )
    flush_disk_type: str = setting("ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    flush_interval_commitlog: int = setting(500, lo=1, hi=3_600_000, unit="ms")
    flush_commitlog_least_pages: int = setting(4, lo=0, hi=JAVA_INT.hi)
    flush_commitlog_thorough_interval: int = setting(10_000, lo=0, hi=JAVA_INT.hi, unit="ms")
    flush_interval_consume_queue: int = setting(1000, lo=1, hi=3_600_000, unit="ms")
    flush_consume_queue_least_pages: int = setting(2, lo=0, hi=JAVA_INT.hi)
    flush_consume_queue_thorough_interval: int = setting(60_000, lo=0, hi=JAVA_INT.hi, unit="ms")
    sync_flush_timeout: int = setting(5000, lo=1, hi=600_000, unit="ms")
    max_message_size: int = setting(4 * 1024 * 1024, lo=1, hi=1024 * 1024 * 1024, unit="bytes")
    file_reserved_time: int = setting(72, lo=0, hi=87_600, unit="hours")
    # hours of day, "04;05" for several
    delete_when: str = setting("04", check=check_hours_of_day, text="hours 0..23 separated by ;")
    disk_max_used_space_ratio: int = setting(75, lo=0, hi=100, unit="%")
    disk_space_warning_level_ratio: int = setting(90, lo=0, hi=100, unit="%")  # refuse writes above
    disk_space_clean_forcibly_ratio: int = setting(85, lo=0, hi=100, unit="%")  # delete immediately above
    clean_resource_interval: int = setting(10_000, lo=1, hi=JAVA_INT.hi, unit="ms")
    delete_commitlog_files_interval: int = setting(100, lo=0, hi=JAVA_INT.hi, unit="ms")
    destroy_mapped_file_interval_forcibly: int = setting(120_000, lo=0, hi=JAVA_INT.hi, unit="ms")
    clean_file_forcibly_enable: bool = True
    access_message_in_memory_max_ratio: int = setting(40, lo=0, hi=100, unit="% of total_physical_memory")
    total_physical_memory: int = setting(default_factory=detect_total_physical_memory, lo=1, unit="bytes")
    max_transfer_bytes_on_message_in_memory: int = setting(256 * 1024, lo=1, hi=JAVA_INT.hi, unit="bytes")
    max_transfer_count_on_message_in_memory: int = setting(32, lo=1, hi=JAVA_INT.hi)
    max_transfer_bytes_on_message_in_disk: int = setting(64 * 1024, lo=1, hi=JAVA_INT.hi, unit="bytes")
    max_transfer_count_on_message_in_disk: int = setting(8, lo=1, hi=JAVA_INT.hi)
    broker_role: str = setting("ASYNC_MASTER", choices=("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"))
    offset_check_in_slave: bool = False
    check_crc_on_recover: bool = True
    message_delay_level: str = setting(
        DEFAULT_MESSAGE_DELAY_LEVEL, check=check_delay_levels, text="1..64 delays like 1s 5m 2h 1d"
    )
    # The message index (Java IndexService): keys of each record → CommitLog offsets.
    message_index_enable: bool = True
    max_hash_slot_num: int = setting(5_000_000, lo=1, hi=100_000_000)
    max_index_num: int = setting(5_000_000 * 4, lo=2, hi=100_000_000)
    # Not in Java: dispatch the common records (ConsumeQueue unit + index keys) in one Cython
    # call per CommitLog file stretch (rmq/_dispatch.pxi), the rest through the Python path;
    # False runs every record through the Python path (for comparisons). Same files either way.
    dispatch_fast_path: bool = True
    # QUERY_MESSAGE answers at most this many records (Java maxMsgsNumBatch) ...
    max_msgs_num_batch: int = setting(64, lo=1, hi=10_000)
    # ... and a unique-key query this many (Java defaultQueryMaxNum).
    default_query_max_num: int = setting(32, lo=1, hi=10_000)
    # Not in Java: mapped files (CommitLog + ConsumeQueue) the process may hold; 0 derives it
    # from the open file limit and vm.max_map_count (rmq.store.resources).
    max_mapped_files: int = setting(0, lo=0, hi=1 << 31)
    # Replication (Java HAService / HAConnection, rmq.store.ha). -1: the broker's listenPort + 1
    # (0 while the broker's port is ephemeral); 0: an ephemeral port.
    ha_listen_port: int = setting(-1, lo=-1, hi=65535)
    ha_send_heartbeat_interval: int = setting(5000, lo=10, hi=3_600_000, unit="ms")
    ha_housekeeping_interval: int = setting(20_000, lo=100, hi=3_600_000, unit="ms")
    ha_transfer_batch_size: int = setting(32 * 1024, lo=1024, hi=4 * 1024 * 1024 - 12, unit="bytes")
    ha_master_address: str | None = None  # "host:port" of the master's HA port (a slave)
    ha_slave_fallbehind_max: int = setting(256 * 1024 * 1024, lo=0, hi=JAVA_INT.hi, unit="bytes")
    # A SYNC_MASTER put waits this long for a slave's ack (Java slaveTimeout), then FLUSH_SLAVE_TIMEOUT.
    slave_timeout: int = setting(3000, lo=1, hi=600_000, unit="ms")
    # Not in Java: slaves one master serves at once (HA connections past it are closed at once).
    ha_max_connections: int = setting(8, lo=1, hi=1024)
    # Not in Java: who may follow this master (rmq.store.ha.service). A peer that proves
    # haAuthSecret (an rmq slave given the same secret) may; a peer that cannot (a Java slave,
    # an rmq slave without a secret) only from an address of haAllowedSlaves. A slave with
    # haAuthSecret proves it to its master. Loopback by default: `rmq standalone` and a slave on
    # the same host work unconfigured, and no other host reads the CommitLog.
    ha_auth_secret: str = ""
    ha_allowed_slaves: str = setting(
        "127.0.0.0/8,::1",
        check=AddressList.check,
        text="IP addresses or networks separated by commas, * for any, empty for none",
    )

    # In-sync replicas in controller mode (Java 5 MessageStoreConfig; docs/design.md
    # "Controller mode"): a SYNC_MASTER put waits for every SyncStateSet member's ack with
    # allAckInSyncStateSet, else for inSyncReplicas acks (the master counts; with
    # enableAutoInSyncReplicas at most the set's size and at least minInSyncReplicas), and is
    # refused (IN_SYNC_REPLICAS_NOT_ENOUGH, nothing stored) while the set has fewer than
    # minInSyncReplicas members. A slave not caught up for haMaxTimeSlaveNotCatchup leaves it.
    # With allAckInSyncStateSet consumers see a message once every member has it (confirm offset).
    all_ack_in_sync_state_set: bool = False
    in_sync_replicas: int = setting(1, lo=1, hi=1024)
    min_in_sync_replicas: int = setting(1, lo=1, hi=1024)
    enable_auto_in_sync_replicas: bool = False
    ha_max_time_slave_not_catchup: int = setting(15_000, lo=100, hi=3_600_000, unit="ms")
    # Java readUnCommitted: consumers may read past the confirm offset (what not every in-sync
    # replica has yet) on a controller-mode master with allAckInSyncStateSet.
    read_uncommitted: bool = False

    # Timer messages (Java 5 MessageStoreConfig timer*, rmq.store.timer): a message carrying
    # TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS / __STARTDELIVERTIME is parked in
    # rmq_sys_wheel_timer and delivered by the timer wheel at its time.
    timer_wheel_enable: bool = True
    timer_precision_ms: int = setting(1000, lo=10, hi=60_000, unit="ms")
    timer_max_delay_sec: int = setting(3600 * 24 * 3, lo=1, hi=JAVA_INT.hi, unit="s")
    timer_roll_window_slot: int = setting(3600 * 24 * 2, lo=2, hi=JAVA_INT.hi, unit="slots")
    timer_flush_interval_ms: int = setting(1000, lo=10, hi=3_600_000, unit="ms")
    timer_congest_num_each_slot: int = setting(JAVA_INT.hi, lo=1, hi=JAVA_INT.hi)
    timer_stop_dequeue: bool = False  # Java timerStopDequeue: timers are parked, none delivered
    mapped_file_size_timer_log: int = setting(
        100 * 1024 * 1024, lo=4096, hi=JAVA_INT.hi, check=multiple_of(64), text="a multiple of 64 bytes"
    )

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
