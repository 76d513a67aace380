"""Store-side message types, statuses and results (Java names)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from rmq import _store
from rmq.common import message as common
from rmq.common.message import (
    MessageConst,
    MessageSysFlag,
    decode_offset_msg_id,
    host_bytes,
    offset_msg_id,
    string_to_properties,
)

if TYPE_CHECKING:
    from rmq.store.mapped_file import MappedFile

__all__ = [
    "QueryMessageResult",
    "PutMessageStatus",
    "AppendMessageStatus",
    "GetMessageStatus",
    "MessageSysFlag",
    "MessageInner",
    "StoredMessage",
    "AppendMessageResult",
    "PutMessageResult",
    "GetMessageResult",
    "MessageFilter",
    "properties_to_string",
    "string_to_properties",
    "offset_msg_id",
    "decode_offset_msg_id",
    "host_bytes",
]


class PutMessageStatus(IntEnum):
    """Java ``PutMessageStatus``: the outcome of a put."""

    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9
    IN_SYNC_REPLICAS_NOT_ENOUGH = 10  # Java 5: fewer SyncStateSet members than minInSyncReplicas


class AppendMessageStatus(IntEnum):
    """Java ``AppendMessageStatus``."""

    PUT_OK = 0
    END_OF_FILE = 1
    MESSAGE_SIZE_EXCEEDED = 2
    PROPERTIES_SIZE_EXCEEDED = 3
    UNKNOWN_ERROR = 4


class GetMessageStatus(IntEnum):
    """Java ``GetMessageStatus`` (the first three values are shared with rmq._store)."""

    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


# GetMessageStatus value -> name, for GetMessageResult.status_name
_STATUS_NAMES = tuple(s.name for s in GetMessageStatus)
assert all(s.value == i for i, s in enumerate(GetMessageStatus))


NAME_VALUE_SEPARATOR = common.NAME_VALUE_SEPARATOR
PROPERTY_SEPARATOR = common.PROPERTY_SEPARATOR


def properties_to_string(props: dict[str, str] | None) -> str:
    """Java 4.9.8 ``messageProperties2String``: ``k\\x01v\\x02...`` without a trailing \\x02
    (the broker's form; see :func:`rmq.common.message.properties_to_string`)."""
    return common.properties_to_string(props, trailing_separator=False)


@dataclass(slots=True)
class MessageInner:
    """What the broker asks the store to append (Java ``MessageExtBrokerInner``).

    ``properties_str`` (already encoded) wins over ``properties``. ``tags_code`` is informative:
    the ConsumeQueue unit gets the code computed from the stored TAGS.
    """

    topic: str
    queue_id: int = 0
    body: bytes | bytearray | memoryview = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    properties_str: str | None = None
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None
    store_timestamp: int = 0

    def encoded_properties(self) -> bytes:
        if self.properties_str is not None:
            return self.properties_str.encode("utf-8")
        return properties_to_string(self.properties).encode("utf-8")


@dataclass(slots=True)
class StoredMessage:
    """A decoded CommitLog record: the store's view of Java ``MessageExt`` (the SDK's is
    :class:`rmq.types.MessageExt`; the two differ in field types, hence two names)."""

    topic: str
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    properties: dict[str, str]
    body_crc: int
    store_size: int
    msg_id: str

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.KEYS)

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> StoredMessage:
        """Build from ``rmq._store.decode_record``'s dict."""

        def host(b: bytes) -> tuple[str, int]:
            if len(b) == 8:
                return socket.inet_ntoa(b[:4]), struct.unpack(">i", b[4:])[0]
            return socket.inet_ntop(socket.AF_INET6, b[:16]), struct.unpack(">i", b[16:])[0]

        store_host = d["store_host"]
        return cls(
            topic=d["topic"],
            queue_id=d["queue_id"],
            flag=d["flag"],
            queue_offset=d["queue_offset"],
            commit_log_offset=d["commit_log_offset"],
            sys_flag=d["sys_flag"],
            born_timestamp=d["born_timestamp"],
            born_host=host(d["born_host"]),
            store_timestamp=d["store_timestamp"],
            store_host=host(store_host),
            reconsume_times=d["reconsume_times"],
            prepared_transaction_offset=d["prepared_transaction_offset"],
            body=d["body"],
            properties=string_to_properties(d["properties"]),
            body_crc=d["body_crc"],
            store_size=d["store_size"],
            msg_id=offset_msg_id(store_host[:8] if len(store_host) == 8 else store_host, d["commit_log_offset"]),
        )


@dataclass(slots=True)
class AppendMessageResult:
    """Where a put landed. ``msg_id`` is the offsetMsgId of the first record; for a batch
    ``msg_ids`` lists all of them (the SEND reply joins them with commas)."""

    wrote_offset: int
    wrote_bytes: int
    msg_id: str
    store_timestamp: int
    logics_offset: int
    msg_num: int = 1
    msg_ids: Sequence[str] = ()  # (empty for a single message: its id is msg_id)
    status: AppendMessageStatus = AppendMessageStatus.PUT_OK


@dataclass(slots=True)
class PutMessageResult:
    """``status`` says what happened; ``append`` is set when the record was written (also with
    FLUSH_DISK_TIMEOUT: the message is stored but not yet known durable); ``remark`` explains a
    refusal in words for the reply. ``flush_wait`` is set by ``MessageStore.append_message``
    when the append may only be acknowledged after ``MessageStore.wait_flush`` (SYNC_FLUSH)."""

    status: PutMessageStatus
    append: AppendMessageResult | None = None
    remark: str | None = None
    flush_wait: bool = False
    # SYNC_MASTER: also wait for a slave's ack (rmq.store.ha.GroupTransferService); set with flush_wait.
    replica_wait: bool = False

    @property
    def is_ok(self) -> bool:
        return self.status == PutMessageStatus.PUT_OK


@dataclass
class QueryMessageResult:
    """Java QueryMessageResult: whole records (copies) found by the index, oldest first."""

    buffers: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    buffer_total_size: int = 0

    def add(self, record: bytes) -> None:
        self.buffers.append(record)
        self.buffer_total_size += len(record)


class GetMessageResult:
    """What ``MessageStore.get_message`` found.

    ``buffers`` are zero-copy memoryviews of CommitLog records (adjacent records merged into
    one view); they stay valid until ``release()`` (idempotent), which drops the holds that keep
    the mapped files from being unmapped.
    """

    __slots__ = (
        "status",
        "next_begin_offset",
        "min_offset",
        "max_offset",
        "suggest_pulling_from_slave",
        "message_count",
        "buffer_total_size",
        "buffers",
        "_holds",
        "holds_files",
        "status_name",
    )

    def __init__(
        self,
        status: GetMessageStatus,
        next_begin_offset: int,
        min_offset: int,
        max_offset: int,
        suggest_pulling_from_slave: bool = False,
        message_count: int = 0,
        buffer_total_size: int = 0,
        buffers: list[memoryview] | None = None,
        holds: list[MappedFile] | None = None,
    ):
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.suggest_pulling_from_slave = suggest_pulling_from_slave
        self.message_count = message_count
        self.buffer_total_size = buffer_total_size
        self.buffers = buffers if buffers is not None else []
        self._holds = holds
        #: True while ``buffers`` are views of mapped files that ``release()`` must let go
        #: (False for an answer copied into bytes, which needs no release).
        self.holds_files = bool(holds)
        #: ``status.name`` (read per pull; an enum's name is a descriptor call)
        self.status_name = _STATUS_NAMES[status]

    def release(self) -> None:
        """Drop the holds on the mapped files (idempotent). Do not use ``buffers`` after."""
        holds, self._holds = self._holds, None
        self.holds_files = False
        self.buffers = []
        if holds:
            for mf in holds:
                mf.release()

    def iter_records(self) -> Iterator[memoryview]:
        """Yield one memoryview per record (splits the merged buffers; for tests and tools)."""
        for part in self.buffers:
            buf = memoryview(part)  # (a copied answer is bytes: its slices as views too)
            pos = 0
            while pos < len(buf):
                size = int.from_bytes(buf[pos : pos + 4], "big")
                yield buf[pos : pos + size]
                pos += size

    def __repr__(self) -> str:
        return (
            f"GetMessageResult({self.status.name}, next={self.next_begin_offset}, "
            f"min={self.min_offset}, max={self.max_offset}, count={self.message_count}, "
            f"bytes={self.buffer_total_size}, slave={self.suggest_pulling_from_slave})"
        )


class MessageFilter:
    """A TAG subscription: ``from_expression("TagA || TagB")``; ``*``, empty and None match all.
    A property (SQL92) subscription: ``for_properties(compiled)``.

    ``codes`` are the Java ``String.hashCode`` of each tag (matched against the ConsumeQueue
    unit), ``tags`` the UTF-8 tag strings (matched against the record's TAGS). ``properties``
    is a compiled property filter (``rmq.common.sql92.Sql92Filter``: ``key_bytes``, ``plan``
    and ``match_values``) evaluated on each record after the tag stages by its C program
    (``program``, with ``match_values`` for what the program hands back), or None (every TAG
    subscription), in which case the scan never looks at properties.
    """

    __slots__ = ("expression", "tags", "codes", "tag_bytes", "properties", "program")

    def __init__(self, tags: list[str] | None, properties: Any = None):
        uniq = None if tags is None else list(dict.fromkeys(tags))
        self.tags = uniq
        self.expression = "*" if uniq is None else " || ".join(uniq)
        self.codes = None if uniq is None else frozenset(_store.java_hash_code(t) for t in uniq)
        self.tag_bytes = None if uniq is None else [t.encode("utf-8") for t in uniq]
        self.properties = properties
        #: the C form of ``properties`` the scan runs (``_store.SqlProgram``)
        self.program = None if properties is None else _store.SqlProgram(properties.plan, properties.key_bytes)
        if properties is not None:
            self.expression = properties.expression

    @classmethod
    def for_properties(cls, compiled: Any) -> MessageFilter:
        """A filter on message properties: every tag passes (Java's SQL92 filter matches by
        ConsumeQueue only through its optional bloom filter, which rmq does not keep), then
        ``compiled.match_values`` decides per record."""
        return cls(None, compiled)

    @classmethod
    def from_expression(cls, expression: str | None) -> MessageFilter:
        expr = (expression or "").strip()
        if not expr or expr == "*":
            return cls(None)
        tags = [t.strip() for t in expr.split("||")]
        tags = [t for t in tags if t]
        if not tags:
            return cls(None)
        return cls(tags)

    def is_matched_by_tags_code(self, tags_code: int | None) -> bool:
        """The ConsumeQueue stage (Java ``isMatchedByConsumeQueue``)."""
        return self.codes is None or tags_code is None or tags_code in self.codes

    def __repr__(self) -> str:
        return f"MessageFilter({self.expression!r})"


ArrivalListener = Callable[[str, int, int, int], None]
