"""Type stubs for the Cython extension rmq._store (rmq/_store.pyx; the record layout is drawn in
rmq/common/message.py)."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, overload

from _typeshed import ReadableBuffer, WriteableBuffer

_T = TypeVar("_T")

MESSAGE_MAGIC_CODE: int
MESSAGE_MAGIC_CODE_V2: int
BLANK_MAGIC_CODE: int
CQ_STORE_UNIT_SIZE: int
END_FILE_MIN_BLANK_LENGTH: int
RECORD_FIXED_SIZE: int
LAYOUT: dict[str, int]
SCAN_LIMIT: int
SCAN_BLANK: int
SCAN_END: int
SCAN_CORRUPT: int
SCAN_TORN: int
ST_FOUND: int
ST_NO_MATCHED_MESSAGE: int
ST_MESSAGE_WAS_REMOVING: int
MADV_POPULATE_WRITE: int

# A walked record: (pos, total, version, sys_flag, born_host_at, born_host_len, store_host_at,
# store_host_len, body_at, body_len, topic_at, topic_len, props_at, props_len), the field order
# of rmq.common.message.RecordSpan.
_Span = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int, int]

def body_crc(body: ReadableBuffer) -> int: ...
def java_hash_code(s: str | bytes) -> int: ...
def tags_code_of_properties(props: ReadableBuffer) -> int: ...
def find_property(props: ReadableBuffer, key: str) -> bytes | None: ...
def set_record_error(cls: type[ValueError]) -> None: ...
def record_span(buf: ReadableBuffer, pos: int = 0, end: int = -1, check_crc: bool = False) -> _Span: ...
def walk_records(buf: ReadableBuffer, start: int = 0, end: int = -1, check_crc: bool = False) -> list[_Span]: ...
def record_size(body_len: int, topic_len: int, props_len: int) -> int: ...
def encode_record(
    dst: WriteableBuffer,
    pos: int,
    body: ReadableBuffer,
    topic: bytes,
    props: ReadableBuffer,
    queue_id: int,
    flag: int,
    queue_offset: int,
    phy_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body_crc: int = -1,
) -> int: ...
def write_blank(dst: WriteableBuffer, pos: int, size: int) -> None: ...
def split_batch(
    batch: ReadableBuffer, topic_len: int, outer_props: ReadableBuffer
) -> list[tuple[int, int, int, int, int, int]]: ...
def encode_batch(
    dst: WriteableBuffer,
    pos: int,
    batch: ReadableBuffer,
    items: list[tuple[int, int, int, int, int, int]],
    topic: bytes,
    outer_props: ReadableBuffer,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    first_queue_offset: int,
    first_phy_offset: int,
) -> int: ...
def scan_records(
    buf: ReadableBuffer, pos: int, limit: int, file_from_offset: int, check_crc: bool = True, max_records: int = ...
) -> tuple[list[tuple[int, int, str, int, int, int, int, int, int, int]], int, int, int]: ...
def decode_record(buf: ReadableBuffer, pos: int = 0, check_crc: bool = False) -> dict[str, Any]: ...
def record_store_timestamp(buf: ReadableBuffer, pos: int) -> int: ...
def last_nonzero(buf: ReadableBuffer, start: int, end: int) -> int: ...
def put_cq_unit(dst: WriteableBuffer, pos: int, phy_offset: int, size: int, tags_code: int) -> None: ...
def read_cq_unit(buf: ReadableBuffer, pos: int) -> tuple[int, int, int]: ...
def cq_first_used(buf: ReadableBuffer, limit: int) -> int: ...
def cq_valid_end(buf: ReadableBuffer, limit: int, max_phy_end: int, start: int = 0) -> int: ...
def populate_write(buf: ReadableBuffer, start: int, length: int) -> int: ...
def sync_range(buf: ReadableBuffer, start: int, end: int) -> int: ...

class CommitLogTable:
    file_size: int
    first_from: int
    def reset(self, file_size: int, first_from: int, buffers: list[ReadableBuffer | None]) -> None: ...
    def release(self) -> None: ...

class SqlProgram:
    nkeys: int
    def __init__(self, plan: tuple[Any, ...] | None, keys: tuple[bytes, ...]) -> None: ...
    def evaluate(self, props: ReadableBuffer) -> int: ...
    def values(self, props: ReadableBuffer) -> list[str | None]: ...

def get_message_scan(
    cq_buf: ReadableBuffer,
    start: int,
    end: int,
    table: CommitLogTable,
    readable_offset: int,
    max_msg_nums: int,
    max_offset_py: int,
    memory: int,
    tag_codes: Iterable[int] | None,
    tag_bytes: list[bytes] | None,
    max_bytes_mem: int,
    max_count_mem: int,
    max_bytes_disk: int,
    max_count_disk: int,
    prop_program: SqlProgram | None = None,
    prop_evaluate: Callable[[list[str | None]], bool] | None = None,
    copy_limit: int = 0,
) -> tuple[int, int, int, int, int, list[tuple[int, int, int]] | bytes]: ...

class TopicEntry:
    """One topic's cached name and next queue offsets inside a ``QueueTable`` (C-level only)."""

class QueueTable:
    """The CommitLog writer's ``{(topic, queue_id): next queue offset}`` and the topics'
    cached UTF-8 names (rmq/_qtable.pxi): one entry per topic with a C array of offsets."""

    def __init__(self, max_topics: int = 100_000) -> None: ...
    @property
    def max_topics(self) -> int: ...
    @property
    def cached_topics(self) -> int: ...
    @overload
    def get(self, key: tuple[str, int]) -> int | None: ...
    @overload
    def get(self, key: tuple[str, int], default: _T) -> int | _T: ...
    def __getitem__(self, key: tuple[str, int]) -> int: ...
    def __setitem__(self, key: tuple[str, int], value: int) -> None: ...
    def __delitem__(self, key: tuple[str, int]) -> None: ...
    def __contains__(self, key: object) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[tuple[str, int]]: ...
    @overload
    def pop(self, key: tuple[str, int]) -> int: ...
    @overload
    def pop(self, key: tuple[str, int], default: _T) -> int | _T: ...
    def items(self) -> list[tuple[tuple[str, int], int]]: ...
    def clear(self) -> None: ...
    def topic_bytes(self, topic: str) -> bytes | None: ...
    def cache_topic(self, topic: str, encoded: bytes) -> bool: ...

class Appender:
    """The CommitLog's one writer (rmq/_append.pxi): queue offsets, topic cache, write
    position and the after-append bookkeeping (put totals, warm-ahead, hooks)."""

    queues: QueueTable
    @property
    def store_host_bytes(self) -> bytes: ...
    @property
    def id_prefix(self) -> str: ...
    mfq: Any
    store: Any
    warm: Any
    waker: Callable[[], object] | None
    wake_pending: bool
    notifier: Callable[[], object] | None
    notify_armed: bool
    refusing: bool
    def bind_file_type(self, cls: type) -> None: ...
    def bind_config_type(self, cls: type) -> None: ...
    hooks: tuple[Callable[[], object], ...]
    put_total: int
    put_bytes: int
    def __init__(self, store_host_bytes: bytes, warm_chunk: int = 0) -> None: ...
    def write(
        self,
        mf: Any,
        topic: str,
        body: ReadableBuffer,
        topic_b: bytes,
        props: ReadableBuffer,
        queue_id: int,
        flag: int,
        queue_offset: int,
        advance: bool,
        sys_flag: int,
        born_timestamp: int,
        born_host: bytes,
        reconsume_times: int,
        prepared_transaction_offset: int,
    ) -> tuple[int, int, int]: ...
    def write_batch(
        self,
        mf: Any,
        topic: str,
        batch: ReadableBuffer,
        items: list[Any],
        topic_b: bytes,
        outer_props: ReadableBuffer | None,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: bytes,
        reconsume_times: int,
        first_queue_offset: int,
    ) -> tuple[int, int, int]: ...
    def write_data(self, mf: Any, data: ReadableBuffer) -> None: ...

# -- the message index (rmq/_index.pxi; layout drawn there) ------------------------------------
INDEX_HEADER_SIZE: int
INDEX_ENTRY_SIZE: int
INDEX_SLOT_SIZE: int

def index_file_size(hash_slot_num: int, index_num: int) -> int: ...
def index_key_hash(topic: str, key: str) -> int: ...
def index_put(
    buf: WriteableBuffer, hash_slot_num: int, index_num: int, key_hash: int, phy_offset: int, store_timestamp: int
) -> bool: ...
def index_build(
    buf: WriteableBuffer,
    hash_slot_num: int,
    index_num: int,
    records_buf: ReadableBuffer,
    records: list[Any],
    rec_i: int,
    key_i: int,
    max_keys: int,
) -> tuple[int, int, int]: ...
def index_select(
    buf: ReadableBuffer,
    hash_slot_num: int,
    index_num: int,
    key_hash: int,
    max_num: int,
    begin: int,
    end: int,
    out: list[int],
) -> None: ...
def index_rebuild_slots(buf: WriteableBuffer, hash_slot_num: int, index_num: int, count: int) -> int: ...

# -- the common dispatch run (rmq/_dispatch.pxi) -------------------------------------------------
class Dispatcher:
    """The common dispatch run in one call: ConsumeQueue units and index entries written
    straight from a CommitLog file; stops at the first record the Python path must take."""

    taken: int
    declined: int
    def __init__(self, schedule_topic: str) -> None: ...
    def __len__(self) -> int: ...
    def clear(self) -> None: ...
    def register(self, topic: str, queue_id: int, cq: Any) -> None: ...
    def run(
        self,
        mm: WriteableBuffer,
        pos: int,
        stop: int,
        file_from_offset: int,
        max_records: int,
        cq_table: dict[str, Any],
        index_mm: WriteableBuffer | None,
        hash_slot_num: int,
        index_num: int,
        max_keys: int,
        arrived: dict[tuple[str, int, int], int] | None,
        watch: list[Any] | None,
    ) -> tuple[int, int, int]: ...

class RecordBuf:
    """A buffer held open for the native modules (``rmq/_store.pxd``); Python code never makes one."""

# Timer messages (rmq/_timer.pxi)
TIMER_UNIT_SIZE: int
TIMER_SLOT_SIZE: int
TIMER_MAGIC_DEFAULT: int
TIMER_MAGIC_ROLL: int

def timer_enqueue(
    log_buf: WriteableBuffer,
    file_pos: int,
    pos: int,
    wheel_buf: WriteableBuffer,
    nslots: int,
    precision: int,
    slot_time: int,
    magic: int,
    enqueue_ms: int,
    deliver_ms: int,
    phy: int,
    size_py: int,
    topic_hash: int,
    queue_offset: int,
) -> int: ...
def timer_slot(wheel_buf: ReadableBuffer, nslots: int, precision: int, slot_time: int) -> tuple[int, int, int]: ...
def timer_read_record(log_buf: ReadableBuffer, file_pos: int) -> tuple[int, int, int, int, int, int, int, int, int]: ...
def timer_slot_records(
    files: list[Any], first_offset: int, file_size: int, last_pos: int, min_pos: int, limit: int
) -> tuple[list[tuple[int, int, int, int, int, int, int]], int, bool]: ...
def timer_wheel_scan(
    wheel_buf: ReadableBuffer, nslots: int, precision: int, from_time: int, to_time: int
) -> tuple[int, int, int]: ...
