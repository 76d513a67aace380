"""Fixtures for the Spark connector tests: one local SparkSession for the whole test session
(starting one costs 5-30 s here), a real ``rmq standalone`` on free loopback ports, and small
helpers that create topics and produce messages over the wire with plain SEND_MESSAGE_V2
(a path independent of the sink under test)."""

from __future__ import annotations

import os
import sys

import pytest
from spark_support import Rmq

from rmq._testing import StandaloneProcess


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")
    # Spark's Python workers must run this interpreter (it has rmq installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import rmq.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    rmq.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def rmq_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("rmq-spark")
    with StandaloneProcess(d / "store") as proc:
        r = Rmq(proc)
        yield r
        r.close()
