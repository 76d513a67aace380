"""The RocketMQ 5 gRPC endpoint (``apache.rocketmq.v2.MessagingService``) inside the broker, as
Java 5 runs its proxy in "local" mode: the 5.x clients of apache/rocketmq-clients connect to
``grpcServerPort`` and every RPC is served by this broker's own processors.

* :mod:`rmq.broker.grpc.schema` — the protocol's messages and enums, declared once in our own
  table and built into protobuf classes at import (no generated code);
* :mod:`rmq.broker.grpc.server` — the grpcio (``grpc.aio``) server on the broker's event loop,
  its bounds, authentication and the RPCs.

Needs the optional ``grpc`` extra (``pip install 'rmq[grpc]'``: grpcio and protobuf).
"""
