"""rmq.remoting: RocketMQ's remoting protocol (frames, commands, server, client).

Knows nothing about brokers or stores; the layers above register processors per request code.
"""
from rmq.remoting.codec import FrameDecoder, decode_frame, encode
from rmq.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rmq.remoting.command import RemotingCommand

__all__ = [
    "FrameDecoder",
    "decode_frame",
    "encode",
    "LanguageCode",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "RemotingCommand",
]
