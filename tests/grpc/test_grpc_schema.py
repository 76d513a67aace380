"""rmq's own ``apache.rocketmq.v2`` table against the definitions as the 5.x client compiled
them (its generated ``*_pb2`` modules, in the client's own venv): the same messages filled
field by field serialize to the same bytes on both sides, and parse back alike."""

from __future__ import annotations

import json
import subprocess

import pytest

from rmq.broker.grpc.schema import MESSAGES, RPCS, pb

pytestmark = [pytest.mark.interop]

# Built by the client's generated classes; printed as {name: hex of deterministic bytes}.
_CLIENT_SIDE = r"""
import json
from google.protobuf import json_format
from rocketmq.grpc_protocol import definition_pb2 as d, service_pb2 as s

out = {}
m = s.SendMessageRequest()
x = m.messages.add()
x.topic.name = "T"; x.topic.resource_namespace = "ns"; x.body = b"\x00body"
x.user_properties["a"] = "1"
sp = x.system_properties
sp.tag = "TagA"; sp.keys.extend(["k1", "k2"]); sp.message_id = "ID"; sp.message_type = d.FIFO
sp.body_digest.type = d.CRC32; sp.body_digest.checksum = "ABCD"; sp.body_encoding = d.IDENTITY
sp.born_timestamp.seconds = 12; sp.born_host = "h"; sp.store_timestamp.seconds = 13; sp.store_host = "s"
sp.delivery_timestamp.seconds = 99; sp.receipt_handle = "rh"; sp.queue_id = 3; sp.queue_offset = 7
sp.invisible_duration.seconds = 30; sp.delivery_attempt = 2; sp.message_group = "g"; sp.trace_context = "tc"
sp.orphaned_transaction_recovery_duration.seconds = 5
out["SendMessageRequest"] = m.SerializeToString(deterministic=True).hex()

t = s.TelemetryCommand()
t.status.code = d.OK; t.status.message = "OK"
st = t.settings
st.client_type = d.PUSH_CONSUMER; st.access_point.scheme = d.IPv4
a = st.access_point.addresses.add(); a.host = "127.0.0.1"; a.port = 8081
st.backoff_policy.max_attempts = 3
st.backoff_policy.exponential_backoff.initial.nanos = 10_000_000
st.backoff_policy.exponential_backoff.multiplier = 2.0
st.request_timeout.seconds = 3
st.subscription.group.name = "G"; e = st.subscription.subscriptions.add(); e.topic.name = "T"
e.expression.type = d.TAG; e.expression.expression = "*"
st.subscription.fifo = True; st.subscription.receive_batch_size = 32
st.subscription.long_polling_timeout.seconds = 30
st.user_agent.language = d.PYTHON; st.user_agent.version = "5.1.2"; st.user_agent.platform = "p"
st.user_agent.hostname = "h"; st.metric.on = False
out["TelemetryCommand"] = t.SerializeToString(deterministic=True).hex()

r = s.QueryRouteResponse(); r.status.code = d.TOPIC_NOT_FOUND
q = r.message_queues.add(); q.topic.name = "T"; q.id = 1; q.permission = d.READ_WRITE
q.broker.name = "b"; q.broker.id = 0; q.broker.endpoints.scheme = d.IPv4
q.accept_message_types.extend([d.NORMAL, d.TRANSACTION])
out["QueryRouteResponse"] = r.SerializeToString(deterministic=True).hex()

e = s.EndTransactionRequest(message_id="m", transaction_id="t", resolution=d.ROLLBACK, source=d.SOURCE_SERVER_CHECK)
e.topic.name = "T"; e.trace_context = "x"
out["EndTransactionRequest"] = e.SerializeToString(deterministic=True).hex()

h = s.HeartbeatRequest(client_type=d.SIMPLE_CONSUMER); h.group.name = "G"
out["HeartbeatRequest"] = h.SerializeToString(deterministic=True).hex()

rc = s.TelemetryCommand()
rc.recover_orphaned_transaction_command.transaction_id = "tx"
rc.recover_orphaned_transaction_command.message.topic.name = "T"
out["TelemetryCommand2"] = rc.SerializeToString(deterministic=True).hex()

rv = s.ReceiveMessageRequest(batch_size=16, auto_renew=True); rv.group.name = "G"
rv.message_queue.id = -1; rv.invisible_duration.seconds = 15; rv.long_polling_timeout.seconds = 20
out["ReceiveMessageRequest"] = rv.SerializeToString(deterministic=True).hex()

svc = s.DESCRIPTOR.services_by_name["MessagingService"]
out["methods"] = {m.name: [m.input_type.name, m.output_type.name] for m in svc.methods}
print(json.dumps(out))
"""


def test_schema_matches_the_clients_generated_code(v5_python):
    proc = subprocess.run([str(v5_python), "-c", _CLIENT_SIDE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout)
    for name, hexed in theirs.items():
        if name == "methods":
            continue
        cls = getattr(pb, name.rstrip("2"))
        data = bytes.fromhex(hexed)
        ours = cls.FromString(data)
        # the same bytes back, with unknown fields dropped: every field is known to our table
        ours.DiscardUnknownFields()
        assert ours.SerializeToString(deterministic=True) == data, name
    for rpc, (req, resp, _, _) in RPCS.items():
        assert theirs["methods"][rpc] == [req, resp], rpc


def test_every_message_of_the_table_builds():
    for name in MESSAGES:
        cls = getattr(pb, name)
        assert cls.FromString(cls().SerializeToString()) == cls()
    assert pb.Resource(name="t").SerializeToString() == b"\x12\x01t"  # name is field 2
    assert pb.Code.TOPIC_NOT_FOUND == 40402 and pb.Code.name(40402) == "TOPIC_NOT_FOUND"
