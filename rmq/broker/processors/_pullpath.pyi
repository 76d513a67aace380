"""Type stubs for the Cython extension rmq.broker.processors._pullpath (_pullpath.pyx)."""

from collections.abc import Callable, Iterable
from typing import Any

FrameHook = Callable[[bytes | bytearray, int, int, int, int], bytes | tuple[bytes, bytes] | None]

class PullFastPath:
    """The plain pull answered from its frame (rmq/broker/processors/_pullpath.pyx)."""

    store: Any
    taken: int
    declined: int
    def __init__(
        self, fields: Iterable[tuple[str, str, int, bool, int, int]], controller: Any, processor: Any
    ) -> None: ...
    def bind(self, store: Any) -> None: ...
    def pull_frame(
        self, data: bytes | bytearray, hstart: int, hend: int, end: int, ser: int, remote_addr: str
    ) -> tuple[bytes, bytes] | None: ...
    def frame_hook(self, remote_addr: str, next_hook: FrameHook | None = None) -> PullFrameHook: ...

class PullFrameHook:
    """One connection's ``FrameDecoder.frame_hook``: pulls natively, other frames to the next hook."""

    taken: int
    @property
    def take_frames(self) -> Callable[..., tuple[int, int, int, int]] | None: ...
    def __init__(self, fast: PullFastPath, remote_addr: str, next_hook: FrameHook | None = None) -> None: ...
    def __call__(
        self, data: bytes | bytearray, hstart: int, hend: int, end: int, ser: int
    ) -> bytes | tuple[bytes, bytes] | None: ...
