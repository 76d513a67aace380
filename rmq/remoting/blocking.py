"""A thin blocking transport: the remoting protocol over plain sockets, without an event loop.

Spark calls its data sources from plain (non-asyncio) Python worker processes, one task at a
time; this is their transport. Frames are written with :func:`rmq.remoting.codec.encode` and
read with :class:`rmq.remoting.codec.FrameDecoder` (the same sans-IO codec the asyncio side
uses); what to send and how to read the answer come from :mod:`rmq.protocol.requests`.

Every call has a deadline. A dead or silent peer becomes a
:class:`~rmq.errors.RemotingConnectError` / :class:`~rmq.errors.RemotingTimeoutError` (both
retriable) and closes that connection (its stream position is unknown afterwards). Requests
to one address may be pipelined (:meth:`BlockingConnection.invoke_all`): all are written,
then the answers are matched back by ``opaque``, which is what the protocol is built for.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from rmq.errors import RemotingCommandError, RemotingConnectError, RemotingTimeoutError
from rmq.protocol.command import BodyPart, RemotingCommand
from rmq.remoting.codec import FrameDecoder, encode

__all__ = ["DEFAULT_MAX_FRAME_LENGTH", "BlockingConnection", "BlockingRemotingClient"]

log = logging.getLogger("rmq.remoting")

#: Largest frame accepted from a peer (a pull of 32 messages of 4 MiB fits; Java's client
#: allows 16 MiB by default, ``com.rocketmq.remoting.frameMaxLength``).
DEFAULT_MAX_FRAME_LENGTH = 64 * 1024 * 1024

_RECV_SIZE = 1 << 20


class BlockingConnection:
    """One TCP connection to a broker or name server, used by one thread at a time.

    Args:
        addr: ``host:port``.
        connect_timeout: seconds allowed for the TCP connect (default 3.0).
        max_frame_length: largest frame accepted (default 64 MiB); a bigger one closes the
            connection with a ``RemotingCommandError``.
        tls: an ``ssl.SSLContext`` to wrap the socket with (the handshake counts against
            ``connect_timeout``); default None = plain TCP.
    """

    def __init__(
        self,
        addr: str,
        connect_timeout: float = 3.0,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.addr = addr
        host, _, port = addr.rpartition(":")
        try:
            sock = socket.create_connection((host, int(port)), timeout=connect_timeout)
        except (OSError, ValueError) as e:
            raise RemotingConnectError(addr, f"connect to {addr} failed: {e}") from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host.strip("[]"))
            except (OSError, ValueError) as e:  # SSLError, a timeout, a reset during the handshake
                sock.close()
                raise RemotingConnectError(addr, f"TLS handshake with {addr} failed: {e}") from e
        self._sock = sock
        self._tls = tls is not None
        self._decoder = FrameDecoder(max_frame_length=max_frame_length)
        self.closed = False

    def looks_dead(self) -> bool:
        """True when the peer has closed the connection (e.g. the broker's idle timeout while
        a Spark worker sat between tasks): the socket reads EOF without blocking."""
        if self.closed:
            return True
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                return False
            if self._tls:
                # TLS has no peek: read what is there (a record or the close) into the decoder,
                # where an unsolicited frame waits like any other.
                self._sock.settimeout(0)
                data = self._sock.recv(_RECV_SIZE)
                if not data:
                    return True
                self._decoder.feed(data)
                return False
            return self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        except OSError:
            return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._sock.close()
            except OSError:
                pass

    def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send one request and wait up to ``timeout`` seconds for its response."""
        return self.invoke_all([cmd], timeout)[0]

    def send_oneway(self, cmd: RemotingCommand, timeout: float) -> None:
        """Write a oneway request (the peer sends no answer) within ``timeout`` seconds."""
        self._write([cmd], timeout)

    def _write(self, cmds: Sequence[RemotingCommand], timeout: float) -> None:
        if self.closed:
            raise RemotingConnectError(self.addr, f"connection to {self.addr} is closed")
        parts: list[BodyPart] = []
        for c in cmds:
            parts.extend(encode(c))
        with self._failing_closes(timeout):
            self._sock.settimeout(timeout)
            self._sock.sendall(b"".join(parts) if len(parts) > 1 else parts[0])

    @contextlib.contextmanager
    def _failing_closes(self, timeout: float) -> Iterator[None]:
        """Any failure closes the connection (its stream position is unknown afterwards) and
        becomes the matching rmq error."""
        try:
            yield
        except TimeoutError:
            self.close()
            raise RemotingTimeoutError(self.addr, timeout) from None
        except OSError as e:
            self.close()
            raise RemotingConnectError(self.addr, f"connection to {self.addr} failed: {e}") from e
        except RemotingCommandError:  # a frame the decoder refuses
            self.close()
            raise

    def invoke_all(self, cmds: Sequence[RemotingCommand], timeout: float) -> list[RemotingCommand]:
        """Write every request, then wait up to ``timeout`` seconds (in total) for all answers.

        Returns the responses in the order of ``cmds``. Any transport failure closes the
        connection and raises.
        """
        if not cmds:
            return []
        deadline = time.monotonic() + timeout
        want = {c.opaque: i for i, c in enumerate(cmds)}
        out: list[RemotingCommand | None] = [None] * len(cmds)
        self._write(cmds, timeout)
        with self._failing_closes(timeout):
            missing = len(cmds)
            while missing:
                for resp in self._decoder:
                    i = want.pop(resp.opaque, None) if resp.is_response else None
                    if i is None:
                        # A late answer to an abandoned call, or a broker->client request
                        # (e.g. NOTIFY_CONSUMER_IDS_CHANGED) that a range reader can ignore.
                        log.debug("ignoring unexpected command from %s: %r", self.addr, resp)
                        continue
                    out[i] = resp
                    missing -= 1
                if not missing:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError()
                self._sock.settimeout(left)
                data = self._sock.recv(_RECV_SIZE)
                if not data:
                    raise ConnectionResetError("peer closed the connection")
                self._decoder.feed(data)
        return [r for r in out if r is not None]


class BlockingRemotingClient:
    """Cached blocking connections by address, plus name-server failover.

    Thread-safe: calls are serialised by one lock (Spark's streaming runner may call from more
    than one thread; a worker runs one task at a time).

    Args:
        name_servers: ``host:port`` addresses, tried in order on failure.
        timeout: seconds allowed for each call unless one is given (default 10.0).
        connect_timeout: seconds allowed for each TCP connect (default 3.0).
        tls: an ``ssl.SSLContext`` for TLS to every peer; default None = plain TCP.
    """

    def __init__(
        self,
        name_servers: Sequence[str],
        *,
        timeout: float = 10.0,
        connect_timeout: float = 3.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if not name_servers:
            raise ValueError("at least one name server address is required")
        self.tls = tls
        self.name_servers = list(name_servers)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._conns: dict[str, BlockingConnection] = {}
        self._lock = threading.Lock()
        self._hooks: list[Any] = []

    def add_rpc_hook(self, hook: Any) -> None:
        """``hook.before(addr, cmd)`` before each request is sent (ACL signing), as
        ``RemotingClient.add_rpc_hook``."""
        self._hooks.append(hook)

    def _conn(self, addr: str) -> BlockingConnection:
        c = self._conns.get(addr)
        if c is not None and not c.closed and c.looks_dead():
            log.info("connection to %s was closed by the peer; reconnecting", addr)
            c.close()
        if c is None or c.closed:
            c = BlockingConnection(addr, self.connect_timeout, tls=self.tls)
            self._conns[addr] = c
        return c

    def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float | None = None, *, idempotent: bool = True
    ) -> RemotingCommand:
        """One request to ``addr``. A cached connection that turns out dead (the peer restarted
        since the last task) is replaced, and an idempotent request retried once on it."""
        return self.invoke_all(addr, [cmd], timeout, idempotent=idempotent)[0]

    def invoke_all(
        self, addr: str, cmds: Sequence[RemotingCommand], timeout: float | None = None, *, idempotent: bool = True
    ) -> list[RemotingCommand]:
        """Pipelined requests to one address; see :meth:`BlockingConnection.invoke_all`."""
        timeout = self.timeout if timeout is None else timeout
        for hook in self._hooks:
            for cmd in cmds:
                hook.before(addr, cmd)
        with self._lock:
            conn = self._conns.get(addr)
            reused = conn is not None and not conn.closed
            try:
                return self._conn(addr).invoke_all(cmds, timeout)
            except RemotingConnectError:
                if not (reused and idempotent):
                    raise
                log.info("connection to %s went away; reconnecting once", addr)
                return self._conn(addr).invoke_all(cmds, timeout)

    def invoke_namesrv(self, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """A request to the first name server that answers (each tried once, in order)."""
        last: Exception | None = None
        for addr in self.name_servers:
            try:
                return self.invoke(addr, cmd, timeout)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                log.warning("name server %s failed: %s", addr, e)
                last = e
        assert last is not None
        raise last

    def close(self) -> None:
        with self._lock:
            for c in self._conns.values():
                c.close()
            self._conns.clear()
