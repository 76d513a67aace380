"""Install the real third-party RocketMQ clients and run our driver scripts with them.

The clients come from the package registries into a cache that survives between runs
(``$RMQ_INTEROP_CACHE``, default ``~/.cache/rmq-interop``):

* ``cpp-venv/``: a virtualenv with PyPI ``rocketmq==0.4.4`` (the Apache C++ core, bundled
  ``librocketmq.so``, wrapped with ctypes);
* ``ons/node_modules``: npm ``ali-ons@3.12.0`` (pure JavaScript).

An install that fails raises :class:`InstallError` with the installer's output; the tests
fail on it (they never skip). A file lock makes concurrent pytest runs share one install.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

CPP_PACKAGE = "rocketmq==0.4.4"
ONS_PACKAGE = "ali-ons@3.12.0"
HERE = Path(__file__).resolve().parent
DRIVERS = HERE / "interop" / "drivers"


class InstallError(RuntimeError):
    """A real client could not be installed; the message carries the installer's output."""


def cache_dir() -> Path:
    return Path(os.environ.get("RMQ_INTEROP_CACHE") or Path.home() / ".cache" / "rmq-interop")


@dataclass
class Clients:
    cpp_python: Path
    node: str
    node_path: Path
    install_seconds: dict[str, float] = field(default_factory=dict)  # only what was installed now


def _run(cmd: list[str], what: str, cwd: Path | None = None, timeout: float = 600) -> None:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{what}: {' '.join(cmd)} failed to run: {exc}") from None
    if proc.returncode != 0:
        raise InstallError(f"{what}: {' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout[-4000:]}")


def _cpp_ok(python: Path) -> bool:
    if not python.exists():
        return False
    probe = (
        "import importlib.metadata as m, rocketmq.client; "
        "assert m.version('rocketmq') == '0.4.4', m.version('rocketmq')"
    )
    return (
        subprocess.run([str(python), "-c", probe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    )


def _ons_ok(node_modules: Path) -> bool:
    pkg = node_modules / "ali-ons" / "package.json"
    try:
        return json.loads(pkg.read_text())["version"] == ONS_PACKAGE.split("@")[1]
    except (OSError, ValueError, KeyError):
        return False


def ensure_clients() -> Clients:
    """Install (once) and return the two real clients. Raises :class:`InstallError`."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    node = shutil.which("node")
    npm = shutil.which("npm")
    if not node or not npm:
        raise InstallError("node and npm are needed for the ali-ons interop tests (apt-get install nodejs npm)")
    timings: dict[str, float] = {}
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        venv = root / "cpp-venv"
        python = venv / "bin" / "python"
        if not _cpp_ok(python):
            t0 = time.monotonic()
            shutil.rmtree(venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(venv)], "creating the C++ client's virtualenv")
            _run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", CPP_PACKAGE],
                f"pip install {CPP_PACKAGE}",
            )
            if not _cpp_ok(python):
                raise InstallError(f"{CPP_PACKAGE} installed but `import rocketmq.client` fails in {venv}")
            timings["cpp"] = round(time.monotonic() - t0, 1)
        ons = root / "ons"
        if not _ons_ok(ons / "node_modules"):
            t0 = time.monotonic()
            shutil.rmtree(ons, ignore_errors=True)
            ons.mkdir(parents=True)
            (ons / "package.json").write_text(json.dumps({"name": "rmq-interop-clients", "private": True}))
            _run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", ONS_PACKAGE],
                f"npm install {ONS_PACKAGE}",
                cwd=ons,
            )
            if not _ons_ok(ons / "node_modules"):
                raise InstallError(f"npm install {ONS_PACKAGE} finished but {ons}/node_modules/ali-ons is missing")
            timings["ons"] = round(time.monotonic() - t0, 1)
        if timings:
            (root / "last-install.json").write_text(json.dumps(timings))
    return Clients(python, node, ons / "node_modules", timings)


# ------------------------------------------------------------------- the RocketMQ 5 gRPC client

V5_PACKAGE = "rocketmq-python-client==5.1.2"


class RegistryUnreachable(InstallError):
    """PyPI could not be reached: the only reason a test needing a real client may skip."""


def _v5_ok(python: Path) -> bool:
    if not python.exists():
        return False
    probe = (
        "import importlib.metadata as m, rocketmq; "
        "assert m.version('rocketmq-python-client') == '5.1.2', m.version('rocketmq-python-client')"
    )
    return (
        subprocess.run([str(python), "-c", probe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    )


def ensure_v5_client() -> Path:
    """The Python of a virtualenv (``<cache>/v5-venv``) holding the unmodified PyPI
    ``rocketmq-python-client==5.1.2`` (its import name ``rocketmq`` is the C++ wrapper's too,
    hence a venv of its own), installed once. Raises :class:`RegistryUnreachable` when pip
    cannot reach the index, :class:`InstallError` for any other failure."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / "v5-venv"
    python = venv / "bin" / "python"
    with open(root / ".install-v5.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _v5_ok(python):
            return python
        shutil.rmtree(venv, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(venv)], "creating the 5.x client's virtualenv")
        try:
            _run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", V5_PACKAGE],
                f"pip install {V5_PACKAGE}",
            )
        except InstallError as exc:
            text = str(exc)
            if any(
                s in text
                for s in (
                    "NewConnectionError",
                    "Temporary failure in name resolution",
                    "Network is unreachable",
                    "Max retries exceeded",
                )
            ):
                raise RegistryUnreachable(f"PyPI unreachable installing {V5_PACKAGE}: {text[-400:]}") from None
            raise
        if not _v5_ok(python):
            raise InstallError(f"{V5_PACKAGE} installed but `import rocketmq` fails in {venv}")
    return python


# ------------------------------------------------------------------------------ running drivers


@dataclass
class DriverResult:
    """What one driver process did: its exit code, JSON events and stderr."""

    argv: list[str]
    returncode: int
    events: list[dict]
    stderr: str
    seconds: float
    home: Path

    def of(self, event: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == event]

    def cpp_log(self, limit: int = 60) -> str:
        """The tail of the C++ core's own log (it writes under $HOME/logs/rocketmq-cpp)."""
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob("*")) if self.home else []
        out = []
        for p in logs:
            try:
                lines = p.read_text(errors="replace").splitlines()[-limit:]
            except OSError:
                continue
            out.append(f"--- {p.name} ---\n" + "\n".join(lines))
        return "\n".join(out) or "(no C++ client log)"

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for e in self.events:
            counts[e.get("event", "?")] = counts.get(e.get("event", "?"), 0) + 1
        return (
            f"$ {' '.join(self.argv)}\n  exit {self.returncode} after {self.seconds:.1f}s, events {counts}\n"
            f"  stderr (tail):\n{self.stderr[-3000:]}"
        )


class Driver:
    """A running driver process; ``result()`` waits for it and parses its output."""

    def __init__(self, argv: list[str], env: dict, home: Path, timeout: float):
        self.argv = argv
        self.home = home
        self.timeout = timeout
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )

    def result(self) -> DriverResult:
        try:
            out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            err += f"\n[test harness] killed after {self.timeout:.0f}s"
        events = []
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    events.append({"event": "unparsed", "line": line})
        return DriverResult(self.argv, self.proc.returncode, events, err, time.monotonic() - self.started, self.home)


class LiveDriver(Driver):
    """A driver whose events go to ``<home>/events.jsonl`` as they happen, so that a test can
    watch them while the driver runs (:meth:`events`); it stops when ``stop_file`` exists."""

    def __init__(self, argv: list[str], env: dict, home: Path, timeout: float, stop_file: Path):
        self.argv = argv
        self.home = home
        self.timeout = timeout
        self.stop_file = stop_file
        self.events_path = home / "events.jsonl"
        self.started = time.monotonic()
        with open(self.events_path, "wb") as out, open(home / "stderr.txt", "wb") as err:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, start_new_session=True)

    def events(self, event: str | None = None) -> list[dict]:
        """The complete lines written so far (``event`` given: only those)."""
        text = self.events_path.read_text(errors="replace")
        out = []
        for line in text.splitlines(keepends=True):
            if not line.endswith("\n") or not line.startswith("{"):
                continue  # (the last line may be half written)
            e = json.loads(line)
            if event is None or e.get("event") == event:
                out.append(e)
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        return (self.home / "stderr.txt").read_text(errors="replace")

    def result(self) -> DriverResult:
        """Create the stop file, wait for the driver to end (killed after ``timeout``)."""
        self.stop_file.touch()
        try:
            self.proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        err = self.stderr()
        return DriverResult(
            self.argv, self.proc.returncode, self.events(), err, time.monotonic() - self.started, self.home
        )


def _env(home: Path, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["HOME"] = str(home)  # the C++ core logs to $HOME/logs/rocketmq-cpp; ali-ons keeps offsets under $HOME
    env.update(extra or {})
    return env


def cpp(clients: Clients, home: Path, command: str, *args: str, timeout: float = 60) -> Driver:
    home.mkdir(parents=True, exist_ok=True)
    argv = [str(clients.cpp_python), str(DRIVERS / "cpp_driver.py"), command, *args]
    return Driver(argv, _env(home), home, timeout)


def ons(clients: Clients, home: Path, command: str, *args: str, timeout: float = 60) -> Driver:
    home.mkdir(parents=True, exist_ok=True)
    argv = [clients.node, str(DRIVERS / "ons_driver.js"), command, *args]
    return Driver(argv, _env(home, {"NODE_PATH": str(clients.node_path)}), home, timeout)


def cpp_live(clients: Clients, home: Path, command: str, *args: str, timeout: float = 60) -> LiveDriver:
    """``cpp_driver.py <command> ... --stop-file <home>/stop`` with its events in a file."""
    home.mkdir(parents=True, exist_ok=True)
    stop = home / "stop"
    argv = [str(clients.cpp_python), str(DRIVERS / "cpp_driver.py"), command, *args, "--stop-file", str(stop)]
    return LiveDriver(argv, _env(home), home, timeout, stop)


def ons_live(clients: Clients, home: Path, command: str, *args: str, timeout: float = 60) -> LiveDriver:
    """``ons_driver.js <command> ... --stop-file <home>/stop`` with its events in a file."""
    home.mkdir(parents=True, exist_ok=True)
    stop = home / "stop"
    argv = [clients.node, str(DRIVERS / "ons_driver.js"), command, *args, "--stop-file", str(stop)]
    return LiveDriver(argv, _env(home, {"NODE_PATH": str(clients.node_path)}), home, timeout, stop)


def write_plan(path: Path, messages: list[dict]) -> str:
    path.write_text(json.dumps(messages))
    return str(path)
