"""Throwaway Dask and Spark engines, for dpkit's own tests and benchmarks (not public API).

:func:`start_dask` starts a ``distributed`` LocalCluster of worker *processes* and a client;
:func:`start_spark` a Spark session in local mode (``local[2]``: one JVM, two task threads,
Python workers for the pandas functions). Both raise :class:`Unavailable` with the reason when
the engine cannot run here (the package or, for Spark, a Java runtime is missing).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from typing import Any

__all__ = ["Unavailable", "start_dask", "start_spark"]


class Unavailable(Exception):
    """The engine cannot be started here; the message says why."""


def start_dask(workers: int = 2, memory_limit: str = "auto") -> tuple[Any, Any]:
    """(cluster, client): ``workers`` processes of one thread each, no dashboard."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise Unavailable(
            "dask.distributed is not installed: pip install 'dpkit[cluster]'"
        ) from None
    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
        memory_limit=memory_limit,
    )
    return cluster, Client(cluster)  # type: ignore[no-untyped-call]


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def start_spark(cores: int = 2, partitions: int = 4, memory: str = "1g") -> Any:
    """A SparkSession on ``local[cores]`` with ``partitions`` shuffle partitions, its Python
    workers running this interpreter (so they import the same dpkit)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise Unavailable("pyspark is not installed: pip install 'dpkit[cluster]'") from None
    if _java() is None:
        raise Unavailable("no Java runtime for Spark: set JAVA_HOME or put java on PATH")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("dpkit")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", memory)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
