"""BrokerController: builds the broker and owns everything it starts (Java ``BrokerController``'s shape).

Construction only wires objects; :meth:`start` brings them up in this order:

1. load the persisted topic, subscription-group and consumer-offset tables;
2. bind the remoting server (first, so a port taken fails fast and an ephemeral port is
   known before the store is told its advertised ``ip:port``; until step 4 every processor
   answers SYSTEM_BUSY);
3. start the MessageStore (locks the store directory, recovers);
4. mark ready, start the long-polling service and the background tasks, register with
   every name server.

:meth:`shutdown` reverses it: unregister from the name servers, stop the tasks, answer held
pulls, close the server (in-flight sends finish), persist offsets and configs, shut the
store down (flush, checkpoint, remove the abort marker, release the lock). Every step runs
whatever the steps before it raised: the store is always shut down.

Background tasks, each owned here and cancelled (and awaited) in ``shutdown``:

* ``register``  — REGISTER_BROKER to every name server every ``registerNameServerPeriod``
  (30 s), asking QUERY_DATA_VERSION first unless ``forceRegister``; a topic created on the
  send path (``register_broker_soon``), by an admin or for a consumer's retry topic registers
  incrementally (only the changed topics, coalesced);
* ``persist``   — the ConfigPersister: topics and groups every ``configPersistInterval``
  (200 ms), consumer offsets every ``flushConsumerOffsetInterval`` (5 s), delay progress every
  10 s, each only when changed, snapshotted on the loop and written in a thread;
* ``housekeep`` — every 10 s, drop clients whose last heartbeat is older than 120 s (Java's
  ``ClientHousekeepingService``) and queue locks past ``rebalanceLockMaxLiveTime``;
* ``slave-sync`` — on a SLAVE only, every ``slaveSyncIntervalMs`` (10 s), copy the master's
  topics, groups, consumer offsets and delay progress (rmq.broker.slave_sync).

Each processor is registered by request code with its own ``ProcessorPool``, Java's
``registerProcessor(code, processor, executor)``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from rmq.broker.acl import PlainPermissionManager, acl_guard, acl_home
from rmq.broker.assignment import MessageRequestModeManager, QueryAssignmentProcessor
from rmq.broker.config_update import BrokerConfiguration
from rmq.broker.context import BrokerContext
from rmq.broker.long_polling import PullRequestHoldService
from rmq.broker.managers.config_store import ConfigPersister
from rmq.broker.managers.consumer import ConsumerManager, ProducerManager
from rmq.broker.managers.consumer_offset import ConsumerOffsetManager
from rmq.broker.managers.subscription_group import SubscriptionGroupManager
from rmq.broker.managers.topic_config import TopicConfigManager
from rmq.broker.metrics import BrokerMetrics
from rmq.broker.namesrv_api import BrokerOuterAPI
from rmq.broker.offset_reset import PendingResets
from rmq.broker.pop import PopService
from rmq.broker.processors.acl_admin import AclAdminProcessor
from rmq.broker.processors.admin import AdminBrokerProcessor
from rmq.broker.processors.admin_conns import ConnsAdminProcessor
from rmq.broker.processors.admin_ops import OpsAdminProcessor
from rmq.broker.processors.client_manage import (
    CheckClientConfigProcessor,
    ClientManageProcessor,
    ConsumerManageProcessor,
)
from rmq.broker.processors.end_transaction import EndTransactionProcessor
from rmq.broker.processors.lock_batch import RebalanceLockProcessor
from rmq.broker.processors.pull import PullMessageProcessor
from rmq.broker.processors.query_message import QueryMessageProcessor
from rmq.broker.processors.reply import ReplyMessageProcessor
from rmq.broker.processors.send import SendMessageProcessor
from rmq.broker.processors.send_back import ConsumerSendMsgBackProcessor
from rmq.broker.rebalance_lock import RebalanceLockManager
from rmq.broker.replicas import ReplicasManager
from rmq.broker.schedule import ScheduleMessageService
from rmq.broker.slave_sync import SlaveSynchronize
from rmq.broker.stats import BrokerStatsManager
from rmq.broker.transaction import TransactionalMessageService
from rmq.broker.vip_channel import VipChannel, vip_port
from rmq.common.constants import PermName
from rmq.common.tasks import BackgroundTasks
from rmq.config import BrokerConfig, ConfigError, check_controller_mode
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.client import NotifyConsumerIdsChangedRequestHeader
from rmq.remoting.acl import SessionCredentials
from rmq.remoting.connection import Connection, ConnectionEvent
from rmq.remoting.dispatcher import ProcessorPool, RequestProcessor
from rmq.remoting.server import RemotingServer
from rmq.remoting.tls import TlsSettings
from rmq.store import MessageStore, StoreConfig
from rmq.store.timer import TimerMessageStore

log = logging.getLogger("rmq.broker")


def _namesrv_credentials(bc: BrokerConfig) -> SessionCredentials | None:
    """The keys the broker signs its name-server requests with (``namesrvAccessKey`` and
    ``namesrvSecretKey``, both or neither; a name server with ``aclEnable`` needs them)."""
    if bc.namesrv_access_key is None and bc.namesrv_secret_key is None:
        return None
    if not bc.namesrv_access_key or not bc.namesrv_secret_key:
        raise ConfigError(
            "namesrvAccessKey and namesrvSecretKey go together: set both (an admin account of the "
            "name server's plain_acl.yml) or neither"
        )
    return SessionCredentials(bc.namesrv_access_key, bc.namesrv_secret_key)


HOUSEKEEPING_INTERVAL = 10.0  # Java ClientHousekeepingService scans every 10 s
REGISTER_MIN_GAP = 0.2  # seconds between two change-triggered registrations


class _Gate:
    """Wraps a processor: SYSTEM_BUSY until the controller is ready (store started); with
    ``aclEnable`` every request is checked first (Java registers the ACL as a server RPCHook)."""

    def __init__(self, controller: BrokerController, processor: RequestProcessor) -> None:
        self._controller = controller
        self._processor = processor  # typed: mypy checks every processor is a RequestProcessor
        self.process_request: Callable[[Any, RemotingCommand], Any] = processor.process_request
        if controller.acl is not None:
            self.process_request = acl_guard(controller.acl, processor.process_request)

    def reject_request(self) -> bool:
        return not self._controller.ready


def _frame_hooks(send: SendMessageProcessor, pull: PullMessageProcessor, send_pool: Any, conn: Any) -> Any:
    """A connection's frame hook: the native pull path first (one look at the code), then the
    SEND fast path (either may be off: ``pullFastPath`` / ``sendFastPath``)."""
    return pull.frame_hook(conn, send.frame_hook(send_pool, conn))


class BrokerController:
    """One broker: store, managers, processors, server and background services.

    Args:
        broker_config: ``BrokerConfig`` (``listen_port=0`` binds an ephemeral port; the bound
            port is then advertised).
        store_config: the store's ``StoreConfig``; its ``store_path_root_dir`` also holds
            ``config/`` with our topic, group and offset tables.
        tls: the ``tls.*`` settings (``rmq.remoting.tls.TlsSettings``): the server mode and
            certificate, and whether registrations with name servers use TLS (``tls.enable``,
            by default when the mode is enforcing, Java ``BrokerStartup``). Default None =
            plain TCP, TLS refused.
    """

    def __init__(self, broker_config: BrokerConfig, store_config: StoreConfig, tls: TlsSettings | None = None):
        self.broker_config = broker_config
        self.store_config = store_config
        self.config_dir = os.path.join(store_config.store_path_root_dir, "config")
        self.topic_config_manager = TopicConfigManager(self.config_dir, broker_config)
        self.subscription_group_manager = SubscriptionGroupManager(self.config_dir, broker_config)
        self.consumer_offset_manager = ConsumerOffsetManager(self.config_dir, broker_config.max_consumer_offset_keys)
        self.consumer_manager = ConsumerManager(
            self._notify_consumer_ids_changed, broker_config.channel_expired_seconds
        )
        self.producer_manager = ProducerManager(
            broker_config.channel_expired_seconds,
            broker_config.max_producer_groups,
            broker_config.max_producers_per_group,
        )
        self.pending_resets = PendingResets(broker_config.channel_expired_seconds)
        self.configuration = BrokerConfiguration(self)
        self.stats = BrokerStatsManager(
            broker_config.broker_cluster_name,
            max_items=broker_config.max_stats_items,
            sample_interval_ms=broker_config.stats_sample_interval_ms,
        )
        # Message semantics: delay levels, orderly locks, transactions.
        self.schedule_service = ScheduleMessageService(self)
        self.rebalance_lock_manager = RebalanceLockManager(
            broker_config.rebalance_lock_max_live_time / 1000.0, broker_config.rebalance_lock_max_entries
        )
        self.transaction_service = TransactionalMessageService(self)
        # Every persisted table, written off the loop when changed (never on a request path).
        self.config_persister = ConfigPersister(broker_config.config_persist_interval / 1000.0)
        self.config_persister.add(self.topic_config_manager)
        self.config_persister.add(self.subscription_group_manager)
        self.config_persister.add(
            self.consumer_offset_manager, max(broker_config.flush_consumer_offset_interval, 100) / 1000.0
        )
        self.config_persister.add(self.schedule_service.table, self.schedule_service.flush_interval)
        # RocketMQ 5 POP consumption (rmq.broker.pop).
        self.pop_service = PopService(self)
        self.config_persister.add(self.pop_service.order_info)
        # Server-side assignment's (topic, group) modes (rmq.broker.assignment).
        self.message_request_mode_manager = MessageRequestModeManager(
            self.config_dir, broker_config.max_message_request_modes
        )
        self.config_persister.add(self.message_request_mode_manager)
        server_settings: dict[str, Any] = dict(
            idle_timeout=broker_config.idle_timeout,
            write_buffer_high=broker_config.write_buffer_high,
            write_buffer_limit=broker_config.write_buffer_limit or None,
            frame_read_timeout=broker_config.frame_read_timeout_seconds or None,
            max_partial_frame_bytes=broker_config.max_partial_frame_bytes or None,
            close_grace=broker_config.close_grace_seconds,
            max_frames_per_turn=broker_config.max_frames_per_turn,
            max_bytes_per_turn=broker_config.max_bytes_per_turn,
            max_requests_in_flight=broker_config.max_requests_in_flight_per_connection,
            tls=tls.server_options() if tls is not None else None,
        )
        self.server = RemotingServer(
            broker_config.listen_host, broker_config.listen_port, name="broker", **server_settings
        )
        # Java's fastRemotingServer on listenPort - 2 (rmq.broker.vip_channel), fixed ports only.
        self.vip_channel: VipChannel | None = None
        self._vip_settings = server_settings
        self.message_store: MessageStore | None = None
        self.pull_message_processor: PullMessageProcessor | None = None
        self.pull_request_hold_service: PullRequestHoldService | None = None
        # Timer messages (rmq.store.timer, Java TimerMessageStore): made with the store at start.
        self.timer_message_store: TimerMessageStore | None = None
        self.broker_outer_api = BrokerOuterAPI(
            broker_config.namesrv_addr_list,
            tls=tls.client_context() if tls is not None and tls.client_enabled else None,
            credentials=_namesrv_credentials(broker_config),
        )
        # A SLAVE copies its master's metadata (started in start() only for a slave).
        self.slave_synchronize = SlaveSynchronize(self, broker_config.slave_sync_interval_ms / 1000.0)
        self._slave_sync_task: asyncio.Task[Any] | None = None
        # Controller mode (rmq.broker.replicas, Java ReplicasManager): the controllers decide the role.
        check_controller_mode(broker_config, store_config.broker_role)
        self.replicas: ReplicasManager | None = None
        if broker_config.enable_controller_mode:
            self.replicas = ReplicasManager(
                self, tls.client_context() if tls is not None and tls.client_enabled else None
            )
        self._ready = False
        # ACL 1.0 (aclEnable): loaded at start, watched by the "acl-watch" task.
        self.acl: PlainPermissionManager | None = None
        if broker_config.acl_enable:
            self.acl = PlainPermissionManager(
                acl_home(broker_config.rocketmq_home), broker_config.acl_watch_interval_ms / 1000.0
            )
        # Prometheus /metrics on metricsPort (rmq.broker.metrics), started with the broker.
        self.metrics = BrokerMetrics(self)
        if self.replicas is not None:
            self.metrics.add_source(self.replicas.metrics)  # role, epochs, SyncStateSet, confirm offset
        # The RocketMQ 5 gRPC endpoint on grpcServerPort (rmq.broker.grpc), started last.
        self.grpc: Any = None
        self._tls = tls
        self._tasks = BackgroundTasks("broker", log)
        self._register_lock: asyncio.Lock | None = None
        self._register_pending: asyncio.Task[Any] | None = None  # queued, not yet started
        # periodic rounds that found every name server holding the table (needRegister false)
        self.register_skipped = 0
        self._register_not_before = 0.0  # loop time before which no queued registration starts
        # Topics created or updated since the last registration that carried them: the next
        # incremental registration (register_topics_now) sends only these.
        self._changed_topics: set[str] = set()
        self._increment_pending: asyncio.Task[Any] | None = None  # queued, not yet started
        self._started = False
        self._stopped = False

    # -- properties -----------------------------------------------------------------------

    @property
    def started_store(self) -> MessageStore:
        """The message store, for request handlers: it exists from ``start`` on, but the server
        listens (and handlers can be called) a moment before, so a request then is refused."""
        store = self.message_store
        if store is None:
            raise RuntimeError("the broker's message store is not started")
        return store

    @property
    def store_role(self) -> str:
        return str(getattr(self.store_config, "broker_role", "ASYNC_MASTER"))

    @property
    def is_slave(self) -> bool:
        return self.store_role == "SLAVE"

    @property
    def broker_addr(self) -> str:
        """The advertised ``ip:port`` (brokerIP1 and the bound port)."""
        return f"{self.broker_config.broker_ip1}:{self.server.port}"

    @property
    def port(self) -> int:
        return self.server.port

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Serving requests (the store started); while False every request is answered
        SYSTEM_BUSY. Setting it binds the SEND fast path to the store (True) or unbinds it."""
        return self._ready

    @ready.setter
    def ready(self, value: bool) -> None:
        self._ready = value
        send = getattr(self, "send_processor", None)  # (none before the processors exist)
        if send is not None:
            send.bind_store(self.message_store if value else None)
        pull = getattr(self, "pull_message_processor", None)
        if pull is not None:
            pull.bind_store(self.message_store if value else None)

    def _register_processors(self) -> None:
        s = self.server
        # The processors see the broker through this narrow view (rmq.broker.context), never the
        # controller itself; the assignment is where mypy checks that the controller has it all.
        ctx: BrokerContext = self
        send = self.send_processor = SendMessageProcessor(ctx)
        pull = self.pull_message_processor = PullMessageProcessor(ctx)
        self.pop_service.filter_manager = pull.consumer_filter_manager
        client_manage = ClientManageProcessor(ctx)
        consumer_manage = ConsumerManageProcessor(ctx)
        admin = AdminBrokerProcessor(ctx)

        send_pool = ProcessorPool("send", max_in_flight=256, max_queue=10_000)
        heartbeat_pool = ProcessorPool("heartbeat", max_in_flight=64, max_queue=50_000)
        admin_pool = ProcessorPool("admin", max_in_flight=16, max_queue=1_000)
        # Pull and consumer-manage processors are synchronous: their pool only labels them.
        pull_pool = ProcessorPool("pull", max_in_flight=64, max_queue=100_000)
        consumer_manage_pool = ProcessorPool("consumerManage", max_in_flight=64, max_queue=100_000)

        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            s.register_processor(code, _Gate(self, send), send_pool)
        if (send.fast is not None or pull.fast is not None) and self.acl is None:
            # The plain SEND stored and the plain PULL answered from their frame bytes, before a
            # command is decoded; with ACL every request needs its command checked first
            # (Java's RPCHook doBeforeRequest).
            s.dispatcher.frame_hooks = functools.partial(_frame_hooks, send, pull, send_pool)
        s.register_processor(RequestCode.PULL_MESSAGE, _Gate(self, pull), pull_pool)
        for code in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT):
            s.register_processor(code, _Gate(self, client_manage), heartbeat_pool)
        s.register_processor(
            RequestCode.CHECK_CLIENT_CONFIG,
            _Gate(self, CheckClientConfigProcessor(self.broker_config, pull.consumer_filter_manager)),
            heartbeat_pool,
        )
        for code in (
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            RequestCode.QUERY_CONSUMER_OFFSET,
        ):
            s.register_processor(code, _Gate(self, consumer_manage), consumer_manage_pool)
        # Admin writes wait for a name-server registration; the read-only admin codes (offset
        # lookups consumers use too) get their own pool so a burst of writes cannot queue them.
        admin_query_pool = ProcessorPool("adminQuery", max_in_flight=64, max_queue=10_000)
        for code in admin.codes:
            pool = admin_pool if code in AdminBrokerProcessor.WRITE_CODES else admin_query_pool
            s.register_processor(code, _Gate(self, admin), pool)
        # Store maintenance and metadata dumps (mqadmin deleteSubGroup, cleanExpiredCQ,
        # deleteExpiredCommitLog, queryCq; a slave's sync of offsets and delay progress).
        ops = OpsAdminProcessor(ctx)
        for ops_code in ops.codes:
            s.register_processor(
                ops_code,
                _Gate(self, ops),
                admin_pool if ops_code in OpsAdminProcessor.WRITE_CODES else admin_query_pool,
            )
        port = vip_port(self.broker_config.listen_port)
        if port is not None:
            gated = {code: _Gate(self, admin) for code in admin.codes}
            gated.update({code: _Gate(self, ops) for code in ops.codes})
            self.vip_channel = VipChannel(self.broker_config.listen_host, port, gated, **self._vip_settings)
        # Message semantics, each with its own pool as in Java.
        send_back_pool = ProcessorPool("sendBack", max_in_flight=64, max_queue=10_000)
        end_transaction_pool = ProcessorPool("endTransaction", max_in_flight=64, max_queue=100_000)
        lock_pool = ProcessorPool("rebalanceLock", max_in_flight=16, max_queue=10_000)
        s.register_processor(
            RequestCode.CONSUMER_SEND_MSG_BACK, _Gate(self, ConsumerSendMsgBackProcessor(ctx)), send_back_pool
        )
        s.register_processor(
            RequestCode.END_TRANSACTION, _Gate(self, EndTransactionProcessor(ctx)), end_transaction_pool
        )
        lock = RebalanceLockProcessor(ctx)
        for code in lock.codes:
            s.register_processor(code, _Gate(self, lock), lock_pool)
        # Connections, consumer status and offset resets (they may wait for a client's answer:
        # their own pool, so a slow client cannot hold up the other admin codes).
        conns = ConnsAdminProcessor(ctx)
        conns_pool = ProcessorPool("adminConns", max_in_flight=16, max_queue=1_000)
        for code in ConnsAdminProcessor.CODES:
            s.register_processor(code, _Gate(self, conns), conns_pool)
        # Java registers QueryMessageProcessor with its own executor (queryMessageThreadPoolNums).
        query_pool = ProcessorPool("queryMessage", max_in_flight=16, max_queue=10_000)
        query = QueryMessageProcessor(ctx)
        for code in query.codes:
            s.register_processor(code, _Gate(self, query), query_pool)
        # Request-reply's replies (Java registers ReplyMessageProcessor with replyMessageExecutor,
        # queue replyThreadPoolQueueCapacity 10 000): a push waits for the requester's answer,
        # which costs a coroutine, not a thread, so every admitted reply may wait at once (the
        # processor bounds what one requester holds; a few silent ones cannot take every slot).
        reply = ReplyMessageProcessor(ctx)
        reply_pool = ProcessorPool("reply", max_in_flight=10_000, max_queue=256)
        for code in ReplyMessageProcessor.CODES:
            s.register_processor(code, _Gate(self, reply), reply_pool)
        # POP consumption (Java registers PopMessageProcessor, AckMessageProcessor, ... each
        # with its own executor; one pool here, the held POPs are not in it).
        pop_pool = ProcessorPool("pop", max_in_flight=256, max_queue=10_000)
        for code in PopService.CODES:
            s.register_processor(code, _Gate(self, self.pop_service), pop_pool)
        # Server-side assignment (Java registers QueryAssignmentProcessor with its own
        # loadBalanceExecutor, queue loadBalanceThreadPoolQueueCapacity 100 000).
        assignment = QueryAssignmentProcessor(ctx, self.message_request_mode_manager)
        load_balance_pool = ProcessorPool("loadBalance", max_in_flight=64, max_queue=100_000)
        for code in assignment.codes:
            s.register_processor(code, _Gate(self, assignment), load_balance_pool)
        acl_admin = AclAdminProcessor(ctx)
        for code in acl_admin.codes:
            s.register_processor(code, _Gate(self, acl_admin), admin_pool)
        if self.replicas is not None:
            # the controller's role notices and the admin tool's getBrokerEpoch (controller mode)
            for code in (RequestCode.NOTIFY_BROKER_ROLE_CHANGED, RequestCode.GET_BROKER_EPOCH_CACHE):
                s.register_processor(code, _Gate(self, self.replicas), admin_pool)

    async def start(self) -> None:
        """Bring the broker up (see module docstring). Raises ``OSError`` when the port is
        taken and the store's error when its directory is locked; nothing is left running."""
        if self._started:
            raise RuntimeError("broker already started")
        self._started = True
        self._register_lock = asyncio.Lock()
        for m in (
            self.topic_config_manager,
            self.subscription_group_manager,
            self.consumer_offset_manager,
            self.message_request_mode_manager,
        ):
            m.load()
        self.schedule_service.load()
        self.pop_service.load()
        if self.acl is not None:
            await asyncio.to_thread(self.acl.load)  # a bad plain_acl.yml fails the start
        self._register_processors()
        self.server.add_connection_listener(self._on_connection_event)
        await self.server.start()
        if self.vip_channel is not None:
            await self.vip_channel.start()
        try:
            self._resolve_ha_listen_port()
            if self.replicas is not None:
                # Fenced until the controller gives a role: no writes, no HA port, no route.
                self.replicas.master_role = self.store_config.broker_role
                self.store_config.broker_role = "SLAVE"
            self.message_store = MessageStore(self.store_config, (self.broker_config.broker_ip1, self.server.port))
            self.message_store.ha_listen_host = self.broker_config.listen_host
            self.message_store.controller_mode = self.replicas is not None
            await self.message_store.start()
        except BaseException:
            self.message_store = None
            await self.server.close()
            if self.vip_channel is not None:
                await self.vip_channel.close()
            await self.broker_outer_api.close()
            raise
        self.pull_request_hold_service = PullRequestHoldService(
            self.pull_message_processor,
            self.message_store,
            self.broker_config.long_polling_enable,
            max_per_connection=self.broker_config.max_held_pulls_per_connection,
            max_total=self.broker_config.max_held_pulls_total,
        )
        self.pull_request_hold_service.start()
        hold = self.pull_request_hold_service
        # Told only about queues with held pulls (the dispatcher tests the table's keys).
        self.message_store.add_arrival_listener(hold.notify_message_arriving, watched=hold.pull_request_table)
        self.schedule_service.start()
        # Timer messages: the wheel runs even with timerWheelEnable=false (timers already
        # parked are still delivered; the SEND path refuses new ones, as Java's hook).
        self.timer_message_store = TimerMessageStore(self.message_store)
        await self.timer_message_store.start()
        self.transaction_service.start()
        self.pop_service.start(revive=not self.is_slave)
        self.ready = True
        # Java BrokerController.start registers once before returning: a client that sees the
        # broker up can route to it. Failures are retried by the loop, sooner than a period.
        try:
            registered = await self.register_broker_all()
        except Exception:  # the loop retries
            log.exception("registering with the name servers failed")
            registered = False
        self._spawn(self._register_loop(registered), "register")
        self._spawn(self.config_persister.run(), "persist")
        self._spawn(self._stats_loop(), "stats")
        self._spawn(self._housekeeping_loop(), "housekeep")
        if self.is_slave and self.replicas is None:
            self._slave_sync_task = self._spawn(self.slave_synchronize.run(), "slave-sync")
        if self.replicas is not None:
            self.replicas.start(self._spawn)
        await self.metrics.start()
        await self._start_grpc()
        if self.acl is not None:
            self._spawn(self.acl.watch(), "acl-watch")
        log.info(
            "broker %s (cluster %s) listening on %s, advertised as %s, store %s, role %s",
            self.broker_config.broker_name,
            self.broker_config.broker_cluster_name,
            self.server.address,
            self.broker_addr,
            self.store_config.store_path_root_dir,
            self.store_role,
        )

    async def _start_grpc(self) -> None:
        """The gRPC endpoint when ``grpcServerPort`` is set; without the ``grpc`` extra
        (grpcio, protobuf) one warning and the broker runs without it."""
        if self.broker_config.grpc_server_port == 0:
            return
        try:
            from rmq.broker.grpc.server import GrpcEndpoint
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in ("grpc", "google"):
                raise
            log.warning(
                "grpcServerPort=%d but the gRPC endpoint needs the grpc extra (pip install 'rmq[grpc]'): %s; "
                "serving without it",
                self.broker_config.grpc_server_port,
                e,
            )
            return
        self.grpc = GrpcEndpoint(self, self._tls)
        await self.grpc.start()

    async def shutdown(self) -> None:
        """Stop everything cleanly (idempotent). Each step is guarded: whatever one of them
        raises is logged and the next still runs, so the store is always shut down (flushed,
        checkpointed, abort marker removed)."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        self.ready = False
        bc = self.broker_config
        steps: list[tuple[str, Callable[[], object]]] = []  # each may return an awaitable
        if self.message_store is not None and bc.namesrv_addr_list:
            steps.append(
                (
                    "unregister",
                    lambda: self.broker_outer_api.unregister_broker_all(
                        bc.broker_cluster_name, self.broker_addr, bc.broker_name, bc.broker_id, timeout=2.0
                    ),
                )
            )
        if self.replicas is not None:
            steps.append(("controller client", self.replicas.close))
        steps.append(("background tasks", self._tasks.close))
        if self.message_store is not None:
            steps.append(("transaction service", self.transaction_service.stop))
            steps.append(("schedule service", self.schedule_service.stop))  # persists the delay progress
            steps.append(("pop service", self.pop_service.stop))
        if self.timer_message_store is not None:
            steps.append(("timer store", self.timer_message_store.stop))  # writes the timer checkpoint
        if self.pull_request_hold_service is not None:
            steps.append(("pull hold service", self.pull_request_hold_service.stop))
        if self.grpc is not None:
            steps.append(("gRPC endpoint", self.grpc.close))
        steps.append(("metrics endpoint", self.metrics.close))
        steps.append(("server", self.server.close))
        if self.pull_message_processor is not None:
            steps.append(("SQL92 compiler", self.pull_message_processor.consumer_filter_manager.close))
        if self.vip_channel is not None:
            steps.append(("VIP channel", self.vip_channel.close))
        steps.append(("config tables", self.config_persister.flush_all))
        if self.message_store is not None:
            steps.append(("store", self.message_store.shutdown))
        steps.append(("name server client", self.broker_outer_api.close))
        for what, step in steps:
            try:
                result = step()
                if hasattr(result, "__await__"):
                    await result
            except Exception:  # the remaining steps must run
                log.exception("broker shutdown: %s failed; continuing", what)
        log.info("broker %s stopped", bc.broker_name)

    async def __aenter__(self) -> BrokerController:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro, f"broker-{name}")

    # -- background tasks -----------------------------------------------------------------

    async def _register_loop(self, registered: bool = False) -> None:
        """Register at start, then every ``registerNameServerPeriod`` (bounded 10 s–60 s as Java).

        A round in which some name server could not be reached is retried sooner (1 s, 2 s,
        4 s, … up to the period), so a broker started before its name server is routed within
        seconds rather than after a whole period.
        """
        period = min(max(self.broker_config.register_name_server_period, 10_000), 60_000) / 1000.0
        backoff = 1.0
        await asyncio.sleep(period if registered else backoff)
        while True:
            ok = False
            try:
                ok = await self.register_broker_all(periodic=True)
            except Exception:  # next round retries
                log.exception("registering with the name servers failed")
            if ok:
                backoff = 1.0
                await asyncio.sleep(period)
            else:
                await asyncio.sleep(min(backoff, period))
                backoff *= 2

    async def _stats_loop(self) -> None:
        """The statistics samples (rmq.broker.stats): ``tick`` takes whichever is due."""
        while True:
            await asyncio.sleep(self.stats.tick_period)
            self.stats.tick()

    async def _housekeeping_loop(self) -> None:
        while True:
            await asyncio.sleep(min(HOUSEKEEPING_INTERVAL, self.broker_config.channel_expired_seconds))
            self.scan_not_active_channels()
            self.rebalance_lock_manager.scan_expired()
            self.pending_resets.expire()

    def scan_not_active_channels(self) -> None:
        """Drop consumers and producers silent for 120 s and close their connections."""
        stale = self.consumer_manager.scan_not_active_channel() + self.producer_manager.scan_not_active_channel()
        for conn in set(stale):
            log.warning("client connection %s expired (no heartbeat), closing", getattr(conn, "remote_addr", "?"))
            if self.pull_request_hold_service is not None:
                self.pull_request_hold_service.on_connection_closed(conn)
            self.pop_service.on_connection_closed(conn)
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - an expired client: closing it is best effort
                pass

    # -- name-server registration ---------------------------------------------------------

    async def register_broker_all(self, timeout: float | None = None, periodic: bool = False) -> bool:
        """REGISTER_BROKER with every name server now (serialized, so tables arrive in order).

        ``periodic`` (the ``registerNameServerPeriod`` round; default False): unless
        ``forceRegister`` or this is a slave, first ask each name server for the version it
        holds (Java ``BrokerController.registerBrokerAll`` → ``needRegister``, QUERY_DATA_VERSION)
        and send the table only when one lacks it; the question itself keeps the broker alive
        there. Returns True when every name server accepted it (or there are none).
        """
        if not self.broker_config.namesrv_addr_list or self._register_lock is None or self._stopped:
            return True
        if self.replicas is not None and not self.replicas.running:
            return True  # controller mode: no route before the controller gave a role
        async with self._register_lock:
            return await self._register_locked(timeout, periodic)

    async def _register_locked(self, timeout: float | None = None, periodic: bool = False) -> bool:
        bc = self.broker_config
        if self._stopped:
            return True
        timeout = timeout if timeout is not None else bc.register_broker_timeout_mills / 1000.0
        if periodic and not bc.force_register and bc.broker_id == 0:
            stale = await self.broker_outer_api.need_register(
                bc.broker_cluster_name,
                self.broker_addr,
                bc.broker_name,
                bc.broker_id,
                self.topic_config_manager.data_version.to_json(),
                timeout,
            )
            self.register_skipped += not stale
            if not stale:
                return True
        wrapper = self.topic_config_manager.serialize_wrapper()
        if not PermName.is_writeable(bc.broker_permission) or not PermName.is_readable(bc.broker_permission):
            # Java: a broker without read/write perm advertises every topic with its perm.
            for tc in wrapper["topicConfigTable"].values():
                tc["perm"] &= bc.broker_permission
        results = await self.broker_outer_api.register_broker_all(
            bc.broker_cluster_name,
            self.broker_addr,
            bc.broker_name,
            bc.broker_id,
            self.ha_server_addr,
            wrapper,
            timeout,
            bc.compressed_register,
        )
        self._on_register_answer()
        return all(ok for _, ok in results)

    # -- replication (rmq.store.ha) ---------------------------------------------------------------

    def _resolve_ha_listen_port(self) -> None:
        """haListenPort -1 (the default): listenPort + 1 as Java's BrokerStartup sets it, or
        an ephemeral port while the broker's own port was ephemeral."""
        sc = self.store_config
        if sc.ha_listen_port < 0:
            sc.ha_listen_port = self.server.port + 1 if self.broker_config.listen_port else 0
        if sc.broker_role != "SLAVE" and sc.ha_listen_port and sc.ha_listen_port == self.server.port:
            raise ValueError(
                f"haListenPort {sc.ha_listen_port} is the broker's listenPort (allowed: another port "
                f"1..65535, 0 for an ephemeral one, -1 for listenPort + 1)"
            )

    @property
    def ha_server_addr(self) -> str:
        """The HA address this broker registers (Java getHAServerAddr: brokerIP2:haListenPort)."""
        store = self.message_store
        port = store.ha.port if store is not None and store.ha is not None else self.server.port + 1
        return f"{self.broker_config.broker_ip2}:{port}"

    def on_role_changed(self) -> None:
        """Controller mode: the store's role changed (rmq.broker.replicas): a slave copies its
        master's metadata, a master does not (Java ``handleSlaveSynchronize``); a master revives
        POP checkpoints, a slave does not (Java ``changeSpecialServiceStatus``)."""
        task = self._slave_sync_task
        if self.is_slave:
            self.pop_service.stop_revive()
            if task is None or task.done():
                self._slave_sync_task = self._spawn(self.slave_synchronize.run(), "slave-sync")
        else:
            self.pop_service.start_revive()
            if task is not None:
                task.cancel()
                self._slave_sync_task = None
                self.slave_synchronize.set_master_addr(None)

    def _on_register_answer(self) -> None:
        """A slave follows the master's HA address from the name server's answer unless
        haMasterAddress is configured (Java BrokerController.registerBrokerAll)."""
        store = self.message_store
        if store is None or not self.is_slave or self.store_config.ha_master_address:
            return
        addr = self.broker_outer_api.ha_server_addr
        if addr:
            store.update_ha_master_address(addr)

    def _queue_registration(self) -> asyncio.Task[Any]:
        """A registration that starts after the one running now (if any), so it carries every
        change made before this call. Calls made while it still waits share it: a burst of N
        topic or group creations costs one or two registrations, not N (each serializes the
        whole topic table)."""
        pending = self._register_pending
        if pending is not None and not pending.done():
            return pending
        task = self._register_pending = self._spawn(self._queued_registration(), "register-now")
        return task

    async def _queued_registration(self) -> bool:
        assert self._register_lock is not None
        loop = asyncio.get_running_loop()
        async with self._register_lock:
            # At most one change-triggered registration per REGISTER_MIN_GAP: each carries the
            # whole topic table, and changes arriving meanwhile join this one.
            delay = self._register_not_before - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if self._register_pending is asyncio.current_task():
                self._register_pending = None  # started: later changes need a new one
            try:
                return await self._register_locked()
            finally:
                self._register_not_before = loop.time() + REGISTER_MIN_GAP

    async def register_broker_now(self, max_wait: float = 2.5) -> None:
        """Queue a registration and wait for it at most ``max_wait`` seconds.

        Used on request paths (heartbeat creating ``%RETRY%<group>``, topic admin): the route
        should exist before the reply when the name servers are healthy, but a slow or
        unreachable name server must not delay the reply past the client's timeout (the C++
        client drops a connection whose heartbeat is unanswered for 3 s). The registration
        itself continues in the background.
        """
        if not self.ready or not self.broker_config.namesrv_addr_list or self._register_lock is None:
            return
        task = self._queue_registration()
        await asyncio.wait({task}, timeout=max_wait)

    async def register_topics_now(self, topics: Iterable[str], max_wait: float = 2.5) -> None:
        """Register only ``topics`` (just created or updated) and wait for it at most
        ``max_wait`` seconds (Java ``BrokerController.registerIncrementBrokerData``).

        Java's name server (``RouteInfoManager.registerBroker``) and ours merge such a table
        into the broker's routes; a full table is recognised by the broker's own
        ``brokerName`` topic, which every broker lists (``TopicConfigManager``), so ours
        still drops deleted topics on a full registration. Creations coalesce: those made
        while a registration is on the wire share the next one, so topics created one request
        at a time cost one name-server round trip each at most, and a burst fewer. No
        ``REGISTER_MIN_GAP`` applies: an increment is small whatever the table's size.
        """
        if not self.ready or not self.broker_config.namesrv_addr_list or self._register_lock is None:
            return
        self._changed_topics.update(topics)
        task = self._increment_pending
        if task is None or task.done():
            task = self._increment_pending = self._spawn(self._incremental_registration(), "register-increment")
        await asyncio.wait({task}, timeout=max_wait)

    async def _incremental_registration(self) -> bool:
        assert self._register_lock is not None
        pending = self._register_pending
        if pending is not None and not pending.done():
            # A full registration is queued, not started (a topic auto-created by a send, a
            # deletion): it will carry the topics changed so far, and an increment with the
            # newer version would make the name server skip it. Topics created after this point
            # still go in an increment below.
            self._changed_topics.clear()
            await asyncio.wait({pending})
        async with self._register_lock:
            if self._increment_pending is asyncio.current_task():
                self._increment_pending = None  # started: later changes need a new one
            changed, self._changed_topics = self._changed_topics, set()
            if self._stopped:
                return True
            bc = self.broker_config
            table = self.topic_config_manager.topic_config_table
            configs = {name: table[name].to_json() for name in sorted(changed) if name in table}
            if not configs:  # deleted meanwhile: the full registration of the delete covers it
                return True
            if not PermName.is_writeable(bc.broker_permission) or not PermName.is_readable(bc.broker_permission):
                for tc in configs.values():
                    tc["perm"] &= bc.broker_permission
            # The name server records the version an increment carries (Java's and ours) and
            # skips a full table of that version, as it keeps a wiped write permission.
            wrapper = {"topicConfigTable": configs, "dataVersion": self.topic_config_manager.data_version.to_json()}
            results = await self.broker_outer_api.register_broker_all(
                bc.broker_cluster_name,
                self.broker_addr,
                bc.broker_name,
                bc.broker_id,
                self.ha_server_addr,
                wrapper,
                bc.register_broker_timeout_mills / 1000.0,
                bc.compressed_register,
            )
            self._on_register_answer()
            ok = all(ok for _, ok in results)
            if not ok:
                # a name server missed it: the next full registration (queued now) carries them
                self._queue_registration()
            return ok

    def register_broker_soon(self, topics: Iterable[str] = ()) -> None:
        """Register soon, without waiting: ``topics`` (just auto-created by a send, a send-back,
        POP or the transaction check) as an increment, coalesced with other creations as
        :meth:`register_topics_now`'s; without topics, a full registration (coalesced). Java
        re-registers the whole table here (``TopicConfigManager.createTopicInSendMessageMethod``
        → ``registerBrokerAll``): at 10,000 topics that is 1.5 MB and a quarter second of this
        loop per auto-created topic, where the increment is a few hundred bytes."""
        if not self.ready or not self.broker_config.namesrv_addr_list or self._register_lock is None:
            return
        topics = tuple(topics)
        if not topics:
            self._queue_registration()
            return
        self._changed_topics.update(topics)
        task = self._increment_pending
        if task is None or task.done():
            self._increment_pending = self._spawn(self._incremental_registration(), "register-increment")

    # -- connections ----------------------------------------------------------------------

    def _on_connection_event(self, event: Any, conn: Connection, exc: Any = None) -> None:
        if event in (ConnectionEvent.CLOSE, ConnectionEvent.EXCEPTION, ConnectionEvent.IDLE):
            self.consumer_manager.do_channel_close_event(conn, event.name.lower())
            self.producer_manager.do_channel_close_event(conn)
            if self.pull_request_hold_service is not None:
                self.pull_request_hold_service.on_connection_closed(conn)

    def _notify_consumer_ids_changed(self, group: str, conns: list[Any]) -> None:
        """Tell the remaining members of ``group`` to rebalance (code 40, oneway)."""
        for conn in conns:
            if getattr(conn, "closed", False):
                continue
            try:
                conn.invoke_oneway(
                    RemotingCommand.request(
                        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                        NotifyConsumerIdsChangedRequestHeader(consumer_group=group),
                    )
                )
            except Exception as e:  # noqa: BLE001 - a closing member simply misses it
                log.debug("notify consumer ids changed to %s failed: %s", getattr(conn, "remote_addr", "?"), e)

    def release_when_written(self, conn: Connection, result: Any) -> None:
        """Release a GetMessageResult once the connection no longer references its views.

        The reply's body parts are zero-copy views of mapped CommitLog files; the transport
        may keep the part that did not fit in the socket buffer, so the holds are dropped
        only when the connection says everything written so far has left (or it closed).
        """
        conn.when_written(result.release)
