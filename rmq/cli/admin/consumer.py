"""Consumer groups and connections: consumerProgress, consumerConnection, producerConnection,
consumerStatus, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset (Java
``tools/command/consumer``, ``connection``, ``offset``)."""
from __future__ import annotations
