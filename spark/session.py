"""One Spark session per process, local[*] by default or the cluster given as `master`, quiet and sized for jobs
of a few million rows (few shuffle partitions, no UI)."""

from __future__ import annotations

import os
import re
import shutil
import sys

DEFAULT_MASTER = "local[*]"
# shuffle partitions: Spark's 200 default costs seconds of task overhead on jobs this size
SHUFFLE_PARTITIONS = max(4, 2 * (os.cpu_count() or 2))


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no Java, no pyspark): the message says what to install."""


def java_available() -> bool:
    """True if a `java` to run Spark is on the PATH or under JAVA_HOME."""
    home = os.environ.get("JAVA_HOME")
    return shutil.which("java") is not None or bool(home and os.path.exists(os.path.join(home, "bin", "java")))


def get_session(master: str | None = None, app: str = "stream-groupings", short_jobs: bool = False):
    """The process's Spark session (created on first use); `master` as for spark-submit, default local[*].

    `short_jobs` is for a session of many jobs of a few rows each (the test suite): the JVM then compiles with
    its quick compiler only (C1): a third less CPU over such a session here. The default also recompiles hot
    code with C2, which pays off on long jobs.
    """
    if not java_available():
        raise SparkUnavailable("Spark needs Java 17 or later: install it (apt-get install openjdk-17-jre-headless)")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable("pyspark is not installed: pip install -e . installs it") from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter and its packages
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # the stage bars would clutter the scripts' stderr
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.sql.session.timeZone", "UTC")
    )
    if short_jobs:
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def first_line(err: BaseException) -> str:
    """The telling line of a Spark error (a task's own error, not 'error calling o42.collect'), at most 200 chars."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
    causes = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    text = causes[-1] if causes else lines[0]
    return text if len(text) <= 200 else text[:197] + "..."
