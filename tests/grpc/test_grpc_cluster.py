"""Two brokers behind one name server: ONE broker's gRPC endpoint answers routes and assignments
naming each broker's own endpoint (docs/design.md, gRPC endpoint: a cluster). The 5.x client
suite (test_grpc_v5_client, test_grpc_fifo) runs against the same cluster through that endpoint."""

from __future__ import annotations

import uuid

import grpc
import pytest
from grpc_support import Stub

from rmq.broker.grpc.schema import pb

pytestmark = pytest.mark.parametrize("grpc_target", ["cluster"], indirect=True)


def test_one_endpoint_routes_to_every_broker_at_its_own_endpoint(grpc_target):
    topic = f"V5K_{uuid.uuid4().hex[:8]}"
    grpc_target.create_topic(topic, queues=3)
    group = f"GID_{topic}"
    own = grpc_target.grpc_ports
    assert own["broker-a"] != own["broker-b"]
    with grpc.insecure_channel(grpc_target.endpoints) as channel:
        stub = Stub(channel)
        route = stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=stub.metadata, timeout=10)
        assert route.status.code == pb.Code.OK, route.status
        by_broker: dict[str, list[int]] = {}
        for q in route.message_queues:
            addresses = [(a.host, a.port) for a in q.broker.endpoints.addresses]
            assert addresses == [("127.0.0.1", own[q.broker.name])], (q.broker.name, addresses)
            assert q.permission == pb.Permission.READ_WRITE
            by_broker.setdefault(q.broker.name, []).append(q.id)
        assert by_broker == {"broker-a": [0, 1, 2], "broker-b": [0, 1, 2]}, by_broker

        # POP's shape: one assignment (queue -1) per broker, each at its own endpoint
        assignment = stub.QueryAssignment(
            pb.QueryAssignmentRequest(topic=pb.Resource(name=topic), group=pb.Resource(name=group)),
            metadata=stub.metadata,
            timeout=10,
        )
        assert assignment.status.code == pb.Code.OK, assignment.status
        got = sorted(
            (a.message_queue.broker.name, a.message_queue.id, a.message_queue.broker.endpoints.addresses[0].port)
            for a in assignment.assignments
        )
        assert got == [("broker-a", -1, own["broker-a"]), ("broker-b", -1, own["broker-b"])], got

        # a FIFO group is assigned every queue of both brokers
        grpc_target.orderly_group(group)
        assignment = stub.QueryAssignment(
            pb.QueryAssignmentRequest(topic=pb.Resource(name=topic), group=pb.Resource(name=group)),
            metadata=stub.metadata,
            timeout=10,
        )
        got = sorted((a.message_queue.broker.name, a.message_queue.id) for a in assignment.assignments)
        assert got == [(b, q) for b in ("broker-a", "broker-b") for q in range(3)], got
