"""rmq.remoting: RocketMQ's remoting protocol (frames, connections, server, client;
the commands, codes and headers are rmq.protocol).

Knows nothing about brokers or stores; the layers above register processors per request code.
"""

from rmq.remoting.client import RemotingClient, RPCHook
from rmq.remoting.codec import FrameDecoder, decode_frame, encode
from rmq.remoting.connection import Connection, ConnectionEvent
from rmq.remoting.dispatcher import ProcessorPool
from rmq.remoting.server import RemotingServer

__all__ = [
    "Connection",
    "ConnectionEvent",
    "FrameDecoder",
    "decode_frame",
    "encode",
    "ProcessorPool",
    "RemotingClient",
    "RemotingServer",
    "RPCHook",
]
