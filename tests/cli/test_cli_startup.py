"""Start-up time: what ``rmq`` processes import (docs/design.md "Start-up time").

Each check runs the real command with ``python -X importtime`` (``PYTHONPROFILEIMPORTTIME=1``
for the broker, which starts through :class:`rmq._testing.BrokerProcess`) and reads the
modules it imported from that report: a command must not load another command's modules, nor
an optional feature's (gRPC, the console, Prometheus, YAML) that is not configured.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_support import RMQ, TIMEOUT

from rmq._testing.processes import BrokerProcess
from rmq.cli.admin._cmd import COMMANDS

#: Never imported by a CLI run or a daemon that does not use them.
OPTIONAL = ("grpc", "aiohttp", "prometheus_client", "yaml", "rmq.console", "rmq.broker.grpc")


def imported(report: str) -> set[str]:
    """The module names of an ``-X importtime`` report (``import time: self | cumulative | name``)."""
    out = set()
    for line in report.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                out.add(name)
    return out


def run_cli(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    r = subprocess.run(
        [sys.executable, "-X", "importtime", *RMQ[1:], *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "import time:" in r.stderr, r.stderr[-2000:]
    return r, imported(r.stderr)


def loaded_under(modules: set[str], prefix: str) -> set[str]:
    return {m for m in modules if m == prefix or m.startswith(prefix + ".")}


def test_admin_command_imports_only_its_own_area_module():
    r, modules = run_cli("admin", "topicList", "-n", "127.0.0.1:1")
    assert r.returncode == 2 and "127.0.0.1:1" in r.stderr  # it ran: nothing listens there
    assert "rmq.cli.admin.topic" in modules and "rmq.client.admin" in modules
    areas = {c.module for c in COMMANDS.values()}
    # topic's own module, and broker's, whose cluster table topic prints too (clusterList)
    assert {f"rmq.cli.admin.{a}" for a in areas} & modules == {"rmq.cli.admin.topic", "rmq.cli.admin.broker"}
    for heavy in (
        *OPTIONAL,
        "javaproperties",
        "rmq.broker",
        "rmq.store",
        "rmq.namesrv",
        "rmq.controller",
        "rmq.cli.logs",
    ):
        assert not loaded_under(modules, heavy), heavy
    # the consumers stay out (the producer and the trace view load: Admin's signatures name them)
    for client in ("rmq.client.consumer.push", "rmq.client.consumer.pull", "rmq.client.consumer.simple"):
        assert client not in modules, client


def test_admin_help_lists_every_command_without_importing_one():
    r, modules = run_cli("admin", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for c in COMMANDS.values():
        assert f" {c.name} {' '.join(c.help.split())}" in text, c.name
    assert not {m for m in modules if m.startswith("rmq.cli.admin.") and m != "rmq.cli.admin._cmd"}
    assert not loaded_under(modules, "rmq.client")


def test_admin_command_help_shows_its_flags():
    r, modules = run_cli("admin", "updateTopic", "--help")
    assert r.returncode == 0 and "--topic" in r.stdout and "--readQueueNums" in r.stdout, r.stdout
    assert "rmq.cli.admin.topic" in modules and "rmq.cli.admin.consumer" not in modules


def test_daemon_help_imports_no_server():
    r, modules = run_cli("broker", "--help")
    assert r.returncode == 0 and "--config" in r.stdout
    for heavy in (*OPTIONAL, "javaproperties", "asyncio", "rmq.broker", "rmq.store", "rmq.client", "rmq.protocol"):
        assert not loaded_under(modules, heavy), heavy


def test_broker_without_optional_features_imports_none_of_them(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    # metrics and gRPC off (rmq._testing's default), no ACL, no controller mode
    broker = BrokerProcess(tmp_path, "127.0.0.1:1", metricsPort=0, grpcServerPort=0).start()
    try:
        assert broker.proc is not None and broker.proc.poll() is None
    finally:
        assert broker.stop() == 0
    modules = imported(broker.log_text())
    assert "rmq.broker.controller" in modules and "rmq.store.message_store" in modules
    for heavy in (*OPTIONAL, "rmq.controller", "rmq.client.admin"):
        assert not loaded_under(modules, heavy), heavy
    assert not {m for m in modules if m.startswith("rmq.cli.admin.") and m != "rmq.cli.admin._cmd"}


@pytest.mark.parametrize("args", [["--help"], ["admin", "topicList", "--help"]])
def test_the_cli_still_answers(args):
    r = subprocess.run([*RMQ, *args], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and r.stdout.startswith("usage: rmq"), r.stderr


def test_every_indexed_command_is_registered_by_its_area_module():
    from rmq.cli.admin import _cmd

    for c in COMMANDS.values():
        assert callable(c.run), c.name  # imports c.module, whose @command registered the body
        assert c.run.__module__ == f"rmq.cli.admin.{c.module}", c.name
    assert set(_cmd._BODIES) == set(COMMANDS)
    with pytest.raises(ValueError, match="not in rmq.cli.admin._cmd._INDEX"):
        _cmd.command("noSuchCommand")(COMMANDS["topicList"].run)
    with pytest.raises(ValueError, match="registered twice"):
        _cmd.command("topicList")(COMMANDS["topicList"].run)
