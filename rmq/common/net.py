"""Socket details shared by the remoting layer and replication (rmq.store.ha)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from rmq.common.log import clip

__all__ = ["AddressList", "set_tcp_nodelay", "split_address"]


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


class AddressList:
    """A list of allowed peer addresses: IPs and networks (``10.0.0.5``, ``10.0.1.0/24``,
    ``::1``) separated by commas, ``*`` for every address, empty for none. ``text`` is parsed
    once; :meth:`allows` takes a peer host as ``getpeername`` gives it (IPv4-mapped IPv6
    addresses match their IPv4 form).

    Raises:
        ValueError: an item is neither an address, a network nor ``*`` (the message names it).
    """

    __slots__ = ("text", "everyone", "networks")

    def __init__(self, text: str) -> None:
        self.text = text
        self.everyone = False
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for item in (t.strip() for t in text.split(",")):
            if not item:
                continue
            if item == "*":
                self.everyone = True
                continue
            try:
                self.networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"{clip(item)!r} is not an IP address or network") from None

    def allows(self, host: str) -> bool:
        if self.everyone:
            return True
        try:
            ip = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.networks)

    @staticmethod
    def check(text: object) -> str | None:
        """A ``setting(check=...)`` for a property holding such a list."""
        try:
            AddressList(str(text))
        except ValueError as e:
            return str(e)
        return None
