"""Type stubs for the Cython extension rmq.broker.processors._sendpath (_sendpath.pyx)."""

from collections.abc import Callable, Iterable
from typing import Any

from rmq._store import Appender

class SendGate:
    """What the SEND fast path reads of the broker, and the running store's appender."""

    topics: dict[str, Any]
    broker_config: Any
    stats: Any
    appender: Appender | None
    @property
    def counters(self) -> PutCounters: ...
    @property
    def broker_config_type(self) -> type: ...
    @property
    def topic_config_type(self) -> type: ...
    def __init__(
        self, topics: dict[str, Any], broker_config: Any, stats: Any, broker_config_type: type, topic_config_type: type
    ) -> None: ...

# (topics [(topic, nums, size, times)], floor_ms [(ms, n)], ceil_ms [(ms, n)], rpc_total_ns, slow_ns)
PutCounts = tuple[list[tuple[str, int, int, int]], list[tuple[int, int]], list[tuple[int, int]], int, list[int]]

class PutCounters:
    """The SEND fast path's statistics as C counters, taken by ``BrokerStatsManager.fold``."""

    pending: int
    def __init__(self) -> None: ...
    def count(self, topic: str, size: int, put_ns: int) -> None: ...
    def take(self) -> PutCounts | None: ...

class SendFastPath:
    """The plain SEND in one call (rmq/broker/processors/_sendpath.pyx): ``send(cmd, born)`` returns the reply
    frame, ``b""`` (stored, oneway) or None (declined, nothing changed); ``send_frame`` the
    same straight from a frame's bytes."""

    taken: int
    declined: int
    frames: int
    scanned: int
    batched: int
    @property
    def gate(self) -> SendGate: ...
    def __init__(
        self,
        fields: Iterable[tuple[str, str, str, int, bool, int, int]],
        gate: SendGate,
        not_allowed: Any,
        retry_prefix: str,
        marks: tuple[str, ...],
        json_decode: Callable[[bytes], Any] | None = None,
    ) -> None: ...
    def send(self, cmd: Any, born: bytes) -> bytes | None: ...
    def send_frame(
        self, data: bytes | bytearray, hstart: int, hend: int, end: int, ser: int, born: bytes
    ) -> bytes | None: ...
    def frame_hook(self, born: bytes, pool: Any) -> SendFrameHook | None: ...

class SendFrameHook:
    """One producer connection's ``FrameDecoder.frame_hook`` (``SendFastPath.frame_hook``)."""

    taken: int
    def __init__(self, fast: SendFastPath, born: bytes, pool: Any) -> None: ...
    def __call__(self, data: bytes | bytearray, hstart: int, hend: int, end: int, ser: int) -> bytes | None: ...
    def take_frames(
        self,
        data: bytes | bytearray,
        pos: int,
        max_frames: int,
        stop: int,
        max_frame_length: int,
        out: list[Any],
        room: int,
    ) -> tuple[int, int, int, int]: ...

# (found [(group, topic, nums, size, times)], misses, max_ms, ceil_ms [(ms, n)], rpc_total_ns, slow_ns)
PullCounts = tuple[list[tuple[str, str, int, int, int]], int, int, list[tuple[int, int]], int, list[int]]

class PullCounters:
    """The PULL path's statistics as C counters, taken by ``BrokerStatsManager.fold``."""

    pending: int
    def __init__(self) -> None: ...
    def found(self, group: str, topic: str, nums: int, size: int, get_ns: int) -> None: ...
    def missed(self, get_ns: int) -> None: ...
    def take(self) -> PullCounts | None: ...
