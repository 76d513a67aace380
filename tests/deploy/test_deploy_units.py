"""deploy/: the systemd units pass `systemd-analyze verify` without a complaint, their command
lines parse with rmq's own parser, they carry the hardening the README promises, and the example
configurations pass rmq's configuration checks (a master and its slave)."""

import configparser
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

import pytest

import rmq
from rmq.cli import _parser
from rmq.cli.daemons import build_broker_configs, build_namesrv_config
from rmq.config import load_properties

# runs promtool / systemd-analyze / a child interpreter or binds a port: not a unit test
pytestmark = pytest.mark.integration

ROOT = pathlib.Path(rmq.__file__).resolve().parent.parent
UNITS = ROOT / "deploy" / "systemd"
CONF = ROOT / "deploy" / "conf"
INSTALLED_RMQ = "/opt/rmq/venv/bin/rmq"  # where deploy/README.md installs rmq
INSTANCE = "broker-a"


def _units():
    units = sorted(UNITS.glob("*.service"))
    assert {u.name for u in units} == {"rmq-namesrv.service", "rmq-broker@.service", "rmq-console.service"}
    return units


def _service(unit):
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read(unit)
    return cp["Service"]


def test_systemd_analyze_verify(tmp_path):
    """verify checks that ExecStart's binary exists: the units are verified as installed with
    ExecStart rewritten from /opt/rmq/venv/bin/rmq to an executable this test creates (a
    wrapper running this tree's rmq), the template as its instance rmq-broker@broker-a."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing (Debian package systemd)")
    wrapper = tmp_path / "bin" / "rmq"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m rmq "$@"\n')
    wrapper.chmod(0o755)
    paths = []
    for unit in _units():
        text = unit.read_text()
        assert text.count(INSTALLED_RMQ) == 1, unit.name
        target = tmp_path / unit.name.replace("@.service", f"@{INSTANCE}.service")
        target.write_text(text.replace(INSTALLED_RMQ, str(wrapper)))
        paths.append(str(target))
    out = subprocess.run(
        [analyze, "verify", *paths],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"},
    )
    # unknown keys and bad values are only logged, so the output must be empty too
    assert out.returncode == 0 and out.stderr.strip() == "" and out.stdout.strip() == "", out.stdout + out.stderr


@pytest.mark.parametrize("unit", _units(), ids=lambda u: u.name)
def test_unit_is_hardened_and_its_command_parses(unit):
    svc = _service(unit)
    assert svc["User"] == "rmq" and svc["Group"] == "rmq"
    assert svc["Restart"] == "on-failure" and "2" in svc["RestartPreventExitStatus"].split()
    assert int(svc["LimitNOFILE"]) >= 65536
    for key, value in (
        ("ProtectSystem", "strict"),
        ("NoNewPrivileges", "yes"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", ""),
        ("SystemCallFilter", "@system-service"),
    ):
        assert svc[key] == value, (unit.name, key)
    argv = shlex.split(svc["ExecStart"].replace("%i", INSTANCE))
    assert argv[0] == INSTALLED_RMQ
    args, extra = _parser().parse_known_args(argv[1:])
    assert extra == [] and args.command in ("namesrv", "broker", "console")
    if args.command == "broker":
        assert args.config_file == f"/etc/rmq/{INSTANCE}.conf"
        assert (CONF / f"{INSTANCE}.conf").exists()  # the example the instance name points at
        assert svc["ReadWritePaths"] == "/etc/rmq"  # updateBrokerConfig writes the -c file
        assert int(svc["TimeoutStopSec"]) >= 120 and "4" in svc["RestartPreventExitStatus"].split()
    if args.command == "namesrv":
        assert args.config_file == "/etc/rmq/namesrv.conf"
    if args.command == "console":
        assert args.users_file == "/etc/rmq/console-users"  # the console refuses to start with no account


def test_example_namesrv_conf_passes_the_checks():
    config, warnings = build_namesrv_config(load_properties(str(CONF / "namesrv.conf")))
    assert warnings == [] and config.listen_host == "0.0.0.0"
    assert config.kv_config_path.startswith("/var/lib/rmq/")  # inside the unit's StateDirectory


def test_example_master_and_slave_pass_the_checks():
    master, master_store, w1 = build_broker_configs(load_properties(str(CONF / "broker-a.conf")))
    slave, slave_store, w2 = build_broker_configs(load_properties(str(CONF / "broker-a-s.conf")))
    assert w1 == [] and w2 == []
    assert (master.broker_cluster_name, master.broker_name) == (slave.broker_cluster_name, slave.broker_name)
    assert (master.broker_id, slave.broker_id) == (0, 1)
    assert (master_store.broker_role, slave_store.broker_role) == ("SYNC_MASTER", "SLAVE")
    assert master.namesrv_addr_list == slave.namesrv_addr_list and len(master.namesrv_addr_list) == 2
    for store in (master_store, slave_store):
        assert store.store_path_root_dir.startswith("/var/lib/rmq/")  # the unit's StateDirectory
    assert master_store.store_path_root_dir != slave_store.store_path_root_dir
