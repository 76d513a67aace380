"""docs/prometheus-rules.yml: promtool checks it and runs its unit tests (rules_test.yml beside
this file), and every metric it reads is one rmq serves (rmq.common.metrics.FAMILIES)."""

import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

import rmq
from rmq.common.metrics import FAMILIES

# runs promtool / systemd-analyze / a child interpreter or binds a port: not a unit test
pytestmark = pytest.mark.integration

ROOT = pathlib.Path(rmq.__file__).resolve().parent.parent
RULES = ROOT / "docs" / "prometheus-rules.yml"
RULES_TEST = pathlib.Path(__file__).with_name("rules_test.yml")


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool is missing: it comes with Debian's prometheus package, which `make test` installs "
            "(apt-get install prometheus) as root or through sudo -n; install it by hand otherwise"
        )
    return path


def test_promtool_check_rules(promtool):
    out = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_test_rules(promtool):
    out = subprocess.run(
        [promtool, "test", "rules", str(RULES_TEST)], capture_output=True, text=True, timeout=120, cwd=RULES_TEST.parent
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def _rules():
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_rules_read_only_metrics_rmq_serves():
    rules = _rules()
    recorded = {r["record"] for r in rules if "record" in r}
    served = set(FAMILIES) | {f"{n}_bucket" for n, f in FAMILIES.items() if f.kind == "histogram"}
    functions = {
        "sum",
        "by",
        "rate",
        "delta",
        "histogram_quantile",
        "max",
        "or",
        "and",
        "offset",
        "le",
        "unless",
        "on",
        "count",
    }
    used = set()
    for r in rules:
        expr = re.sub(r'\{[^}]*\}|"[^"]*"|\[[^]]*\]', " ", r["expr"])  # label matchers, strings, ranges
        used |= {t for t in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if t not in functions}
    used -= recorded | {"group", "topic", "cluster", "broker", "up", "m"}
    assert used and used <= served, used - served
    # every alert the issue asks for is there, and each tells severity, summary and description
    alerts = {r["alert"]: r for r in rules if "alert" in r}
    assert {
        "RmqBrokerDown",
        "RmqConsumerLagGrowing",
        "RmqConsumersGone",
        "RmqDeadLetterQueueGrowing",
        "RmqDiskNearlyFull",
        "RmqFlushBehind",
        "RmqDispatchBehind",
        "RmqSlaveBehind",
        "RmqSendLatencyHigh",
    } <= set(alerts)
    for a in alerts.values():
        assert a["labels"]["severity"] in ("warning", "critical")
        assert a["annotations"]["summary"] and a["annotations"]["description"]


def test_every_alert_has_a_unit_test():
    tested = set(re.findall(r"alertname: (\w+)", RULES_TEST.read_text()))
    assert {r["alert"] for r in _rules() if "alert" in r} <= tested
