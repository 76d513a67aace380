"""A small pure-Python model of getMessage (Java 4.9.8 DefaultMessageStore.getMessage), a test
model, not part of the package.

It is written straight from Java's algorithm, independently of ``rmq._store``, and is used by
the differential test (tests/store/test_get_message.py). It works on plain data:

* ``units``: the ConsumeQueue as a list indexed by logical offset of ``(phy, size, tags_code)``
  (entries below ``min_offset`` are ignored);
* ``records``: ``phy -> (size, tags or None)`` for the CommitLog records that are readable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FOUND = "FOUND"
NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class ModelConfig:
    cq_units_per_file: int
    commitlog_file_size: int
    memory: int  # totalPhysicalMemory * ratio / 100
    max_bytes_mem: int = 256 * 1024
    max_count_mem: int = 32
    max_bytes_disk: int = 64 * 1024
    max_count_disk: int = 8
    slave: bool = False
    offset_check_in_slave: bool = False


@dataclass
class ModelResult:
    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_pulling_from_slave: bool = False
    phys: list = field(default_factory=list)
    total: int = 0


def get_message(
    cfg: ModelConfig,
    units: list,
    min_offset: int,
    records: dict,
    max_offset_py: int,
    offset: int,
    max_msg_nums: int,
    filter_codes=None,
    filter_tags=None,
) -> ModelResult:
    max_offset = len(units)

    def correction(old, new):
        return new if (not cfg.slave or cfg.offset_check_in_slave) else old

    if max_offset == 0:
        return ModelResult(NO_MESSAGE_IN_QUEUE, correction(offset, 0), min_offset, max_offset)
    if offset < min_offset:
        return ModelResult(OFFSET_TOO_SMALL, correction(offset, min_offset), min_offset, max_offset)
    if offset == max_offset:
        return ModelResult(OFFSET_OVERFLOW_ONE, correction(offset, offset), min_offset, max_offset)
    if offset > max_offset:
        new = min_offset if min_offset == 0 else max_offset
        return ModelResult(OFFSET_OVERFLOW_BADLY, correction(offset, new), min_offset, max_offset)

    # getIndexBuffer: from `offset` to the end of the written part of its ConsumeQueue file.
    per_file = cfg.cq_units_per_file
    file_end = min(max_offset, (offset // per_file + 1) * per_file)
    buffer = units[offset:file_end]

    status = NO_MATCHED_MESSAGE
    next_phy_file_start = None
    max_phy_pulling = 0
    budget = max(16000, max_msg_nums * 20)
    phys, total, count = [], 0, 0
    i = 0
    while i < len(buffer) * 20 and i < budget:
        phy, size, tags_code = buffer[i // 20]
        max_phy_pulling = phy
        if next_phy_file_start is not None and phy < next_phy_file_start:
            i += 20
            continue
        in_disk = (max_offset_py - phy) > cfg.memory
        # isTheBatchFull
        if total != 0 and count != 0:
            if max_msg_nums <= count:
                break
            if in_disk:
                if total + size > cfg.max_bytes_disk or count > cfg.max_count_disk - 1:
                    break
            elif total + size > cfg.max_bytes_mem or count > cfg.max_count_mem - 1:
                break
        if filter_codes is not None and tags_code not in filter_codes:
            if total == 0:
                status = NO_MATCHED_MESSAGE
            i += 20
            continue
        rec = records.get(phy)
        if rec is None or rec[0] != size:
            if total == 0:
                status = MESSAGE_WAS_REMOVING
            fs = cfg.commitlog_file_size
            next_phy_file_start = phy + fs - phy % fs
            i += 20
            continue
        if filter_tags is not None and rec[1] not in filter_tags:
            if total == 0:
                status = NO_MATCHED_MESSAGE
            i += 20
            continue
        phys.append(phy)
        total += size
        count += 1
        status = FOUND
        next_phy_file_start = None
        i += 20
    return ModelResult(
        status, offset + i // 20, min_offset, max_offset, (max_offset_py - max_phy_pulling) > cfg.memory, phys, total
    )
