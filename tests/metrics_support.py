"""Helpers for the metrics tests: scrape over real HTTP, parse with prometheus_client's own
parser, and a known lag workload (1000 messages on 4 queues, a group that consumed 300)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from rmq._testing import free_port, terminate, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode

TOPIC = "MetricsTopic"
GROUP = "MetricsGroup"
PER_QUEUE = 250  # 1000 messages over 4 queues
CONSUMED = {0: 100, 1: 100, 2: 50, 3: 50}  # 300 consumed in all
LAG = {q: PER_QUEUE - n for q, n in CONSUMED.items()}  # 150, 150, 200, 200: 700 in all

Samples = dict[str, list[tuple[dict[str, str], float]]]


def http_get(port: int, path: str = "/metrics", timeout: float = 20.0) -> tuple[int, str, str]:
    """``(status, content type, body)`` of a GET on 127.0.0.1 (blocking: call via to_thread)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def parse(text: str) -> Samples:
    """Every sample by its name (``rocketmq_rpc_latency_bucket`` …), with its labels."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


async def scrape(port: int) -> Samples:
    status, ctype, body = await asyncio.to_thread(http_get, port)
    assert status == 200, (status, body[:500])
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    return parse(body)


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``."""
    found = [v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


async def lag_workload(env) -> None:
    """1000 messages into TOPIC (250 per queue), GROUP pulls 300 of them (100, 100, 50, 50)
    and commits what it pulled."""
    await env.create_topic(TOPIC, 4)
    for i in range(4 * PER_QUEUE):
        resp = await env.send(TOPIC, b"m%d" % i, queue_id=i % 4, wait_dispatch=False)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    await env.dispatched()
    for qid, target in CONSUMED.items():
        offset = 0
        while offset < target:
            resp = await env.pull(TOPIC, qid, offset, group=GROUP, max_nums=min(32, target - offset), suspend_ms=0)
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
            offset = int(resp.ext_fields["nextBeginOffset"])
        assert offset == target
        resp = await env.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(qid), "commitOffset": str(target)},
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def retry_and_dlq_workload(env) -> None:
    """GROUP sends one message back for a later retry (its %RETRY% topic appears; it commits
    offset 0 there) and one straight to its %DLQ% topic (delay level -1)."""
    from rmq._testing import phy_offset

    await env.create_topic(TOPIC, 4)
    ids = []
    for _ in range(2):
        resp = await env.send(TOPIC, b"back")
        assert resp.code == ResponseCode.SUCCESS
        ids.append(resp.ext_fields["msgId"])
    for msg_id, level in zip(ids, (1, -1), strict=True):
        resp = await env.send_back(phy_offset(msg_id), GROUP, delay_level=level, origin_msg_id=msg_id)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await env.call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": "%RETRY%" + GROUP, "queueId": "0", "commitOffset": "0"},
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await env.dispatched()


async def consumer_online(env, client_id: str = "10.0.0.1@metrics", message_model: str = "CLUSTERING") -> None:
    """A HEART_BEAT of a consumer of GROUP (TOPIC and its retry topic; clustering unless
    ``message_model`` says otherwise) and a producer of PG, over the env's connection (which
    stays open)."""
    import json

    body = {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "groupName": GROUP,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": message_model,
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [
                    {"topic": TOPIC, "subString": "*", "subVersion": 1},
                    {"topic": "%RETRY%" + GROUP, "subString": "*", "subVersion": 1},
                ],
            }
        ],
        "producerDataSet": [{"groupName": "PG"}],
    }
    resp = await env.call(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


class Exporter:
    """``python -m rmq exporter`` on a free port, its output in a file."""

    def __init__(self, tmp_path, namesrv: str, *args: str) -> None:
        self.port = free_port()
        self.log = tmp_path / f"exporter-{self.port}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rmq",
                    "exporter",
                    "-n",
                    namesrv,
                    "--port",
                    str(self.port),
                    "--interval",
                    "1",
                    "--timeout",
                    "3",
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(os.environ),
            )

    async def samples_with(self, pred) -> dict:
        """The exporter's samples once ``pred(samples)`` holds (it refreshes every second)."""

        async def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"exporter exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                status, _ctype, body = await asyncio.to_thread(http_get, self.port, "/metrics", 5.0)
            except OSError:
                return None
            s = parse(body) if status == 200 else {}
            return s if pred(s) else None

        return await wait_until(ready, timeout=60, interval=0.2, what="the exporter's metrics")

    def stop(self) -> int:
        return terminate(self.proc)
