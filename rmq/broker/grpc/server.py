"""The gRPC server (grpcio's ``grpc.aio`` on the broker's event loop) and its RPCs.

Java 5 runs its proxy inside the broker ("local" mode, ``ProxyStartup`` with
``ProxyMode.LOCAL``): each gRPC request becomes a RemotingCommand handed to the broker's own
processor through an in-memory channel (``LocalMessageService``, ``SimpleChannel``). This module
does the same: a SendMessage becomes a SEND_MESSAGE_V2 command run by the broker's
``SendMessageProcessor`` (same checks, same store append, same transaction and delay handling),
EndTransaction an END_TRANSACTION run by the ``TransactionalMessageService``, and the
transaction check-back the broker sends to a "producer connection" is turned into a
``RecoverOrphanedTransactionCommand`` on that client's Telemetry stream (Java
``GrpcClientChannel.writeAndFlush``).

Answers carry ``apache.rocketmq.v2.Status`` codes as Java's proxy does (``ResponseBuilder``,
``GrpcProxyException``); the gRPC status itself is OK except for transport-level refusals
(malformed protobuf, message over ``grpcMaxMessageSize``, unknown method → UNIMPLEMENTED).

Bounds: HTTP/2 ``MAX_CONCURRENT_STREAMS`` per connection (``grpcMaxConcurrentStreams``: the
in-flight RPCs of one connection), ``grpcMaxMessageSize``, Telemetry streams per client id
(``grpcMaxTelemetrySessionsPerClient``), the client-settings table (``grpcMaxClients``), and
each Telemetry stream's outgoing queue (``grpcTelemetryQueueSize``; HTTP/2 flow control holds a
client that does not read to its window, and the queue past it drops, so such a client holds
neither memory nor the loop).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from rmq import _store
from rmq.broker.grpc.schema import RPCS, SERVICE, pb
from rmq.broker.processors.send_back import ConsumerSendMsgBackProcessor
from rmq.common.constants import MixAll, PermName, TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.common.message import (
    MessageConst,
    MessageSysFlag,
    java_string_hash,
    properties_to_string,
    string_to_properties,
    walk_records_py,
)
from rmq.common.topic_attributes import TopicMessageType
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from rmq.protocol.headers.message import EndTransactionRequestHeader, SendMessageRequestHeader
from rmq.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from rmq.protocol.requests.namesrv import get_route_info, parse_topic_route
from rmq.protocol.requests.pop import ExtraInfo, parse_offset_info, parse_pop, real_topic, retry_mark
from rmq.remoting.codec import decode_frame
from rmq.remoting.plain_acl import Permission
from rmq.store import decode_offset_msg_id

if TYPE_CHECKING:
    from rmq.broker.context import GrpcContext

log = logging.getLogger("rmq.broker.grpc")
_rlog = RateLimitedLog(log)

Code = pb.Code

# The 5.x clients' metadata (apache/rocketmq-clients, Java ``GrpcConstants``).
MD_CLIENT_ID = "x-mq-client-id"
MD_NAMESPACE = "x-mq-namespace"
MD_DATE_TIME = "x-mq-date-time"
MD_AUTHORIZATION = "authorization"
MD_LANGUAGE = "x-mq-language"

# The timer property the broker's timer store honours (Java MessageConst.PROPERTY_TIMER_DELIVER_MS),
# and the 5.x properties Java's proxy adds (PROPERTY_TRACE_CONTEXT, PROPERTY_BORN_HOST).
PROPERTY_TIMER_DELIVER_MS = MessageConst.TIMER_DELIVER_MS
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "BORN_HOST"

# Java ProxyConfig defaults: messageDelayLevel-free timers up to 40 days (maxDelayTimeMills),
# transactions recovered at most after 1 h (maxTransactionRecoverySecond), a message group of at
# most 64 characters (maxMessageGroupSize), 128 user properties of 16 KiB in all.
MAX_DELAY_MS = 40 * 24 * 3600 * 1000
MAX_TRANSACTION_RECOVERY_SECONDS = 3600
MAX_MESSAGE_GROUP_SIZE = 64
MAX_USER_PROPERTIES = 128
MAX_USER_PROPERTY_BYTES = 16 * 1024
# Timestamp.isValid: seconds within 0001-01-01..9999-12-31.
_TS_MIN_SECONDS = -62135596800
_TS_MAX_SECONDS = 253402300799

# What the broker answers in settings (Java ProxyConfig / GrpcClientSettingsManager): producers
# retry with exponential back-off 10 ms .. 1 s ×2, 3 attempts; consumers get 16 retries + 1.
_PRODUCER_ATTEMPTS = 3
_CONSUMER_ATTEMPTS = 17
_RECEIVE_BATCH = 32
# Java's default group retry policy (the delay levels 1s 5s 10s 30s 1m … 2h, CustomizedRetryPolicy)
# with every step at least the 10 s a changed invisible time may be (a shorter one is refused).
_CONSUMER_BACKOFF_SECONDS = (10, 10, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
_LONG_POLLING_SECONDS = 30

# Java ProxyConfig: receive's invisible time at least 10 s (minInvisibleTimeMillsForRecv), a
# long poll at least 5 s (grpcClientConsumerMinLongPollingTimeoutMillis) with 1 s of the
# client's deadline kept in reserve; 32 messages per receive at most (POP's cap), POP's init mode
# MAX for a group that has no offset yet (Java ConsumeInitMode.MAX).
_MIN_INVISIBLE_MS = 10_000
_DEFAULT_INVISIBLE_MS = 30_000
_MIN_POLL_MS = 5_000
_POLL_RESERVE_MS = 1_000
_MAX_RECEIVE_BATCH = 32
_INIT_MODE_MAX = 1

# (module constants: an attribute of ``pb`` read per message costs a lookup each time)
_CODE_OK = int(Code.OK)
_OK_NAME = Code.name(Code.OK)
_TRANSACTION = int(pb.MessageType.TRANSACTION)
_IDENTITY = int(pb.Encoding.IDENTITY)
_CRC32 = int(pb.DigestType.CRC32)
_SendMessageResponse = pb.SendMessageResponse
_ReceiveMessageResponse = pb.ReceiveMessageResponse
_AckMessageResponse = pb.AckMessageResponse
_Message = pb.Message

_STORE_CODES: dict[int, int] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
}


class GrpcError(Exception):
    """A refusal with its ``apache.rocketmq.v2.Code`` (Java ``GrpcProxyException``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int, message: str | None = None) -> Any:
    """An ``apache.rocketmq.v2.Status`` (message defaults to the code's name, as Java's)."""
    return pb.Status(code=code, message=message if message is not None else Code.name(code))


def accepted_message_types(topic_config: Any) -> list[int]:
    """The message types a topic accepts, from its ``message.type`` attribute (Java 5
    ``TopicMessageType``; MIXED accepts them all). A topic without the attribute accepts them
    all too: rmq's broker does not type-check sends to an untyped topic (as RocketMQ 4.x, see
    design.md "Typed topics"), so its route says so. Java 5's proxy announces such a topic as
    NORMAL, and the 5.x clients then refuse FIFO/DELAY/TRANSACTION sends to it themselves
    until the broker's settings (``validate_message_type=False``) reach them: a race we do not
    copy. The one place the route's lookup is made; sends are checked by the SEND processor."""
    declared = topic_config.declared_message_type
    if declared is None or declared is TopicMessageType.MIXED:
        return [
            int(pb.MessageType.NORMAL),
            int(pb.MessageType.FIFO),
            int(pb.MessageType.DELAY),
            int(pb.MessageType.TRANSACTION),
        ]
    return [int(getattr(pb.MessageType, declared.value, pb.MessageType.NORMAL))]


def _permission(perm: int) -> int:
    readable = bool(perm & PermName.PERM_READ)
    writable = bool(perm & PermName.PERM_WRITE)
    if readable and writable:
        return int(pb.Permission.READ_WRITE)
    if readable:
        return int(pb.Permission.READ)
    if writable:
        return int(pb.Permission.WRITE)
    return int(pb.Permission.NONE)


def _peer_host(context: Any) -> str:
    """``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` → the host."""
    peer = str(context.peer() or "")
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return rest.rsplit(":", 1)[0]


def _peer_addr(context: Any) -> str:
    """``ipv4:1.2.3.4:5`` → ``1.2.3.4:5`` (the address the connection lists show)."""
    peer = str(context.peer() or "?")
    kind, sep, rest = peer.partition(":")
    return rest if sep and kind in ("ipv4", "ipv6") else peer


def _metadata_value(context: Any, key: str) -> str:
    """One metadata value ("" when absent), without building the whole table."""
    for k, value in context.invocation_metadata() or ():
        if k == key:
            return value if isinstance(value, str) else ""
    return ""


def _metadata(context: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            out[key] = value
    return out


def _wrap(namespace: str, name: str) -> str:
    """Java ``NamespaceUtil.wrapNamespace``: ``<namespace>%<name>`` (retry/DLQ prefixes kept in front)."""
    if not namespace or name.startswith(namespace + "%"):
        return name
    for prefix in (MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX):
        if name.startswith(prefix):
            return prefix + namespace + "%" + name[len(prefix) :]
    return f"{namespace}%{name}"


def _millis(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


@dataclass
class _RouteBroker:
    """One broker of a topic's route as the 5.x clients see it: its name, the topic's
    permission and queue counts there, and that broker's own gRPC endpoint."""

    name: str
    perm: int
    read: int
    write: int
    endpoints: Any


# How long a peer broker's gRPC port (read with GET_BROKER_CONFIG) is trusted, and how many
# peers are remembered (a cluster has a few; past the bound the table starts over).
_PEER_PORT_TTL = 30.0
_MAX_PEERS = 1024


@dataclass
class _Client:
    """One 5.x client (by its ``x-mq-client-id``): its settings and its Telemetry streams."""

    client_id: str
    settings: Any = None  # the client's Settings as last received (None: defaults)
    sessions: list[_Telemetry] = field(default_factory=list)
    producer_groups: set[str] = field(default_factory=set)
    consumer_group: str = ""  # the group it is registered in as a consumer ("" none)
    language: str = "PYTHON"  # x-mq-language, as the connection lists show it
    last_seen: float = field(default_factory=time.monotonic)


class _Telemetry:
    """One Telemetry stream: a bounded queue of commands to the client. It also stands for the
    client as a "producer connection" in the broker's ProducerManager (what Java's
    ``GrpcClientChannel`` is): ``invoke_oneway`` turns a CHECK_TRANSACTION_STATE into a
    ``RecoverOrphanedTransactionCommand``."""

    def __init__(self, endpoint: GrpcEndpoint, client: _Client, remote_addr: str, size: int) -> None:
        self.endpoint = endpoint
        self.client = client
        self.remote_addr = remote_addr
        self.queue: asyncio.Queue[Any] = asyncio.Queue(size)
        self.closed = False
        self.attributes: dict[str, Any] = {}
        self.reader: asyncio.Future[Any] | None = None

    def close(self) -> None:
        """End the stream (the broker's expiry scan closes a member silent for
        ``channelExpiredSeconds``): its reader stops, and the stream ends with it."""
        self.closed = True
        if self.reader is not None:
            self.reader.cancel()

    def push(self, command: Any) -> bool:
        if self.closed:
            return False
        try:
            self.queue.put_nowait(command)
        except asyncio.QueueFull:
            _rlog.warning(
                "telemetry-full",
                "gRPC client %s (%s) does not read its Telemetry stream: a command was dropped",
                clip(self.client.client_id),
                self.remote_addr,
            )
            return False
        return True

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        command = self.endpoint.recovery_command(cmd)
        if command is not None:
            self.push(command)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


class _LocalChannel:
    """The connection a processor answers on for one gRPC request (Java ``SimpleChannel``):
    the processor's reply (a command, or a frame written "to the connection") resolves
    the reply (see :meth:`result`).

    The processors answer it with commands, not encoded frames (``reply_frames`` False: the
    SEND path's reply is not encoded to be decoded again here), and the future a reply is
    waited on is made only when the processor answers later (SYNC_FLUSH, long polling)."""

    reply_frames = False

    # the endpoint checked the request's v2 signature and its topics (``GrpcEndpoint._authorize``);
    # a processor that checks a remoting signature skips this channel's requests
    acl_checked = True

    def __init__(self, remote_addr: str) -> None:
        self.remote_addr = remote_addr
        self.attributes: dict[str, Any] = {}
        self.closed = False
        self._reply: RemotingCommand | None = None
        self._waiter: asyncio.Future[RemotingCommand] | None = None

    def send_response_frame(self, frame: bytes) -> None:
        self.send_response(decode_frame(frame))

    def send_response(self, cmd: RemotingCommand) -> None:
        if self._reply is None:
            self._reply = cmd
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_result(cmd)

    async def result(self, answer: Any) -> RemotingCommand:
        """The reply, whichever way the processor gave it (returned, awaitable, or written)."""
        if hasattr(answer, "__await__"):
            answer = await answer
        if isinstance(answer, RemotingCommand):
            return answer
        if self._reply is not None:
            return self._reply
        self._waiter = asyncio.get_running_loop().create_future()
        return await self._waiter


class GrpcEndpoint:
    """The broker's ``apache.rocketmq.v2.MessagingService`` on ``grpcServerPort``.

    Args:
        controller: the ``BrokerController`` (its config, TLS settings, ACL, processors).
        tls: the broker's ``TlsSettings`` or None; with a server certificate and a mode other
            than ``disabled`` the port speaks TLS only (gRPC has no permissive mode).
    """

    def __init__(self, controller: GrpcContext, tls: Any = None) -> None:
        self.controller = controller
        self.config = controller.broker_config
        self.tls = tls
        self.server: Any = None
        self.port = 0
        self.clients: dict[str, _Client] = {}
        # peer broker address -> (its grpcServerPort, or 0 for none; when read)
        self._peer_ports: dict[str, tuple[int, float]] = {}
        self._streams: set[asyncio.Task[Any]] = set()
        # the broker's CONSUMER_SEND_MSG_BACK rules (ForwardMessageToDeadLetterQueue runs them)
        self._send_back = ConsumerSendMsgBackProcessor(controller)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve on ``grpcServerPort`` (nothing when 0); a port taken is one warning."""
        bc = self.config
        if bc.grpc_server_port == 0:
            return
        options = [
            ("grpc.max_concurrent_streams", bc.grpc_max_concurrent_streams),
            ("grpc.max_receive_message_length", bc.grpc_max_message_size),
            ("grpc.max_send_message_length", bc.grpc_max_message_size),
            ("grpc.so_reuseport", 0),
            # a client that stops answering pings is dropped (Java's proxy: keepalive 2 min)
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ]
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers([self._handlers()])
        host = bc.grpc_server_host or bc.listen_host
        address = f"[{host}]:{bc.grpc_server_port}" if ":" in host else f"{host}:{bc.grpc_server_port}"
        try:
            credentials = await asyncio.to_thread(self._credentials)
            if credentials is not None:
                port = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as e:  # grpcio: "Failed to bind to address ..."
            log.warning(
                "gRPC endpoint not started: cannot bind %s (%s); set grpcServerPort to a free port, or 0 for none",
                address,
                e,
            )
            return
        await server.start()
        self.server = server
        self.port = port
        log.info("gRPC endpoint (RocketMQ 5 clients) listening on %s:%d%s", host, port, " (TLS)" if credentials else "")

    def _credentials(self) -> Any:
        tls = self.tls
        if tls is None or not tls.server_cert_path or tls.mode.value == "disabled":
            return None
        with open(tls.server_key_path or tls.server_cert_path, "rb") as f:
            key = f.read()
        with open(tls.server_cert_path, "rb") as f:
            cert = f.read()
        trust = None
        if tls.server_trust_cert_path and tls.server_need_client_auth != "none":
            with open(tls.server_trust_cert_path, "rb") as f:
                trust = f.read()
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=trust, require_client_auth=tls.server_need_client_auth == "require"
        )

    async def close(self) -> None:
        for client in self.clients.values():
            for session in client.sessions:
                session.closed = True
        if self.server is not None:
            await self.server.stop(grace=1.0)
            self.server = None

    # -- the handlers ---------------------------------------------------------------------

    def _handlers(self) -> Any:
        handlers: dict[str, Any] = {}
        for rpc, (req, resp, client_streams, server_streams) in RPCS.items():
            fn = getattr(self, "rpc_" + rpc)
            de = _lenient(getattr(pb, req), rpc)
            ser = getattr(pb, resp).SerializeToString
            if client_streams and server_streams:
                handlers[rpc] = grpc.stream_stream_rpc_method_handler(
                    fn, request_deserializer=de, response_serializer=ser
                )
            elif server_streams:
                handlers[rpc] = grpc.unary_stream_rpc_method_handler(
                    fn, request_deserializer=de, response_serializer=ser
                )
            else:
                handlers[rpc] = grpc.unary_unary_rpc_method_handler(
                    self._unary(fn, resp), request_deserializer=de, response_serializer=ser
                )
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def _unary(self, fn: Callable[[Any, Any], Any], resp: str) -> Callable[[Any, Any], Any]:
        """Every refusal (GrpcError) or failure becomes the response's Status, as Java's."""
        cls = getattr(pb, resp)

        async def call(request: Any, context: Any) -> Any:
            try:
                if request is None:
                    raise GrpcError(Code.BAD_REQUEST, "malformed request: not a valid protobuf message")
                if not self.controller.ready:
                    raise GrpcError(Code.TOO_MANY_REQUESTS, "the broker is starting or stopping")
                return await fn(request, context)
            except GrpcError as e:
                return cls(status=status(e.code, e.message))
            except Exception as e:  # noqa: BLE001 - an unexpected failure answers this request only
                _rlog.error(f"grpc-{resp}", "gRPC %s failed", resp, exc_info=True)
                return cls(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}"))

        return call

    # -- authentication and names -----------------------------------------------------------

    def _authorize(self, context: Any, resources: dict[str, int] | None) -> None:
        acl = self.controller.acl
        if acl is None:
            return
        md = _metadata(context)
        refusal = acl.check_v2(md.get(MD_AUTHORIZATION), md.get(MD_DATE_TIME), _peer_host(context), resources)
        if refusal is not None:
            _rlog.warning("grpc-acl", "gRPC request from %s refused by ACL: %s", context.peer(), clip(refusal.remark))
            code = Code.UNAUTHORIZED if "signature" in str(refusal) or "accessKey" in str(refusal) else Code.FORBIDDEN
            raise GrpcError(code, str(refusal))

    @staticmethod
    def _name(context: Any, resource: Any) -> str:
        namespace = resource.resource_namespace or _metadata_value(context, MD_NAMESPACE)
        return _wrap(namespace, resource.name)

    def _client(self, context: Any, create: bool = True) -> _Client | None:
        client_id = _metadata_value(context, MD_CLIENT_ID)
        if not client_id:
            raise GrpcError(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is missing")
        client = self.clients.get(client_id)
        if client is None and create:
            if len(self.clients) >= self.config.grpc_max_clients:
                self._purge_idle_clients()
            if len(self.clients) >= self.config.grpc_max_clients:
                _rlog.warning(
                    "grpc-clients-full", "gRPC client table full (grpcMaxClients=%d)", self.config.grpc_max_clients
                )
                return None
            client = self.clients[client_id] = _Client(client_id)
            client.language = _metadata_value(context, MD_LANGUAGE) or client.language
        if client is not None:
            client.last_seen = time.monotonic()
        return client

    def _purge_idle_clients(self) -> None:
        """Forget clients without a Telemetry stream not heard of for ``channelExpiredSeconds``
        (a client entry is made by its Telemetry stream and dropped with its last one; this
        catches what a crash in between left)."""
        horizon = time.monotonic() - self.config.channel_expired_seconds
        for client_id, client in list(self.clients.items()):
            if not client.sessions and client.last_seen < horizon:
                del self.clients[client_id]

    def _topic_config(self, topic: str) -> Any:
        tc = self.controller.topic_config_manager.select_topic_config(topic)
        if tc is None:
            # Java: "failed to fetch topic route" even with autoCreateTopicEnable (gRPC routes
            # come from the name server, which has none for an unknown topic).
            raise GrpcError(Code.TOPIC_NOT_FOUND, f"topic not found: {clip(topic)}")
        return tc

    def _endpoints(self, host: str | None = None, port: int | None = None) -> Any:
        """The endpoints clients should use for a broker: its advertised host (brokerIP1, or the
        host of a peer's address) and its gRPC port."""
        host = host if host is not None else self.config.broker_ip1
        try:
            scheme = pb.AddressScheme.IPv6 if ipaddress.ip_address(host).version == 6 else pb.AddressScheme.IPv4
        except ValueError:
            scheme = pb.AddressScheme.DOMAIN_NAME
        return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port or self.port)])

    async def _route(self, topic: str) -> tuple[list[_RouteBroker], Any]:
        """The brokers holding ``topic``, each with its own gRPC endpoint, and the local topic
        config (None when this broker has not got the topic).

        This broker's part comes from its topic table; with name servers configured, the other
        brokers' parts come from the name server's route (GET_ROUTEINFO_BY_TOPIC) and each
        peer's gRPC port from its configuration (GET_BROKER_CONFIG's ``grpcServerPort``), so a
        client given one endpoint reaches every queue at its own broker (docs/design.md, gRPC
        endpoint: a cluster). A peer without a gRPC port is left out of the route (a 5.x
        client could not reach it), as is any peer when the name server cannot be asked."""
        tc = self.controller.topic_config_manager.select_topic_config(topic)
        own_name = self.config.broker_name
        brokers: list[_RouteBroker] = []
        if tc is not None:
            perm = tc.perm & self.config.broker_permission
            brokers.append(_RouteBroker(own_name, perm, tc.read_queue_nums, tc.write_queue_nums, self._endpoints()))
        if self.config.namesrv_addr_list:
            api = self.controller.broker_outer_api
            try:
                route = parse_topic_route(await api.client.invoke_namesrv(get_route_info(topic), timeout=3.0))
            except Exception as e:  # noqa: BLE001 - no name server answer: this broker's part only
                _rlog.warning("grpc-route", "gRPC route of %s: the name server did not answer (%s)", clip(topic), e)
                route = None
            for qd in route.queue_datas if route is not None else ():
                if qd.broker_name == own_name:
                    continue
                addr = route.master_addr(qd.broker_name) if route is not None else None
                if not addr:
                    continue
                port = await self._peer_port(addr)
                if port:
                    host = addr.rsplit(":", 1)[0].strip("[]")
                    brokers.append(
                        _RouteBroker(
                            qd.broker_name,
                            qd.perm,
                            qd.read_queue_nums,
                            qd.write_queue_nums,
                            self._endpoints(host, port),
                        )
                    )
        if not brokers:
            # Java: "failed to fetch topic route" even with autoCreateTopicEnable (gRPC routes
            # come from the name server, which has none for an unknown topic).
            raise GrpcError(Code.TOPIC_NOT_FOUND, f"topic not found: {clip(topic)}")
        return brokers, tc

    async def _peer_port(self, addr: str) -> int:
        """A peer broker's ``grpcServerPort`` (0: none, or it did not answer), read with
        GET_BROKER_CONFIG and kept for ``_PEER_PORT_TTL`` seconds."""
        now = time.monotonic()
        known = self._peer_ports.get(addr)
        if known is not None and now - known[1] < _PEER_PORT_TTL:
            return known[0]
        port = 0
        try:
            cmd = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {})
            reply = await self.controller.broker_outer_api.client.invoke(addr, cmd, timeout=3.0)
            if reply.code == ResponseCode.SUCCESS:
                for line in (reply.body_bytes() or b"").decode("utf-8", "replace").splitlines():
                    key, sep, value = line.partition("=")
                    if sep and key.strip() == "grpcServerPort" and value.strip().isdigit():
                        port = int(value.strip())
        except Exception as e:  # noqa: BLE001 - an unreachable peer is left out of routes
            _rlog.warning("grpc-peer", "gRPC route: broker %s did not give its gRPC port (%s)", addr, e)
        if len(self._peer_ports) >= _MAX_PEERS:
            self._peer_ports.clear()
        self._peer_ports[addr] = (port, now)
        return port

    # -- QueryRoute, Heartbeat, QueryAssignment -----------------------------------------------

    async def rpc_QueryRoute(self, request: Any, context: Any) -> Any:
        topic = self._name(context, request.topic)
        self._authorize(context, {topic: Permission.ANY})
        brokers, tc = await self._route(topic)
        types = accepted_message_types(tc) if tc is not None else [int(pb.MessageType.NORMAL)]
        queues = []
        for rb in brokers:
            broker = pb.Broker(name=rb.name, id=MixAll.MASTER_ID, endpoints=rb.endpoints)
            # Java genMessageQueueFromQueueData: the queues both readable and writable, then the
            # read-only or write-only rest.
            for qid in range(max(rb.read, rb.write)):
                p = rb.perm
                if qid >= rb.read:
                    p &= ~PermName.PERM_READ
                if qid >= rb.write:
                    p &= ~PermName.PERM_WRITE
                queues.append(
                    pb.MessageQueue(
                        topic=request.topic,
                        id=qid,
                        permission=_permission(p),
                        broker=broker,
                        accept_message_types=types,
                    )
                )
        return pb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)

    async def rpc_Heartbeat(self, request: Any, context: Any) -> Any:
        group = self._name(context, request.group) if request.HasField("group") else ""
        self._authorize(context, {MixAll.get_retry_topic(group): Permission.SUB} if group else None)
        client = self._client(context, create=False)
        if client is not None:
            self._register_producer(client)
            self._register_consumer(client)
        return pb.HeartbeatResponse(status=status(Code.OK))

    async def rpc_QueryAssignment(self, request: Any, context: Any) -> Any:
        topic = self._name(context, request.topic)
        group = self._name(context, request.group)
        self._authorize(context, {topic: Permission.ANY, MixAll.get_retry_topic(group): Permission.SUB})
        brokers, tc = await self._route(topic)
        types = accepted_message_types(tc) if tc is not None else [int(pb.MessageType.NORMAL)]
        # POP assigns by broker, not by queue: one queue id -1 per readable broker; a FIFO
        # group (consumeMessageOrderly) gets every readable queue, each received on its own
        # (Java QueryAssignmentActivity).
        cfg = self._group_config(group)
        fifo = cfg is not None and cfg.consume_message_orderly
        assignments = [
            pb.Assignment(
                message_queue=pb.MessageQueue(
                    topic=request.topic,
                    id=qid,
                    permission=_permission(rb.perm),
                    broker=pb.Broker(name=rb.name, id=MixAll.MASTER_ID, endpoints=rb.endpoints),
                    accept_message_types=types,
                )
            )
            for rb in brokers
            if rb.perm & PermName.PERM_READ and rb.read > 0
            for qid in (range(rb.read) if fifo else (-1,))
        ]
        if not assignments:
            return pb.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "the topic is not readable"))
        return pb.QueryAssignmentResponse(status=status(Code.OK), assignments=assignments)

    async def rpc_NotifyClientTermination(self, request: Any, context: Any) -> Any:
        self._authorize(context, None)
        client = self._client(context, create=False)
        if client is not None:
            self._forget(client)
        return pb.NotifyClientTerminationResponse(status=status(Code.OK))

    def _forget(self, client: _Client) -> None:
        pm = self.controller.producer_manager
        cm = self.controller.consumer_manager
        for session in client.sessions:
            session.closed = True
            pm.do_channel_close_event(session)  # type: ignore[arg-type]
            cm.do_channel_close_event(session, "the client terminated")  # type: ignore[arg-type]
        self.clients.pop(client.client_id, None)

    def _register_consumer(self, client: _Client) -> None:
        """A consumer's group membership in the broker's ConsumerManager, held by its newest
        Telemetry stream (Java ``ClientActivity``: CONSUME_ACTIVELY for a SimpleConsumer,
        CONSUME_PASSIVELY for a PushConsumer, CLUSTERING, from the last offset), so the
        consumer-connection and progress lists show 5.x consumers. Refreshed by every
        heartbeat; dropped with the stream, on NotifyClientTermination, or by the broker's
        expiry scan."""
        from rmq.broker.managers.consumer import (
            ClientChannelInfo,
            ConsumeFromWhere,
            ConsumeType,
            MessageModel,
            SubscriptionData,
        )

        settings = client.settings
        if not client.sessions or settings is None or settings.WhichOneof("pub_sub") != "subscription":
            return
        sub = settings.subscription
        group = _wrap(sub.group.resource_namespace, sub.group.name)
        if not sub.group.name:
            return
        subscriptions = []
        version = int(time.time() * 1000)
        for entry in sub.subscriptions:
            expression = entry.expression.expression or "*"
            sql = entry.expression.type == pb.FilterType.SQL
            tags = () if sql or expression == "*" else tuple(t.strip() for t in expression.split("||") if t.strip())
            subscriptions.append(
                SubscriptionData(
                    topic=_wrap(entry.topic.resource_namespace, entry.topic.name),
                    sub_string=expression,
                    tags_set=tags,
                    sub_version=version,
                    expression_type="SQL92" if sql else "TAG",
                )
            )
        session = client.sessions[-1]
        cm = self.controller.consumer_manager
        if client.consumer_group and client.consumer_group != group:
            for s in client.sessions:
                cm.unregister_consumer(client.consumer_group, s)  # type: ignore[arg-type]
        client.consumer_group = group
        kind = ConsumeType.CONSUME_ACTIVELY
        if settings.client_type == pb.ClientType.PUSH_CONSUMER:
            kind = ConsumeType.CONSUME_PASSIVELY
        cm.register_consumer(
            group,
            ClientChannelInfo(session, client.client_id, client.language, 0),  # type: ignore[arg-type]
            kind,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            subscriptions,
        )

    def _register_producer(self, client: _Client) -> None:
        """Each topic a producer publishes to is its producer group here (Java's proxy uses the
        topic as the transaction checker's group), held by its newest Telemetry stream."""
        from rmq.broker.managers.consumer import ClientChannelInfo

        if not client.sessions:
            return
        settings = client.settings
        if settings is not None and settings.WhichOneof("pub_sub") == "publishing":
            for topic in settings.publishing.topics:
                client.producer_groups.add(_wrap(topic.resource_namespace, topic.name))
        session = client.sessions[-1]
        pm = self.controller.producer_manager
        for group in client.producer_groups:
            pm.register_producer(group, ClientChannelInfo(session, client.client_id, client.language, 0))  # type: ignore[arg-type]

    # -- SendMessage ----------------------------------------------------------------------

    async def rpc_SendMessage(self, request: Any, context: Any) -> Any:
        messages = request.messages
        if not messages:
            raise GrpcError(Code.MESSAGE_CORRUPTED, "no message to send")
        # (one scan of the metadata per request, for the one name used)
        namespace = _metadata_value(context, MD_NAMESPACE)
        first = messages[0].topic
        topic = _wrap(first.resource_namespace or namespace, first.name)
        if len(messages) > 1:
            for m in messages:
                if _wrap(m.topic.resource_namespace or namespace, m.topic.name) != topic:
                    raise GrpcError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
        self._authorize(context, {topic: Permission.PUB})
        tc = self._topic_config(topic)
        # the producer's address, as the connection lists and the stored bornHost give it
        peer = _peer_addr(context)
        # The response is filled in place (a message built apart and passed to a constructor
        # is copied into it by protobuf).
        response = _SendMessageResponse()
        entries = response.entries
        codes = set()
        for m in messages:
            entry = entries.add()
            try:
                await self._send_one(context, peer, topic, tc, m, entry)
            except GrpcError as e:
                entry.status.code = e.code
                entry.status.message = e.message
            codes.add(entry.status.code)
        head = response.status
        if len(codes) == 1:
            head.code = only = codes.pop()
            head.message = entries[0].status.message if only != _CODE_OK else _OK_NAME
        else:
            head.code = Code.MULTIPLE_RESULTS
            head.message = Code.name(Code.MULTIPLE_RESULTS)
        return response

    def _properties(self, peer: str, topic: str, m: Any) -> tuple[dict[str, str], int]:
        """Java ``SendMessageActivity.buildMessageProperty``: the stored properties and sysFlag.
        (proto3 gives an unset string field as "", so a value read is the presence check.)"""
        sp = m.system_properties
        props: dict[str, str] = {}
        size = 0
        user = m.user_properties
        if user:
            if len(user) > MAX_USER_PROPERTIES:
                raise GrpcError(
                    Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}"
                )
            for k, v in user.items():
                if k in _SYSTEM_PROPERTIES:
                    raise GrpcError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {clip(k)}")
                if _has_control(k) or _has_control(v):
                    raise GrpcError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "a property cannot contain control characters")
                size += len(k.encode()) + len(v.encode())
                props[k] = v
        tag = sp.tag
        if tag:
            if "|" in tag or _has_control(tag) or not tag.strip():
                raise GrpcError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be blank or contain | or control characters")
            props[MessageConst.TAGS] = tag
            size += len(tag.encode())
        keys = sp.keys
        if keys:
            for key in keys:
                if not key.strip() or _has_control(key):
                    raise GrpcError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be blank or contain control characters")
                size += len(key.encode())
            props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(keys)
        if size > MAX_USER_PROPERTY_BYTES:
            raise GrpcError(
                Code.MESSAGE_PROPERTIES_TOO_LARGE,
                f"the total size of user property is too large, max is {MAX_USER_PROPERTY_BYTES}",
            )
        message_id = sp.message_id
        if not message_id.strip():
            raise GrpcError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = message_id
        sys_flag = 0
        if sp.message_type == _TRANSACTION:
            props[MessageConst.TRANSACTION_PREPARED] = "true"
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
            if sp.HasField("orphaned_transaction_recovery_duration"):
                seconds = sp.orphaned_transaction_recovery_duration.seconds
                if seconds > MAX_TRANSACTION_RECOVERY_SECONDS:
                    raise GrpcError(
                        Code.BAD_REQUEST,
                        f"the max transaction recovery time of message is too large, max is "
                        f"{MAX_TRANSACTION_RECOVERY_SECONDS}",
                    )
                props[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
        if sp.HasField("delivery_timestamp"):
            ts = sp.delivery_timestamp
            if not _TS_MIN_SECONDS <= ts.seconds <= _TS_MAX_SECONDS or not 0 <= ts.nanos < 1_000_000_000:
                # Java Timestamps.checkValid (there an INTERNAL_SERVER_ERROR; here the code that
                # names the field): the 5.x Python client puts what it is given into seconds.
                raise GrpcError(Code.ILLEGAL_DELIVERY_TIME, f"Timestamp is not valid: seconds={ts.seconds}")
            deliver_ms = _millis(ts)
            if deliver_ms - int(time.time() * 1000) > MAX_DELAY_MS:
                raise GrpcError(
                    Code.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {MAX_DELAY_MS}"
                )
            props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
        props[MessageConst.PRODUCER_GROUP] = topic
        group = sp.message_group
        if group:
            if not group.strip() or _has_control(group):
                raise GrpcError(
                    Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be blank or contain control characters"
                )
            if len(group) > MAX_MESSAGE_GROUP_SIZE:
                raise GrpcError(
                    Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {MAX_MESSAGE_GROUP_SIZE}"
                )
            props[MessageConst.SHARDING_KEY] = group
        trace_context = sp.trace_context
        if trace_context:
            props[PROPERTY_TRACE_CONTEXT] = trace_context
        born_host = sp.born_host or (peer.rsplit(":", 1)[0].strip("[]") if peer != "?" else "")
        if born_host:
            props[PROPERTY_BORN_HOST] = born_host
        return props, sys_flag

    async def _send_one(self, context: Any, peer: str, topic: str, tc: Any, m: Any, entry: Any) -> None:
        """Store one message of a SendMessage (Java ``SendMessageActivity``) and fill its
        ``SendResultEntry``; a refusal before the store raises GrpcError."""
        body = m.body
        if not body:
            raise GrpcError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        store = self.controller.started_store
        max_body = store.config.max_message_size
        if len(body) > max_body:
            raise GrpcError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_body}")
        sp = m.system_properties
        transaction = sp.message_type == _TRANSACTION
        props, sys_flag = self._properties(peer, topic, m)
        if transaction:
            client = self._client(context, create=False)
            if client is not None and topic not in client.producer_groups:
                client.producer_groups.add(topic)
                self._register_producer(client)
        # Java SendMessageQueueSelector: a message group picks its queue by hash, others any.
        sharding_key = props.get(MessageConst.SHARDING_KEY)
        if sharding_key is not None:
            queue_id = java_string_hash(sharding_key) % max(1, tc.write_queue_nums)
        else:
            queue_id = -1
        born_ms = _millis(sp.born_timestamp) if sp.HasField("born_timestamp") else int(time.time() * 1000)
        header = SendMessageRequestHeader(
            producer_group=topic,
            topic=topic,
            default_topic=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_topic_queue_nums=4,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=born_ms,
            flag=0,
            properties=properties_to_string(props, trailing_separator=False),
            reconsume_times=sp.delivery_attempt if sp.HasField("delivery_attempt") else 0,
        )
        # The processor reads the typed header it is given, the command only for its body,
        # flag and reply: no remoting ext fields are made for it (Java's proxy likewise hands
        # its header object to the processor).
        cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, body=bytes(body))
        channel = _LocalChannel(peer)
        processor = self.controller.send_processor
        reply = await channel.result(processor.send_message(channel, cmd, header, False))  # type: ignore[arg-type]
        code = _STORE_CODES.get(reply.code, Code.INTERNAL_SERVER_ERROR)
        if reply.code == ResponseCode.MESSAGE_ILLEGAL and (reply.remark or "").startswith("TopicMessageType"):
            code = Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE  # (Java's proxy: the typed-topic check)
        status = entry.status
        status.code = code
        if code != _CODE_OK:
            status.message = reply.remark or f"send failed: code {reply.code}"
            return
        status.message = _OK_NAME
        ext = reply.ext_fields
        entry.message_id = sp.message_id
        if transaction:
            entry.transaction_id = str(ext.get("msgId", ""))
        entry.offset = int(ext.get("queueOffset", 0))

    # -- transactions ---------------------------------------------------------------------

    async def rpc_EndTransaction(self, request: Any, context: Any) -> Any:
        topic = self._name(context, request.topic)
        self._authorize(context, {topic: Permission.PUB})
        if not request.transaction_id:
            raise GrpcError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        try:
            _, _, commit_log_offset = decode_offset_msg_id(request.transaction_id)
        except ValueError:
            raise GrpcError(
                Code.INVALID_TRANSACTION_ID, f"unknown transaction id {clip(request.transaction_id)}"
            ) from None
        half = self.controller.started_store.look_message_by_offset(commit_log_offset)
        if half is None or half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != request.message_id:
            raise GrpcError(
                Code.INVALID_TRANSACTION_ID, f"no half message for transaction {clip(request.transaction_id)}"
            )
        if request.resolution == pb.TransactionResolution.COMMIT:
            kind = MessageSysFlag.TRANSACTION_COMMIT_TYPE
        elif request.resolution == pb.TransactionResolution.ROLLBACK:
            kind = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
        else:
            kind = MessageSysFlag.TRANSACTION_NOT_TYPE
        header = EndTransactionRequestHeader(
            producer_group=half.properties.get(MessageConst.PRODUCER_GROUP, topic),
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=kind,
            from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=request.message_id,
            transaction_id=request.transaction_id,
        )
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header)
        channel = _LocalChannel(_peer_addr(context))
        reply = await self.controller.transaction_service.end_transaction(channel, cmd, header)  # type: ignore[arg-type]
        if reply.code != ResponseCode.SUCCESS:
            return pb.EndTransactionResponse(status=status(Code.INTERNAL_SERVER_ERROR, reply.remark or "end failed"))
        return pb.EndTransactionResponse(status=status(Code.OK))

    def recovery_command(self, cmd: RemotingCommand) -> Any:
        """A CHECK_TRANSACTION_STATE the broker sends a producer → the 5.x client's
        ``RecoverOrphanedTransactionCommand`` (Java ``GrpcClientChannel``): the half message
        with its real topic, and the check copy's offsetMsgId as transaction id (what
        EndTransaction looks the copy up by)."""
        ext = cmd.ext_fields
        try:
            commit_log_offset = int(ext.get("commitLogOffset", -1))
        except (TypeError, ValueError):
            return None
        half = self.controller.started_store.look_message_by_offset(commit_log_offset)
        if half is None:
            return None
        props = dict(half.properties)
        message = self.to_message(half, props.get(MessageConst.REAL_TOPIC) or half.topic, props)
        message.system_properties.message_type = pb.MessageType.TRANSACTION
        command = pb.TelemetryCommand(
            recover_orphaned_transaction_command=pb.RecoverOrphanedTransactionCommand(
                message=message, transaction_id=str(ext.get("offsetMsgId") or half.msg_id)
            )
        )
        return command

    @staticmethod
    def to_message(stored: Any, topic: str, props: dict[str, str], message: Any = None) -> Any:
        """A stored message as ``apache.rocketmq.v2.Message`` (Java ``GrpcConverter.buildMessage``),
        filled into ``message`` when given (a response's own field: protobuf copies a message
        passed to a constructor, body included)."""
        if message is None:
            message = _Message()
        namespace, sep, name = topic.partition("%")
        if not sep:
            namespace, name = "", topic
        resource = message.topic
        if namespace:
            resource.resource_namespace = namespace
        resource.name = name
        sp = message.system_properties
        sp.message_id = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, stored.msg_id)
        sp.body_encoding = _IDENTITY
        sp.queue_id = stored.queue_id
        sp.store_host = f"{stored.store_host[0]}:{stored.store_host[1]}"
        sp.born_host = props.get(PROPERTY_BORN_HOST, stored.born_host[0])
        body = stored.body
        digest = sp.body_digest
        digest.type = _CRC32
        digest.checksum = format(zlib.crc32(body) & 0xFFFFFFFF, "08X")
        sp.born_timestamp.FromMilliseconds(stored.born_timestamp)
        sp.store_timestamp.FromMilliseconds(stored.store_timestamp)
        value = props.get(MessageConst.TAGS)
        if value:
            sp.tag = value
        value = props.get(MessageConst.KEYS)
        if value:
            sp.keys.extend(value.split(MessageConst.KEY_SEPARATOR))
        value = props.get(MessageConst.SHARDING_KEY)
        if value:
            sp.message_group = value
        value = props.get(PROPERTY_TIMER_DELIVER_MS)
        if value and value.isdigit():
            sp.delivery_timestamp.FromMilliseconds(int(value))
        value = props.get(PROPERTY_TRACE_CONTEXT)
        if value:
            sp.trace_context = value
        user = message.user_properties
        for k, v in props.items():
            if k not in _SYSTEM_PROPERTIES:
                user[k] = v
        message.body = body
        return message

    # -- Telemetry ------------------------------------------------------------------------

    async def rpc_Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Settings in, settings back (merged with the broker's); transaction checks out.
        Until a client's settings arrive every RPC works on the defaults (Java fails there)."""
        try:
            self._authorize(context, None)
            client = self._client(context)
        except GrpcError as e:
            yield pb.TelemetryCommand(status=status(e.code, e.message))
            return
        if client is None:
            yield pb.TelemetryCommand(status=status(Code.TOO_MANY_REQUESTS, "too many gRPC clients"))
            return
        if len(client.sessions) >= self.config.grpc_max_telemetry_sessions_per_client:
            yield pb.TelemetryCommand(
                status=status(
                    Code.TOO_MANY_REQUESTS,
                    f"a client may hold {self.config.grpc_max_telemetry_sessions_per_client} Telemetry streams",
                )
            )
            return
        session = _Telemetry(self, client, _peer_addr(context), self.config.grpc_telemetry_queue_size)
        client.sessions.append(session)
        reader = session.reader = asyncio.ensure_future(self._read_telemetry(request_iterator, session))
        try:
            while True:
                get = asyncio.ensure_future(session.queue.get())
                done, _ = await asyncio.wait({get, reader}, return_when=asyncio.FIRST_COMPLETED)
                if get in done:
                    yield get.result()
                    continue
                get.cancel()
                break
        finally:
            session.closed = True
            reader.cancel()
            if session in client.sessions:
                client.sessions.remove(session)
            self.controller.producer_manager.do_channel_close_event(session)  # type: ignore[arg-type]
            self.controller.consumer_manager.do_channel_close_event(session, "its Telemetry stream ended")  # type: ignore[arg-type]
            if not client.sessions:
                self.clients.pop(client.client_id, None)
            else:
                if client.producer_groups:
                    self._register_producer(client)
                self._register_consumer(client)

    async def _read_telemetry(self, request_iterator: Any, session: _Telemetry) -> None:
        async for command in request_iterator:
            if command is None:
                session.push(pb.TelemetryCommand(status=status(Code.BAD_REQUEST, "malformed TelemetryCommand")))
                continue
            kind = command.WhichOneof("command")
            if kind == "settings":
                session.client.settings = command.settings
                self._register_producer(session.client)
                self._register_consumer(session.client)
                session.push(
                    pb.TelemetryCommand(status=status(Code.OK), settings=self._answer_settings(command.settings))
                )
            # thread_stack_trace / verify_message_result: answers to commands this broker never
            # sends; ignored.

    def _answer_settings(self, given: Any) -> Any:
        """The client's settings merged with the broker's (Java ``GrpcClientSettingsManager``)."""
        out = pb.Settings()
        out.CopyFrom(given)
        backoff = out.backoff_policy
        kind = given.WhichOneof("pub_sub")
        if kind == "publishing":
            store = self.controller.message_store
            max_body = int(getattr(getattr(store, "config", None), "max_message_size", 4 * 1024 * 1024))
            out.publishing.max_body_size = max_body
            # sends are checked by the broker itself (typed topics), not trusted to the client
            out.publishing.validate_message_type = False
            backoff.max_attempts = _PRODUCER_ATTEMPTS
            backoff.exponential_backoff.initial.FromMilliseconds(10)
            backoff.exponential_backoff.max.FromMilliseconds(1000)
            backoff.exponential_backoff.multiplier = 2.0
        elif kind == "subscription":
            sub = out.subscription
            if not sub.HasField("receive_batch_size"):
                sub.receive_batch_size = _RECEIVE_BATCH
            if not sub.HasField("long_polling_timeout"):
                sub.long_polling_timeout.FromSeconds(_LONG_POLLING_SECONDS)
            # Java GrpcClientSettingsManager.mergeSubscriptionData: the group's config decides
            # FIFO (consumeMessageOrderly) and the attempts (retryMaxTimes + 1)
            cfg = self._group_config(_wrap(sub.group.resource_namespace, sub.group.name))
            sub.fifo = bool(cfg is not None and cfg.consume_message_orderly)
            backoff.max_attempts = cfg.retry_max_times + 1 if cfg is not None else _CONSUMER_ATTEMPTS
            for seconds in _CONSUMER_BACKOFF_SECONDS:
                backoff.customized_backoff.next.add().FromSeconds(seconds)
        out.metric.on = False
        return out

    # -- consumption: ReceiveMessage, AckMessage, ChangeInvisibleDuration over POP --------------

    def _group_config(self, group: str) -> Any:
        """The group's subscription config, None when the broker has none (not created here:
        a client's settings or receive do not add groups beyond what POP itself does)."""
        return self.controller.subscription_group_manager.subscription_group_table.get(group)

    def _subscription(self, client: _Client | None) -> Any:
        settings = client.settings if client is not None else None
        if settings is not None and settings.WhichOneof("pub_sub") == "subscription":
            return settings.subscription
        return None

    async def rpc_ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """Java ``ReceiveMessageActivity``: one POP_MESSAGE run by the broker's PopService (held
        for long polling like any POP), answered as a status then the messages, each with its
        ack handle as ``receipt_handle``."""
        try:
            if not self.controller.ready:
                raise GrpcError(Code.TOO_MANY_REQUESTS, "the broker is starting or stopping")
            if request is None:
                raise GrpcError(Code.BAD_REQUEST, "malformed request: not a valid protobuf message")
            async for response in self._receive(request, context):
                yield response
        except GrpcError as e:
            yield pb.ReceiveMessageResponse(status=status(e.code, e.message))
        # Java ReceiveMessageResponseStreamWriter.onComplete: every answer ends with the time
        # of delivery (the clients measure their receive latency from it)
        done = pb.ReceiveMessageResponse()
        done.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
        yield done

    async def _receive(self, request: Any, context: Any) -> AsyncIterator[Any]:
        group = self._name(context, request.group)
        topic = self._name(context, request.message_queue.topic)
        if not request.group.name:
            raise GrpcError(Code.ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
        self._authorize(context, {topic: Permission.SUB, MixAll.get_retry_topic(group): Permission.SUB})
        client = self._client(context, create=False)
        sub = self._subscription(client)
        batch = request.batch_size or (sub.receive_batch_size if sub is not None else _RECEIVE_BATCH)
        if not 0 < batch <= _MAX_RECEIVE_BATCH:
            raise GrpcError(Code.BAD_REQUEST, f"batch size must be 1..{_MAX_RECEIVE_BATCH}, not {batch}")
        if request.HasField("invisible_duration"):
            invisible_ms = int(request.invisible_duration.ToMilliseconds())
        else:
            invisible_ms = _DEFAULT_INVISIBLE_MS
        bc = self.config
        low = max(_MIN_INVISIBLE_MS, bc.pop_min_invisible_time)
        if not low <= invisible_ms <= bc.pop_max_invisible_time:
            raise GrpcError(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"the invisibleTime must be {low}..{bc.pop_max_invisible_time} ms, not {invisible_ms}",
            )
        # Java: the long-polling time is the request's (or the settings'), cut to what the
        # client's deadline leaves after a reserve, and at least 5 s.
        if request.HasField("long_polling_timeout"):
            poll_ms = int(request.long_polling_timeout.ToMilliseconds())
        elif sub is not None and sub.HasField("long_polling_timeout"):
            poll_ms = int(sub.long_polling_timeout.ToMilliseconds())
        else:
            poll_ms = _LONG_POLLING_SECONDS * 1000
        remaining = context.time_remaining()
        if remaining is not None:
            poll_ms = min(poll_ms, int(remaining * 1000) - _POLL_RESERVE_MS)
        if poll_ms < _MIN_POLL_MS:
            raise GrpcError(
                Code.ILLEGAL_POLLING_TIME, f"the polling time must leave {_MIN_POLL_MS} ms before the deadline"
            )
        poll_ms = min(poll_ms, bc.pop_max_poll_time)
        expression = request.filter_expression
        exp_type = "SQL92" if expression.type == pb.FilterType.SQL else "TAG"
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            # Java ReceiveMessageQueueSelector: the request names the broker, not the queue
            queue_id=-1,
            max_msg_nums=batch,
            invisible_time=invisible_ms,
            poll_time=poll_ms,
            born_time=int(time.time() * 1000),
            init_mode=_INIT_MODE_MAX,
            exp_type=exp_type,
            exp=expression.expression or "*",
            order=self._is_fifo(group, sub),
        )
        cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, header)
        channel = _LocalChannel(_peer_addr(context))
        try:
            reply = await channel.result(self.controller.pop_service.process_request(channel, cmd))  # type: ignore[arg-type]
        finally:
            channel.closed = True  # a held POP whose client went away is not run again
        if reply.code == ResponseCode.POLLING_FULL:
            raise GrpcError(Code.TOO_MANY_REQUESTS, "polling full")
        if reply.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_TIMEOUT):
            raise GrpcError(Code.MESSAGE_NOT_FOUND, "no new message")
        if reply.code != ResponseCode.SUCCESS:
            raise GrpcError(_STORE_CODES.get(reply.code, Code.INTERNAL_SERVER_ERROR), reply.remark or "pop failed")
        body = reply.body_bytes() if reply.body is not None else b""
        if not body:
            raise GrpcError(Code.MESSAGE_NOT_FOUND, "no match message")
        # orderly POP: a message popped again carries its count in orderCountInfo, per queue
        # (Java MQClientAPIImpl.processPopResponse sets it as the reconsume times)
        try:
            counts = parse_offset_info(reply.ext_fields.get("orderCountInfo"))
        except ValueError:
            counts = {}
        # the handles of a topic's records come from the answer's offset infos (the broker
        # re-encodes only retry records, with POP_CK), as Java's processPopResponse builds them
        popped = parse_pop(reply)
        yield pb.ReceiveMessageResponse(status=status(Code.OK))
        for span in walk_records_py(body):
            d = _store.decode_record(memoryview(body)[span.pos : span.pos + span.total])
            props = string_to_properties(d["properties"])
            stored = _Popped(d)
            response = _ReceiveMessageResponse()
            sp = self.to_message(stored, topic, props, response.message).system_properties
            sp.receipt_handle = popped.handle(
                d["topic"], d["queue_id"], d["queue_offset"], bc.broker_name, props.get(MessageConst.POP_CK)
            )
            sp.queue_offset = d["queue_offset"]
            count = counts.get(f"{retry_mark(d['topic'])}@{d['queue_id']}")
            sp.delivery_attempt = (count[0] if count else d["reconsume_times"]) + 1
            sp.invisible_duration.FromMilliseconds(invisible_ms)
            sp.message_type = _message_type(props)
            yield response

    def _is_fifo(self, group: str, sub: Any) -> bool:
        """A group receives in order when its config says ``consumeMessageOrderly`` (Java: the
        settings' ``fifo`` comes from there); a group the broker does not know yet follows the
        client's settings."""
        cfg = self._group_config(group)
        if cfg is not None:
            return bool(cfg.consume_message_orderly)
        return bool(sub is not None and sub.HasField("fifo") and sub.fifo)

    def _handle(self, receipt_handle: str) -> tuple[ExtraInfo, int]:
        try:
            info = ExtraInfo.parse(receipt_handle)
        except ValueError as e:
            raise GrpcError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {clip(e)}") from None
        if info.queue_offset is None:
            raise GrpcError(Code.INVALID_RECEIPT_HANDLE, "receipt handle has no queue offset")
        return info, info.queue_offset

    async def rpc_AckMessage(self, request: Any, context: Any) -> Any:
        group = self._name(context, request.group)
        topic = self._name(context, request.topic)
        self._authorize(context, {topic: Permission.SUB, MixAll.get_retry_topic(group): Permission.SUB})
        peer = _peer_addr(context)
        response = _AckMessageResponse()  # (filled in place, not copied into)
        results = response.entries
        codes = set()
        for entry in request.entries:
            result = results.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle)
            st = result.status
            try:
                reply = await self._ack(peer, group, topic, entry.receipt_handle)
                if reply.code == ResponseCode.SUCCESS:
                    st.code, st.message = _CODE_OK, _OK_NAME
                else:
                    st.code = _STORE_CODES.get(reply.code, Code.INVALID_RECEIPT_HANDLE)
                    st.message = reply.remark or ""
            except GrpcError as e:
                st.code, st.message = e.code, e.message
            codes.add(st.code)
        code = codes.pop() if len(codes) == 1 else Code.MULTIPLE_RESULTS if codes else _CODE_OK
        response.status.code = code
        response.status.message = Code.name(code)
        return response

    async def _ack(self, peer: str, group: str, topic: str, receipt_handle: str) -> RemotingCommand:
        """ACK_MESSAGE of one handle, run by the broker's PopService (given the header itself)."""
        info, offset = self._handle(receipt_handle)
        header = AckMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=info.queue_id,
            extra_info=receipt_handle,
            offset=offset,
        )
        cmd = RemotingCommand(RequestCode.ACK_MESSAGE)
        channel = _LocalChannel(peer)
        return await self.controller.pop_service.ack_with_header(channel, cmd, header, info)  # type: ignore[arg-type]

    async def rpc_ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        group = self._name(context, request.group)
        topic = self._name(context, request.topic)
        self._authorize(context, {topic: Permission.SUB, MixAll.get_retry_topic(group): Permission.SUB})
        invisible_ms = int(request.invisible_duration.ToMilliseconds())
        bc = self.config
        low = max(_MIN_INVISIBLE_MS, bc.pop_min_invisible_time)
        if not low <= invisible_ms <= bc.pop_max_invisible_time:
            raise GrpcError(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"the invisibleTime must be {low}..{bc.pop_max_invisible_time} ms, not {invisible_ms}",
            )
        info, offset = self._handle(request.receipt_handle)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=info.queue_id,
            extra_info=request.receipt_handle,
            offset=offset,
            invisible_time=invisible_ms,
        )
        cmd = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header)
        channel = _LocalChannel(_peer_addr(context))
        reply = await channel.result(self.controller.pop_service.process_request(channel, cmd))  # type: ignore[arg-type]
        if reply.code != ResponseCode.SUCCESS:
            raise GrpcError(_STORE_CODES.get(reply.code, Code.INVALID_RECEIPT_HANDLE), reply.remark or "change failed")
        ext = reply.ext_fields
        # Java ChangeInvisibleDurationActivity: the new handle names the new checkpoint (one
        # message at its own offset, popped now).
        new = dataclasses.replace(
            info,
            ck_queue_offset=offset,
            pop_time=int(ext.get("popTime", 0)),
            invisible_time=int(ext.get("invisibleTime", invisible_ms)),
            revive_qid=int(ext.get("reviveQid", info.revive_qid)),
        )
        if info.is_order:
            new = dataclasses.replace(new, ck_queue_offset=info.ck_queue_offset, revive_qid=info.revive_qid)
        return pb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=str(new))

    async def rpc_ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        """Java ``ForwardMessageToDLQActivity`` / ``ProducerProcessor.forwardMessageToDeadLetterQueue``:
        a CONSUMER_SEND_MSG_BACK of the handle's message with delay level -1 (straight to
        ``%DLQ%<group>``), run by the broker's send-back processor, then the handle acked."""
        group = self._name(context, request.group)
        topic = self._name(context, request.topic)
        if not request.group.name:
            raise GrpcError(Code.ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
        self._authorize(context, {topic: Permission.SUB, MixAll.get_retry_topic(group): Permission.SUB})
        info, offset = self._handle(request.receipt_handle)
        # the handle names the queue and offset popped (the topic itself or the group's pop
        # retry topic); the send-back wants the CommitLog offset (Java's handle carries it)
        popped = real_topic(topic, group, info.retry)
        store = self.controller.started_store
        cq = store.find_consume_queue(popped, info.queue_id, create=False)
        unit = cq.get_unit(offset) if cq is not None else None
        if not unit:
            raise GrpcError(Code.INVALID_RECEIPT_HANDLE, "the receipt handle names no stored message")
        header = ConsumerSendMsgBackRequestHeader(
            offset=unit[0],
            group=group,
            delay_level=-1,
            origin_msg_id=request.message_id,
            origin_topic=popped,
            max_reconsume_times=0,
        )
        cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header)
        channel = _LocalChannel(_peer_addr(context))
        reply = await channel.result(self._send_back.process_request(channel, cmd))  # type: ignore[arg-type]
        if reply.code != ResponseCode.SUCCESS:
            code = _STORE_CODES.get(reply.code, Code.INTERNAL_SERVER_ERROR)
            return pb.ForwardMessageToDeadLetterQueueResponse(status=status(code, reply.remark or "forward failed"))
        ack = await self._ack(_peer_addr(context), group, topic, request.receipt_handle)
        if ack.code != ResponseCode.SUCCESS:
            _rlog.warning(
                "grpc-dlq-ack", "gRPC: a message forwarded to the DLQ of %s was not acked: %s", clip(group), ack.remark
            )
        return pb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.OK))


class _Popped:
    """A popped record's fields as ``GrpcEndpoint.to_message`` reads them."""

    def __init__(self, d: dict[str, Any]) -> None:
        self.msg_id = ""
        self.queue_id = d["queue_id"]
        self.born_timestamp = d["born_timestamp"]
        self.store_timestamp = d["store_timestamp"]
        self.body = d["body"]
        self.born_host = _host(d["born_host"])
        self.store_host = _host(d["store_host"])


def _host(b: bytes) -> tuple[str, int]:
    if len(b) == 8:
        return ".".join(str(x) for x in b[:4]), int.from_bytes(b[4:], "big")
    return str(ipaddress.IPv6Address(b[:16])), int.from_bytes(b[16:], "big")


def _message_type(props: dict[str, str]) -> int:
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return int(pb.MessageType.TRANSACTION)
    if MessageConst.SHARDING_KEY in props:
        return int(pb.MessageType.FIFO)
    if PROPERTY_TIMER_DELIVER_MS in props:
        return int(pb.MessageType.DELAY)
    return int(pb.MessageType.NORMAL)


def _lenient(cls: Any, rpc: str) -> Callable[[bytes], Any]:
    """The request parser: None for bytes that are not a valid message (answered BAD_REQUEST in
    the response's Status, with one rate-limited warning), where grpcio would log a traceback
    per request and answer UNKNOWN."""
    parse = cls.FromString

    def parse_or_none(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError, or a recursion limit
            _rlog.warning("grpc-malformed", "malformed gRPC %s request (%d bytes): %s", rpc, len(data), e)
            return None

    return parse_or_none


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


# Java MessageConst.STRING_HASH_SET: names the system owns (a user property may not use them).
_SYSTEM_PROPERTIES = frozenset(
    {
        *MessageConst.RESERVED,
        MessageConst.SHARDING_KEY,
        MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS,
        MessageConst.TRANSACTION_CHECK_TIMES,
        MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET,
        MessageConst.CORRELATION_ID,
        MessageConst.MESSAGE_REPLY_TO_CLIENT,
        MessageConst.MESSAGE_TTL,
        MessageConst.REPLY_MESSAGE_ARRIVE_TIME,
        MessageConst.PUSH_REPLY_TIME,
        MessageConst.CLUSTER,
        MessageConst.MESSAGE_TYPE,
        MessageConst.TRACE_SWITCH,
        MessageConst.POP_CK,
        MessageConst.POP_CK_OFFSET,
        MessageConst.FIRST_POP_TIME,
        PROPERTY_TIMER_DELIVER_MS,
        PROPERTY_TRACE_CONTEXT,
        PROPERTY_BORN_HOST,
        MessageConst.TIMER_DELAY_SEC,
        MessageConst.TIMER_DELAY_MS,
        MessageConst.START_DELIVER_TIME,
        MessageConst.TIMER_OUT_MS,
        MessageConst.TIMER_ENQUEUE_MS,
        MessageConst.TIMER_DEQUEUE_MS,
        MessageConst.TIMER_ROLL_TIMES,
        "MSG_REGION",
        "BORN_TIMESTAMP",
    }
)
