"""The broker as its request processors and services see it: a narrow context, not the controller.

Java hands every processor the whole ``BrokerController``. Here the processors
(``rmq.broker.processors``) and the services they call (schedule, transaction, slave sync,
configuration, metrics) are typed against the ``typing.Protocol`` classes below, which list what
they use and nothing else; ``BrokerController`` satisfies them structurally (mypy checks the
assignment ``ctx: BrokerContext = self`` in ``BrokerController._register_processors``, which
then hands ``ctx`` to every processor). No module of ``rmq.broker`` other than the controller
and the package's ``__init__`` imports ``rmq.broker.controller``
(``tests/common/test_common_layering.py`` checks it), so a processor cannot reach the server,
the background tasks or the registration locks.

``BrokerContext`` is grouped in blocks (identity and configuration, store, metadata tables,
clients, services, registration). A feature that needs one more thing of the broker adds one
read-only property to the block it belongs to (or a block of its own), and the controller
already has it, or gets it, under the same name. Where a processor needs only a couple of
things it takes a narrower protocol below (``EndTransactionContext``, ``RebalanceLockContext``,
``AclAdminContext``, ``ScheduleContext``) or the objects themselves.

Every member is a read-only property: a processor reads the broker's parts, it does not
replace them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rmq.broker.acl import PlainPermissionManager
    from rmq.broker.config_update import BrokerConfiguration
    from rmq.broker.long_polling import PullRequestHoldService
    from rmq.broker.managers.consumer import ConsumerManager, ProducerManager
    from rmq.broker.managers.consumer_offset import ConsumerOffsetManager
    from rmq.broker.managers.subscription_group import SubscriptionGroupManager
    from rmq.broker.managers.topic_config import TopicConfigManager
    from rmq.broker.namesrv_api import BrokerOuterAPI
    from rmq.broker.offset_reset import PendingResets
    from rmq.broker.pop import PopService
    from rmq.broker.processors.send import SendMessageProcessor
    from rmq.broker.rebalance_lock import RebalanceLockManager
    from rmq.broker.replicas import ReplicasManager
    from rmq.broker.schedule import ScheduleMessageService
    from rmq.broker.slave_sync import SlaveSynchronize
    from rmq.broker.stats import BrokerStatsManager
    from rmq.broker.transaction import TransactionalMessageService
    from rmq.config import BrokerConfig
    from rmq.remoting.connection import Connection
    from rmq.store import MessageStore, StoreConfig
    from rmq.store.timer import TimerMessageStore

__all__ = [
    "AclAdminContext",
    "BrokerContext",
    "EndTransactionContext",
    "GrpcContext",
    "RebalanceLockContext",
    "ReplicasContext",
    "ScheduleContext",
    "TimerContext",
]


class BrokerContext(Protocol):
    """What the broker's processors and services use of the broker (see the module docstring)."""

    # -- identity and configuration ----------------------------------------------------------

    @property
    def broker_config(self) -> BrokerConfig:
        """The live ``BrokerConfig`` (updateBrokerConfig changes some fields in place)."""
        ...

    @property
    def store_config(self) -> StoreConfig: ...

    @property
    def config_dir(self) -> str:
        """``<storePathRootDir>/config``: the persisted tables."""
        ...

    @property
    def broker_addr(self) -> str:
        """The advertised ``ip:port``."""
        ...

    @property
    def port(self) -> int:
        """The bound listen port."""
        ...

    @property
    def store_role(self) -> str:
        """``ASYNC_MASTER``, ``SYNC_MASTER`` or ``SLAVE``."""
        ...

    @property
    def is_slave(self) -> bool: ...

    # -- store ----------------------------------------------------------------------------------

    @property
    def message_store(self) -> MessageStore | None:
        """The store, None before ``start`` (metrics and housekeeping test it)."""
        ...

    @property
    def started_store(self) -> MessageStore:
        """The store for request handlers; raises ``RuntimeError`` before it started."""
        ...

    def release_when_written(self, conn: Connection, result: Any) -> None:
        """Release a ``GetMessageResult`` once ``conn`` wrote its zero-copy views."""
        ...

    # -- metadata tables ----------------------------------------------------------------------

    @property
    def topic_config_manager(self) -> TopicConfigManager: ...

    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...

    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...

    # -- clients --------------------------------------------------------------------------------

    @property
    def consumer_manager(self) -> ConsumerManager: ...

    @property
    def producer_manager(self) -> ProducerManager: ...

    @property
    def pending_resets(self) -> PendingResets:
        """Offset resets waiting for the consumers' next pull (``INVOKE_BROKER_TO_RESET_OFFSET``)."""
        ...

    # -- services -------------------------------------------------------------------------------

    @property
    def stats(self) -> BrokerStatsManager: ...

    @property
    def configuration(self) -> BrokerConfiguration:
        """GET/UPDATE_BROKER_CONFIG's properties and their live updates."""
        ...

    @property
    def schedule_service(self) -> ScheduleMessageService: ...

    @property
    def transaction_service(self) -> TransactionalMessageService: ...

    @property
    def rebalance_lock_manager(self) -> RebalanceLockManager: ...

    @property
    def timer_message_store(self) -> TimerMessageStore | None:
        """Timer messages' wheel (``rmq.store.timer``), None before ``start``."""
        ...

    @property
    def pull_request_hold_service(self) -> PullRequestHoldService | None:
        """Held pulls (long polling), None before ``start``."""
        ...

    @property
    def slave_synchronize(self) -> SlaveSynchronize: ...

    @property
    def replicas(self) -> ReplicasManager | None:
        """Controller mode's registration and role (rmq.broker.replicas); None otherwise."""
        ...

    @property
    def pop_service(self) -> PopService:
        """RocketMQ 5 POP consumption (its runtime-info lines)."""
        ...

    @property
    def broker_outer_api(self) -> BrokerOuterAPI:
        """The name-server client (a slave's master address, slave sync's requests)."""
        ...

    @property
    def acl(self) -> PlainPermissionManager | None:
        """ACL 1.0's accounts with ``aclEnable``, else None."""
        ...

    # -- name-server registration ---------------------------------------------------------------

    def register_broker_soon(self, topics: Iterable[str] = ()) -> None:
        """Register ``topics`` (just created) as an increment, or without topics the whole
        table, coalesced; return at once."""
        ...

    async def register_broker_now(self, max_wait: float = 2.5) -> None:
        """Queue a full registration and wait for it at most ``max_wait`` seconds."""
        ...

    async def register_topics_now(self, topics: Iterable[str], max_wait: float = 2.5) -> None:
        """Register only ``topics`` (an increment) and wait for it at most ``max_wait`` seconds."""
        ...


class GrpcContext(BrokerContext, Protocol):
    """What the gRPC endpoint (``rmq.broker.grpc``, Java's proxy in local mode) uses beyond the
    broker context: whether the broker serves, and the SEND processor it hands sends to (the
    POP service is the context's)."""

    @property
    def ready(self) -> bool: ...

    @property
    def send_processor(self) -> SendMessageProcessor: ...


class EndTransactionContext(Protocol):
    """What ``EndTransactionProcessor`` uses: the role and the transaction service."""

    @property
    def is_slave(self) -> bool: ...

    @property
    def transaction_service(self) -> TransactionalMessageService: ...


class RebalanceLockContext(Protocol):
    """What ``RebalanceLockProcessor`` uses: the config (its batch bound) and the lock table."""

    @property
    def broker_config(self) -> BrokerConfig: ...

    @property
    def rebalance_lock_manager(self) -> RebalanceLockManager: ...


class AclAdminContext(Protocol):
    """What ``AclAdminProcessor`` uses: the accounts, the config and the advertised address."""

    @property
    def acl(self) -> PlainPermissionManager | None: ...

    @property
    def broker_config(self) -> BrokerConfig: ...

    @property
    def broker_addr(self) -> str: ...


class ReplicasContext(Protocol):
    """What ``ReplicasManager`` (controller mode, rmq.broker.replicas) uses: the configs it
    changes on a role change (``brokerId``), the store, the slave's metadata copy, the role
    reaction and the name-server registration."""

    @property
    def broker_config(self) -> BrokerConfig: ...

    @property
    def store_config(self) -> StoreConfig: ...

    @property
    def message_store(self) -> MessageStore | None: ...

    @property
    def started_store(self) -> MessageStore: ...

    @property
    def broker_addr(self) -> str: ...

    @property
    def slave_synchronize(self) -> SlaveSynchronize: ...

    @property
    def topic_config_manager(self) -> TopicConfigManager: ...

    def on_role_changed(self) -> None: ...

    async def register_broker_all(self, timeout: float | None = None) -> bool: ...


class ScheduleContext(Protocol):
    """What ``ScheduleMessageService`` uses: the delay levels' config, its table's directory and
    the store it reads and writes."""

    @property
    def store_config(self) -> StoreConfig: ...

    @property
    def config_dir(self) -> str: ...

    @property
    def started_store(self) -> MessageStore: ...


class TimerContext(Protocol):
    """What the SEND path's timer rewrite (``rmq.broker.timer``) uses: the ``timer*`` settings
    and the wheel (its flow control)."""

    @property
    def store_config(self) -> StoreConfig: ...

    @property
    def timer_message_store(self) -> TimerMessageStore | None: ...
