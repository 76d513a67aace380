"""The ``apache.rocketmq.v2`` messages and enums the endpoint serves, declared once here.

The names and field numbers are those of the published API (apache/rocketmq-apis,
``apache/rocketmq/v2/definition.proto`` and ``service.proto``); the table is ours: one line per
field, ``name number type [rep | opt | oneof:<group> | map:<key>]``, from which a
``FileDescriptorProto`` is assembled and turned into message classes with protobuf's
``message_factory`` at import. Nothing is generated or fetched. Only what the RPCs served here
read or write is declared: protobuf keeps unknown fields and unknown enum numbers, so a newer
client's extra fields pass through harmlessly.

``opt`` is proto3 ``optional`` (presence tracked, ``HasField`` works); ``oneof:<g>`` puts the
field in the oneof ``g``; ``map:<k>`` is a ``map<k, type>``. ``Timestamp`` and ``Duration`` are
the well-known ``google.protobuf`` types.

Use: ``from rmq.broker.grpc.schema import pb`` then ``pb.SendMessageRequest()``,
``pb.Code.OK`` (enum values as ints: ``pb.Code.OK == 20000``).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

PACKAGE = "apache.rocketmq.v2"
SERVICE = f"{PACKAGE}.MessagingService"
FILE_NAME = "rmq/apache_rocketmq_v2.proto"

# -- enums: name -> "VALUE=number ..." ------------------------------------------------------
ENUMS: dict[str, str] = {
    "TransactionResolution": "TRANSACTION_RESOLUTION_UNSPECIFIED=0 COMMIT=1 ROLLBACK=2",
    "TransactionSource": "SOURCE_UNSPECIFIED=0 SOURCE_CLIENT=1 SOURCE_SERVER_CHECK=2",
    "Permission": "PERMISSION_UNSPECIFIED=0 NONE=1 READ=2 WRITE=3 READ_WRITE=4",
    "FilterType": "FILTER_TYPE_UNSPECIFIED=0 TAG=1 SQL=2",
    "AddressScheme": "ADDRESS_SCHEME_UNSPECIFIED=0 IPv4=1 IPv6=2 DOMAIN_NAME=3",
    "MessageType": "MESSAGE_TYPE_UNSPECIFIED=0 NORMAL=1 FIFO=2 DELAY=3 TRANSACTION=4",
    "DigestType": "DIGEST_TYPE_UNSPECIFIED=0 CRC32=1 MD5=2 SHA1=3",
    "ClientType": "CLIENT_TYPE_UNSPECIFIED=0 PRODUCER=1 PUSH_CONSUMER=2 SIMPLE_CONSUMER=3 PULL_CONSUMER=4",
    "Encoding": "ENCODING_UNSPECIFIED=0 IDENTITY=1 GZIP=2",
    "Language": "LANGUAGE_UNSPECIFIED=0 JAVA=1 CPP=2 DOT_NET=3 GOLANG=4 RUST=5 PYTHON=6 PHP=7 NODE_JS=8",
    # The status codes of every response (Java's proxy answers with these, never a gRPC error).
    "Code": (
        "CODE_UNSPECIFIED=0 OK=20000 MULTIPLE_RESULTS=30000 BAD_REQUEST=40000 ILLEGAL_ACCESS_POINT=40001 "
        "ILLEGAL_TOPIC=40002 ILLEGAL_CONSUMER_GROUP=40003 ILLEGAL_MESSAGE_TAG=40004 ILLEGAL_MESSAGE_KEY=40005 "
        "ILLEGAL_MESSAGE_GROUP=40006 ILLEGAL_MESSAGE_PROPERTY_KEY=40007 INVALID_TRANSACTION_ID=40008 "
        "ILLEGAL_MESSAGE_ID=40009 ILLEGAL_FILTER_EXPRESSION=40010 ILLEGAL_INVISIBLE_TIME=40011 "
        "ILLEGAL_DELIVERY_TIME=40012 INVALID_RECEIPT_HANDLE=40013 MESSAGE_PROPERTY_CONFLICT_WITH_TYPE=40014 "
        "UNRECOGNIZED_CLIENT_TYPE=40015 MESSAGE_CORRUPTED=40016 CLIENT_ID_REQUIRED=40017 "
        "ILLEGAL_POLLING_TIME=40018 ILLEGAL_OFFSET=40019 UNAUTHORIZED=40100 PAYMENT_REQUIRED=40200 "
        "FORBIDDEN=40300 NOT_FOUND=40400 MESSAGE_NOT_FOUND=40401 TOPIC_NOT_FOUND=40402 "
        "CONSUMER_GROUP_NOT_FOUND=40403 OFFSET_NOT_FOUND=40404 REQUEST_TIMEOUT=40800 PAYLOAD_TOO_LARGE=41300 "
        "MESSAGE_BODY_TOO_LARGE=41301 MESSAGE_BODY_EMPTY=41302 PRECONDITION_FAILED=42800 "
        "TOO_MANY_REQUESTS=42900 REQUEST_HEADER_FIELDS_TOO_LARGE=43100 MESSAGE_PROPERTIES_TOO_LARGE=43101 "
        "INTERNAL_ERROR=50000 INTERNAL_SERVER_ERROR=50001 HA_NOT_AVAILABLE=50002 NOT_IMPLEMENTED=50100 "
        "PROXY_TIMEOUT=50400 MASTER_PERSISTENCE_TIMEOUT=50401 SLAVE_PERSISTENCE_TIMEOUT=50402 "
        "UNSUPPORTED=50500 VERSION_UNSUPPORTED=50501 VERIFY_FIFO_MESSAGE_UNSUPPORTED=50502 "
        "FAILED_TO_CONSUME_MESSAGE=60000"
    ),
}

# -- messages: name -> fields, one per line -------------------------------------------------
MESSAGES: dict[str, str] = {
    "FilterExpression": """type 1 FilterType
        expression 2 string""",
    "RetryPolicy": """max_attempts 1 int32
        exponential_backoff 2 ExponentialBackoff oneof:strategy
        customized_backoff 3 CustomizedBackoff oneof:strategy""",
    "ExponentialBackoff": """initial 1 Duration
        max 2 Duration
        multiplier 3 float""",
    "CustomizedBackoff": "next 1 Duration rep",
    "Resource": """resource_namespace 1 string
        name 2 string""",
    "SubscriptionEntry": """topic 1 Resource
        expression 2 FilterExpression""",
    "Address": """host 1 string
        port 2 int32""",
    "Endpoints": """scheme 1 AddressScheme
        addresses 2 Address rep""",
    "Broker": """name 1 string
        id 2 int32
        endpoints 3 Endpoints""",
    "MessageQueue": """topic 1 Resource
        id 2 int32
        permission 3 Permission
        broker 4 Broker
        accept_message_types 5 MessageType rep""",
    "Digest": """type 1 DigestType
        checksum 2 string""",
    "SystemProperties": """tag 1 string opt
        keys 2 string rep
        message_id 3 string
        body_digest 4 Digest
        body_encoding 5 Encoding
        message_type 6 MessageType
        born_timestamp 7 Timestamp
        born_host 8 string
        store_timestamp 9 Timestamp opt
        store_host 10 string
        delivery_timestamp 11 Timestamp opt
        receipt_handle 12 string opt
        queue_id 13 int32
        queue_offset 14 int64 opt
        invisible_duration 15 Duration opt
        delivery_attempt 16 int32 opt
        message_group 17 string opt
        trace_context 18 string opt
        orphaned_transaction_recovery_duration 19 Duration opt""",
    "Message": """topic 1 Resource
        user_properties 2 string map:string
        system_properties 3 SystemProperties
        body 4 bytes""",
    "Assignment": "message_queue 1 MessageQueue",
    "Status": """code 1 Code
        message 2 string""",
    "UA": """language 1 Language
        version 2 string
        platform 3 string
        hostname 4 string""",
    "Settings": """client_type 1 ClientType opt
        access_point 2 Endpoints opt
        backoff_policy 3 RetryPolicy opt
        request_timeout 4 Duration opt
        publishing 5 Publishing oneof:pub_sub
        subscription 6 Subscription oneof:pub_sub
        user_agent 7 UA
        metric 8 Metric""",
    "Publishing": """topics 1 Resource rep
        max_body_size 2 int32
        validate_message_type 3 bool""",
    "Subscription": """group 1 Resource opt
        subscriptions 2 SubscriptionEntry rep
        fifo 3 bool opt
        receive_batch_size 4 int32 opt
        long_polling_timeout 5 Duration opt""",
    "Metric": """on 1 bool
        endpoints 2 Endpoints opt""",
    # service.proto
    "QueryRouteRequest": """topic 1 Resource
        endpoints 2 Endpoints""",
    "QueryRouteResponse": """status 1 Status
        message_queues 2 MessageQueue rep""",
    "SendMessageRequest": "messages 1 Message rep",
    "SendResultEntry": """status 1 Status
        message_id 2 string
        transaction_id 3 string
        offset 4 int64""",
    "SendMessageResponse": """status 1 Status
        entries 2 SendResultEntry rep""",
    "QueryAssignmentRequest": """topic 1 Resource
        group 2 Resource
        endpoints 3 Endpoints""",
    "QueryAssignmentResponse": """status 1 Status
        assignments 2 Assignment rep""",
    "ReceiveMessageRequest": """group 1 Resource
        message_queue 2 MessageQueue
        filter_expression 3 FilterExpression
        batch_size 4 int32
        invisible_duration 5 Duration opt
        auto_renew 6 bool
        long_polling_timeout 7 Duration opt
        attempt_id 8 string opt""",
    "ReceiveMessageResponse": """status 1 Status oneof:content
        message 2 Message oneof:content
        delivery_timestamp 3 Timestamp oneof:content""",
    "AckMessageEntry": """message_id 1 string
        receipt_handle 2 string""",
    "AckMessageRequest": """group 1 Resource
        topic 2 Resource
        entries 3 AckMessageEntry rep""",
    "AckMessageResultEntry": """message_id 1 string
        receipt_handle 2 string
        status 3 Status""",
    "AckMessageResponse": """status 1 Status
        entries 2 AckMessageResultEntry rep""",
    "ForwardMessageToDeadLetterQueueRequest": """group 1 Resource
        topic 2 Resource
        receipt_handle 3 string
        message_id 4 string
        delivery_attempt 5 int32
        max_delivery_attempts 6 int32""",
    "ForwardMessageToDeadLetterQueueResponse": "status 1 Status",
    "HeartbeatRequest": """group 1 Resource opt
        client_type 2 ClientType""",
    "HeartbeatResponse": "status 1 Status",
    "EndTransactionRequest": """topic 1 Resource
        message_id 2 string
        transaction_id 3 string
        resolution 4 TransactionResolution
        source 5 TransactionSource
        trace_context 6 string""",
    "EndTransactionResponse": "status 1 Status",
    "PrintThreadStackTraceCommand": "nonce 1 string",
    "ReconnectEndpointsCommand": "nonce 1 string",
    "ThreadStackTrace": """nonce 1 string
        thread_stack_trace 2 string opt""",
    "VerifyMessageCommand": """nonce 1 string
        message 2 Message""",
    "VerifyMessageResult": "nonce 1 string",
    "RecoverOrphanedTransactionCommand": """message 1 Message
        transaction_id 2 string""",
    "TelemetryCommand": """status 1 Status opt
        settings 2 Settings oneof:command
        thread_stack_trace 3 ThreadStackTrace oneof:command
        verify_message_result 4 VerifyMessageResult oneof:command
        recover_orphaned_transaction_command 5 RecoverOrphanedTransactionCommand oneof:command
        print_thread_stack_trace_command 6 PrintThreadStackTraceCommand oneof:command
        verify_message_command 7 VerifyMessageCommand oneof:command
        reconnect_endpoints_command 8 ReconnectEndpointsCommand oneof:command""",
    "NotifyClientTerminationRequest": "group 1 Resource opt",
    "NotifyClientTerminationResponse": "status 1 Status",
    "ChangeInvisibleDurationRequest": """group 1 Resource
        topic 2 Resource
        receipt_handle 3 string
        invisible_duration 4 Duration
        message_id 5 string""",
    "ChangeInvisibleDurationResponse": """status 1 Status
        receipt_handle 2 string""",
}

# -- the service: rpc -> (request, response, client streams, server streams) ---------------
RPCS: dict[str, tuple[str, str, bool, bool]] = {
    "QueryRoute": ("QueryRouteRequest", "QueryRouteResponse", False, False),
    "Heartbeat": ("HeartbeatRequest", "HeartbeatResponse", False, False),
    "SendMessage": ("SendMessageRequest", "SendMessageResponse", False, False),
    "QueryAssignment": ("QueryAssignmentRequest", "QueryAssignmentResponse", False, False),
    "ReceiveMessage": ("ReceiveMessageRequest", "ReceiveMessageResponse", False, True),
    "AckMessage": ("AckMessageRequest", "AckMessageResponse", False, False),
    "ForwardMessageToDeadLetterQueue": (
        "ForwardMessageToDeadLetterQueueRequest",
        "ForwardMessageToDeadLetterQueueResponse",
        False,
        False,
    ),
    "EndTransaction": ("EndTransactionRequest", "EndTransactionResponse", False, False),
    "Telemetry": ("TelemetryCommand", "TelemetryCommand", True, True),
    "NotifyClientTermination": ("NotifyClientTerminationRequest", "NotifyClientTerminationResponse", False, False),
    "ChangeInvisibleDuration": ("ChangeInvisibleDurationRequest", "ChangeInvisibleDurationResponse", False, False),
}

_FD = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _FD.TYPE_STRING,
    "bytes": _FD.TYPE_BYTES,
    "int32": _FD.TYPE_INT32,
    "int64": _FD.TYPE_INT64,
    "bool": _FD.TYPE_BOOL,
    "float": _FD.TYPE_FLOAT,
}
_WELL_KNOWN = {"Timestamp": ".google.protobuf.Timestamp", "Duration": ".google.protobuf.Duration"}


def _set_type(field: Any, type_name: str) -> None:
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    elif type_name in _WELL_KNOWN:
        field.type = _FD.TYPE_MESSAGE
        field.type_name = _WELL_KNOWN[type_name]
    elif type_name in ENUMS:
        field.type = _FD.TYPE_ENUM
        field.type_name = f".{PACKAGE}.{type_name}"
    elif type_name in MESSAGES:
        field.type = _FD.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{type_name}"
    else:
        raise ValueError(f"unknown type {type_name} in the gRPC schema table")


def _message(name: str, spec: str) -> descriptor_pb2.DescriptorProto:
    msg = descriptor_pb2.DescriptorProto(name=name)
    oneofs: dict[str, int] = {}
    synthetic: list[tuple[Any, str]] = []  # proto3 optional: a one-field oneof, declared after the real ones
    for line in spec.splitlines():
        words = line.split()
        fname, number, type_name, *mods = words
        field = msg.field.add(name=fname, number=int(number), label=_FD.LABEL_OPTIONAL, json_name=_camel(fname))
        mod = mods[0] if mods else ""
        if mod.startswith("map:"):
            # map<k, v>: a repeated nested "<Name>Entry" message with map_entry set
            entry_name = "".join(p.capitalize() for p in fname.split("_")) + "Entry"
            entry = msg.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, label=_FD.LABEL_OPTIONAL, json_name="key")
            _set_type(key, mod[4:])
            value = entry.field.add(name="value", number=2, label=_FD.LABEL_OPTIONAL, json_name="value")
            _set_type(value, type_name)
            field.label = _FD.LABEL_REPEATED
            field.type = _FD.TYPE_MESSAGE
            field.type_name = f".{PACKAGE}.{name}.{entry_name}"
            continue
        _set_type(field, type_name)
        if mod == "rep":
            field.label = _FD.LABEL_REPEATED
        elif mod.startswith("oneof:"):
            group = mod[6:]
            if group not in oneofs:
                oneofs[group] = len(oneofs)
                msg.oneof_decl.add(name=group)
            field.oneof_index = oneofs[group]
        elif mod == "opt":
            field.proto3_optional = True
            synthetic.append((field, "_" + fname))
        elif mod:
            raise ValueError(f"unknown modifier {mod} in the gRPC schema table ({name}.{fname})")
    for field, group in synthetic:
        field.oneof_index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=group)
    return msg


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=PACKAGE, syntax="proto3")
    fd.dependency.extend(["google/protobuf/timestamp.proto", "google/protobuf/duration.proto"])
    for ename, values in ENUMS.items():
        enum = fd.enum_type.add(name=ename)
        for pair in values.split():
            vname, number = pair.split("=")
            enum.value.add(name=vname, number=int(number))
    for mname, spec in MESSAGES.items():
        fd.message_type.append(_message(mname, spec))
    service = fd.service.add(name=SERVICE.rsplit(".", 1)[1])
    for rpc, (req, resp, cs, ss) in RPCS.items():
        service.method.add(
            name=rpc,
            input_type=f".{PACKAGE}.{req}",
            output_type=f".{PACKAGE}.{resp}",
            client_streaming=cs,
            server_streaming=ss,
        )
    return fd


class _Enum:
    """An enum's values as int attributes (``pb.Code.OK == 20000``) and ``name(number)``."""

    def __init__(self, descriptor: Any) -> None:
        self._names = {v.number: v.name for v in descriptor.values}
        for v in descriptor.values:
            setattr(self, v.name, v.number)

    def name(self, number: int) -> str:
        return str(self._names.get(number, number))


class _Namespace:
    """The message classes and enums by name (attributes typed ``Any``: built at run time)."""

    def __init__(self) -> None:
        # A pool of our own: nothing else registered in the default pool can clash with it.
        self.pool = descriptor_pool.DescriptorPool()
        for wk in (timestamp_pb2, duration_pb2):
            self.pool.AddSerializedFile(wk.DESCRIPTOR.serialized_pb)
        self.file = self.pool.Add(_file())
        fdesc = self.pool.FindFileByName(FILE_NAME)
        self._classes: dict[str, Any] = {}
        for mname in MESSAGES:
            self._classes[mname] = message_factory.GetMessageClass(fdesc.message_types_by_name[mname])
        for ename in ENUMS:
            self._classes[ename] = _Enum(fdesc.enum_types_by_name[ename])
        # (the well-known types of this pool: a message field takes only its own pool's class)
        self.Timestamp = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("google.protobuf.Timestamp"))
        self.Duration = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("google.protobuf.Duration"))
        # Instance attributes: found by the ordinary lookup. (A ``__getattr__`` is called only
        # after that lookup failed, which builds an AttributeError with a formatted message on
        # every use: ``pb.X`` on the per-message paths cost more than the work around it.)
        self.__dict__.update(self._classes)


pb: Any = _Namespace()
