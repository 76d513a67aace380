"""PySpark data source ``format("rocketmq")`` for rmq topics.

Install with the ``spark`` extra (``pip install 'rmq[spark]'``: pyspark >= 4.0 and pyarrow).
Nothing else in rmq imports this package, and importing it does not import pyspark: the
data source class is loaded on first use.

An installed rmq ships the top-level module ``pyspark_rocketmq``, Spark's auto-registration
hook, so ``format("rocketmq")`` works without further ado. From an editable checkout (whose
modules Spark's lookup does not list), register it once per session (``register`` does nothing
when Spark already found it); either way the executors must be able to import ``rmq``
(``PYSPARK_PYTHON``; ``register`` checks it on a local master)::

    import rmq.spark
    rmq.spark.register(spark)
    df = (spark.read.format("rocketmq")
          .option("nameServer", "127.0.0.1:9876")
          .option("subscribe", "orders")
          .load())

Options and columns: see :mod:`rmq.spark.options` and :mod:`rmq.spark.source`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from rmq.errors import ConfigError

__all__ = ["RocketMQDataSource", "register", "is_registered", "check_workers", "SOURCE_SCHEMA"]

#: seconds a worker interpreter may take to import rmq.spark.source (it imports pyspark)
_CHECK_TIMEOUT = 120.0


def is_registered(spark: Any) -> bool | None:
    """True when ``format("rocketmq")`` is known to this SparkSession: registered before, or
    found by Spark through an installed rmq's ``pyspark_rocketmq`` module. None when this
    Spark does not say (a Spark Connect session)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists("rocketmq"))
    except Exception:  # noqa: BLE001 - no JVM handle (Spark Connect) or another Spark version
        return None


def check_workers(spark: Any) -> None:
    """Check that Spark's Python workers can import rmq (local masters only: a cluster's
    executors are not on this machine).

    Spark starts its workers with ``spark.pyspark.python``, else ``$PYSPARK_PYTHON``, else
    ``python3``; an interpreter without rmq fails every read and write with a bare
    ``ModuleNotFoundError`` inside a Spark stack trace. This runs that interpreter once and
    says so up front.

    Raises:
        rmq.errors.ConfigError: naming ``PYSPARK_PYTHON``, the interpreter and its error.
    """
    try:
        master = spark.sparkContext.master
        python = spark.conf.get("spark.pyspark.python", None)
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext, the server's workers
        return
    if not str(master).startswith("local"):
        return
    python = python or os.environ.get("PYSPARK_PYTHON") or "python3"
    cmd = [python, "-c", "import rmq.spark.source"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_CHECK_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        problem = f"{type(e).__name__}: {e}"
    else:
        if done.returncode == 0:
            return
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        problem = lines[-1] if lines else f"exit code {done.returncode}"
    raise ConfigError(
        "PYSPARK_PYTHON",
        f"Spark's Python workers run {python!r}, which cannot import rmq ({problem[:300]}); "
        f"set PYSPARK_PYTHON (or spark.pyspark.python) before the SparkSession starts",
        f"an interpreter with rmq[spark] installed, e.g. {sys.executable}",
    )


def register(spark: Any) -> bool:
    """Register ``format("rocketmq")`` with a SparkSession unless it is already known
    (:func:`is_registered`: an installed rmq is found by Spark itself); returns True when
    this call registered it.

    On a local master it first checks that Spark's Python workers can import rmq
    (:func:`check_workers`), so a wrong ``PYSPARK_PYTHON`` fails here, clearly.

    Raises:
        rmq.errors.ConfigError: the workers' interpreter cannot import rmq.
    """
    check_workers(spark)
    if is_registered(spark):
        return False
    from rmq.spark.source import RocketMQDataSource

    try:
        spark.dataSource.register(RocketMQDataSource)
    except Exception as e:  # pyspark's AnalysisException; its module differs between versions
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
        return False
    return True


def __getattr__(name: str) -> Any:
    if name in ("RocketMQDataSource", "SOURCE_SCHEMA"):
        from rmq.spark import source

        return getattr(source, name)
    raise AttributeError(f"module 'rmq.spark' has no attribute {name!r}")
