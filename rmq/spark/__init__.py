"""PySpark data source ``format("rocketmq")`` for rmq topics.

Install with the ``spark`` extra (``pip install 'rmq[spark]'``: pyspark >= 4.0 and pyarrow).
Nothing else in rmq imports this package, and importing it does not import pyspark: the
data source class is loaded on first use.

An installed rmq ships the top-level module ``pyspark_rocketmq``, Spark's auto-registration
hook, so ``format("rocketmq")`` works without further ado. From an editable checkout (whose
modules Spark's lookup does not list), register it once per session; either way the
executors must be able to import ``rmq``::

    import rmq.spark
    rmq.spark.register(spark)
    df = (spark.read.format("rocketmq")
          .option("nameServer", "127.0.0.1:9876")
          .option("subscribe", "orders")
          .load())

Options and columns: see :mod:`rmq.spark.options` and :mod:`rmq.spark.source`.
"""
from __future__ import annotations

from typing import Any

__all__ = ["RocketMQDataSource", "register", "SOURCE_SCHEMA"]


def register(spark: Any) -> None:
    """Register ``format("rocketmq")`` with a SparkSession (idempotent).

    When Spark already found it through the ``pyspark_rocketmq`` hook, Spark refuses a second
    registration under the same name (DATA_SOURCE_ALREADY_EXISTS); that is the same source,
    so it is not an error here.
    """
    from rmq.spark.source import RocketMQDataSource

    try:
        spark.dataSource.register(RocketMQDataSource)
    except Exception as e:  # pyspark's AnalysisException; its module differs between versions
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise


def __getattr__(name: str) -> Any:
    if name in ("RocketMQDataSource", "SOURCE_SCHEMA"):
        from rmq.spark import source

        return getattr(source, name)
    raise AttributeError(f"module 'rmq.spark' has no attribute {name!r}")
