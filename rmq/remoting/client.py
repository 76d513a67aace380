"""RemotingClient: calls to brokers and name servers (Java ``NettyRemotingClient``).

One connection per address, created on first use; concurrent callers share one connect
attempt. Responses are matched by ``opaque`` in the connection's response table, so they
may arrive in any order. Three ways to call:

* ``await invoke(addr, cmd, timeout)``: wait for the response.
* ``invoke_async(addr, cmd, timeout, callback)``: return at once; ``callback(response,
  None)`` or ``callback(None, exc)`` runs on the loop later. At most
  ``max_async_in_flight`` such calls are outstanding (Java ``semaphoreAsync``), and a
  background scan fails the ones past their deadline once a second
  (``scanResponseTable``).
* ``await invoke_oneway(addr, cmd)``: write and forget (bounded by ``max_oneway_in_flight``).

The same connections carry requests *from* the broker (CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED, …), served by processors registered with
``register_processor``, exactly as on the server.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Callable, Iterable
from typing import Any, Protocol, Self

from rmq.common.log import RateLimitedLog, clip
from rmq.common.net import split_address
from rmq.common.tasks import BackgroundTasks
from rmq.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from rmq.protocol.command import FLAG_ONEWAY, RemotingCommand
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH
from rmq.remoting.connection import (
    AsyncCall,
    Connection,
    ConnectionEvent,
    ConnectionManager,
)
from rmq.remoting.dispatcher import Dispatcher, ProcessorPool

__all__ = ["RPCHook", "RemotingClient"]

log = logging.getLogger("rmq.remoting")
_rlog = RateLimitedLog(log)

# Java NettyRemotingClient scans its response table every second.
_SCAN_INTERVAL = 1.0


class RPCHook(Protocol):
    """Called around every ``invoke`` (ACL signing, tracing). Exceptions propagate to the caller."""

    def before(self, addr: str, cmd: RemotingCommand) -> None: ...

    def after(self, addr: str, cmd: RemotingCommand, response: RemotingCommand) -> None: ...


def _split_addr(addr: str) -> tuple[str, int]:
    try:
        return split_address(addr)
    except ValueError:
        raise RemotingConnectError(addr, f"bad address {addr!r}, expected host:port") from None


class RemotingClient:
    """Client side of the remoting protocol.

    Args:
        namesrv_addrs: name servers for ``invoke_namesrv``: a list, or a ``;``-separated
            string as in Java's ``namesrvAddr`` (default None).
        connect_timeout: seconds to establish a connection (default 3.0).
        max_async_in_flight: outstanding ``invoke_async`` calls (default 65535).
        max_oneway_in_flight: outstanding ``invoke_oneway`` calls (default 65535).
        idle_timeout: close connections idle this long (default 120 s); None disables.
        max_frame_length: refuse larger frames (default 16 MiB).
        name: used in logs (default ``"client"``).
        tls: an ``ssl.SSLContext`` to speak TLS to every peer (Java ``NettyClientConfig.useTLS``);
            default None = plain TCP. The handshake counts against ``connect_timeout``.
    """

    def __init__(
        self,
        namesrv_addrs: list[str] | str | None = None,
        *,
        connect_timeout: float = 3.0,
        max_async_in_flight: int = 65535,
        max_oneway_in_flight: int = 65535,
        idle_timeout: float | None = 120.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        name: str = "client",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.namesrv_addrs: list[str] = []
        self.tls = tls
        self.update_namesrv_addrs(namesrv_addrs or [])
        self.connect_timeout = connect_timeout
        self.max_async_in_flight = max_async_in_flight
        self.max_oneway_in_flight = max_oneway_in_flight
        self.idle_timeout = idle_timeout
        self.max_frame_length = max_frame_length
        self.name = name
        self.dispatcher = Dispatcher(name)
        self.connection_manager = ConnectionManager(name)
        self.connection_manager.add_listener(self._on_event)
        self._conns: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Task[Connection]] = {}
        self._async_in_flight = 0
        self._oneway_in_flight = 0
        self._hooks: list[RPCHook] = []
        self._tasks = BackgroundTasks(name, log)
        self._scan_task: asyncio.Task[Any] | None = None
        self._namesrv_index = 0
        self._closed = False

    # ------------------------------------------------------------------ configuration

    def update_namesrv_addrs(self, addrs: Iterable[str] | str) -> None:
        """Replace the name-server list (``"a:9876;b:9876"`` or a list)."""
        if isinstance(addrs, str):
            addrs = addrs.split(";")
        self.namesrv_addrs = [a.strip() for a in addrs if a and a.strip()]

    def register_processor(self, code: int, processor: Any, pool: ProcessorPool | None = None) -> None:
        """Serve broker→client requests with ``code``."""
        self.dispatcher.register_processor(code, processor, pool)

    def register_default_processor(self, processor: Any, pool: ProcessorPool | None = None) -> None:
        self.dispatcher.register_default_processor(processor, pool)

    def add_rpc_hook(self, hook: RPCHook) -> None:
        """``hook.before(addr, cmd)`` before each call, ``hook.after(addr, cmd, response)`` after a response."""
        self._hooks.append(hook)

    def add_connection_listener(self, listener: Callable[..., Any]) -> None:
        self.connection_manager.add_listener(listener)

    # ------------------------------------------------------------------ connections

    def _on_event(self, event: ConnectionEvent, conn: Connection, exc: BaseException | None = None) -> None:
        if event is ConnectionEvent.CLOSE:
            addr = conn.attributes.get("addr")
            if addr is not None and self._conns.get(addr) is conn:
                del self._conns[addr]

    async def get_connection(self, addr: str) -> Connection:
        """The open connection to ``addr``, connecting if needed (shared by concurrent callers).

        Raises:
            RemotingConnectError: could not connect within ``connect_timeout``.
        """
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise RemotingConnectError(addr, f"{self.name} is closed")
        task = self._connecting.get(addr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = task
            task.add_done_callback(functools.partial(self._connect_done, addr))
        # shield: one caller giving up must not cancel the connect the others wait on
        return await asyncio.shield(task)

    def _connect_done(self, addr: str, task: asyncio.Task[Connection]) -> None:
        if self._connecting.get(addr) is task:
            del self._connecting[addr]
        if not task.cancelled():
            task.exception()  # retrieved here, so a connect nobody waits for anymore is not "never retrieved"

    async def _connect(self, addr: str) -> Connection:
        host, port = _split_addr(addr)
        loop = asyncio.get_running_loop()
        self._ensure_scan()

        def factory() -> Connection:
            # The broker is not an anonymous peer: its replies may be slow over a thin link
            # (requests have their own timeouts), and our own burst of async sends must not
            # abort the connection, so no frame deadline and no write-buffer abort here.
            c = Connection(
                self.dispatcher,
                self.connection_manager,
                role=self.name,
                idle_timeout=self.idle_timeout,
                max_frame_length=self.max_frame_length,
                write_buffer_limit=None,
                frame_read_timeout=None,
            )
            c.attributes["addr"] = addr
            return c

        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.tls is None:
                    _, conn = await loop.create_connection(factory, host, port)
                else:
                    _, conn = await loop.create_connection(
                        factory,
                        host,
                        port,
                        ssl=self.tls,
                        server_hostname=host,
                        ssl_handshake_timeout=self.connect_timeout,
                    )
        except TimeoutError:
            raise RemotingConnectError(addr, f"connect to {addr} timed out after {self.connect_timeout}s") from None
        except OSError as exc:
            raise RemotingConnectError(addr, f"connect to {addr} failed: {exc}") from exc
        if self._closed:
            conn.abort()
            raise RemotingConnectError(addr, f"{self.name} closed while connecting")
        self._conns[addr] = conn
        log.debug("%s: connected to %s", self.name, addr)
        return conn

    def close_connection(self, addr: str) -> None:
        """Close the connection to ``addr`` (if any); its waiters fail with RemotingConnectError."""
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------------ calls

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and wait for the response.

        Args:
            addr: ``"host:port"``.
            cmd: the request.
            timeout: seconds for the whole call, connecting included (default 3.0).

        Returns:
            The response command (any code; the caller interprets it).

        Raises:
            RemotingConnectError: could not connect, or the connection dropped while waiting.
            RemotingTimeoutError: no response in time.
            RemotingSendRequestError: the connection closed before the write.
        """
        for hook in self._hooks:
            hook.before(addr, cmd)
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            async with asyncio.timeout(timeout):
                conn = await self.get_connection(addr)
        except TimeoutError:
            raise RemotingTimeoutError(addr, timeout, f"connecting to {addr} used up the {timeout}s timeout") from None
        remaining = timeout - (loop.time() - start)
        if remaining <= 0:
            raise RemotingTimeoutError(addr, timeout, f"connecting to {addr} used up the {timeout}s timeout")
        try:
            response = await conn.invoke(cmd, remaining)
        except RemotingSendRequestError:
            self.close_connection(addr)
            raise
        for hook in self._hooks:
            hook.after(addr, cmd, response)
        return response

    def invoke_async(
        self,
        addr: str,
        cmd: RemotingCommand,
        timeout: float,
        callback: Callable[[RemotingCommand | None, BaseException | None], None],
    ) -> None:
        """Send ``cmd`` and return at once; ``callback(response, exc)`` runs later on the loop.

        Exactly one of ``response`` / ``exc`` is set: a ``RemotingTimeoutError`` (the 1 s
        scan), ``RemotingConnectError`` or ``RemotingSendRequestError``.

        Raises:
            RemotingTooMuchRequestError: ``max_async_in_flight`` calls are already outstanding.
        """
        if self._async_in_flight >= self.max_async_in_flight:
            raise RemotingTooMuchRequestError(
                f"invoke_async to {addr}: {self._async_in_flight} calls in flight (max {self.max_async_in_flight})"
            )
        for hook in self._hooks:
            hook.before(addr, cmd)
        self._async_in_flight += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._async_in_flight -= 1

        def done(response: RemotingCommand | None, exc: BaseException | None) -> None:
            if response is not None:
                for hook in self._hooks:
                    try:
                        hook.after(addr, cmd, response)
                    except Exception as hook_exc:  # noqa: BLE001 - a hook failing becomes the call's outcome
                        response, exc = None, hook_exc
                        break
            callback(response, exc)

        call = AsyncCall(cmd.opaque, done, deadline, timeout, release)
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            self._send_async(conn, cmd, call)  # fast path: no task
        else:
            task = self._spawn(self._connect_and_send_async(addr, cmd, call))

            # A task cancelled before its first step never runs its body: fail the call here.
            def fail_if_cancelled(t: asyncio.Task[Any]) -> None:
                if t.cancelled():
                    call.complete(None, RemotingConnectError(addr, f"{self.name} closed"))

            task.add_done_callback(fail_if_cancelled)

    def _send_async(self, conn: Connection, cmd: RemotingCommand, call: AsyncCall) -> None:
        conn.register_async(call)
        try:
            conn.write(cmd)
        except RemotingError as exc:
            conn.unregister(call.opaque)
            call.complete(None, exc)

    async def _connect_and_send_async(self, addr: str, cmd: RemotingCommand, call: AsyncCall) -> None:
        try:
            async with asyncio.timeout(max(0.0, call.deadline - asyncio.get_running_loop().time())):
                conn = await self.get_connection(addr)
        except TimeoutError:
            call.complete(None, RemotingTimeoutError(addr, call.timeout))
            return
        except RemotingError as exc:
            call.complete(None, exc)
            return
        self._send_async(conn, cmd, call)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Write ``cmd`` with the oneway flag; no response is expected.

        Raises:
            RemotingTooMuchRequestError: ``max_oneway_in_flight`` oneway calls are outstanding.
            RemotingConnectError / RemotingSendRequestError: as for ``invoke``.
        """
        if self._oneway_in_flight >= self.max_oneway_in_flight:
            raise RemotingTooMuchRequestError(
                f"invoke_oneway to {addr}: {self._oneway_in_flight} calls in flight (max {self.max_oneway_in_flight})"
            )
        for hook in self._hooks:
            hook.before(addr, cmd)
        self._oneway_in_flight += 1
        try:
            conn = await self.get_connection(addr)
            cmd.flag |= FLAG_ONEWAY
            conn.write(cmd)  # buffered by the transport: "in flight" ends here
        finally:
            self._oneway_in_flight -= 1

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """``invoke`` on a name server, failing over to the next one when it cannot be reached.

        Starts with the last name server that worked. A timeout is not failed over (the
        request may have been processed), as in Java.

        Raises:
            RemotingConnectError: no name server configured or none reachable.
            RemotingTimeoutError: the chosen name server did not answer in time.
        """
        addrs = self.namesrv_addrs
        if not addrs:
            raise RemotingConnectError("<namesrv>", "no name server address configured")
        last_exc: RemotingError | None = None
        n = len(addrs)
        for i in range(n):
            idx = (self._namesrv_index + i) % n
            addr = addrs[idx]
            try:
                response = await self.invoke(addr, cmd, timeout)
            except (RemotingConnectError, RemotingSendRequestError) as exc:
                _rlog.warning(
                    f"namesrv-unreachable:{addr}",
                    "%s: name server %s unreachable (%s), trying the next",
                    self.name,
                    addr,
                    clip(exc),
                )
                last_exc = exc
                continue
            self._namesrv_index = idx
            return response
        assert last_exc is not None
        raise last_exc

    # ------------------------------------------------------------------ background

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro)

    def _ensure_scan(self) -> None:
        if self._scan_task is None and not self._closed:
            self._scan_task = asyncio.get_running_loop().create_task(self._scan_response_table())

    async def _scan_response_table(self) -> None:
        """Fail ``invoke_async`` calls past their deadline, once a second (Java ``scanResponseTable``).

        A task because deadlines must fire even when no traffic arrives; it owns nothing and
        is cancelled by ``close()``.
        """
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(_SCAN_INTERVAL)
            now = loop.time()
            for conn in list(self.connection_manager.connections):
                try:
                    conn.expire(now)
                except Exception:
                    log.exception("%s: response table scan failed on %s", self.name, conn)

    @property
    def pending_count(self) -> int:
        """Response-table entries over all connections (for tests and metrics)."""
        return sum(c.pending_count for c in self.connection_manager.connections)

    @property
    def async_in_flight(self) -> int:
        return self._async_in_flight

    async def close(self) -> None:
        """Close all connections (waiters fail with RemotingConnectError) and stop the scan. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._scan_task is not None:
            self._scan_task.cancel()
            await asyncio.gather(self._scan_task, return_exceptions=True)
            self._scan_task = None
        await self._tasks.close(also=list(self._connecting.values()))
        conns = list(self.connection_manager.connections)
        for conn in conns:
            conn.close()
        if conns:
            _, pending = await asyncio.wait([asyncio.ensure_future(c.wait_closed()) for c in conns], timeout=3.0)
            for t in pending:
                t.cancel()
        self._conns.clear()
        await self.dispatcher.close(grace=1.0)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
