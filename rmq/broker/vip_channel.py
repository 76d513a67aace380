"""The VIP channel: a second listener on ``listenPort - 2`` for the metadata a Java slave reads.

Java's broker always opens a ``fastRemotingServer`` on ``listenPort - 2``, and a Java 4.9.8
slave asks its master's topic table there: ``BrokerOuterAPI.getAllTopicConfig`` sends
GET_ALL_TOPIC_CONFIG (21) to ``MixAll.brokerVIPChannel(true, masterAddr)``. So that a Java slave
can follow an rmq master, the broker listens there too and answers the four codes of
``SlaveSynchronize`` (21, 43, 45, 201) and GET_BROKER_RUNTIME_INFO, nothing that writes. Java
clients use the VIP channel only with ``com.rocketmq.sendMessageWithVIPChannel=true`` (off by
default since 4.5); they are not served here.

The channel opens only when ``listenPort`` is fixed and above 2 (a broker on an ephemeral port
has no port a Java slave could compute); a port that cannot be bound is logged once and the
broker runs without it, as it serves every client on its main port.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq.protocol.codes import RequestCode
from rmq.remoting.dispatcher import ProcessorPool
from rmq.remoting.server import RemotingServer

log = logging.getLogger("rmq.broker")

#: What a Java slave (and Java's admin tools with the VIP channel on) read there.
VIP_CODES = (
    RequestCode.GET_ALL_TOPIC_CONFIG,
    RequestCode.GET_ALL_CONSUMER_OFFSET,
    RequestCode.GET_ALL_DELAY_OFFSET,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    RequestCode.GET_BROKER_RUNTIME_INFO,
)


def vip_port(listen_port: int) -> int | None:
    """Java ``MixAll.brokerVIPChannel``: ``listenPort - 2``; None for an ephemeral or too low port."""
    return listen_port - 2 if listen_port > 2 else None


class VipChannel:
    """The listener (see the module docstring).

    Args:
        host, port: where to listen (``listenHost``, ``listenPort - 2``).
        processors: request code → processor (the broker's, already wrapped as its main
            server's are: ready gate and ACL).
        server_kwargs: the main server's other settings (idle timeout, buffer bounds, TLS).
    """

    def __init__(self, host: str, port: int, processors: dict[int, Any], **server_kwargs: Any) -> None:
        self.server = RemotingServer(host, port, name="broker-vip", **server_kwargs)
        pool = ProcessorPool("vip", max_in_flight=8, max_queue=1_000)
        for code in VIP_CODES:
            if code in processors:
                self.server.register_processor(code, processors[code], pool)
        self.started = False

    async def start(self) -> bool:
        """Bind; False (one warning) when the port is taken or cannot be bound."""
        try:
            await self.server.start()
        except OSError as e:
            log.warning(
                "VIP channel (listenPort - 2) not opened on %s: %s; a Java slave of this broker cannot "
                "copy its topic config",
                self.server.address,
                e,
            )
            return False
        self.started = True
        log.info("VIP channel listening on %s (the metadata a Java slave reads)", self.server.address)
        return True

    async def close(self) -> None:
        if self.started:
            await self.server.close()
            self.started = False
