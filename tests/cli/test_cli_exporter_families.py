"""Every family rocketmq-exporter's collector defines (Java ``RMQMetricsCollector``, listed
below by its label lists) is served by ``rmq exporter`` with the collector's labels, from a live
cluster: a master with a slave, a producer online, and an rmq push consumer consuming (its
GET_CONSUMER_RUNNING_INFO answer is what the ``rocketmq_client_*`` families come from)."""

from __future__ import annotations

import asyncio

from metrics_support import GROUP, TOPIC, Exporter, lag_workload, retry_and_dlq_workload

import rmq
from rmq._testing import broker_env, run_broker, wait_until
from rmq.common.tasks import wait_event

# Java RMQMetricsCollector's *_LABEL_NAMES → the families it registers with them.
_RUNTIME = (  # noqa: SIM905 - the names as one text, as many per line as fit
    "commitlog_disk_ratio commitlog_maxoffset commitlog_minoffset commitlogdir_capacity_free "
    "commitlogdir_capacity_total consumequeue_disk_ratio dispatch_behind_bytes dispatch_maxbuffer "
    "earliest_message_timestamp getfound_tps10 getfound_tps60 getfound_tps600 "
    "getmessage_entire_time_max getmiss_tps10 getmiss_tps60 getmiss_tps600 gettotal_tps10 "
    "gettotal_tps60 gettotal_tps600 gettransfered_tps10 gettransfered_tps60 gettransfered_tps600 "
    "msg_gettotal_today_now msg_gettotal_todaymorning msg_gettotal_yesterdaymorning "
    "msg_put_total_today_now msg_puttotal_todaymorning msg_puttotal_yesterdaymorning "
    "pagecache_lock_time_mills pmdt_0ms pmdt_0to10ms pmdt_100to200ms pmdt_10stomore pmdt_10to50ms "
    "pmdt_1to2s pmdt_200to500ms pmdt_2to3s pmdt_3to4s pmdt_4to5s pmdt_500to1s pmdt_50to100ms "
    "pmdt_5to10s pull_threadpoolqueue_capacity pull_threadpoolqueue_headwait_timemills "
    "pull_threadpoolqueue_size put_latency_99 put_latency_999 put_message_average_size "
    "put_message_size_total put_tps10 put_tps60 put_tps600 putmessage_entire_time_max "
    "putmessage_times_total query_threadpool_queue_capacity "
    "query_threadpoolqueue_headwait_timemills query_threadpoolqueue_size remain_howmanydata_toflush "
    "remain_transientstore_buffer_numbs send_threadpool_queue_size send_threadpoolqueue_capacity "
    "send_threadpoolqueue_headwait_timemills start_accept_sendrequest_time"
).split()
COLLECTOR: dict[tuple[str, ...], list[str]] = {
    ("cluster", "brokerIP", "broker"): ["rocketmq_broker_tps", "rocketmq_broker_qps", "rocketmq_broker_commitlog_diff"],
    ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"): [
        f"rocketmq_brokeruntime_{n}" for n in _RUNTIME
    ],
    ("cluster", "broker", "group"): ["rocketmq_topic_dlq_offset", "rocketmq_producer_count"],
    ("clientAddr", "clientId", "group", "topic"): [
        "rocketmq_client_consume_fail_msg_count",
        "rocketmq_client_consume_fail_msg_tps",
        "rocketmq_client_consume_ok_msg_tps",
        "rocketmq_client_consume_rt",
        "rocketmq_client_consumer_pull_rt",
        "rocketmq_client_consumer_pull_tps",
    ],
    ("caddr", "localaddr", "group"): ["rocketmq_group_count"],
    ("group", "topic", "countOfOnlineConsumers", "msgModel"): [
        "rocketmq_group_diff",
        "rocketmq_group_retrydiff",
        "rocketmq_group_dlqdiff",
    ],
    ("cluster", "broker", "topic", "group"): [
        "rocketmq_consumer_tps",
        "rocketmq_consumer_message_size",
        "rocketmq_consumer_offset",
        "rocketmq_group_consume_tps",
        "rocketmq_group_consume_total_offset",
        "rocketmq_send_back_nums",
        "rocketmq_group_get_latency_by_storetime",
    ],
    ("cluster", "broker", "topic"): [
        "rocketmq_producer_tps",
        "rocketmq_producer_message_size",
        "rocketmq_producer_offset",
        "rocketmq_topic_retry_offset",
    ],
}
CLIENT_GROUP = "ExporterClientGroup"


def test_the_list_is_the_collectors_whole():
    names = [n for ns in COLLECTOR.values() for n in ns]
    assert len(names) == len(set(names)) == 89  # every GaugeMetricFamily of RMQMetricsCollector


async def test_every_collector_family_is_served_with_its_labels(tmp_path):
    async with broker_env(tmp_path / "store") as env:
        await lag_workload(env)
        await retry_and_dlq_workload(env)
        got: list[int] = []

        def handler(msg: rmq.MessageExt) -> rmq.ConsumeResult:
            got.append(msg.queue_offset)
            # one in ten fails: the consume failed figures and the retry topic move too
            return rmq.ConsumeResult.RECONSUME_LATER if msg.queue_offset % 10 == 0 else rmq.ConsumeResult.SUCCESS

        consumer = rmq.PushConsumer(
            env.ns_addr,
            CLIENT_GROUP,
            handler=handler,
            consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(TOPIC)
        name = env.broker.broker_config.broker_name
        async with (
            run_broker(tmp_path / "slave", env.ns, broker_name=name, broker_id=1, broker_role="SLAVE"),
            rmq.Producer(env.ns_addr, "ExporterProducerGroup") as producer,
            consumer,
        ):
            await wait_until(lambda: len(got) >= 1000, timeout=60, what="the client consuming the topic")
            stop = asyncio.Event()

            async def trickle() -> None:
                # the producer stays online and the client keeps consuming while the exporter
                # starts, so the client's minute rates stay above 0 however long that takes
                while not stop.is_set():
                    await producer.send(rmq.Message(TOPIC, b"more"))
                    await wait_event(stop, 0.1)

            sender = asyncio.create_task(trickle())
            exp = Exporter(tmp_path, env.ns_addr)
            wanted = [n for ns in COLLECTOR.values() for n in ns]

            last: dict = {}

            def ready(s: dict) -> bool:
                last.update(s)
                ok_tps = [
                    v for lab, v in s.get("rocketmq_client_consume_ok_msg_tps", []) if lab["group"] == CLIENT_GROUP
                ]
                return all(n in s for n in wanted) and any(v > 0 for v in ok_tps)

            try:
                s = await exp.samples_with(ready)
            except AssertionError as e:
                missing = [n for n in wanted if n not in last]
                raise AssertionError(f"{e}; missing {missing}; {last.get('rocketmq_client_consume_ok_msg_tps')}") from e
            finally:
                stop.set()
                await sender
                assert exp.stop() == 0, exp.log.read_text()[-2000:]
    for labels, names in COLLECTOR.items():
        for n in names:
            for lab, _v in s[n]:
                assert tuple(sorted(lab)) == tuple(sorted(labels)), (n, lab)
    # the client's own figures, labelled as the collector labels them: its address and id, per topic
    [conn] = [lab for lab, _ in s["rocketmq_group_count"] if lab["group"] == CLIENT_GROUP]
    client = {lab["topic"]: lab for lab, _ in s["rocketmq_client_consumer_pull_tps"] if lab["group"] == CLIENT_GROUP}
    assert set(client) == {TOPIC, "%RETRY%" + CLIENT_GROUP}  # its subscriptions, as Java's statusTable
    assert client[TOPIC]["clientId"] == conn["localaddr"] and client[TOPIC]["clientAddr"] == conn["caddr"]

    def of(family: str, **labels: str) -> float:
        [v] = [v for lab, v in s[family] if all(lab[k] == x for k, x in labels.items())]
        return v

    assert of("rocketmq_client_consumer_pull_tps", group=CLIENT_GROUP, topic=TOPIC) > 0
    assert of("rocketmq_client_consume_fail_msg_count", group=CLIENT_GROUP, topic=TOPIC) > 0
    assert of("rocketmq_client_consume_rt", group=CLIENT_GROUP, topic=TOPIC) >= 0
    # GET_CONSUME_STATS' figures per broker: the committed total (as rocketmq_consumer_offset)
    assert of("rocketmq_group_consume_total_offset", group=GROUP, topic=TOPIC) == 300
    assert of("rocketmq_group_consume_total_offset", group=GROUP, topic=TOPIC) == of(
        "rocketmq_consumer_offset", group=GROUP, topic=TOPIC
    )
    assert of("rocketmq_producer_count", group="ExporterProducerGroup") == 1
    assert of("rmq_exporter_clients", state="answered") == 1 and of("rmq_exporter_clients", state="failed") == 0
