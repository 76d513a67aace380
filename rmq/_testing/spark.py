"""A Spark standalone cluster for the connector's cluster tests and bench: a master and workers
started from the installed pyspark as separate JVMs, and a Spark driver program in a process of
its own, driven over a pipe.

pyspark's wheel ships ``bin/spark-class`` but not the ``sbin/start-master.sh`` /
``start-worker.sh`` scripts, so each daemon is ``spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` (``spark-class`` execs the JVM,
so the pid we hold is the JVM's). Everything binds 127.0.0.1 (``SPARK_LOCAL_IP``) on ports the
JVMs pick themselves (port 0, read back from their logs: no race for a free port), with its own
work, local and conf directories under the cluster's directory and the master's REST submission
server (a fixed port, 6066) off.

Executors run in their own JVMs, started by the workers, and Spark's Python workers under them
run ``spark.pyspark.python``. :meth:`SparkCluster.session_conf` gives a driver what makes rmq
importable there: this interpreter as ``spark.pyspark.python`` and this process's
``PYTHONPATH`` (with the checkout holding ``rmq`` first) as ``spark.executorEnv.PYTHONPATH``,
which Spark's ``PythonWorkerFactory`` puts on the Python workers' path; the workers' JVMs get the
same ``PYTHONPATH`` in their environment.

One process has one SparkContext, and the local-mode tests keep theirs for the whole session,
so a cluster test runs its driver as :class:`SparkDriver`: ``python -m rmq._testing.spark``
reading JSON commands on stdin and answering on a pipe of its own (its stdout and stderr, the
JVM's too, go to a log file).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmq._testing import terminate, wait_until_sync

__all__ = [
    "SparkCluster",
    "SparkDaemon",
    "SparkDriver",
    "checkpoint_progress",
    "run_stream",
    "spark_home",
    "spark_missing",
]

log = logging.getLogger("rmq.testing.spark")

# What Spark says when a Python worker it started did not connect back in time.
WORKER_START_TIMEOUT = "Python worker failed to connect back"


def run_stream(start: Callable[[], Any], timeout: float = 120.0, attempts: int = 4) -> Any:
    """Start a streaming query with ``start()``, wait up to ``timeout`` seconds for it to end
    (``trigger(availableNow=True)`` queries end by themselves) and return it; a query Spark
    could not start because its Python worker did not connect back is started again, up to
    ``attempts`` times in all (default 4). Any other failure is the query's: it is returned
    (``q.exception()``) or raised, as ``awaitTermination`` raises it.

    Spark's ``PythonStreamingSourceRunner`` (the driver side of a Python data source's stream)
    starts its worker as a plain child process, never through the pyspark daemon whatever
    ``spark.python.use.daemon`` says, and gives it a hard-coded 10 s
    (``PythonWorkerFactory.PROCESS_WAIT_TIMEOUT_MS``, no setting) to import pyspark, pyarrow
    and numpy and connect back: at a load of 15 on two cores that can take longer. The query
    then fails while Spark builds its plan, before it planned a batch or read anything, so
    starting it again on the same checkpoint is what its user would do and changes nothing of
    what a test asserts about the data.
    """
    for attempt in range(1, attempts + 1):
        q = start()
        try:
            q.awaitTermination(timeout)
        except Exception as e:  # (pyspark's StreamingQueryException, its message names the cause)
            if WORKER_START_TIMEOUT not in str(e) or attempt == attempts:
                raise
        else:
            exc = q.exception()
            if exc is None or WORKER_START_TIMEOUT not in str(exc) or attempt == attempts:
                return q
        log.warning("streaming query %s: Spark's Python worker did not connect back in time; starting it again", q.id)
    raise AssertionError("unreachable")  # (the last attempt returns or raises above)


def spark_home() -> str | None:
    """The installed pyspark's directory (it holds ``bin/spark-class`` and ``jars``), or None."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return os.path.dirname(spec.origin)


def spark_missing() -> str | None:
    """Why no Spark standalone cluster can be started here (for a skip reason), or None."""
    home = spark_home()
    if home is None:
        return "pyspark is not installed (pip install -e '.[spark]')"
    if importlib.util.find_spec("pyarrow") is None:
        return "pyarrow is not installed (pip install -e '.[spark]')"
    if not os.path.exists(os.path.join(home, "bin", "spark-class")):
        return f"{home}/bin/spark-class not found"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "no java on PATH and no JAVA_HOME (Spark needs Java 17)"
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces: the fields follow the last ')'
    fields = stat[stat.rindex(b")") + 2 :].split()
    return None if fields[0] == b"Z" else int(fields[1])


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    return _ppid(pid) is not None


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _ppid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(0), []):
            out.append(c)
            todo.append(c)
    return out


class SparkDaemon:
    """One master or worker JVM (``spark-class <class> <args>``) with its log file."""

    def __init__(self, cls: str, args: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.cls = cls
        self.args = args
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SparkDaemon:
        home = spark_home()
        assert home is not None
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [os.path.join(home, "bin", "spark-class"), self.cls, *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                # its own process group: the executors it starts inherit it, so a kill of the
                # group reaches them too
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_text(self) -> str:
        return _read(self.log_path)

    def wait_log(self, pattern: str, timeout: float, what: str) -> re.Match[str]:
        """The first match of ``pattern`` in the log; fails if the JVM exits first."""

        def found() -> re.Match[str] | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{what}: the JVM exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
            return re.search(pattern, self.log_text())

        try:
            m = wait_until_sync(found, timeout, interval=0.2, what=what)
        except AssertionError:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}:\n{self.log_text()[-3000:]}") from None
        assert m is not None
        return m

    def kill_tree(self) -> list[int]:
        """``kill -9`` of the JVM and every process under it (its executors and their Python
        workers; pyspark's daemon puts itself in a process group of its own, so each group of
        the tree is killed whole). Returns the pids killed, once none of them runs."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        tree = [self.pid, *descendants(self.pid)]
        groups = set()
        for pid in tree:
            try:
                groups.add(os.getpgid(pid))
            except ProcessLookupError:
                pass
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        wait_until_sync(lambda: not any(_alive(p) for p in tree), 60, interval=0.1, what="the killed processes gone")
        return tree

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (SIGKILL after ``timeout``), then kill whatever it left behind."""
        if self.proc is None:
            return
        left = descendants(self.pid) if self.proc.poll() is None else []
        terminate(self.proc, timeout)
        for pid in left:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


class SparkCluster:
    """A Spark standalone cluster on 127.0.0.1: a master and ``workers`` workers, each a JVM.

    Args:
        directory: the cluster's directory (created): logs, conf, work and local dirs.
        workers: workers started by :meth:`start` (default 2).
        worker_cores / worker_memory: what each worker offers (default 1 core, ``"1g"``); with
            the app's ``spark.executor.cores`` 1, each worker runs one executor of it.
        daemon_memory: heap of the master and worker JVMs (default ``"256m"``).
        start_timeout: seconds to wait for each daemon (default 300: a JVM start takes a
            minute on a busy 2-core machine).

    Use as a context manager; :meth:`stop` stops the workers (and their executors) and the
    master, also after a failed test.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        daemon_memory: str = "256m",
        start_timeout: float = 300.0,
    ) -> None:
        self.dir = Path(directory)
        self.n_workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self.master: SparkDaemon | None = None
        self.workers: list[SparkDaemon] = []
        self.master_url = ""
        self.ui_url = ""

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        home = spark_home()
        assert home is not None
        env.update(
            SPARK_HOME=home,
            SPARK_CONF_DIR=str(self.dir / "conf"),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=str(self.dir / "local"),
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            PYTHONPATH=python_path(),
        )
        return env

    def _write_conf(self) -> Path:
        for d in ("conf", "local", "logs"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        props = self.dir / "conf" / "spark-defaults.conf"
        props.write_text(
            "# written by rmq._testing.spark\n"
            # the REST submission server would bind the fixed port 6066
            "spark.master.rest.enabled false\n"
            "spark.ui.showConsoleProgress false\n"
            # the master keeps a worker that stopped heartbeating for this long; a killed
            # worker's connection closes at once anyway
            "spark.worker.timeout 30\n"
        )
        return props

    def start(self) -> SparkCluster:
        """Start the master and the workers; returns once every worker is ALIVE at the master."""
        props = self._write_conf()
        self.master = SparkDaemon(
            "org.apache.spark.deploy.master.Master",
            ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--properties-file", str(props)],
            self.dir / "logs" / "master.log",
            self._env(),
        ).start()
        m = self.master.wait_log(r"Starting Spark master at (spark://\S+)", self.start_timeout, "the Spark master")
        self.master_url = m.group(1)
        ui = self.master.wait_log(r"MasterWebUI.* started at http://[^:]+:(\d+)", self.start_timeout, "the master UI")
        self.ui_url = f"http://127.0.0.1:{ui.group(1)}"
        for _ in range(self.n_workers):
            self.add_worker(wait=False)
        self.wait_workers(self.n_workers)
        return self

    def add_worker(self, wait: bool = True) -> SparkDaemon:
        """Start one more worker (e.g. in place of a killed one); with ``wait``, returns once
        the master lists it ALIVE."""
        assert self.master is not None
        i = len(self.workers)
        work = self.dir / f"worker-{i}"
        work.mkdir(parents=True, exist_ok=True)
        w = SparkDaemon(
            "org.apache.spark.deploy.worker.Worker",
            [
                *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                *("--cores", str(self.worker_cores), "--memory", self.worker_memory),
                *("--work-dir", str(work), "--properties-file", str(self.dir / "conf" / "spark-defaults.conf")),
                self.master_url,
            ],
            self.dir / "logs" / f"worker-{i}.log",
            self._env(),
        ).start()
        self.workers.append(w)
        if wait:
            self.wait_worker(w)
        return w

    def worker_port(self, w: SparkDaemon) -> int:
        """The worker's RPC port (from its log line "Starting Spark worker 127.0.0.1:<port>")."""
        m = w.wait_log(r"Starting Spark worker [\d.]+:(\d+)", self.start_timeout, "the worker's port")
        return int(m.group(1))

    def wait_worker(self, w: SparkDaemon) -> None:
        port = self.worker_port(w)

        def alive() -> bool:
            if w.proc is not None and w.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {w.proc.returncode}:\n{w.log_text()[-3000:]}")
            return any(x["port"] == port and x["state"] == "ALIVE" for x in self.state()["workers"])

        wait_until_sync(alive, self.start_timeout, interval=0.5, what=f"worker :{port} ALIVE at the master")

    def wait_workers(self, n: int) -> None:
        for w in self.workers[-n:]:
            self.wait_worker(w)

    def state(self) -> dict[str, Any]:
        """The master's JSON (``<web UI>/json/``): workers with their state, apps, cores."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as r:
            out: dict[str, Any] = json.loads(r.read())
        return out

    def executors(self) -> dict[int, int]:
        """Running executors per live worker, by worker port (each worker's own JSON)."""
        out = {}
        for x in self.state()["workers"]:
            if x["state"] != "ALIVE":
                continue
            try:
                with urllib.request.urlopen(f"{x['webuiaddress']}/json/", timeout=10) as r:
                    info = json.loads(r.read())
            except OSError:
                continue
            out[int(x["port"])] = len(info.get("executors", []))
        return out

    def session_conf(self, app: str = "rmq-spark-cluster", executor_memory: str = "512m") -> dict[str, str]:
        """SparkSession settings for a driver on this cluster (see the module docstring)."""
        return {
            "spark.master": self.master_url,
            "spark.app.name": app,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.executor.cores": "1",
            "spark.executor.memory": executor_memory,
            "spark.driver.memory": "1g",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": python_path(),
            "spark.local.dir": str(self.dir / "local"),
        }

    def stop(self) -> None:
        for w in self.workers:
            w.stop()
        if self.master is not None:
            self.master.stop()

    def __enter__(self) -> SparkCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def python_path() -> str:
    """This process's ``PYTHONPATH`` with the directory holding the imported ``rmq`` first: what
    Spark's Python workers need to import the same rmq."""
    import rmq

    root = os.path.dirname(os.path.dirname(os.path.abspath(rmq.__file__)))
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return os.pathsep.join([root, *rest])


def checkpoint_progress(checkpoint: str | os.PathLike[str]) -> tuple[int, dict[str, Any]]:
    """The last batch a streaming query committed (``<checkpoint>/commits/<id>``; -1 before the
    first) and the source's end offsets of that batch (the last line of
    ``<checkpoint>/offsets/<id>``: the connector's ``{topic: {broker: {queue: offset}}}``)."""
    commits = Path(checkpoint) / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    if not ids:
        return -1, {}
    last = max(ids)
    lines = _read(Path(checkpoint) / "offsets" / str(last)).strip().splitlines()
    return last, (json.loads(lines[-1]) if len(lines) >= 3 else {})


# --- the driver process ----------------------------------------------------------------------


class SparkDriver:
    """A Spark driver program in its own process (``python -m rmq._testing.spark``), driven
    with :meth:`call`: one JSON command per line on its stdin, one JSON answer per line on a
    pipe of its own. Its log (Spark's and the JVM's output) is ``log_path``. Closing stdin
    stops its SparkSession and ends it."""

    def __init__(self, log_path: str | os.PathLike[str], env: dict[str, str] | None = None) -> None:
        self.log_path = Path(log_path)
        read_fd, write_fd = os.pipe()
        child_env = dict(os.environ)
        child_env.update(env or {})
        child_env["PYTHONPATH"] = python_path()
        # SparkContext takes the Python workers' interpreter from $PYSPARK_PYTHON (the driver's
        # own workers, which plan a Python data source, and, through the functions it ships,
        # the executors' ones)
        child_env["PYSPARK_PYTHON"] = child_env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rmq._testing.spark", str(write_fd)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                env=child_env,
                start_new_session=True,
            )
        os.close(write_fd)
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "r", encoding="utf-8") as f:
            for line in f:
                self._replies.put(line)
        self._replies.put(None)

    def log_text(self) -> str:
        return _read(self.log_path)

    def call(self, op: str, timeout: float = 600.0, **args: Any) -> Any:
        """Run ``op`` in the driver and return its result; a failure there raises
        ``RuntimeError`` with its message, a driver that died or did not answer within
        ``timeout`` seconds one with the tail of its log."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"op": op, "args": args}) + "\n").encode())
        self.proc.stdin.flush()
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(
                f"the driver did not answer {op} within {timeout}s:\n{self.log_text()[-3000:]}"
            ) from None
        if line is None:
            raise RuntimeError(f"the driver exited during {op}:\n{self.log_text()[-3000:]}")
        reply = json.loads(line)
        if not reply["ok"]:
            raise RuntimeError(f"{op} failed in the driver: {reply['error']}")
        return reply["result"]

    def close(self, timeout: float = 120.0) -> None:
        """Close stdin (the driver stops Spark and exits); SIGKILL its group after ``timeout``."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> SparkDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def summarize(df: Any) -> dict[str, Any]:
    """Per (topic, broker, queue) of a DataFrame of the connector's columns: rows, distinct
    offsets, smallest and largest offset. Every offset of a queue once ⇔ rows == distinct ==
    largest − smallest + 1."""
    from pyspark.sql import functions as F

    rows = (
        df.groupBy("topic", "brokerName", "partition")
        .agg(F.count("*").alias("n"), F.countDistinct("offset").alias("d"), F.min("offset"), F.max("offset"))
        .collect()
    )
    return {"queues": sorted([list(r) for r in rows]), "rows": sum(r[3] for r in rows)}


class _Ops:
    """What the driver process can do; each ``op_<name>`` answers one command."""

    def __init__(self) -> None:
        self.spark: Any = None
        self.queries: dict[str, Any] = {}

    def op_session(self, conf: dict[str, str]) -> dict[str, Any]:
        import pyspark
        from pyspark.sql import SparkSession

        import rmq.spark

        b = SparkSession.builder
        for k, v in conf.items():
            b = b.config(k, v)
        self.spark = b.getOrCreate()
        self.spark.sparkContext.setLogLevel("WARN")
        rmq.spark.register(self.spark)
        return {"pyspark": pyspark.__version__, "master": self.spark.sparkContext.master}

    def _reader(self, options: dict[str, str], stream: bool) -> Any:
        r = (self.spark.readStream if stream else self.spark.read).format("rocketmq")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    def op_batch_summary(self, options: dict[str, str]) -> dict[str, Any]:
        return summarize(self._reader(options, stream=False))

    def op_parquet_summary(self, path: str) -> dict[str, Any]:
        # a file sink's directory is read through its _spark_metadata log: only the files of
        # committed batches count, never those a killed task left behind
        return summarize(self.spark.read.parquet(path))

    def op_stream_start(
        self, name: str, options: dict[str, str], path: str, checkpoint: str, available_now: bool = False
    ) -> None:
        df = self._reader(options, stream=True).select("topic", "brokerName", "partition", "offset", "value")
        w = df.writeStream.format("parquet").option("path", path).option("checkpointLocation", checkpoint)
        w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime="0 seconds")
        self.queries[name] = w.queryName(name).start()

    def _status(self, name: str) -> dict[str, Any]:
        q = self.queries[name]
        exc = q.exception() if not q.isActive else None
        return {"active": q.isActive, "exception": str(exc)[:4000] if exc else None}

    def op_stream_status(self, name: str) -> dict[str, Any]:
        return self._status(name)

    def op_stream_await(self, name: str, seconds: float) -> dict[str, Any]:
        try:
            self.queries[name].awaitTermination(seconds)
        except Exception:  # noqa: BLE001 - a failed query: its exception is in the status
            pass
        return self._status(name)

    def op_stream_stop(self, name: str) -> dict[str, Any]:
        self.queries[name].stop()
        return self._status(name)

    def op_stop(self) -> None:
        if self.spark is not None:
            self.spark.stop()
            self.spark = None


def _driver_main(reply_fd: int) -> int:
    out = os.fdopen(reply_fd, "w", encoding="utf-8", buffering=1)
    ops = _Ops()
    try:
        for line in sys.stdin:
            req = json.loads(line)
            try:
                result = getattr(ops, "op_" + req["op"])(**req["args"])
                reply: dict[str, Any] = {"ok": True, "result": result}
            except Exception as e:  # noqa: BLE001 - every failure goes back to the caller
                reply = {"ok": False, "error": f"{type(e).__name__}: {e}"[:8000]}
            out.write(json.dumps(reply) + "\n")
    finally:
        ops.op_stop()
    return 0


if __name__ == "__main__":
    sys.exit(_driver_main(int(sys.argv[1])))
