"""Socket details shared by the remoting layer and replication (rmq.store.ha)."""
from __future__ import annotations

import asyncio
import socket

from rmq.common.log import clip

__all__ = ["set_tcp_nodelay", "split_address"]


def split_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` (an IPv6 host in brackets or not) as ``(host, port)`` (Java
    RemotingHelper.string2SocketAddress). Raises ValueError for anything else, a port out of
    1..65535 included."""
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port address: {clip(addr)!r}")
    return host.strip("[]"), int(port)


def set_tcp_nodelay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle off on ``transport``'s socket (Java's servers and clients set TCP_NODELAY):
    requests, replies, offset reports are small and latency-bound. Not TCP (a unix socket in
    tests): nothing to do."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
