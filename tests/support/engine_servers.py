"""Throwaway Dask and Spark engines, for dpkit's own tests and benchmarks (not shipped).

:func:`start_dask` starts a ``distributed`` LocalCluster of worker *processes* and a client;
:func:`start_spark` a Spark session in local mode (``local[2]``: one JVM, two task threads,
Python workers for the pandas functions); :func:`start_spark_connect` a Spark Connect server in
its own process (``spark-submit`` of the server class whose jar PySpark ≥ 4 bundles: nothing is
downloaded) and a client session on it. All raise :class:`Unavailable` with the reason when the
engine cannot run here (a package, a Java runtime or the server's jar is missing).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import attrs

__all__ = [
    "ConnectLaunch",
    "ConnectServer",
    "Unavailable",
    "launch_spark_connect",
    "start_dask",
    "start_spark",
    "start_spark_connect",
]


class Unavailable(Exception):
    """The engine cannot be started here; the message says why."""


#: Dask's housekeeping timers, slowed down: the event-loop tick monitor (every 20 ms), the
#: workers' statistical profiler (10 ms), memory monitor (100 ms) and system monitor (500 ms).
#: Left at their defaults they cost an idle LocalCluster of two workers about 7.4 CPU seconds a
#: minute (measured), for the whole run, in every process of the test run that started one;
#: with these, 1.0. None of them changes what a computation does.
QUIET_DASK = {
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


def _environment_name(key: str) -> str:
    return "DASK_" + key.upper().replace(".", "__").replace("-", "_")


def start_dask(workers: int = 2, memory_limit: str = "auto") -> tuple[Any, Any]:
    """(cluster, client): ``workers`` processes of one thread each, no dashboard, the
    housekeeping timers of :data:`QUIET_DASK` (set in this process's Dask config and, for the
    worker processes, which read theirs at start-up, in the environment)."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise Unavailable(
            "dask.distributed is not installed: pip install 'dpkit[cluster]'"
        ) from None
    dask.config.set(QUIET_DASK)
    for key, value in QUIET_DASK.items():
        os.environ[_environment_name(key)] = str(value)
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


#: The JVM of a test engine: the serial collector (no GC threads competing for the test run's
#: cores) and the C1 compiler only (a short run's queries are compiled once; C2's
#: optimisation of them never pays back). Measured on the Spark tests of
#: tests/integration/test_cluster_queries.py: 129 → 85 CPU seconds, the same 42 passes.
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


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
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


@attrs.frozen
class ConnectServer:
    """A running Spark Connect server (``url``, ``sc://127.0.0.1:PORT``), the client
    ``session`` on it, its log file, and the seconds from its launch until it answered the
    first query (``started_in``)."""

    url: str
    session: Any
    log: str
    started_in: float
    launch: ConnectLaunch

    def stop(self) -> None:
        """Close the client session, then stop the server (:meth:`ConnectLaunch.stop`)."""
        with contextlib.suppress(Exception):
            self.session.stop()
        self.launch.stop()


@attrs.frozen
class ConnectLaunch:
    """A Spark Connect server process, launched and perhaps not listening yet: the tests
    launch it while they collect, so that its JVM starts while other tests run, and wait for
    it (:meth:`ready`) when the first test needs it."""

    process: subprocess.Popen[bytes]
    port: int
    log: str
    began: float  # time.monotonic() at the launch

    def ready(self, timeout: float = 240.0) -> ConnectServer:
        """Wait until the server listens, then connect a client session to it and run one
        query; :class:`Unavailable` (with the end of the server's log) if the server exits
        or does not listen within ``timeout`` seconds of the launch."""
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        try:
            while not _listening(self.port):
                if self.process.poll() is not None:
                    raise Unavailable(
                        f"the Spark Connect server exited ({self.process.returncode}); its "
                        f"log ends:\n{_tail(self.log)}"
                    )
                if time.monotonic() - self.began > timeout:
                    raise Unavailable(
                        f"the Spark Connect server did not listen within {timeout:.0f} s; its "
                        f"log ends:\n{_tail(self.log)}"
                    )
                time.sleep(0.25)
            url = f"sc://127.0.0.1:{self.port}"
            session = ConnectSession.builder.remote(url).create()
            session.range(1).collect()  # the first answered query: the server is ready
        except BaseException:
            self.stop()
            raise
        return ConnectServer(url, session, self.log, time.monotonic() - self.began, self)

    def stop(self, grace: float = 30.0) -> None:
        """Stop the server and the Python workers it started: SIGTERM to its process group
        (the JVM's shutdown hook stops Spark), SIGKILL after ``grace`` seconds; then remove
        its log's directory."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(os.path.dirname(self.log), ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _tail(path: str, lines: int = 15) -> str:
    with open(path, encoding="utf-8", errors="replace") as log:
        return "".join(log.readlines()[-lines:])


def launch_spark_connect(cores: int = 2, partitions: int = 4, memory: str = "1g") -> ConnectLaunch:
    """Launch a Spark Connect server on ``local[cores]`` in a process (group) of its own,
    listening on a free localhost port; :class:`Unavailable` if it cannot run here.

    The server is PySpark's own (``org.apache.spark.sql.connect.service.SparkConnectServer``,
    the class ``start-connect-server.sh`` runs), from the ``spark-connect`` jar that the PySpark
    4 wheel ships (nothing is downloaded); its Python workers run this interpreter, so they
    import the same dpkit."""
    try:
        import pyspark
        from pyspark.find_spark_home import _find_spark_home
    except ImportError:
        raise Unavailable("pyspark is not installed: pip install 'dpkit[cluster]'") from None
    try:
        import pyspark.sql.connect.session  # checks that the client's packages are here
    except ImportError as missing:  # PySpark names the client's missing package
        raise Unavailable(
            f"the Spark Connect client cannot load ({missing}): pip install 'dpkit[cluster]'"
        ) from None
    if _java() is None:
        raise Unavailable("no Java runtime for Spark: set JAVA_HOME or put java on PATH")
    home = _find_spark_home()
    if not glob.glob(os.path.join(home, "jars", "spark-connect_*.jar")):
        raise Unavailable(
            f"pyspark {pyspark.__version__} ships no Spark Connect server "
            f"({home}/jars/spark-connect_*.jar is missing; PySpark >= 4.0 bundles it)"
        )
    port = _free_port()
    log = os.path.join(tempfile.mkdtemp(prefix="dpkit-spark-connect-"), "server.log")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_REMOTE", "SPARK_CONN"))}
    env.update(SPARK_HOME=home, PYSPARK_PYTHON=sys.executable)
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.log.level": "WARN",
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
    }
    command = [
        os.path.join(home, "bin", "spark-submit"),
        *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
        *("--master", f"local[{cores}]", "--name", "dpkit-connect", "--driver-memory", memory),
        *(part for key, value in conf.items() for part in ("--conf", f"{key}={value}")),
    ]
    began = time.monotonic()
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, preexec_fn=_detached
        )
    return ConnectLaunch(process, port, log, began)


def _detached() -> None:
    """In the server's process before it runs the JVM: a process group of its own (stopped as
    one), and, on Linux, SIGTERM when the process that launched it dies — the scripts ``exec``
    the JVM, which keeps this — so that a killed test run leaves no server behind."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def start_spark_connect(
    cores: int = 2, partitions: int = 4, memory: str = "1g", timeout: float = 240.0
) -> ConnectServer:
    """A Spark Connect server (:func:`launch_spark_connect`) and a Connect client session on
    it, once it answers.

    The client is made with the Connect builder itself (``pyspark.sql.connect.session``): the
    generic ``SparkSession.builder.remote(...)`` would also switch this whole process to
    Connect mode (``SPARK_CONNECT_MODE_ENABLED``) and break a classic session in it."""
    return launch_spark_connect(cores, partitions, memory).ready(timeout)
