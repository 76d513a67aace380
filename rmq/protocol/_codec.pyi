"""Type stubs for the Cython extension rmq.protocol._codec (rmq/protocol/_codec.pyx)."""

from collections.abc import Callable, Iterable
from typing import Any

from _typeshed import ReadableBuffer

# json_header_encode returns None for input it leaves to the
# pure-Python reference encoder in rmq/remoting/codec.py (which then encodes it or raises).
def json_header_encode(
    code: int,
    ext: dict[str, Any],
    flag: int,
    language: str,
    opaque: int,
    remark: str | None,
    version: int,
    body_len: int = -1,
) -> bytes | None: ...

# The ROCKETMQ binary twins: None for what the reference in rmq/remoting/codec.py must handle.
def binary_header_decode(
    buf: ReadableBuffer, start: int, header_len: int, cmd_cls: type[Any], lang_names: tuple[str, ...]
) -> Any: ...
def binary_header_encode(
    code: int,
    ext: dict[str, Any] | None,
    flag: int,
    language: int,
    opaque: int,
    remark: str | None,
    version: int,
    body_len: int = -1,
) -> bytes | None: ...

# The whole frame of a stored SEND's reply (msgId, queueId, queueOffset, TRACE_ON, MSG_REGION).
def send_reply_frame(
    serialize_type: int,
    code: int,
    opaque: int,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    region: str,
    trace_on: bool,
) -> bytes | None: ...

# The whole frame of a PULL reply (nextBeginOffset, minOffset, maxOffset, suggestWhichBrokerId),
# its body after the header; None for a remark that is not plain ASCII.
def pull_reply_frame(
    serialize_type: int,
    code: int,
    opaque: int,
    remark: str | None,
    next_begin: int,
    min_offset: int,
    max_offset: int,
    suggest: int,
    body: bytes | None = None,
) -> bytes | None: ...

# The JSON request-header scan the SEND fast path uses, for tests: (code, flag, opaque, version,
# extFields) or None when the header is outside the common shape (the general decoder's).
def json_header_scan_py(header: bytes | bytearray | memoryview) -> tuple[int, int, int, int, dict[str, str]] | None: ...

class HeaderReader:
    """``reader(cls, ext)``: a typed header from extFields, like the generated
    ``from_ext_fields`` (which it calls, as ``fallback``, for anything it does not handle or
    refuses: an int outside ``lo..hi``, text with a lone surrogate)."""

    fallback: Callable[[type, dict[str, Any]], Any]
    def __init__(
        self,
        fields: Iterable[tuple[str, str, int, bool, Any, int, int]],
        fallback: Callable[[type, dict[str, Any]], Any],
    ) -> None: ...
    def __call__(self, cls: type, ext: dict[str, Any]) -> Any: ...

# The topic lines of an inflated compressed RegisterBrokerBody as {name: entry(read, write,
# perm)}, or None for what the reference in rmq/protocol/body/register.py must handle.
def register_topic_lines(
    raw: bytes, pos: int, count: int, entry: Callable[[int, int, int], Any]
) -> dict[str, Any] | None: ...
