r"""Daemon configuration: the broker's and name server's settings, and a RocketMQ-style loader.

RocketMQ configures its daemons with Java ``.properties`` files whose keys are the camelCase
field names of ``BrokerConfig``, ``NettyServerConfig`` and ``MessageStoreConfig``
(``brokerName=broker-a``, ``listenPort=10911``, ``flushDiskType=SYNC_FLUSH``). We keep those
key names so an existing ``broker.conf`` works unchanged, and map them onto snake_case
dataclass fields: a key matches a field when both agree after dropping underscores and case
(``brokerIP1`` → ``broker_ip1``, ``mappedFileSizeCommitLog`` → ``mapped_file_size_commitlog``).

Loading is two steps, so the CLI can layer ``--key=value`` overrides on top of a file::

    props = load_properties("broker.conf")          # dict[str, str], in file order
    props.update(parse_overrides(["--flushDiskType=SYNC_FLUSH"]))
    warnings = apply_properties(props, broker_config, store_config)

``apply_properties`` converts each value to the field's type and checks it against the range
the field declares (:func:`rmq.common.settings.setting`); it raises :class:`ConfigError` (naming
the property, the value and the allowed values) on a bad value, and on a key that matches no
field, with a "did you mean" suggestion. With ``lenientConfig=true`` (a property, or the CLI's
``--lenient-config``) unknown keys only come back as warning strings, as in Java.
:func:`check_config` checks every field of the finished objects, defaults and CLI flags
included, so a daemon never starts with a value outside its range.

Files are read as Java reads them (``java.util.Properties.load``, through ``javaproperties``):
``\:`` and ``\=`` escapes, ``\uXXXX``, and backslash-continued lines are decoded.

This module sits beside the layers rather than in one: it imports only ``rmq.common``, and
takes the store's ``StoreConfig`` as just another dataclass target.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass

from rmq.common.constants import TopicValidator
from rmq.common.files import atomic_write

# The exception and the properties codec live in rmq.common.properties (what the TLS settings,
# the ACL files and the CLI's logging options need, without this module's config classes).
from rmq.common.properties import ConfigError as ConfigError
from rmq.common.properties import format_properties as format_properties
from rmq.common.properties import load_properties as load_properties
from rmq.common.properties import parse_properties as parse_properties
from rmq.common.properties import property_text as property_text
from rmq.common.settings import JAVA_INT, Allowed, allowed_of, setting

__all__ = [
    "BrokerConfig",
    "ConfigError",
    "NamesrvConfig",
    "apply_properties",
    "check_config",
    "check_controller_mode",
    "format_properties",
    "load_properties",
    "parse_overrides",
    "parse_properties",
    "property_text",
]


@dataclass(slots=True)
class NamesrvConfig:
    """Name server settings (Java ``NamesrvConfig`` + ``NettyServerConfig``).

    Attributes:
        listen_host: address to bind; ``127.0.0.1`` unless told otherwise.
        listen_port: TCP port, 9876 (Java's default).
        broker_channel_expired_seconds: a broker that has not registered for this long is
            dropped from every route (Java ``BROKER_CHANNEL_EXPIRED_TIME``, 120 s; 60..86 400).
        scan_not_active_broker_interval: seconds between expiry sweeps (Java 10 s; 1..86 400).
        idle_timeout: connections with no traffic for this long are closed (120 s).
        max_brokers: broker addresses registered at once; past it REGISTER_BROKER is refused
            (2048).
        max_topics_per_broker: topics one registration may carry (100 000).
        max_topics: distinct topics over all brokers (500 000).
        max_kv_namespaces / max_kv_entries_per_namespace: bounds of the KV config table
            (256 namespaces of 10 000 keys); past them PUT_KV_CONFIG is refused.
        max_kv_key_chars / max_kv_value_chars: longest namespace or key (1024) and value
            (65 536) PUT_KV_CONFIG accepts.
        kv_config_path: the KV config file, Java's ``kvConfig.json`` format (Java
            ``kvConfigPath``); "" (default) keeps the table in memory only.
        config_store_path: where UPDATE_NAMESRV_CONFIG persists an accepted change (Java
            ``configStorePath``); "" (default) = ``rmq namesrv -c FILE``'s FILE, else nowhere.
        acl_enable: refuse the write codes (registrations, KV writes, config updates, write
            permission, topic deletion) unless signed by an admin account of
            ``<rocketmqHome>/conf/plain_acl.yml`` or sent from a white address (False).
        rocketmq_home: where the accounts are (default ``$ROCKETMQ_HOME``); needed with
            ``acl_enable``.
        acl_watch_interval_ms: ms between two looks at the accounts files (500).
        order_message_enable: GET_ROUTEINFO_BY_TOPIC answers carry the topic's
            ``ORDER_TOPIC_CONFIG`` KV entry (``updateOrderConf``) as ``orderTopicConf`` (Java
            ``orderMessageEnable``); False (default) = never. Changeable at runtime.
    """

    listen_host: str = "127.0.0.1"
    listen_port: int = setting(9876, lo=0, hi=65535)
    # Bounded below so neither the config file nor UPDATE_NAMESRV_CONFIG can break routing: an
    # expiry shorter than a broker's registration period drops live brokers between two
    # registrations (Java brokers register every 30 s by default, never less often than every
    # 60 s: BrokerController clamps registerNameServerPeriod to 10..60 s), and a scan more
    # often than every second only burns the loop.
    broker_channel_expired_seconds: float = setting(120.0, lo=60.0, hi=86_400.0, unit="s")
    scan_not_active_broker_interval: float = setting(10.0, lo=1.0, hi=86_400.0, unit="s")
    idle_timeout: float = setting(120.0, lo=0.001, hi=86_400.0, unit="s")
    max_brokers: int = setting(2048, lo=1, hi=1_000_000)
    max_topics_per_broker: int = setting(100_000, lo=1, hi=10_000_000)
    max_topics: int = setting(500_000, lo=1, hi=10_000_000)
    max_kv_namespaces: int = setting(256, lo=1, hi=1_000_000)
    max_kv_entries_per_namespace: int = setting(10_000, lo=1, hi=10_000_000)
    max_kv_key_chars: int = setting(1024, lo=1, hi=65_535)
    max_kv_value_chars: int = setting(65_536, lo=1, hi=16 * 1024 * 1024)
    kv_config_path: str = ""
    config_store_path: str = ""
    # Not in Java: guard the write codes with the broker's ACL accounts (rmq.namesrv.acl). Off
    # by default: Java 4.9.8's brokers and tools never sign what they send a name server.
    acl_enable: bool = setting(False, choices=(False, True))
    rocketmq_home: str | None = None
    acl_watch_interval_ms: int = setting(500, lo=50, hi=60_000, unit="ms")
    # Java NamesrvConfig.orderMessageEnable: off by default, so an order conf left in the KV
    # table (say for 8 queues of a topic since recreated with 4) cannot send producers to
    # queues that do not exist unless the operator asked for order confs.
    order_message_enable: bool = setting(False, choices=(False, True))


@dataclass(slots=True)
class BrokerConfig:
    """Broker settings, named after Java ``BrokerConfig`` (plus ``listenPort`` from Netty's).

    Store settings (``storePathRootDir``, ``flushDiskType``, ``brokerRole``, …) live in
    ``rmq.store.StoreConfig``; the same properties file fills both.

    Each numeric field declares its allowed values with :func:`rmq.common.settings.setting`
    (``my_field: int = setting(10, lo=1, hi=100)``); a plain default works too and accepts any
    value of a Java ``long`` (floats: any finite number).

    Attributes:
        broker_cluster_name: ``DefaultCluster``.
        broker_name: ``broker-a`` (Java uses the host name; a fixed name keeps routes stable).
        broker_id: 0 = master, anything else a slave.
        broker_ip1: the address advertised to name servers and written into every message's
            STOREHOST (hence into every offsetMsgId); ``127.0.0.1`` by default.
        listen_host: address to bind; ``127.0.0.1`` unless told otherwise.
        listen_port: TCP port, 10911.
        namesrv_addr: ``host:port`` list separated by ``;`` (Java's format); ``None`` = none.
        lenient_config: unknown property names are warned about instead of stopping the
            start (False; ``--lenient-config`` on the command line sets it).
        broker_permission: 6 = read + write, 4 read only, 2 write only (``PermName``).
        default_topic_queue_nums: queues of TBW102, hence the cap for auto-created topics (8,
            1..1024).
        auto_create_topic_enable: create unknown topics from TBW102 on send (True).
        auto_create_subscription_group: create unknown consumer groups on use (True).
        long_polling_enable: hold suspended pulls until a message arrives (True).
        short_polling_time_mills: hold time when long polling is off (1000 ms).
        notify_consumer_ids_changed_enable: push code 40 on membership changes (True).
        register_name_server_period: ms between registrations (30 000).
        register_broker_timeout_mills: timeout of one registration call (6000 ms).
        force_register: the periodic registration sends the whole topic table even when every
            name server already has its dataVersion (False; Java's default is True). False asks
            first with QUERY_DATA_VERSION (Java ``BrokerOuterAPI.needRegister``), which also
            keeps the broker alive there, and sends the table only to a name server that lacks
            it: at 10,000 topics a table is about 1.5 MB every 30 s. A slave always registers
            (the answer carries its master's HA address).
        compressed_register: send REGISTER_BROKER bodies deflated in Java's compressed format
            (``RegisterBrokerBody.encode(true)``: dataVersion, then one ``name read write perm
            filterType`` line per topic; topicSysFlag and order are not carried, as in Java)
            (False, as Java).
        flush_consumer_offset_interval: ms between consumer-offset persists (5000).
        channel_expired_seconds: a client that has not sent a heartbeat for this long is
            dropped (Java 120 s).
        idle_timeout: connections with no traffic for this long are closed (120 s).
        slave_read_enable: a master suggests consumers pull from its slave when they read from
            disk, a slave suggests they stay (False: every broker suggests the master; a slave
            still answers the pulls it gets, as Java 4.9.8's does).
        slave_sync_interval_ms: how often a SLAVE copies its master's topic config, consumer
            offsets, delay offsets and subscription groups (10 000, Java's fixed period;
            100..600 000).
        enable_property_filter: consumers may filter by SQL92 expressions on message
            properties (False, as Java).
        filter_cache_size: compiled SQL92 filters kept, one per expression text (4096,
            16..1 000 000); past it the least recently used goes.
        cluster_topic_enable / broker_topic_enable: the system topics named after the cluster
            and the broker are readable and writable (True).
        max_stats_items: keys (topics, topic@group pairs) per runtime-statistics set (100 000);
            past it a new key is not counted. Items idle for 25 h are dropped.
        stats_sample_interval_ms: the "10 s" statistics sampling tick (10 000; 10..10 000, a
            shorter one only for tests: the 1 s, 10 min and 1 h ticks scale with it).
        broker_config_path: the properties file UPDATE_BROKER_CONFIG persists to (the ``-c``
            file; default ``<storePathRootDir>/config/broker.properties``).
        trace_topic_enable / msg_trace_topic_name: create the message-trace topic.
        store_reply_message_enable: a request-reply reply is also stored in the cluster's
            ``<cluster>_REPLY_TOPIC`` as Java does (True).
        max_reply_pushes_per_client: replies being pushed to one requesting client at a time
            (64); past it a reply is refused with SYSTEM_ERROR, so a requester that does not
            answer its pushes holds only its own replies.
        region_id: returned as ``MSG_REGION`` in SEND replies (``DefaultRegion``).
        trace_on: returned as ``TRACE_ON`` in SEND replies (True).
        send_fast_path: store plain SENDs in one Cython call, read straight from their frame
            bytes (True; False decodes every SEND into a command and runs it through the
            Python processor: for comparisons).
        pull_fast_path: answer plain pulls (a TAG subscription, records in the queue) in one
            Cython call straight from their frame bytes (True; False runs every pull through
            the Python processor: for comparisons).
        transaction_time_out: ms before an unresolved half message is checked back (6000).
        transaction_check_interval: ms between transaction check runs (60 000).
        metrics_port: the Prometheus ``/metrics`` HTTP port, bound on ``metrics_host`` (5557 as
            rocketmq-exporter's; 0 = no endpoint; a port already taken is one warning and the
            broker runs without it).
        metrics_host: the address ``/metrics`` binds; "" (default) = ``listen_host``.
        grpc_server_port: the RocketMQ 5 gRPC endpoint's port (``apache.rocketmq.v2``, for the
            5.x clients; 0 = off, the default of ``rmq broker``; ``rmq standalone`` serves 8081,
            Java's proxy default; a port already taken is one warning and the broker runs
            without it). Needs the ``grpc`` extra (grpcio, protobuf).
        grpc_server_host: the address the gRPC endpoint binds; "" (default) = ``listen_host``.
        grpc_max_concurrent_streams: RPCs one gRPC connection may have open at once (HTTP/2
            ``MAX_CONCURRENT_STREAMS``, 256); past it the client waits for a stream.
        grpc_max_message_size: the largest gRPC request or response (8 MiB); a larger one is
            refused with RESOURCE_EXHAUSTED. Bodies are held to ``maxMessageSize`` as well.
        grpc_max_telemetry_sessions_per_client: Telemetry streams one client id may hold open (8);
            one more is answered TOO_MANY_REQUESTS.
        grpc_max_clients: 5.x clients whose settings the broker keeps at once (100 000); a new
            client past it works on the defaults (settings not stored, one warning).
        grpc_telemetry_queue_size: commands (settings answers, transaction checks) queued for one
            Telemetry stream whose client does not read (1024); past it a command is dropped
            (a transaction check is sent again next round) with one rate-limited warning.
        namesrv_access_key / namesrv_secret_key: the keys the broker signs its name-server
            requests with (both or neither; default none, as Java's broker); a name server with
            ``aclEnable`` needs them, of an account with ``admin: true``.
        metrics_max_queue_series: per-queue lag series one scrape carries at most (100 000;
            the per-group totals are always complete).
        transaction_check_max: checks of one half message before it is rolled back (15).
        reject_transaction_message: refuse prepared (half) messages (False).
        write_buffer_high: bytes buffered for one client before its connection stops reading
            requests until the client catches up (4 MiB).
        write_buffer_limit: bytes buffered for one client before its connection is aborted as
            one that does not read its replies (32 MiB: one maximal frame behind a full high
            mark); 0 disables.
        frame_read_timeout_seconds: a frame once started must arrive within this many
            seconds, or the connection is closed (30; 0 disables).
        max_partial_frame_bytes: bytes of unfinished frames all connections may buffer
            together; the connection that goes past it is closed (64 MiB; 0 disables).
        close_grace_seconds: a closing connection whose client does not take the last replies
            is aborted after this many seconds (3).
        max_frames_per_turn: frames one connection has handled per event-loop turn before the
            other connections get theirs (64): a client's pipeline cannot hold the loop.
        max_bytes_per_turn: bytes of frames one connection has handled per loop turn (256 KiB;
            a larger frame is handled alone).
        max_requests_in_flight_per_connection: asynchronous requests (sends, admin, …) of one
            connection running or queued; past it the broker stops reading from that
            connection until half are answered (1024).
        sql92_compiles_per_connection: SQL92 expressions one connection may have compiling at
            once (off the event loop); a pull past it is answered SYSTEM_BUSY (4).
        sql92_compiles_total: SQL92 expressions compiling at once in the broker (16).
        max_held_pulls_per_connection: suspended (long-polling) pulls one connection may
            have held; past it a pull is answered SYSTEM_BUSY (10 000).
        max_held_pulls_total: suspended pulls held by the broker in all (100 000).
        revive_queue_num: queues of the POP revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (Java
            ``reviveQueueNum``, 8).
        revive_interval: ms between two rounds of the POP revive service at most (Java
            ``reviveInterval``, 1000).
        pop_polling_size: held POP / NOTIFICATION requests per connection (1024).
        max_pop_polling_size: held POP / NOTIFICATION requests in all (Java ``maxPopPollingSize``,
            100 000); past either a POP is answered POLLING_FULL.
        pop_retry_probability: percent of POPs that read the pop retry topic first (Java, 20).
        pop_ck_max_num: POP checkpoints in flight at most (200 000); past it POLLING_FULL.
        pop_min_invisible_time / pop_max_invisible_time: the invisible times a POP or
            CHANGE_MESSAGE_INVISIBLETIME may ask (1 s .. 12 h).
        pop_max_poll_time: the longest a POP or NOTIFICATION may be held (60 000 ms).
        pop_max_batch_acks: entries of one BATCH_ACK_MESSAGE body at most (1024).
        default_message_request_mode: a (topic, group)'s mode for QUERY_ASSIGNMENT when
            SET_MESSAGE_REQUEST_MODE set none (Java ``defaultMessageRequestMode``, PULL; or POP).
        default_pop_share_queue_num: that default's ``popShareQueueNum`` in POP mode (Java, -1:
            every client pops every queue).
        server_load_balancer_enable: QUERY_ASSIGNMENT allocates among the group's clients (True);
            False answers every queue to every client (Java ``serverLoadBalancerEnable``).
        max_message_request_modes: (topic, group) entries SET_MESSAGE_REQUEST_MODE may store
            (100 000); past it a new entry is refused with SYSTEM_ERROR.
        config_persist_interval: ms between two writes of a changed topic or subscription-group
            table (200); writes run off the event loop and coalesce every change in between.
        max_topic_queue_nums: queues of one topic at most, for UPDATE_AND_CREATE_TOPIC and a
            group's ``retryQueueNums`` alike (1024).
        enable_topic_message_type_check: a SEND to a topic whose ``message.type`` attribute is
            set is refused (MESSAGE_ILLEGAL) unless the message is of that type or the topic
            is MIXED (True, as Java 5's proxy; topics without the attribute are not checked).
        enable_mixed_message_type: UPDATE_AND_CREATE_TOPIC may declare ``message.type=MIXED``
            (False, as Java 5).
        max_consumer_offset_keys: topic@group pairs in the consumer offset table at most; a
            commit for one more is refused (100 000).
        rebalance_lock_max_live_time: ms a queue lock (LOCK_BATCH_MQ) lives without renewal
            (Java ``rebalanceLockMaxLiveTime``, 60 000); expired entries leave the table.
        rebalance_lock_max_batch_size: queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may name (4096);
            a larger request is refused.
        rebalance_lock_max_entries: queue locks held in all (100 000); past it new locks are
            not granted.
        max_subscription_group_nums: consumer groups auto-created at most (100 000); past it an
            unknown group is answered SUBSCRIPTION_GROUP_NOT_EXIST (groups created explicitly
            by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP are not limited).
        max_groups_per_heartbeat: consumer and producer groups one HEART_BEAT may name (5000).
        max_clients_per_connection: group memberships (consumer and producer) one connection
            may hold (10 000).
        max_subscriptions_per_connection: subscriptions the consumer groups of one connection
            may declare (10 000). Past any of the three a heartbeat is refused (SYSTEM_ERROR)
            and registers nothing.
        max_producer_groups: producer groups the producer table (GET_PRODUCER_CONNECTION_LIST)
            holds at most (10 000); a heartbeat naming one more is not recorded for it.
        max_producers_per_group: connections one producer group holds at most (1000); past it
            the one silent for longest is evicted.
        call_client_timeout_mills: ms the broker waits for a client it relays a request to
            (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, GET_CONSUMER_STATUS_FROM_CLIENT;
            Java ``Broker2Client.callClient`` waits 10 000).
        acl_enable: check every client request as Java 4.9.8's plain ACL does (False). The
            accounts are read from ``<rocketmq_home>/conf/plain_acl.yml`` (plus any ``*.yml``
            under ``<rocketmq_home>/conf/acl/``) and reloaded when a file changes.
        rocketmq_home: Java's ``rocketmqHome``; None (default) = the ``ROCKETMQ_HOME``
            environment variable. Needed when ``acl_enable`` is on.
        acl_watch_interval_ms: how often the ACL files are checked for changes (500 ms, Java
            ``FileWatchService``; 50..60 000).
    """

    #: read at their slot offsets by the SEND fast path at every SEND
    #: (SendGate, rmq/broker/processors/_sendpath.pyx; rmq/common/slots.pxd)
    __native_slots__ = ("region_id", "broker_permission", "enable_topic_message_type_check", "trace_on")

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = setting(0, lo=0, hi=2**63 - 1)
    broker_ip1: str = "127.0.0.1"
    broker_ip2: str = "127.0.0.1"
    listen_host: str = "127.0.0.1"
    listen_port: int = setting(10911, lo=0, hi=65535)
    namesrv_addr: str | None = None
    lenient_config: bool = False
    broker_permission: int = setting(6, choices=(2, 4, 6))
    default_topic_queue_nums: int = setting(8, lo=1, hi=1024)
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = TopicValidator.RMQ_SYS_TRACE_TOPIC
    store_reply_message_enable: bool = True
    max_reply_pushes_per_client: int = setting(64, lo=1, hi=100_000)
    long_polling_enable: bool = True
    short_polling_time_mills: int = setting(1000, lo=0, hi=600_000, unit="ms")
    notify_consumer_ids_changed_enable: bool = True
    register_name_server_period: int = setting(30_000, lo=100, hi=600_000, unit="ms")
    register_broker_timeout_mills: int = setting(6000, lo=1, hi=600_000, unit="ms")
    force_register: bool = False
    compressed_register: bool = False
    flush_consumer_offset_interval: int = setting(5000, lo=1, hi=3_600_000, unit="ms")
    channel_expired_seconds: float = setting(120.0, lo=0.001, hi=86_400.0, unit="s")
    idle_timeout: float = setting(120.0, lo=0.001, hi=86_400.0, unit="s")
    slave_read_enable: bool = False
    enable_property_filter: bool = False
    filter_cache_size: int = setting(4096, lo=16, hi=1_000_000)
    # Not in Java (its SlaveSynchronize runs every 10 s, fixed): how often a SLAVE copies its
    # master's topics, groups, consumer offsets and delay progress (rmq.broker.slave_sync).
    slave_sync_interval_ms: int = setting(10_000, lo=100, hi=600_000, unit="ms")
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    send_fast_path: bool = True
    pull_fast_path: bool = True
    transaction_time_out: int = setting(6000, lo=1, hi=JAVA_INT.hi, unit="ms")
    transaction_check_interval: int = setting(60_000, lo=1, hi=JAVA_INT.hi, unit="ms")
    transaction_check_max: int = setting(15, lo=1, hi=10_000)
    reject_transaction_message: bool = False
    write_buffer_high: int = setting(4 * 1024 * 1024, lo=64 * 1024, hi=1 << 30, unit="bytes")
    write_buffer_limit: int = setting(32 * 1024 * 1024, lo=64 * 1024, hi=1 << 32, unit="bytes")
    frame_read_timeout_seconds: float = setting(30.0, lo=0.1, hi=3600.0, unit="s")
    max_partial_frame_bytes: int = setting(64 * 1024 * 1024, lo=1024 * 1024, hi=1 << 40, unit="bytes")
    close_grace_seconds: float = setting(3.0, lo=0.0, hi=600.0, unit="s")
    max_frames_per_turn: int = setting(64, lo=1, hi=1_000_000)
    max_bytes_per_turn: int = setting(256 * 1024, lo=1024, hi=1 << 30, unit="bytes")
    max_requests_in_flight_per_connection: int = setting(1024, lo=1, hi=10_000_000)
    sql92_compiles_per_connection: int = setting(4, lo=1, hi=10_000)
    sql92_compiles_total: int = setting(16, lo=1, hi=100_000)
    max_held_pulls_per_connection: int = setting(10_000, lo=1, hi=10_000_000)
    max_held_pulls_total: int = setting(100_000, lo=1, hi=100_000_000)
    config_persist_interval: int = setting(200, lo=10, hi=3_600_000, unit="ms")
    max_topic_queue_nums: int = setting(1024, lo=1, hi=65_535)
    max_consumer_offset_keys: int = setting(100_000, lo=1, hi=100_000_000)
    rebalance_lock_max_live_time: int = setting(60_000, lo=1000, hi=86_400_000, unit="ms")
    rebalance_lock_max_batch_size: int = setting(4096, lo=1, hi=1_000_000)
    rebalance_lock_max_entries: int = setting(100_000, lo=1, hi=100_000_000)
    max_subscription_group_nums: int = setting(100_000, lo=1, hi=100_000_000)
    # What one client connection may register through heartbeats: group memberships (consumer
    # and producer groups; each is one client entry), the subscriptions its consumer groups
    # declare, and the groups one HEART_BEAT may name. Past them the heartbeat is refused.
    max_groups_per_heartbeat: int = setting(5_000, lo=1, hi=1_000_000)
    max_clients_per_connection: int = setting(10_000, lo=1, hi=1_000_000)
    max_subscriptions_per_connection: int = setting(10_000, lo=1, hi=10_000_000)
    # Runtime statistics (rmq.broker.stats): keys per stats set, and the "10 s" sampling tick
    # (the 1 s, 10 min and 1 h ticks keep Java's ratios to it; shorter only for tests).
    max_stats_items: int = setting(100_000, lo=1, hi=10_000_000)
    stats_sample_interval_ms: int = setting(10_000, lo=10, hi=10_000, unit="ms")
    # The properties file the broker was started from (-c); UPDATE_BROKER_CONFIG persists
    # changes there (Java brokerConfigPath); None: <storePathRootDir>/config/broker.properties.
    broker_config_path: str | None = None
    max_producer_groups: int = setting(10_000, lo=1, hi=10_000_000)
    max_producers_per_group: int = setting(1_000, lo=1, hi=1_000_000)
    call_client_timeout_mills: int = setting(10_000, lo=1, hi=600_000, unit="ms")
    # ACL 1.0 (Java BrokerConfig aclEnable, PlainAccessValidator): every client request signed
    # against ${rocketmqHome}/conf/plain_acl.yml (and conf/acl/*.yml), reloaded on change.
    acl_enable: bool = setting(False, choices=(False, True))
    rocketmq_home: str | None = None
    acl_watch_interval_ms: int = setting(500, lo=50, hi=60_000, unit="ms")
    # Not in Java: the keys this broker signs its name-server requests with (a name server with
    # aclEnable refuses unsigned registrations); the account needs admin: true there.
    namesrv_access_key: str | None = None
    namesrv_secret_key: str | None = None
    # Prometheus /metrics (rmq.broker.metrics): the HTTP port (rocketmq-exporter's 5557; 0 = none;
    # a taken port is a warning, the broker runs on) and the per-queue lag series a scrape carries.
    metrics_port: int = setting(5557, lo=0, hi=65535)
    # The address /metrics binds; "" (default) = listenHost (loopback unless told otherwise), so
    # metrics are never more exposed than the broker itself; set 127.0.0.1 to keep them local
    # on a broker that listens on every interface (the series name topics, groups and clients).
    metrics_host: str = ""
    metrics_max_queue_series: int = setting(100_000, lo=0, hi=10_000_000)
    # Typed topics (Java 5 ProxyConfig enableTopicMessageTypeCheck, BrokerConfig
    # enableMixedMessageType): a SEND to a topic with a message.type attribute must carry a
    # message of that type; MIXED may be declared only when allowed.
    enable_topic_message_type_check: bool = True
    enable_mixed_message_type: bool = False
    # RocketMQ 5 POP consumption (rmq.broker.pop; docs/design.md "POP consumption"). Java's names
    # and defaults: the revive topic's queues, the revive service's period, the held POPs per
    # connection (Java counts them per polling key) and in all, the percent of POPs that try the
    # pop retry topic first.
    revive_queue_num: int = setting(8, lo=1, hi=64)
    revive_interval: int = setting(1000, lo=10, hi=60_000, unit="ms")
    pop_polling_size: int = setting(1024, lo=1, hi=1_000_000)
    max_pop_polling_size: int = setting(100_000, lo=1, hi=10_000_000)
    pop_retry_probability: int = setting(20, lo=0, hi=100)
    # Not in Java: checkpoints in flight (popped, not yet acked or revived) the broker keeps in
    # memory; past it a POP is answered POLLING_FULL. And the bounds of what a request may ask:
    # invisible time, poll time, acks in one BATCH_ACK_MESSAGE.
    pop_ck_max_num: int = setting(200_000, lo=1, hi=100_000_000)
    pop_min_invisible_time: int = setting(1000, lo=1, hi=JAVA_INT.hi, unit="ms")
    pop_max_invisible_time: int = setting(12 * 3600 * 1000, lo=1, hi=7 * 24 * 3600 * 1000, unit="ms")
    pop_max_poll_time: int = setting(60_000, lo=0, hi=600_000, unit="ms")
    pop_max_batch_acks: int = setting(1024, lo=1, hi=100_000)
    # Server-side assignment (QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE, rmq.broker.assignment):
    # Java's names and defaults; the (topic, group) mode table and the cached routes are bounded.
    default_message_request_mode: str = setting("PULL", choices=("PULL", "POP"))
    default_pop_share_queue_num: int = setting(-1, lo=-1, hi=JAVA_INT.hi)
    server_load_balancer_enable: bool = setting(True, choices=(False, True))
    max_message_request_modes: int = setting(100_000, lo=1, hi=10_000_000)
    # The RocketMQ 5 gRPC endpoint (rmq.broker.grpc; docs/design.md "gRPC endpoint"): 0 = off
    # (`rmq standalone` serves 8081, Java's proxy default); a taken port is one warning.
    grpc_server_port: int = setting(0, lo=0, hi=65535)
    grpc_server_host: str = ""
    grpc_max_concurrent_streams: int = setting(256, lo=1, hi=100_000)
    grpc_max_message_size: int = setting(8 * 1024 * 1024, lo=64 * 1024, hi=1 << 30, unit="bytes")
    grpc_max_telemetry_sessions_per_client: int = setting(8, lo=1, hi=1024)
    grpc_max_clients: int = setting(100_000, lo=1, hi=10_000_000)
    grpc_telemetry_queue_size: int = setting(1024, lo=1, hi=1_000_000)
    # Controller mode (Java 5 BrokerConfig; docs/design.md "Controller mode", rmq.broker.replicas):
    # the broker registers to the controllers at controllerAddr ("host:port;host:port"), which
    # decide its role and brokerId; Java's names, defaults and periods.
    enable_controller_mode: bool = False
    controller_addr: str = ""
    sync_broker_metadata_period: int = setting(5000, lo=10, hi=600_000, unit="ms")
    check_sync_state_set_period: int = setting(5000, lo=10, hi=600_000, unit="ms")
    sync_controller_metadata_period: int = setting(10_000, lo=10, hi=600_000, unit="ms")
    controller_heart_beat_timeout_mills: int = setting(10_000, lo=100, hi=600_000, unit="ms")
    broker_heartbeat_interval: int = setting(1000, lo=10, hi=600_000, unit="ms")
    send_heartbeat_timeout_millis: int = setting(1000, lo=10, hi=600_000, unit="ms")
    broker_election_priority: int = setting(JAVA_INT.hi, lo=JAVA_INT.lo, hi=JAVA_INT.hi)

    @property
    def controller_addr_list(self) -> list[str]:
        """``controller_addr`` split on ``;`` (and ``,``), blanks dropped."""
        return [a.strip() for a in re.split(r"[;,]", self.controller_addr or "") if a.strip()]

    @property
    def namesrv_addr_list(self) -> list[str]:
        """``namesrv_addr`` split on ``;`` (and ``,``), blanks dropped."""
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in re.split(r"[;,]", self.namesrv_addr) if a.strip()]

    @property
    def broker_addr(self) -> str:
        """The advertised ``ip:port`` clients use to reach this broker."""
        return f"{self.broker_ip1}:{self.listen_port}"


def parse_overrides(args: typing.Iterable[str]) -> dict[str, str]:
    """Turn ``--key=value`` words (the CLI's leftovers) into a dict.

    ``--key`` alone means ``true``. Anything not starting with ``--`` is a :class:`ConfigError`.
    """
    out: dict[str, str] = {}
    for arg in args:
        if not arg.startswith("--") or len(arg) <= 2:
            raise ConfigError(f"unexpected argument {arg!r} (properties are given as --key=value)")
        key, sep, value = arg[2:].partition("=")
        out[key] = value if sep else "true"
    return out


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _convert(key: str, value: str, tp: typing.Any) -> typing.Any:
    """Convert one property string to ``tp`` (bool, int, float, str, or ``X | None``)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value.strip() == "" or value.strip().lower() == "null":
            return None
        tp = args[0]
    v = value.strip()
    if tp is bool:
        low = v.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"bad value for {key}: {value!r} (expected true or false)")
    if tp is int:
        try:
            return int(v.replace("_", ""), 0) if v.lower().startswith(("0x", "0o", "0b")) else int(v)
        except ValueError:
            raise ConfigError(f"bad value for {key}: {value!r} (expected an integer)") from None
    if tp is float:
        try:
            return float(v)
        except ValueError:
            raise ConfigError(f"bad value for {key}: {value!r} (expected a number)") from None
    return value.strip()


def _index(targets: tuple[typing.Any, ...]) -> dict[str, tuple[object, dataclasses.Field[typing.Any], typing.Any]]:
    index: dict[str, tuple[object, dataclasses.Field[typing.Any], typing.Any]] = {}
    for target in targets:
        hints = typing.get_type_hints(type(target))
        for f in dataclasses.fields(target):
            index.setdefault(_norm(f.name), (target, f, hints.get(f.name, str)))
    return index


def _is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("true", "1", "yes", "on")


def _suggest(key: str, index: dict[str, tuple[object, dataclasses.Field[typing.Any], typing.Any]]) -> str:
    close = difflib.get_close_matches(_norm(key), list(index), n=1, cutoff=0.6)
    if not close:
        return ""
    return f"; did you mean {snake_to_camel(index[close[0]][1].name)}?"


def _check_value(key: str, raw: object, value: object, allowed: Allowed | None) -> object:
    if allowed is None:
        return value
    if allowed.choices is not None and isinstance(value, str):
        value = value.upper()
    problem = allowed.problem(value)
    if problem is not None:
        raise ConfigError(f"bad value for {key}: {raw!r} ({problem})")
    return value


def apply_properties(props: dict[str, str], *targets: typing.Any, lenient: bool | None = None) -> list[str]:
    """Set every property on the first target dataclass that has a matching field.

    Args:
        props: camelCase (or snake_case) keys to string values.
        targets: dataclass instances, searched in order (e.g. ``broker_config, store_config``).
        lenient: unknown keys only warn. ``None`` (default): as the ``lenientConfig`` property
            in ``props`` says (false when absent).

    Returns:
        One warning string per unknown key when lenient (the daemon logs them).

    Raises:
        ConfigError: a value that cannot be converted or is outside the field's allowed
            values (the message names the property and the allowed values), or, unless
            lenient, a key that matches no field ("did you mean ..." when one is close).
    """
    index = _index(targets)
    if lenient is None:
        lenient = _is_true(next((v for k, v in props.items() if _norm(k) == "lenientconfig"), None))
    warnings: list[str] = []
    for key, value in props.items():
        entry = index.get(_norm(key))
        if entry is None:
            if _norm(key) == "lenientconfig":
                continue
            message = f"unknown config key {key!r}{_suggest(key, index)}"
            if not lenient:
                raise ConfigError(message + " (set lenientConfig=true or pass --lenient-config to only warn)")
            warnings.append(message + " (ignored)")
            continue
        target, f, tp = entry
        converted = _check_value(key, value, _convert(key, value, tp), allowed_of(f, tp))
        setattr(target, f.name, converted)
    return warnings


def check_config(*targets: typing.Any) -> None:
    """Check every field of every target against its allowed values (declared ranges, or the
    Java ``long`` / finite default for numbers), whatever set it: a default, a property or a
    CLI flag. Raises :class:`ConfigError` naming the first bad property (camelCase)."""
    for target in targets:
        hints = typing.get_type_hints(type(target))
        for f in dataclasses.fields(target):
            tp = hints.get(f.name, str)
            value = getattr(target, f.name)
            if value is None:
                continue
            allowed = allowed_of(f, tp)
            if allowed is None:
                continue
            problem = allowed.problem(value)
            if problem is not None:
                raise ConfigError(f"bad value for {snake_to_camel(f.name)}: {value!r} ({problem})")


def check_controller_mode(broker_config: BrokerConfig, broker_role: str) -> None:
    """Controller mode's rules across properties (docs/design.md "Controller mode"): the
    controller decides the role, so ``brokerRole=SLAVE`` contradicts it (the configured master
    role is the one taken when elected), and ``controllerAddr`` must name a controller.
    :class:`ConfigError` naming the property and the allowed values."""
    if not broker_config.enable_controller_mode:
        return
    if broker_role == "SLAVE":
        raise ConfigError(
            "bad value for brokerRole: 'SLAVE' (with enableControllerMode=true the controller decides the role; "
            "allowed: ASYNC_MASTER or SYNC_MASTER, the role this broker takes when it is elected)"
        )
    if not broker_config.controller_addr_list:
        raise ConfigError(
            "bad value for controllerAddr: empty (with enableControllerMode=true; allowed: host:port of the "
            "controllers separated by ';')"
        )


def allowed_values(target: typing.Any) -> dict[str, str]:
    """``{camelCaseKey: allowed values in words}`` of every field that has a range (for docs and
    ``--help`` style listings)."""
    hints = typing.get_type_hints(type(target))
    out = {}
    for f in dataclasses.fields(target):
        allowed = allowed_of(f, hints.get(f.name, str))
        if allowed is not None:
            out[snake_to_camel(f.name)] = allowed.describe()
    return out


def snake_to_camel(name: str) -> str:
    """``broker_cluster_name`` → ``brokerClusterName`` (for logs and reports)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def describe(obj: typing.Any) -> dict[str, object]:
    """A dataclass as ``{camelCaseKey: value}``, for GET_BROKER_CONFIG-style dumps."""
    return {snake_to_camel(f.name): getattr(obj, f.name) for f in dataclasses.fields(obj)}


# ---------------------------------------------------------------------------------------------
# Runtime configuration (Java Configuration): read, checked update, persistence


class ConfigUpdateRefused(ConfigError):
    """A runtime update that changed nothing: ``black_list`` when it names a key of the black
    list (answered NO_PERMISSION, as Java), otherwise a bad, unknown or start-up-only key or a
    bad value (SYSTEM_ERROR)."""

    def __init__(self, message: str, *, black_list: bool = False) -> None:
        super().__init__(message)
        self.black_list = black_list


_LENIENT_HINT = " (set lenientConfig=true or pass --lenient-config to only warn)"
_KEY_LINE = re.compile(r"^\s*([^#!\s=:][^=:\s]*)\s*[=:\s]")


class Configuration:
    """A running daemon's configuration (Java ``Configuration``): the live config dataclasses,
    their dump, checked updates and their persistence. The broker and the name server subclass
    it with their lists (:attr:`live`, :attr:`black_list`) and reactions (:meth:`changed`).

    An update (:meth:`update`) is checked whole before anything changes, with the start-up rules
    (:func:`apply_properties` on copies, then :func:`check_config`): a key of the black list, a
    known key not in :attr:`live` (read once at start-up; :meth:`refusal` says why), an unknown
    key or a value outside the field's range refuses it all. Java sets any field by reflection
    and may take a value it cannot use; we refuse what could not take effect instead.

    Persistence (:meth:`persist`, Java ``Configuration.persist``) writes the changed keys into the
    properties file :meth:`path` names: Java rewrites the file with every property; here the
    changed keys' lines are replaced (their continuation lines and later duplicates dropped),
    new keys appended and the operator's other lines and comments kept; the file is replaced
    atomically (``rmq.common.files.atomic_write``), off the event loop.

    Args:
        targets: the live config dataclasses, searched in order (updates are applied in place).
    """

    #: camelCase keys a running daemon applies at once.
    live: frozenset[str] = frozenset()
    #: camelCase keys never changed remotely (Java ``configBlackList``).
    black_list: frozenset[str] = frozenset()
    #: camelCase keys whose value is never shown (GET_BROKER_CONFIG is answered to any client
    #: the ACL lets in): a set value reads as ``******``.
    secrets: frozenset[str] = frozenset({"haAuthSecret", "namesrvSecretKey"})

    def __init__(self, *targets: typing.Any) -> None:
        import asyncio  # here, not at the top: `rmq <daemon> --help` and the CLI import this module

        self.targets = targets
        self._lock = asyncio.Lock()
        self._camel = {_norm(f.name): snake_to_camel(f.name) for t in targets for f in dataclasses.fields(t)}
        self._live = {_norm(k) for k in self.live}
        self._black = {_norm(k) for k in self.black_list}

    def path(self) -> str | None:
        """The properties file updates are persisted to; None (the default): not persisted."""
        return None

    def all_configs(self) -> dict[str, object]:
        """Every property, camelCase, in declaration order (the first target's wins)."""
        out: dict[str, object] = {}
        for t in self.targets:
            for k, v in describe(t).items():
                out.setdefault(k, "******" if v and k in self.secrets else v)
        return out

    def get_all_configs_format_string(self) -> str:
        """Java ``getAllConfigsFormatString``: every property as properties text, Java's
        ``true``/``false``, a ``None`` value as an empty one."""
        return format_properties({k: property_text(v) for k, v in self.all_configs().items()})

    def refusal(self, key: str) -> str:
        """Why the start-up-only property ``key`` (camelCase) cannot change now."""
        return (
            f"{key} cannot be changed at runtime; put it in the config file and restart. "
            f"Properties that change live: {', '.join(sorted(self.live))}"
        )

    def check(self, props: Mapping[str, str]) -> None:
        """Raise :class:`ConfigUpdateRefused` unless every property may change now to its value."""
        if any(_norm(k) in self._black for k in props):
            raise ConfigUpdateRefused("Can not update config in black list.", black_list=True)
        for key in props:
            camel = self._camel.get(_norm(key))
            if camel is not None and _norm(key) not in self._live:
                raise ConfigUpdateRefused(self.refusal(camel))
        trial = [copy.copy(t) for t in self.targets]
        try:
            apply_properties(dict(props), *trial, lenient=False)
            check_config(*trial)
        except ConfigError as e:
            raise ConfigUpdateRefused(str(e).replace(_LENIENT_HINT, "")) from None

    async def update(self, props: Mapping[str, str]) -> dict[str, str]:
        """Java ``Configuration.update``: check, apply and persist ``props``; returns the applied
        ``{camelKey: value}`` (values as :meth:`get_all_configs_format_string` writes them).
        Raises :class:`ConfigUpdateRefused` (nothing applied) or ``OSError`` (applied, but the
        file could not be written)."""
        if not props:
            return {}
        async with self._lock:
            self.check(props)
            apply_properties(dict(props), *self.targets, lenient=False)
            now = {_norm(k): v for k, v in self.all_configs().items()}
            applied = {self._camel[_norm(k)]: property_text(now[_norm(k)]) for k in props if _norm(k) in self._camel}
            await self.changed(applied)
            await self.persist(applied)
            return applied

    async def changed(self, applied: dict[str, str]) -> None:
        """Called once an update is applied, before it is persisted (subclasses pass the new
        values on to the components that copied them)."""

    async def persist(self, applied: Mapping[str, str]) -> None:
        """Java ``Configuration.persist``: write ``applied`` into :meth:`path`'s file (none: no-op)."""
        path = self.path()
        if path:
            import asyncio

            await asyncio.to_thread(rewrite_properties_file, os.path.expanduser(path), dict(applied))  # noqa: ASYNC240 - expanduser opens no file


def rewrite_properties_file(path: str, updated: Mapping[str, str]) -> None:
    """Replace the lines of ``updated``'s keys in the properties file at ``path`` (created if
    missing; keys matched in camelCase or snake_case spellings, as the loader does): the first
    line of a key gets its new value, its continuation lines and later duplicates are dropped,
    missing keys are appended, every other line is kept. Values are escaped as
    ``java.util.Properties.store`` does. Atomic (temporary file, fsync, rename); ``OSError``."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    wanted = {_norm(k): (k, v) for k, v in updated.items()}
    done: set[str] = set()
    out: list[str] = []
    continued = skipping = False  # inside a backslash-continued value; dropping its lines
    for line in lines:
        ends_continued = line.endswith("\\") and not line.endswith("\\\\")
        if continued:
            continued = ends_continued
            if not skipping:
                out.append(line)
            continue
        m = _KEY_LINE.match(line)
        continued = ends_continued
        skipping = False
        if m is not None and _norm(m.group(1)) in wanted:
            n = _norm(m.group(1))
            skipping = True
            if n not in done:
                key, value = wanted[n]
                out.append(f"{key}={_escape_value(value)}")
                done.add(n)
            continue
        out.append(line)
    out.extend(f"{key}={_escape_value(value)}" for n, (key, value) in wanted.items() if n not in done)
    atomic_write(path, ("\n".join(out) + "\n").encode())


def _escape_value(value: str) -> str:
    # java.util.Properties.store: backslashes, line breaks and a leading blank are escaped
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + out if out.startswith(" ") else out


__all__ += ["ConfigUpdateRefused", "Configuration", "rewrite_properties_file"]
