"""One short run of the whole bench path against a real ``rmq standalone``: what ``make bench``
does (bench/run_all.py starts the broker on free ports, runs produce, prefill + drain and
latency as separate processes, stops the broker), with a few thousand messages. Nothing here
asserts speed; it checks that every figure is there and the counts add up."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180), pytest.mark.heavy(55)]


def _bench(script: str, *args: str, timeout: float = 170) -> subprocess.CompletedProcess[str]:
    """``bench/<script> args...`` from the repository's root, its output merged; asserts it exited 0."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc


def _last_json(proc: subprocess.CompletedProcess[str]) -> dict:
    """The JSON line a bench script prints last (``--json``)."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_run_all_short(tmp_path):
    out = tmp_path / "figures.json"
    proc = _bench(
        "run_all.py",
        "--produce-seconds",
        "2",
        "--prefill",
        "3000",
        "--latency-seconds",
        "2",
        "--json-out",
        str(out),
    )
    results = {r["bench"]: r for r in json.loads(out.read_text())}
    assert set(results) == {"produce", "pull", "latency"}, proc.stdout[-3000:]

    produce = results["produce"]
    assert produce["messages"] > 0 and produce["send_failed"] == 0 and produce["response_failed"] == 0
    assert produce["rt_ms_p50"] <= produce["rt_ms_p99"] <= produce["rt_ms_p999"] <= produce["rt_ms_max"]
    assert produce["broker_cpu_s"] > 0 and produce["broker_cpu_s_per_1m"] > 0
    assert produce["broker_disk_kb_per_msg"] > 0  # at least its record (/proc/PID/io write_bytes)
    assert "--broker-pid" in produce["command"]

    pull = results["pull"]
    assert pull["prefill_messages"] == 3000
    assert pull["backlog"] == 3000 and pull["messages"] == 3000, pull  # every message exactly once
    assert pull["errors"] == 0 and pull["queues"] == 4
    assert pull["bytes"] > 3000 * 1024  # records carry the 1 KiB bodies plus their headers
    assert pull["broker_cpu_s"] is not None and pull["broker_cpu_s"] >= 0  # a 3000-message drain may take < 1 tick

    latency = results["latency"]
    assert latency["sent"] > 0 and latency["consumed"] >= latency["sent"]
    assert 0 <= latency["latency_ms_p50"] <= latency["latency_ms_p99"] <= latency["latency_ms_max"]

    text = proc.stdout
    assert "Send TPS:" in text and "Max RT(ms):" in text and "Response Failed:" in text
    assert "== figures" in text and "rmq standalone stopped (exit code 0)" in text


@pytest.mark.parametrize("serialize", ["rocketmq", "json"])
def test_produce_repeat_threads_against_fresh_brokers(serialize):
    """``--repeat 2 --threads 4``: two fresh brokers, the raw sender over one connection, every
    message acknowledged, the medians over both rounds printed and in the JSON line."""
    proc = _bench(
        "produce_bench.py",
        "--topic",
        "BenchR",
        "--repeat",
        "2",
        "--threads",
        "4",
        "--serialize",
        serialize,
        "--count",
        "2000",
        "--json",
    )
    summary = _last_json(proc)
    assert [r["messages"] for r in summary["runs"]] == [2000, 2000]
    assert all(r["serialize"] == serialize and r["client"] == "raw" and r["connections"] == 1 for r in summary["runs"])
    tps = summary["tps"]
    assert tps["min"] <= tps["median"] <= tps["max"] and summary["broker_cpu_s_per_1m"]["median"] > 0
    assert "tps: median" in proc.stdout and "(load " in proc.stdout


def test_scale_bench_tiny():
    """bench/scale_bench.py at tiny sizes: every figure is there and consistent (the lead runs
    the real sizes)."""
    proc = _bench(
        "scale_bench.py",
        "--topics=30",
        "--groups=5",
        "--clients=12",
        "--heartbeat-interval=1",
        "--idle-seconds=1",
        "--route-queries=50",
        "--register-repeat=1",
        "--store-gb=0.005",
        "--small-files",
        "--json",
    )
    f = _last_json(proc)
    assert f["target"] == "rmq" and f["masters"] == ["broker-a"]
    assert f["topics"] == 30 and f["broker_topics"] >= 30 and f["groups"] == 5 and f["clients"] == 12
    assert 0 < f["register_compressed_bytes"] < f["register_json_bytes"]
    assert f["query_data_version_ms"] > 0 and f["register_full_ms"] > 0
    assert f["register_full_namesrv_cpu_ms"] is not None and f["register_compressed_namesrv_cpu_ms"] is not None
    assert 0 < f["route_p50_ms"] <= f["route_p99_ms"]
    assert f["idle_heartbeats_failed"] == 0 and f["idle_cpu_s_per_min"] is not None
    assert all(f[k] > 10 for k in ("rss_start_mb", "rss_loaded_mb", "rss_idle_mb"))
    assert f["store_bytes"] > 0 and f["recovery_clean_s"] > 0 and f["recovery_kill9_s"] > 0
    assert f["recovery_clean_store_s"] is not None and f["recovery_kill9_store_s"] is not None
    assert "recovery of" in proc.stdout and "QUERY_DATA_VERSION" in proc.stdout


def test_register_micro_tiny():
    """bench/register_micro.py at a tiny size: every figure is there (the script itself checks
    that each registration's changed topic reached the routes)."""
    proc = _bench("register_micro.py", "--topics=40", "--rounds=2", "--json", timeout=120)
    f = _last_json(proc)
    assert f["topics"] == 40 and f["first_registration_ms"] > 0
    for kind in ("full", "compressed"):
        for part in ("decode_ms", "register_ms", "total_ms"):
            s = f[kind][part]
            assert 0 <= s["min"] <= s["median"] <= s["max"], (kind, part, s)


def test_grpc_bench_tiny():
    """bench/grpc_bench.py at tiny sizes: the send and the receive + ack phases each move every
    message, with both sides' CPU (the lead runs the real sizes)."""
    proc = _bench("grpc_bench.py", "--messages=200", "--concurrency=8", "--json")
    f = _last_json(proc)
    assert f["send"]["messages"] == 200 and f["send"]["failed"] == 0, f["send"]
    assert f["receive_ack"]["messages"] == 200
    for phase in ("send", "receive_ack"):
        assert f[phase]["broker_cpu_s_per_1m"] > 0 and f[phase]["client_cpu_s_per_1m"] > 0, f
        assert f[phase]["paced_by"] in ("broker", "client (grpcio aio)"), f
