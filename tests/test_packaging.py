"""Release packaging: one version everywhere, and (slow) `python -m build` makes an sdist and a
wheel (the wheel from the sdist: the sdist builds the extensions with Cython from the build
requirements), the wheel installs in a new venv and `rmq standalone` from that venv answers on
its ports."""

import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest

import rmq
from rmq._testing import (
    free_broker_port,
    free_port,
    invoke_once,
    terminate,
    wait_for_port,
    wait_until,
    wait_until_sync,
)
from rmq._version import __version__
from rmq.protocol.codes import RequestCode, ResponseCode

# runs promtool / systemd-analyze / a child interpreter or binds a port: not a unit test
pytestmark = [pytest.mark.integration, pytest.mark.heavy(120)]

ROOT = pathlib.Path(rmq.__file__).resolve().parent.parent


async def _runtime_table(broker_addr):
    resp = await invoke_once(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert resp.code == ResponseCode.SUCCESS
    return json.loads(resp.body_bytes())["table"]


def test_version_has_one_source():
    out = subprocess.run([sys.executable, "-m", "rmq", "--version"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"rmq {__version__}" == f"rmq {rmq.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]\d+|rc\d+|\.dev\d+)?", __version__)
    with open(ROOT / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    assert "version" in pyproject["project"]["dynamic"] and "version" not in pyproject["project"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "rmq._version.__version__"}
    # the CHANGELOG has a section for the version being released (or its Unreleased notes)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{__version__}]" in changelog and "## [Unreleased]" in changelog


async def test_broker_reports_rmq_version_beside_java_version(tmp_path):
    from rmq._testing import run_standalone

    async with run_standalone(tmp_path) as (_, broker):
        table = await _runtime_table(f"127.0.0.1:{broker.server.port}")
    assert table["rmqVersion"] == __version__
    # what Java clients and mqadmin compare stays Java's (MQVersion.CURRENT_VERSION of 4.9.8)
    assert table["brokerVersion"] == "409" and table["brokerVersionDesc"] == "V4_9_8"


def _tracked(*patterns):
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", *patterns], capture_output=True, text=True, check=True)
    return {line for line in out.stdout.splitlines() if line}


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_sdist_and_wheel_build_and_the_wheel_built_from_the_sdist_installs_and_runs(tmp_path):
    # `python -m build` builds the sdist, then the wheel from that sdist (pypa/build's default),
    # so the wheel proves the sdist builds the extensions; installing that wheel proves it runs.
    # (Installing the sdist as well compiled every Cython module a second time, in a second
    # isolated build environment: the longest single cost of `make test`.)
    # RMQ_QUICK_BUILD (setup.py): gcc at -O0 -g0, a fifth of the release flags' CPU; what this
    # proves is that the wheel builds, installs and runs, not how fast its extensions are.
    dist = tmp_path / "dist"
    out = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        env={**os.environ, "RMQ_QUICK_BUILD": "1"},
        timeout=1500,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (sdist,) = dist.glob(f"rmq-{__version__}.tar.gz")
    (wheel,) = dist.glob(f"rmq-{__version__}-*.whl")

    # The sdist carries every Cython source and stub (whatever the modules are called), the
    # licence, the docs and the service units; no generated C.
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    sources = _tracked("rmq/*.pyx", "rmq/*.pxd", "rmq/*.pxi", "rmq/*.pyi")
    assert sources and sources <= names, sources - names
    assert {"LICENSE", "CHANGELOG.md", "docs/operations.md", "docs/prometheus-rules.yml"} <= names
    assert _tracked("deploy/*") <= names and "tools/check-system.sh" in names
    static = _tracked("rmq/console/static/*")
    assert static and static <= names, static - names
    assert not [n for n in names if n.startswith("rmq/") and n.endswith(".c")]
    with zipfile.ZipFile(wheel) as z:
        wnames = set(z.namelist())
        meta = z.read(f"rmq-{__version__}.dist-info/METADATA").decode()
    assert any(re.fullmatch(r"rmq/_store\.cpython-.*\.so", n) for n in wnames)
    assert "rmq/py.typed" in wnames and "rmq/_store.pyi" in wnames
    assert static <= wnames, static - wnames  # the console's page is package data
    assert f"rmq-{__version__}.dist-info/licenses/LICENSE" in wnames
    assert not [n for n in wnames if n.endswith((".pyx", ".pxi", ".c"))]
    assert "License-Expression: Apache-2.0" in meta and "Classifier: Programming Language :: Cython" in meta

    # The wheel built from the sdist in a new venv (dependencies from the index or the
    # machine's pip configuration, as a user's pip would).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # the venv's rmq, not this tree's: with this tree on PYTHONPATH pip would find rmq of the
    # wheel's version installed already and skip the wheel
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rmq_bin = str(venv / "bin" / "rmq")
    version = subprocess.run([rmq_bin, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert version.stdout.strip() == f"rmq {__version__}"
    probe = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, rmq, rmq._store; print(m.version('rmq'), rmq.__file__)",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    installed_version, installed_file = probe.stdout.split()
    assert installed_version == __version__
    assert installed_file.startswith(str(venv)), installed_file

    ns_port, broker_port = free_port(), free_broker_port()
    with open(tmp_path / "standalone.log", "wb") as log:  # (the child has its own descriptor)
        proc = subprocess.Popen(
            [
                rmq_bin,
                "standalone",
                "--namesrv-port",
                str(ns_port),
                "--broker-port",
                str(broker_port),
                "--store-dir",
                str(tmp_path / "store"),
                "--metricsPort=0",
                "--consolePort=0",
                "--mappedFileSizeCommitLog=67108864",
                "--maxHashSlotNum=20000",
                "--maxIndexNum=80000",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until_sync(
            lambda: proc.poll() is not None or wait_for_port("127.0.0.1", broker_port, 1.0),
            timeout=120,
            what="the installed rmq standalone to listen",
        )
        assert proc.poll() is None, (tmp_path / "standalone.log").read_text()

        async def routed():  # the broker registers with the name server after it listens
            resp = await invoke_once(f"127.0.0.1:{ns_port}", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
            return resp.code == ResponseCode.SUCCESS

        await wait_until(routed, timeout=60, what="the installed broker's route in its name server")
        assert (await _runtime_table(f"127.0.0.1:{broker_port}"))["rmqVersion"] == __version__
    finally:
        assert terminate(proc) == 0
