"""Typed request and response bodies of the admin protocol (Java
``org.apache.rocketmq.common.protocol.body``), one module per area: each class encodes what
the broker or name server sends and decodes what Java's send (fastjson, which may key a map
by an object: :func:`rmq.common.fastjson.loads` reads it; ``rmq.remoting.body._mq`` writes and reads
``MessageQueue`` keys)."""
