"""Dispatcher: route each request to the processor registered for its code.

Java's ``NettyRemotingAbstract.processRequestCommand`` looks the code up in
``processorTable: code → Pair<processor, executor>`` and submits the work to that executor;
a full executor queue answers SYSTEM_BUSY. Here there are no threads on the request path:

* A processor's ``process_request(conn, cmd)`` is called **inline** on the loop. If it is a
  plain function returning a ``RemotingCommand`` (the pull fast path: a Cython scan of the
  mapped files), the reply is written before the next frame of the same read is decoded,
  and costs no task.
* If it returns an awaitable, that runs as a task counted against the code's
  :class:`ProcessorPool`: at most ``max_in_flight`` run at once, up to ``max_queue`` more
  wait, and beyond that the request is answered SYSTEM_BUSY without calling the processor.
  The task is also counted against its connection (``Connection.request_started``), which
  stops reading past its own bound, so one client cannot take a whole pool's queue.
* ``None`` means "no reply now": the processor keeps ``(conn, cmd)`` and answers later with
  ``conn.send_response()`` (long polling).

Outcomes mirror Java: unknown code → REQUEST_CODE_NOT_SUPPORTED (remark names the code);
``reject_request()`` true or pool full → SYSTEM_BUSY; the processor raised → SYSTEM_ERROR
with the error in the remark and a log line; oneway requests (flag bit 1) never get a reply.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from rmq.common.log import RateLimitedLog, clip
from rmq.protocol.codes import ResponseCode
from rmq.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand

if TYPE_CHECKING:  # pragma: no cover
    from rmq.remoting.codec import FrameHook
    from rmq.remoting.connection import Connection

__all__ = ["Dispatcher", "ProcessorPool", "RequestProcessor"]

log = logging.getLogger("rmq.remoting")

# Overload, unknown-code and failure lines repeat per request; one line per key per interval
# (with the count of the rest) is enough to see what is happening without flooding the log.
_rlog = RateLimitedLog(log)
# Frames of a failed request's traceback kept in its log line.
_TRACEBACK_FRAMES = 12


class RequestProcessor(Protocol):
    """What ``register_processor`` accepts (``reject_request`` is optional)."""

    def process_request(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None: ...

    def reject_request(self) -> bool: ...


class ProcessorPool:
    """Bounds the asynchronous work of one group of request codes (Java: one executor).

    Args:
        name: for logs and remarks (default ``"default"``).
        max_in_flight: awaitables running at once (default 64).
        max_queue: awaitables waiting for a slot before SYSTEM_BUSY (default 10 000, Java's
            ``sendThreadPoolQueueCapacity``).
        threads: size of this pool's own thread pool for :meth:`run_blocking`; 0 (default)
            uses the loop's default executor.
    """

    def __init__(
        self, name: str = "default", max_in_flight: int = 64, max_queue: int = 10_000, threads: int = 0
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.name = name
        self.max_in_flight = max_in_flight
        self.max_queue = max(0, max_queue)
        self.threads = threads
        self._admitted = 0  # running + waiting
        self._slots: asyncio.Semaphore | None = None  # created lazily on the running loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def in_flight(self) -> int:
        """Awaitables admitted and not finished (running or waiting for a slot)."""
        return self._admitted

    @property
    def full(self) -> bool:
        """True when one more request would exceed ``max_in_flight + max_queue``."""
        return self._admitted >= self.max_in_flight + self.max_queue

    def submit(self, aw: Awaitable[Any], on_done: Callable[[Any, BaseException | None], None]) -> asyncio.Task[None]:
        """Run ``aw`` when a slot is free; ``on_done(result, exc)`` is called on the loop.

        The caller checks :attr:`full` first.
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        self._admitted += 1
        task = asyncio.get_running_loop().create_task(self._run(aw, on_done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, aw: Awaitable[Any], on_done: Callable[[Any, BaseException | None], None]) -> None:
        assert self._slots is not None
        try:
            async with self._slots:
                try:
                    result = await aw
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - on_done answers with the error
                    on_done(None, exc)
                    return
                on_done(result, None)
        finally:
            self._admitted -= 1
            if inspect.iscoroutine(aw) and aw.cr_frame is not None:
                aw.close()  # cancelled while queued: never awaited

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in this pool's threads (fsync, big scans) and return its result."""
        loop = asyncio.get_running_loop()
        if self.threads > 0 and self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix=f"rmq-{self.name}")
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    async def close(self, grace: float = 3.0) -> None:
        """Wait up to ``grace`` seconds for admitted work, cancel the rest, stop the threads."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class Dispatcher:
    """The processor table: ``code → (processor, ProcessorPool)`` plus a default processor.

    Shared by the server and the client (broker→client requests).
    """

    def __init__(self, name: str = "remoting") -> None:
        self.name = name
        # code → (processor, pool, processor.reject_request or None)
        self._table: dict[int, tuple[Any, ProcessorPool, Any]] = {}
        self._default: tuple[Any, ProcessorPool, Any] | None = None
        self._default_pool = ProcessorPool("default", max_in_flight=256)
        self._pools: list[ProcessorPool] = [self._default_pool]
        # ``frame_hooks(conn)`` -> the FrameDecoder.frame_hook of a new connection (or None):
        # set by a server whose processors can answer some frames before they are decoded
        # (the broker's plain SEND, rmq/broker/processors/_sendpath.pyx); None (default) decodes every frame.
        self.frame_hooks: Callable[[Connection], FrameHook | None] | None = None

    def register_processor(self, code: int, processor: Any, pool: ProcessorPool | None = None) -> None:
        """Serve ``code`` with ``processor``; async work is bounded by ``pool`` (default: shared pool)."""
        self._table[int(code)] = (processor, self._adopt(pool), getattr(processor, "reject_request", None))

    def register_default_processor(self, processor: Any, pool: ProcessorPool | None = None) -> None:
        """Serve every code that has no processor of its own."""
        self._default = (processor, self._adopt(pool), getattr(processor, "reject_request", None))

    def _adopt(self, pool: ProcessorPool | None) -> ProcessorPool:
        if pool is None:
            return self._default_pool
        if pool not in self._pools:
            self._pools.append(pool)
        return pool

    def processor_for(self, code: int) -> tuple[Any, ProcessorPool] | None:
        """``(processor, pool)`` serving ``code`` (the default processor's if none), or None."""
        entry = self._table.get(code, self._default)
        return None if entry is None else entry[:2]

    # ------------------------------------------------------------------ the request path

    def dispatch(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Process one request from ``conn``; every outcome but ``None``/oneway sends a reply."""
        entry = self._table.get(cmd.code)
        if entry is None:
            entry = self._default
            if entry is None:
                _rlog.warning(
                    f"unsupported-code:{cmd.code}",
                    "%s: %s sent request code %s, which is not supported",
                    self.name,
                    conn.remote_addr,
                    cmd.code,
                )
                self._reply(
                    conn,
                    cmd,
                    _error(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {cmd.code} not supported"),
                )
                return
        processor, pool, reject = entry
        if reject is not None and reject():
            self._reply(
                conn,
                cmd,
                _error(cmd, ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy, start flow control for a while"),
            )
            return
        if pool.full:
            _rlog.warning(
                f"pool-full:{pool.name}",
                "%s: pool %r is full (%d in flight), SYSTEM_BUSY to %s code %s",
                self.name,
                pool.name,
                pool.in_flight,
                conn.remote_addr,
                cmd.code,
            )
            self._reply(
                conn, cmd, _error(cmd, ResponseCode.SYSTEM_BUSY, f"[OVERLOAD]system busy, pool {pool.name} is full")
            )
            return
        try:
            result = processor.process_request(conn, cmd)
        except Exception as exc:  # noqa: BLE001 - _failed answers with an error response
            self._failed(conn, cmd, exc)
            return
        if result is None:
            return  # answered later through conn.send_response (or oneway)
        if type(result) is RemotingCommand:
            self._reply(conn, cmd, result)
            return
        if inspect.isawaitable(result):
            task = pool.submit(result, functools.partial(self._on_async_done, conn, cmd))
            # Counted per connection until it finishes: past maxRequestsInFlightPerConnection
            # the connection stops reading (one client cannot fill the pool's queue).
            conn.request_started()
            task.add_done_callback(conn.request_finished)
            return
        self._failed(conn, cmd, TypeError(f"processor returned {type(result).__name__}, not a RemotingCommand"))

    def _on_async_done(self, conn: Connection, cmd: RemotingCommand, result: Any, exc: BaseException | None) -> None:
        if exc is not None:
            self._failed(conn, cmd, exc)
        elif result is None:
            return
        elif isinstance(result, RemotingCommand):
            self._reply(conn, cmd, result)
        else:
            self._failed(conn, cmd, TypeError(f"processor returned {type(result).__name__}, not a RemotingCommand"))

    def _failed(self, conn: Connection, cmd: RemotingCommand, exc: BaseException) -> None:
        """SYSTEM_ERROR to the requester; one log line per code and error type per interval.

        The error's text may quote the request (a 2-million-character header value), so the
        line carries it clipped, with the stack (innermost frames) but not ``exc_info``, whose
        formatting would repeat the whole message.
        """
        text = clip(exc)
        _rlog.error(
            f"failed:{cmd.code}:{type(exc).__name__}",
            "%s: processing code %s from %s failed: %s: %s\n%s",
            self.name,
            cmd.code,
            conn.remote_addr,
            type(exc).__name__,
            text,
            "".join(traceback.format_tb(exc.__traceback__, -_TRACEBACK_FRAMES)).rstrip(),
        )
        self._reply(conn, cmd, _error(cmd, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {text}"))

    @staticmethod
    def _reply(conn: Connection, request: RemotingCommand, response: RemotingCommand) -> None:
        if request.flag & FLAG_ONEWAY:
            return
        # Whatever the processor built, it answers this request, in this request's encoding.
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type
        conn.send_response(response)

    async def close(self, grace: float = 3.0) -> None:
        """Let in-flight async work finish (up to ``grace`` s), then cancel it."""
        await asyncio.gather(*(p.close(grace) for p in self._pools))


def _error(cmd: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    return cmd.response(code, remark)
