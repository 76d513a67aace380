"""rmq: a RocketMQ-compatible broker, name server and asyncio client SDK."""
from rmq._version import __version__

__all__ = ["__version__"]
