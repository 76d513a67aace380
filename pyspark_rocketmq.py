"""Spark's auto-registration hook for ``format("rocketmq")``.

Spark (>= 4.0) imports every top-level module named ``pyspark_*`` and registers its
``DefaultSource`` data source, so an installed rmq needs no ``spark.dataSource.register``
call. This module must never fail to import (a failure would break Spark's lookup of every
Python data source), so without pyspark or pyarrow it simply offers nothing.
"""
try:
    from rmq.spark.source import RocketMQDataSource
except ImportError:  # rmq installed without the spark extra: offer nothing
    pass
else:
    DefaultSource = RocketMQDataSource
