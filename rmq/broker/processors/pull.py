"""PULL_MESSAGE (11): the consumer's read path (seeds 000, 001, 003).

``process_request`` is synchronous on purpose: it runs inline on the event loop (no task,
no pool hop), asks the store for the messages (a Cython scan returning zero-copy views of the
mapped CommitLog) and writes those views as the response body. The views hold the mapped
files; ``GetMessageResult.release()`` drops the holds once the transport no longer needs them.

The checks run in Java's order (``PullMessageProcessor.processRequest``):

1. broker readable                                       → NO_PERMISSION
2. subscription group exists (auto-created) and enabled  → SUBSCRIPTION_GROUP_NOT_EXIST / NO_PERMISSION
3. sysFlag bits: commitOffset 1, suspend 2, subscription 4, classFilter 8
4. topic exists and is readable                          → TOPIC_NOT_EXIST / NO_PERMISSION
5. 0 <= queueId < readQueueNums                          → SYSTEM_ERROR
6. subscription: from the request when bit 4 is set (parse → SUBSCRIPTION_PARSE_FAILED),
   otherwise from the group's heartbeats: group known (SUBSCRIPTION_NOT_EXIST), broadcast
   allowed (NO_PERMISSION), topic subscribed (SUBSCRIPTION_NOT_EXIST), subVersion not older
   (SUBSCRIPTION_NOT_LATEST)
   A non-TAG expression while ``enablePropertyFilter`` is off → SYSTEM_ERROR, before anything
   is compiled (Java compiles first; the answer is the same for a good expression).
   For a SQL92 subscription the compiled filter comes from the ConsumerFilterManager (one
   compile per expression text): a bad expression carried by the pull →
   SUBSCRIPTION_PARSE_FAILED, one from the heartbeats → FILTER_DATA_NOT_EXIST. An expression
   not compiled yet makes the pull asynchronous: it is compiled in the executor (bounded per
   connection and in all, SYSTEM_BUSY past them) and the pull then runs as above.

Then GetMessageStatus → response code (Java's switch on it), the response header (nextBeginOffset,
minOffset, maxOffset, suggestWhichBrokerId), a hold in the PullRequestHoldService when nothing
was found and the suspend bit is set, the OffsetMovedEvent of a PULL_OFFSET_MOVED answer
(written to ``OFFSET_MOVED_EVENT`` by a master, or a slave with ``offsetCheckInSlave``: Java
``generateOffsetMovedEvent``), and finally the commit of the offset the pull carried
(commitOffset bit, master only).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from rmq.broker.filter import CompileBusy, ConsumerFilterManager, is_tag_type, unsupported_remark
from rmq.broker.managers.consumer import MessageModel
from rmq.broker.processors._pullpath import PullFastPath
from rmq.broker.processors._sendpath import PullCounters
from rmq.broker.processors.common import FAQ, bad_request
from rmq.broker.processors.pull_fast import make_fast_path
from rmq.common.constants import MixAll, PermName, TopicValidator
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.message import MessageConst, PullSysFlag
from rmq.common.sql92 import SelectorError
from rmq.errors import RemotingCommandError
from rmq.protocol.body.topic import OffsetMovedEvent
from rmq.protocol.codes import ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.store import MessageFilter, MessageInner
from rmq.types import MessageQueue

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

MASTER_ID = MixAll.MASTER_ID
_monotonic_ns = time.monotonic_ns
#: OffsetMovedEvent writes in flight at once; past it an event is dropped (one rate-limited
#: line): a flood of out-of-range pulls must not queue unbounded appends.
MAX_OFFSET_MOVED_WRITES = 64

# GetMessageStatus name -> response code, except NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE,
# which depend on the requested offset.
_STATUS_CODE = {
    "FOUND": ResponseCode.SUCCESS,
    "MESSAGE_WAS_REMOVING": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "NO_MATCHED_MESSAGE": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "OFFSET_FOUND_NULL": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": ResponseCode.PULL_OFFSET_MOVED,
    "OFFSET_OVERFLOW_ONE": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_TOO_SMALL": ResponseCode.PULL_OFFSET_MOVED,
}


class PullMessageProcessor:
    """Handles code 11. Synchronous; answers itself through ``conn.send_response``."""

    def __init__(self, controller: BrokerContext):
        self.controller = controller
        self.broker_config = controller.broker_config
        self._filters: dict[str, MessageFilter] = {}
        bc = self.broker_config
        self.consumer_filter_manager = ConsumerFilterManager(
            bc.filter_cache_size, bc.sql92_compiles_per_connection, bc.sql92_compiles_total
        )
        self._offset_moved_writes: set[asyncio.Task[None]] = set()
        # the statistics of each pull, in C (folded into controller.stats by its fold())
        self.counters = PullCounters()
        controller.stats.add_fold(self.counters.take, controller.stats.apply_pull_counts)
        # the plain pull answered from its frame bytes (rmq/broker/processors/_pullpath.pyx),
        # sharing this processor's filter cache and counters; this processor for the rest
        self.fast: PullFastPath | None = (
            make_fast_path(controller, self) if getattr(self.broker_config, "pull_fast_path", True) else None
        )

    @property
    def filters(self) -> dict[str, MessageFilter]:
        """The bounded cache of parsed filter expressions (key: type and expression), shared
        with the native pull path (``_pullpath.PullFastPath``) so a pull finds one filter
        whichever path answers it."""
        return self._filters

    @property
    def store(self) -> MessageStore:
        return self.controller.started_store

    def reject_request(self) -> bool:
        return False

    def bind_store(self, store: MessageStore | None) -> None:
        """The store the native pull path reads, once the broker is ready; None when it stops
        (every pull then takes this processor's path, which answers SYSTEM_BUSY)."""
        if self.fast is not None:
            self.fast.bind(store)

    def frame_hook(self, conn: Connection, next_hook: Any = None) -> Any:
        """The connection's frame hook (``Dispatcher.frame_hooks``): plain pulls answered from
        their frame bytes by ``self.fast``, other frames to ``next_hook`` (the SEND hook);
        ``next_hook`` itself without the native path."""
        if self.fast is None:
            return next_hook
        return self.fast.frame_hook(conn.remote_addr, next_hook)

    def process_request(self, conn: Connection, cmd: RemotingCommand) -> Any:
        response = self.process(conn, cmd, allow_suspend=True)
        if isinstance(response, _Compile):
            try:
                compiling = self.consumer_filter_manager.start(conn, response.expression_type, response.expression)
            except CompileBusy as e:
                conn.send_response(cmd.response(ResponseCode.SYSTEM_BUSY, str(e), {}))
                return None
            return self._compile_then_pull(conn, cmd, response, compiling)
        if response is not None:
            self.write_response(conn, response)
        return None

    async def _compile_then_pull(
        self, conn: Connection, cmd: RemotingCommand, need: _Compile, compiling: asyncio.Future[Any]
    ) -> None:
        """The pull of an expression not compiled yet: compiled off the loop, then run."""
        response: RemotingCommand | _Compile | None
        try:
            compiled = await ConsumerFilterManager.wait(compiling)
        except SelectorError as e:
            response = need.failure(cmd, e)
        else:
            response = self.process(
                conn, cmd, allow_suspend=True, known=(need.expression_type.upper(), need.expression, compiled)
            )
            if isinstance(response, _Compile):  # the heartbeat's subscription changed meanwhile
                response = cmd.response(
                    ResponseCode.SYSTEM_BUSY, "the subscription changed while its expression compiled, try again", {}
                )
        if response is not None:
            self.write_response(conn, response)

    def _sql_filter(self, expression_type: str, expression: str | None, known: Any) -> MessageFilter | None:
        """The compiled filter of a non-TAG expression: the held pull's, the one just compiled
        for this pull, or the cache's (None: not compiled yet; raises a cached SelectorError)."""
        if isinstance(known, MessageFilter):
            return known
        if known is not None and known[0] == expression_type.upper() and known[1] == (expression or ""):
            return cast(MessageFilter, known[2])
        return self.consumer_filter_manager.lookup(expression_type, expression)

    def write_response(self, conn: Connection, response: RemotingCommand) -> None:
        """Send a pull response; release the store's holds once the body has been written."""
        holder = response.body if isinstance(response.body, _Holder) else None
        if holder is not None:
            response.body = holder.buffers
            try:
                conn.send_response(response)
            finally:
                self.controller.release_when_written(conn, holder.result)
        else:
            conn.send_response(response)

    def _filter(self, expression: str | None) -> MessageFilter:
        key = expression or "*"
        f = self._filters.get(key)
        if f is None:
            if len(self._filters) > 4096:  # bounded cache of parsed expressions
                self._filters.clear()
            f = self._filters[key] = MessageFilter.from_expression(key)
        return f

    def process(
        self,
        conn: Connection,
        cmd: RemotingCommand,
        allow_suspend: bool,
        known: MessageFilter | tuple[str, str, MessageFilter] | None = None,
    ) -> RemotingCommand | _Compile | None:
        """One pull: a response, None when it was suspended into the hold service, or a
        :class:`_Compile` when its SQL92 expression must be compiled first. ``known`` is the
        filter a held pull was suspended with, or ``(type, expression, filter)`` just compiled."""
        c = self.controller
        try:
            h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)

        # 1. broker readable
        if not PermName.is_readable(self.broker_config.broker_permission):
            return cmd.response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker_config.broker_ip1}] pulling message is forbidden",
                {},
            )
        # 2. subscription group
        sgc = c.subscription_group_manager.find_subscription_group_config(h.consumer_group)
        if sgc is None:
            return cmd.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{clip_remark(h.consumer_group)}] does not exist, " + FAQ,
                {},
            )
        if not sgc.consume_enable:
            return cmd.response(
                ResponseCode.NO_PERMISSION, "subscription group no permission, " + clip_remark(h.consumer_group), {}
            )
        # 3. flags
        has_suspend = bool(h.sys_flag & PullSysFlag.FLAG_SUSPEND)
        has_commit_offset = bool(h.sys_flag & PullSysFlag.FLAG_COMMIT_OFFSET)
        has_subscription = bool(h.sys_flag & PullSysFlag.FLAG_SUBSCRIPTION)
        suspend_timeout_millis = h.suspend_timeout_millis if has_suspend else 0
        # 4. topic
        tc = c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            _rlog.warning(
                "pull-topic-not-exist",
                "pull from %s: topic %s does not exist (consumer %s)",
                clip(h.consumer_group),
                clip(h.topic),
                conn.remote_addr,
            )
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{clip_remark(h.topic)}] not exist, apply first please!" + FAQ, {}
            )
        if not PermName.is_readable(tc.perm):
            return cmd.response(
                ResponseCode.NO_PERMISSION, f"the topic[{clip_remark(h.topic)}] pulling message is forbidden", {}
            )
        # 5. queue id
        if h.queue_id < 0 or h.queue_id >= tc.read_queue_nums:
            remark = (
                f"queueId[{h.queue_id}] is illegal, topic:[{clip_remark(h.topic)}] topicConfig.readQueueNums:"
                f"[{tc.read_queue_nums}] consumer:[{conn.remote_addr}]"
            )
            _rlog.warning("pull-bad-queue", "%s", clip(remark, 400))
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark, {})
        # 6. subscription
        if has_subscription:
            expression_type = h.expression_type or "TAG"
            sub_string = h.subscription
            tag_type = is_tag_type(expression_type)
            if not tag_type and not self.broker_config.enable_property_filter:
                return cmd.response(ResponseCode.SYSTEM_ERROR, unsupported_remark(expression_type), {})
            try:
                if tag_type:
                    message_filter = self._filter(sub_string)
                else:
                    found = self._sql_filter(expression_type, sub_string, known)
                    if found is None:
                        return _Compile(expression_type, sub_string or "", from_heartbeat=False)
                    message_filter = found
            except Exception as e:  # noqa: BLE001 - any parse failure is the client's expression
                _rlog.warning(
                    "pull-bad-subscription",
                    "parse the consumer's subscription[%s] failed, group: %s: %s",
                    clip(sub_string),
                    clip(h.consumer_group),
                    clip(e),
                )
                return cmd.response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed", {}
                )
        else:
            cgi = c.consumer_manager.get_consumer_group_info(h.consumer_group)
            if cgi is None:
                return cmd.response(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist" + FAQ, {}
                )
            if not sgc.consume_broadcast_enable and cgi.message_model == MessageModel.BROADCASTING:
                return cmd.response(
                    ResponseCode.NO_PERMISSION,
                    f"the consumer group[{clip_remark(h.consumer_group)}] can not consume by broadcast way",
                    {},
                )
            sub = cgi.find_subscription_data(h.topic)
            if sub is None:
                return cmd.response(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist" + FAQ, {}
                )
            if sub.sub_version < h.sub_version:
                return cmd.response(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest", {})
            expression_type = sub.expression_type
            sub_string = sub.sub_string
            tag_type = is_tag_type(expression_type)
            if tag_type:
                message_filter = self._filter(sub_string)
            elif not self.broker_config.enable_property_filter:
                return cmd.response(ResponseCode.SYSTEM_ERROR, unsupported_remark(expression_type), {})
            else:
                # Java keeps the filter data registered from the heartbeats; a version older than
                # the pull's (FILTER_DATA_NOT_LATEST) cannot happen here: the subscription the
                # filter is compiled from passed the SUBSCRIPTION_NOT_LATEST check above.
                try:
                    found = self._sql_filter(expression_type, sub_string, known)
                except SelectorError as e:
                    return _Compile(expression_type, sub_string or "", from_heartbeat=True).failure(cmd, e)
                if found is None:
                    return _Compile(expression_type, sub_string or "", from_heartbeat=True)
                message_filter = found
        # 7. property filtering enabled
        if not tag_type and not self.broker_config.enable_property_filter:
            return cmd.response(ResponseCode.SYSTEM_ERROR, unsupported_remark(expression_type), {})

        # A reset this member may not have applied (ali-ons ignores RESET_CONSUMER_CLIENT_OFFSET):
        # move it to the reset offset (rmq.broker.offset_reset).
        store = c.started_store
        if c.pending_resets:
            moved_to = c.pending_resets.redirect(h.consumer_group, h.topic, h.queue_id, h.queue_offset)
            if moved_to is not None:
                return cmd.response(
                    ResponseCode.PULL_OFFSET_MOVED,
                    None,
                    {
                        "nextBeginOffset": str(moved_to),
                        "suggestWhichBrokerId": str(MASTER_ID),
                        "minOffset": str(max(0, store.get_min_offset_in_queue(h.topic, h.queue_id))),
                        "maxOffset": str(store.get_max_offset_in_queue(h.topic, h.queue_id)),
                    },
                )
        # The store scan (its duration: Java StoreStatsService.setGetMessageEntireTimeMax).
        t0 = _monotonic_ns()
        result = store.get_message(
            h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, message_filter
        )
        get_ns = _monotonic_ns() - t0
        status = result.status_name
        ext = {
            "nextBeginOffset": str(result.next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        # Suggest the slave to a consumer reading from disk only when slaves serve
        # reads; otherwise always the master.
        if self.broker_config.slave_read_enable:
            suggest = sgc.which_broker_when_consume_slowly if result.suggest_pulling_from_slave else sgc.broker_id
        else:
            suggest = MASTER_ID
        code = _STATUS_CODE.get(status)
        if code is None:  # NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE
            code = ResponseCode.PULL_OFFSET_MOVED if h.queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        # A slave serves the pull whatever slaveReadEnable says: Java 4.9.8 sets
        # PULL_RETRY_IMMEDIATELY for a SLAVE without slaveReadEnable, then overwrites it from the
        # store's status (PullMessageProcessor.processRequest), so consumers read a slave when
        # the master is gone. A slave does not move a consumer's offset it cannot vouch for
        # (it may lag its master): without offsetCheckInSlave, PULL_OFFSET_MOVED becomes
        # PULL_RETRY_IMMEDIATELY at the requested offset, suggesting the group's brokerId.
        if code == ResponseCode.PULL_OFFSET_MOVED and c.is_slave and not c.store_config.offset_check_in_slave:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            suggest = sgc.broker_id
            _rlog.warning(
                "slave-offset-moved",
                "PULL_OFFSET_MOVED:none correction. topic=%s, groupId=%s, requestOffset=%d, suggestBrokerId=%d",
                clip(h.topic),
                clip(h.consumer_group),
                h.queue_offset,
                suggest,
            )
        ext["suggestWhichBrokerId"] = str(suggest)

        response: RemotingCommand | None
        if code == ResponseCode.SUCCESS and result.message_count > 0:
            self.counters.found(h.consumer_group, h.topic, result.message_count, result.buffer_total_size, get_ns)
            if result.holds_files:
                # The holder rides in the body slot only until write_response swaps in its buffers.
                response = cmd.response(code, status, ext, _Holder(result))  # type: ignore[arg-type]
            else:  # the records copied into one bytes (MessageStore.get_message): nothing to release
                response = cmd.response(code, status, ext, result.buffers)  # type: ignore[arg-type]
        else:
            result.release()
            self.counters.missed(get_ns)
            if code == ResponseCode.SUCCESS:  # FOUND without a message: never send an empty body
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
            response = cmd.response(code, status, ext)
            if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and has_suspend:
                polling_millis = suspend_timeout_millis
                if not self.broker_config.long_polling_enable:
                    polling_millis = self.broker_config.short_polling_time_mills
                assert c.pull_request_hold_service is not None  # started before any pull is served
                if c.pull_request_hold_service.suspend_pull_request(
                    conn, cmd, h.topic, h.queue_id, h.queue_offset, polling_millis, message_filter
                ):
                    response = None
                else:  # this connection or the broker holds as many pulls as allowed
                    response = cmd.response(
                        ResponseCode.SYSTEM_BUSY,
                        "[PULL_HOLD_LIMIT]too many suspended pulls, try again later",
                        {},
                    )
            elif code == ResponseCode.PULL_OFFSET_MOVED:
                # Reached only by a master or a slave with offsetCheckInSlave (a slave without it
                # answered PULL_RETRY_IMMEDIATELY above), Java's condition for the event.
                self.generate_offset_moved_event(
                    OffsetMovedEvent(
                        h.consumer_group,
                        MessageQueue(h.topic, self.broker_config.broker_name, h.queue_id),
                        h.queue_offset,
                        result.next_begin_offset,
                    )
                )
                log.info(
                    "PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, queueId=%d, requestOffset=%d, "
                    "newOffset=%d, suggestBrokerId=%d (%s)",
                    clip(h.topic),
                    clip(h.consumer_group),
                    h.queue_id,
                    h.queue_offset,
                    result.next_begin_offset,
                    suggest,
                    status,
                )

        # Commit the consumer offset the pull carried (master only, first pass only).
        if allow_suspend and has_commit_offset and not c.is_slave:
            c.consumer_offset_manager.commit_offset(
                conn.remote_addr, h.consumer_group, h.topic, h.queue_id, h.commit_offset
            )
        return response

    def generate_offset_moved_event(self, event: OffsetMovedEvent) -> None:
        """Append ``event`` to ``OFFSET_MOVED_EVENT`` queue 0, tags and keys the group, as Java
        ``PullMessageProcessor.generateOffsetMovedEvent`` does (monitoring tools subscribe to it).
        The append runs in a task (the pull is answered without waiting for it); at most
        ``MAX_OFFSET_MOVED_WRITES`` at once, past which the event is dropped with one
        rate-limited log line."""
        writes = self._offset_moved_writes
        if len(writes) >= MAX_OFFSET_MOVED_WRITES:
            _rlog.warning(
                "offset-moved-event-busy",
                "dropped an OffsetMovedEvent of group %s for %s@%d: %d writes in flight (at most %d)",
                clip(event.consumer_group),
                clip(event.message_queue.topic),
                event.message_queue.queue_id,
                len(writes),
                MAX_OFFSET_MOVED_WRITES,
            )
            return
        task = asyncio.get_running_loop().create_task(self._put_offset_moved_event(event))
        writes.add(task)
        task.add_done_callback(writes.discard)

    async def _put_offset_moved_event(self, event: OffsetMovedEvent) -> None:
        group = event.consumer_group
        inner = MessageInner(
            topic=TopicValidator.RMQ_SYS_OFFSET_MOVED_EVENT,
            queue_id=0,
            body=event.to_body(),
            flag=0,
            properties={MessageConst.TAGS: group, MessageConst.KEYS: group},
            born_timestamp=int(time.time() * 1000),
            born_host=(self.broker_config.broker_ip1, self.controller.port),
        )
        try:
            result = await self.store.put_message(inner)
        except Exception:  # noqa: BLE001 - Java logs and goes on (generateOffsetMovedEvent)
            _rlog.warning("offset-moved-event-put", "writing an OffsetMovedEvent failed", exc_info=True)
            return
        if not result.is_ok:
            _rlog.warning(
                "offset-moved-event-status",
                "writing an OffsetMovedEvent of group %s failed: %s",
                clip(group),
                result.status.name,
            )


class _Compile:
    """What ``process`` answers when the pull's SQL92 expression is not compiled yet."""

    __slots__ = ("expression", "expression_type", "from_heartbeat")

    def __init__(self, expression_type: str, expression: str, from_heartbeat: bool) -> None:
        self.expression_type = expression_type
        self.expression = expression
        self.from_heartbeat = from_heartbeat

    def failure(self, cmd: RemotingCommand, e: SelectorError) -> RemotingCommand:
        """Java's answer to an expression that does not compile."""
        if self.from_heartbeat:
            _rlog.warning("pull-bad-filter", "the consumer filter data of a group does not compile: %s", clip(e))
            return cmd.response(
                ResponseCode.FILTER_DATA_NOT_EXIST,
                "The broker's consumer filter data is not exist!Your expression may be wrong!",
                {},
            )
        _rlog.warning(
            "pull-bad-subscription", "parse the consumer's subscription[%s] failed: %s", clip(self.expression), clip(e)
        )
        return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed", {})


class _Holder:
    """Carries a ``GetMessageResult`` inside a response until ``write_response`` sends it."""

    __slots__ = ("result",)

    def __init__(self, result: Any) -> None:
        self.result = result

    @property
    def buffers(self) -> Any:
        return self.result.buffers
