"""SlaveSynchronize: a SLAVE broker's copy of its master's metadata (Java ``SlaveSynchronize``).

Every ``slaveSyncIntervalMs`` (10 s; the first round 3 s after start, as Java's
``BrokerController.handleSlaveSynchronize``) a slave asks its master for

* GET_ALL_TOPIC_CONFIG (21): the topic table, taken whole when its ``dataVersion`` differs
  from ours (Java ``syncTopicConfig``: clear, put all, persist);
* GET_ALL_CONSUMER_OFFSET (43): the committed offsets, laid over ours (Java ``putAll``: keys
  the master lacks stay);
* GET_ALL_DELAY_OFFSET (45): the schedule service's progress per delay level, taken whole;
* GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): the subscription groups, taken whole when the
  ``dataVersion`` differs.

The master's address is what the name server answered to our last REGISTER_BROKER
(``masterAddr``, Java ``doRegisterBrokerAll`` → ``slaveSynchronize.setMasterAddr``): while the master is not
registered there is no address and nothing is asked, so a dead master never empties a slave's
tables. A master that does not answer, answers an error or a body that is not the table it
should be leaves the table as it was (one rate-limited warning); each of the four is
independent. Entries that cannot be ours (an illegal topic or group name, queue numbers past
``maxTopicQueueNums``, a negative offset) are dropped one by one; the sizes are bounded by the
remoting client's frame limit (16 MiB), ``maxConsumerOffsetKeys``, ``maxSubscriptionGroupNums``
and the number of delay levels. The tables changed are written by the broker's
ConfigPersister, off the event loop; the answers are decoded and checked in a thread
(50 000 topics take some hundred milliseconds), and only the swap of a table runs on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from rmq.broker.context import BrokerContext
from rmq.broker.managers.subscription_group import SubscriptionGroupConfig, check_group_name
from rmq.broker.managers.topic_config import DataVersion, TopicConfig
from rmq.common.constants import PermName, TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.errors import RMQError
from rmq.protocol.body.sync import DataVersionData
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests.broker import (
    get_all_consumer_offset,
    get_all_delay_offset,
    get_all_subscription_group_config,
    get_all_topic_config,
    parse_all_consumer_offset,
    parse_all_delay_offset,
    parse_all_subscription_group_config,
    parse_all_topic_config,
)

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

#: Java schedules the first round 3 s after the broker starts.
FIRST_SYNC_DELAY = 3.0
#: Java BrokerOuterAPI waits 3 s for each of the four answers.
SYNC_TIMEOUT = 3.0
_INT64_MAX = (1 << 63) - 1
_QUEUE_ID_MAX = (1 << 31) - 1


class SlaveSynchronize:
    """The four copies of one slave broker (see the module docstring).

    Args:
        controller: the broker (``rmq.broker.context.BrokerContext``: its managers, schedule
            service, config and the remoting client of its ``BrokerOuterAPI``, which also
            reaches the master).
        interval: seconds between rounds (BrokerConfig ``slaveSyncIntervalMs``, 10 s).
        timeout: seconds to wait for each answer (3 s, Java's).
    """

    def __init__(self, controller: BrokerContext, interval: float = 10.0, timeout: float = SYNC_TIMEOUT) -> None:
        self.controller = controller
        self.interval = interval
        self.timeout = timeout
        self._master_addr: str | None = None
        #: rounds that reached the master for each table (tests and brokerStatus read them).
        self.synced: dict[str, int] = {"topicConfig": 0, "consumerOffset": 0, "delayOffset": 0, "subscriptionGroup": 0}
        #: rounds in which the master was asked and at least one table could not be copied.
        self.failures = 0
        #: wall-clock ms of the last round in which all four tables were copied, 0 before.
        self.last_sync_timestamp = 0

    @property
    def master_addr(self) -> str | None:
        """The master's ``ip:port``: the one set by :meth:`set_master_addr`, else the
        ``masterAddr`` of the last REGISTER_BROKER answer (Java ``doRegisterBrokerAll`` sets it
        from every answer); None while the name server knows no master for us."""
        if self._master_addr is not None:
            return self._master_addr
        return getattr(self.controller.broker_outer_api, "master_addr", "") or None

    def set_master_addr(self, addr: str | None) -> None:
        """Sync from ``addr`` whatever the name server answers (None: follow its answers)."""
        if addr != self._master_addr:
            log.info("slave sync: master address set to %s (was %s)", clip(addr), clip(self._master_addr))
        self._master_addr = addr or None

    def runtime_info(self) -> dict[str, str]:
        """This slave's sync state for GET_BROKER_RUNTIME_INFO (not in Java 4.9.8, whose slave
        only logs it): the master it copies from ("" when none), the wall-clock ms of the last
        complete copy (0 before the first) and the rounds that failed."""
        return {
            "slaveSyncMasterAddr": self.master_addr or "",
            "slaveSyncLastTimestamp": str(self.last_sync_timestamp),
            "slaveSyncFailedRounds": str(self.failures),
        }

    async def run(self) -> None:
        """The periodic task (owned and cancelled by the controller)."""
        await asyncio.sleep(min(FIRST_SYNC_DELAY, self.interval))
        while True:
            try:
                await self.sync_all()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next round tries again
                log.exception("slave sync round failed")
            await asyncio.sleep(self.interval)

    async def sync_all(self) -> bool:
        """One round (Java ``syncAll``): the four copies, each on its own. True when all four
        were copied; False when there is no master to ask or one of them failed."""
        master = self.master_addr
        if master is None or master == self.controller.broker_addr:
            return False
        ok = True
        for name, step in (
            ("topicConfig", self.sync_topic_config),
            ("consumerOffset", self.sync_consumer_offset),
            ("delayOffset", self.sync_delay_offset),
            ("subscriptionGroup", self.sync_subscription_group_config),
        ):
            try:
                await step(master)
                self.synced[name] += 1
            except (TimeoutError, RMQError, OSError, ValueError) as e:
                ok = False
                _rlog.warning(
                    f"slave-sync-{name}",
                    "slave sync of %s from master %s failed, keeping ours: %s",
                    name,
                    clip(master),
                    clip(e),
                )
        if ok:
            self.last_sync_timestamp = int(time.time() * 1000)
        else:
            self.failures += 1
        return ok

    async def _invoke(self, master: str, cmd: RemotingCommand) -> RemotingCommand:
        client = self.controller.broker_outer_api.client
        resp: RemotingCommand = await client.invoke(master, cmd, timeout=self.timeout)
        return resp

    # -- the four tables -------------------------------------------------------------------

    async def sync_topic_config(self, master: str) -> None:
        """Java ``syncTopicConfig``: the master's table replaces ours when its version differs.
        The answer is decoded and checked in a thread; only the swap runs on the loop."""
        resp = await self._invoke(master, get_all_topic_config())
        tcm = self.controller.topic_config_manager
        version, table = await asyncio.to_thread(_topic_table, resp, master, tcm.max_queue_nums)
        _replace_versioned(tcm, tcm.topic_config_table, version, table, f"topic config from master {clip(master)}")

    async def sync_consumer_offset(self, master: str) -> None:
        """Java ``syncConsumerOffset``: the master's offsets over ours (``putAll``)."""
        resp = await self._invoke(master, get_all_consumer_offset())
        offsets = await asyncio.to_thread(_offset_table, resp)
        com = self.controller.consumer_offset_manager
        table = com.offset_table
        changed = dropped = 0
        for key, good in offsets.items():
            if key not in table and len(table) >= com.max_keys:
                dropped += 1
                continue
            if table.get(key) != good:
                table[key] = good
                changed += 1
        if dropped:
            _rlog.warning(
                "slave-sync-offsets-full",
                "slave sync: %d topic@group offsets of master %s not copied: the table holds maxConsumerOffsetKeys=%d",
                dropped,
                clip(master),
                com.max_keys,
            )
        if changed:
            com.mark_dirty()
            log.debug("slave sync: %d topic@group offsets from master %s", changed, clip(master))

    async def sync_delay_offset(self, master: str) -> None:
        """Java ``syncDelayOffset``: the master's delay progress replaces ours."""
        offsets = parse_all_delay_offset(await self._invoke(master, get_all_delay_offset()))
        schedule = self.controller.schedule_service
        levels = schedule.max_delay_level
        good = {lvl: o for lvl, o in offsets.items() if 1 <= lvl <= levels and 0 <= o <= _INT64_MAX}
        if len(good) != len(offsets):
            _rlog.warning(
                "slave-sync-delay",
                "slave sync: master %s delay offsets outside levels 1..%d or negative skipped: %s",
                clip(master),
                levels,
                clip(offsets),
            )
        table = schedule.table
        if table.offset_table != good:
            table.offset_table = good
            table.mark_dirty()

    async def sync_subscription_group_config(self, master: str) -> None:
        """Java ``syncSubscriptionGroupConfig``: the master's groups replace ours when the version
        differs (decoded and checked in a thread, swapped on the loop)."""
        resp = await self._invoke(master, get_all_subscription_group_config())
        limit = int(getattr(self.controller.broker_config, "max_subscription_group_nums", 100_000))
        version, table = await asyncio.to_thread(_group_table, resp, master, limit)
        sgm = self.controller.subscription_group_manager
        _replace_versioned(
            sgm, sgm.subscription_group_table, version, table, f"subscription groups from master {clip(master)}"
        )


def _replace_versioned(
    manager: Any, live: dict[str, Any], version: DataVersionData, table: dict[str, Any], what: str
) -> None:
    """Java's rule for the versioned tables (topics, groups): the master's table replaces ours,
    in one swap on the loop, when its data version differs; the version is taken too."""
    if _same_version(manager.data_version, version):
        return
    live.clear()
    live.update(table)
    manager.data_version = DataVersion(version.timestamp, version.counter)
    manager.mark_dirty()
    log.info("slave sync: %s (%d entries, version %s)", what, len(table), version.to_json())


# -- decoding and checking, off the event loop (pure functions of the answer) -----------------


def _topic_table(resp: RemotingCommand, master: str, cap: int) -> tuple[DataVersionData, dict[str, TopicConfig]]:
    """The master's data version and the topics of its answer that can be ours (each one
    refused is logged and left out). Raises what the parser raises for a malformed body."""
    wrapper = parse_all_topic_config(resp)
    table: dict[str, TopicConfig] = {}
    for name, d in wrapper.topic_config_table.items():
        try:
            tc = TopicConfig.from_json(d)
            problem = TopicValidator.check_topic(tc.topic_name)
            if problem is None and tc.topic_name != name:
                problem = "the entry's topicName differs from its key"
            if problem is None and not (0 <= tc.read_queue_nums <= cap and 0 <= tc.write_queue_nums <= cap):
                problem = f"queue numbers past maxTopicQueueNums {cap}"
            if problem is None and not PermName.is_valid(tc.perm):
                problem = f"perm {tc.perm} is not valid"
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            problem = f"malformed: {e}"
        if problem is not None:
            _rlog.warning(
                "slave-sync-topic",
                "slave sync: master %s topic %s skipped: %s",
                clip(master),
                clip(name),
                clip(problem),
            )
            continue
        table[name] = tc
    return wrapper.data_version, table


def _offset_table(resp: RemotingCommand) -> dict[str, dict[int, int]]:
    """The master's offsets, without the queue ids and offsets that cannot be ours (Java's
    table may hold -1 for "none")."""
    return {
        key: {q: o for q, o in queues.items() if 0 <= q <= _QUEUE_ID_MAX and 0 <= o <= _INT64_MAX}
        for key, queues in parse_all_consumer_offset(resp).items()
    }


def _group_table(
    resp: RemotingCommand, master: str, limit: int
) -> tuple[DataVersionData, dict[str, SubscriptionGroupConfig]]:
    """The master's data version and its groups that can be ours, at most ``limit``
    (``maxSubscriptionGroupNums``)."""
    wrapper = parse_all_subscription_group_config(resp)
    table: dict[str, SubscriptionGroupConfig] = {}
    for name, d in wrapper.subscription_group_table.items():
        if len(table) >= limit:
            _rlog.warning(
                "slave-sync-groups-full",
                "slave sync: master %s has more than maxSubscriptionGroupNums=%d groups; the rest not copied",
                clip(master),
                limit,
            )
            break
        try:
            cfg = SubscriptionGroupConfig.from_json(d)
            problem = check_group_name(cfg.group_name)
            if problem is None and cfg.group_name != name:
                problem = "the entry's groupName differs from its key"
        except (TypeError, ValueError, OverflowError) as e:
            problem = f"malformed: {e}"
        if problem is not None:
            _rlog.warning(
                "slave-sync-group",
                "slave sync: master %s group %s skipped: %s",
                clip(master),
                clip(name),
                clip(problem),
            )
            continue
        table[name] = cfg
    return wrapper.data_version, table


def _same_version(ours: DataVersion, theirs: DataVersionData) -> bool:
    """Java ``DataVersion.equals``: same timestamp and counter."""
    return ours.timestamp == theirs.timestamp and ours.counter == theirs.counter
