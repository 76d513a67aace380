"""``rmq exporter`` reads a real 4.x client's running info: the C++ core (PyPI rocketmq==0.4.4)
consuming answers GET_CONSUMER_RUNNING_INFO (relayed by the broker) within the exporter's
bounds. Its core writes no ``statusTable`` (only properties, subscriptions and ``mqTable``), so,
as rocketmq-exporter's ``ClientMetricTaskRunnable`` does with such an answer, no
``rocketmq_client_*`` series is made for it while the group's other families are served.
(ali-ons has no handler for the request at all.)"""

from __future__ import annotations

import asyncio

import interop_support as support
import pytest
from metrics_support import Exporter
from test_interop_reset_offset import Lines, admin_call, produce, wait_for

from rmq.common.metrics import CLIENT_STATUS_FAMILIES

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

OLD = 8


def test_exporter_reads_a_cpp_consumers_running_info(real_clients, broker, names, tmp_path):
    topic = names.topic
    broker.create_topic(topic, 4)
    old = [f"{names.marker}old-{i}" for i in range(OLD)]
    produce(broker.namesrv, topic, old)
    group = names.group + "_cpp"
    # it stops once it has the old messages and a final one, sent when the exporter is done
    cpp = Lines(
        support.cpp(
            real_clients,
            tmp_path / "cpp",
            "push",
            "--namesrv",
            broker.namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--expect",
            str(OLD + 1),
            "--marker",
            names.marker,
            "--timeout",
            "150",
            timeout=170,
        )
    )
    try:
        wait_for(lambda: set(old) <= set(cpp.bodies()), 60, "the C++ consumer to get the messages", broker.log_tail)
        [conn] = admin_call(broker.namesrv, lambda a: a.examine_consumer_connection_info(group)).connection_set
        exp = Exporter(tmp_path, broker.namesrv)

        def served(s: dict) -> bool:
            answered = [v for lab, v in s.get("rmq_exporter_clients", []) if lab["state"] == "answered"]
            count = [v for lab, v in s.get("rocketmq_group_count", []) if lab["group"] == group]
            return answered == [1.0] and count == [1.0]

        try:
            s = asyncio.run(exp.samples_with(served))
        finally:
            assert exp.stop() == 0, exp.log.read_text()[-2000:]
        info = admin_call(broker.namesrv, lambda a: a.get_consumer_running_info(group, conn.client_id))
    finally:
        produce(broker.namesrv, topic, [f"{names.marker}final"])
        report = cpp.finish()
    assert cpp.driver.proc.returncode == 0, report
    # the one consumer online (the module's broker serves this test alone) answered, none failed
    states = {lab["state"]: v for lab, v in s["rmq_exporter_clients"]}
    assert states == {"answered": 1.0, "failed": 0.0, "not_asked": 0.0}
    [(lab, _)] = [(lab, v) for lab, v in s["rocketmq_group_count"] if lab["group"] == group]
    assert lab["localaddr"] == conn.client_id
    # what it answers: its queues, no ConsumeStatus; hence no client series, as the Java exporter
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and info.mq_table
    assert info.status_table == {}
    for name in CLIENT_STATUS_FAMILIES:
        assert not [lab for lab, _ in s.get(name, []) if lab["group"] == group], name
