"""The only SparkSession factory.

It wires the Iceberg catalog from the pipeline config, picks the jars (``cdc.spark.jars``: Maven coordinates, the files
Spark's Ivy cache already holds for a local master, unless the user brings ``spark.jars`` / ``spark.jars.packages``;
checked before the JVM starts), and decides what depends on the master **in effect**:

* under ``spark-submit`` that is the master spark-submit put into the SparkConf (``--master``, the Airflow
  ``spark_default`` connection, ``spark-defaults.conf``), unless the job's own ``--master`` overrides it;
* otherwise the job's ``--master``, else the YAML's ``spark.master``, else ``local[*]``.

Only a local master pins the driver to 127.0.0.1 (executors otherwise dial another address) and lets Python workers
import ``cdc`` from where the driver did (``spark.executorEnv.PYTHONPATH``). On a cluster the driver address is
Spark's to choose, and executors get ``cdc`` from the wheel passed with ``--py-files`` (``ship_wheels``: PySpark
itself puts only .zip/.egg/.jar py-files on their path; README "Running on a cluster").
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from cdc.config import catalogs, storage
from cdc.config.model import PipelineConfig
from cdc.spark import jars, jvm_cache, localfs
from cdc.spark.py4j_classes import bind_pyspark_classes

DEFAULT_MASTER = "local[*]"
# A local master's JVM (driver and executors in one) compiles with C1 only: a micro-batch is a few dozen short
# statements, and on few cores C2's compile threads cost more CPU than its code saves (measured on 2 cores: a
# 100-event batch 28 -> 15 CPU s, a 500k-event batch 49 -> 33; bench/README "Performance"). A long, merge-heavy
# local run can be a little faster with C2: set spark.driver.extraJavaOptions in the YAML's spark: to choose.
# C1 alone makes HotSpot shrink its code cache to 48 MB, which a job of many tables fills: the JVM then cannot link a
# method handle, a Spark thread dies and the SparkContext stops under every table. So the cache keeps its usual size.
# G1 puts every object of half a heap region or more ("humongous") straight into the old generation, and each such
# allocation may start a concurrent marking cycle. Spark allocates a 4 MB chunk for every broadcast (the task binary
# of every job, Iceberg's table of every scan and write) and 1 MB ones to serialize tasks: with the default regions
# (1-2 MB) a job of 20 small tables started a marking cycle every 3 seconds. 4 MB regions with 1 MB broadcast
# chunks keep both young (measured on 2 cores, 20 tables × 1,000 events in one warm session: JVM CPU 77 -> 67 s).
LOCAL_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:G1HeapRegionSize=4m"
LOCAL_SPARK_CONF = {"spark.broadcast.blockSize": "1m"}  # a local master's JVM only: there is no torrent to split
ARCHIVES = (".whl", ".zip", ".egg")  # what --py-files ships
_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def effective_master(submitted: str | None, cli_master: str | None, yaml_master: str | None) -> str:
    """The master the session will run on (pure): the job's ``--master``, else what spark-submit put in the
    SparkConf, else the YAML's ``spark.master``, else ``local[*]``."""
    return cli_master or submitted or yaml_master or DEFAULT_MASTER


def is_local(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` and ``local-cluster[...]`` (all on this host)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def catalog_conf(cfg: PipelineConfig) -> dict[str, str]:
    """``spark.sql.catalog.<name>.*`` settings for the configured Iceberg catalog (pure): its type or implementation
    (``cdc.config.catalogs``), the warehouse, and its properties (an ``s3://`` warehouse gets ``S3FileIO``,
    ``cdc.config.storage``)."""
    c = cfg.catalog
    prefix = f"spark.sql.catalog.{c.name}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
    conf.update({f"{prefix}.{k}": v for k, v in catalogs.spark_settings(c.type).items()})
    if c.warehouse:
        conf[f"{prefix}.warehouse"] = c.warehouse
    if c.type == "jdbc":  # the schema pyiceberg's SQL catalog creates and reads too (cdc.iceberg.sql_catalog)
        conf[f"{prefix}.jdbc.schema-version"] = "V1"
    for k, v in storage.java_properties(c.warehouse, c.properties).items():
        conf[f"{prefix}.{k}"] = v
    return conf


def session_conf(cfg: PipelineConfig, master: str | None = None, *, submitted: str | None = None,
                 jar_mode: str = "auto", package_dir: str | None = None,
                 jar_files: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every Spark setting the job needs (pure; the user's ``spark:`` settings win, except ``spark.master``).

    ``master``: the job's ``--master``; ``submitted``: the master spark-submit put in the SparkConf (None when not
    under spark-submit); ``package_dir``: the directory ``cdc`` was imported from when it is not in a shipped
    archive (local Python workers get it on their path); ``jar_files``: local jar files of the coordinates
    (``cdc.spark.jars.local_files``: the Ivy cache, Debian's JDBC drivers)."""
    user = dict(cfg.spark)
    in_effect = effective_master(submitted, master, user.get("spark.master"))
    local = is_local(in_effect)
    conf: dict[str, str] = {
        "spark.sql.extensions": _EXTENSIONS,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        "spark.ui.enabled": "false" if local else "true",  # on a cluster the Spark UI is how operators watch a run
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # Arrow batches from the Kafka reader tasks; bounded memory per task.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
        "spark.sql.iceberg.check-ordering": "false",
        # what Spark masks in its UI, event logs and error texts: its default pattern plus the REST "credential"
        "spark.redaction.regex": storage.REDACTION_REGEX,
    }
    conf.update(catalog_conf(cfg))
    if submitted is None:  # under spark-submit the JVM (and its classpath) exists already: jars are its business
        conf.update(jars.jar_conf(user, jars.for_config(cfg), local, jar_mode, jar_files))
    if local:
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.extraJavaOptions"] = LOCAL_DRIVER_JAVA_OPTIONS  # the YAML's own wins (update below)
        conf.update(LOCAL_SPARK_CONF)
        if package_dir:
            conf["spark.executorEnv.PYTHONPATH"] = _join_path(package_dir, user.get("spark.executorEnv.PYTHONPATH"))
    conf.update(user)
    conf["spark.master"] = in_effect
    return conf


def _join_path(first: str, rest: str | None) -> str:
    return os.pathsep.join(p for p in (first, rest) if p)


def submitted_master(env: Mapping[str, str] | None = None) -> str | None:
    """The master spark-submit put into the SparkConf, or None when this process was not started by spark-submit.

    Under spark-submit the JVM is up before Python runs (``PYSPARK_GATEWAY_PORT``, as PySpark itself checks), so
    asking it costs nothing; otherwise no JVM is started here (the session's settings, e.g.
    ``spark.jars.packages``, must reach the JVM's launch)."""
    if not (env if env is not None else os.environ).get("PYSPARK_GATEWAY_PORT"):
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # attaches to spark-submit's gateway (PYSPARK_GATEWAY_PORT)
    return SparkConf().get("spark.master", None)


def python_env(master: str, executable: str) -> dict[str, str]:
    """Local masters run Python workers with this interpreter (pure). A cluster's executors use their own
    (``spark.pyspark.python`` or ``PYSPARK_PYTHON`` there): this host's path may not exist on them."""
    return {"PYSPARK_PYTHON": executable, "PYSPARK_DRIVER_PYTHON": executable} if is_local(master) else {}


def package_dir() -> str | None:
    """The directory ``cdc`` was imported from, or None when it came from a shipped archive (``--py-files``)."""
    here = Path(__file__).resolve()
    if any(part.endswith(ARCHIVES) for part in here.parts):
        return None
    return str(here.parent.parent)


# Modules a job first imports half-way through a batch, 0.1-0.2 s each on this machine: pandas (pyarrow checks every
# Python list it converts against it), distutils (Spark's Arrow type mapping), polars_avro (the Avro decoder), the
# registry and admin clients. ``preload_modules`` imports them on a thread while the JVM creates the SparkContext, a
# time the driver only waits (a 100-event batch: about 0.5 s of its critical path, issue 16).
JOB_MODULES = ("pandas", "distutils.version", "polars_avro", "confluent_kafka.schema_registry",
               "confluent_kafka.admin", "pyarrow.compute")


def preload_modules(names: Sequence[str] = JOB_MODULES, wait_seconds: float = 300.0) -> threading.Thread:
    """Import ``names`` on a daemon thread (started before ``build_session``) once PySpark's JVM gateway is up; one
    that fails to import is left to the code that needs it, which reports it.

    Not before: PySpark starts the JVM with a ``preexec_fn``, and a fork while another thread imports can leave the
    forking thread waiting for a lock the importing one holds (it did: the job hung before its JVM existed)."""
    import importlib

    from pyspark import SparkContext

    def load() -> None:
        deadline = time.monotonic() + wait_seconds
        while SparkContext._gateway is None:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - e.g. an optional module missing: the job itself says so when it matters
                pass

    thread = threading.Thread(target=load, name="cdc-preload", daemon=True)
    thread.start()
    return thread


def build_session(cfg: PipelineConfig, app_name: str = "cdc-ingest", master: str | None = None,
                  class_cache: bool = False) -> Any:
    """Create (or reuse) the SparkSession for this pipeline. ``class_cache`` (job entry points that end the process
    with ``cdc.spark.jvm_cache.finish``): a local JVM started here maps the classes of earlier runs (``cdc.spark.jvm_cache``)."""
    submitted = submitted_master()
    conf = session_conf(cfg, master, submitted=submitted, jar_mode=os.environ.get(jars.JARS_ENV, "auto"),
                        package_dir=package_dir(), jar_files=jars.local_files(ivy=jars.ivy_home(cfg.spark)))
    from pyspark import SparkContext

    if submitted is None and SparkContext._gateway is None:  # a JVM starts here: its jars must be there or reachable
        jars.preflight(conf)

    if submitted is None and is_local(conf["spark.master"]) and SparkContext._gateway is None:  # a JVM starts here

        conf = localfs.with_local_fs(conf, localfs.jar(), localfs.spark_defaults())  # before the archive: its key
        if class_cache:
            conf = jvm_cache.prepare(conf, "spark.driver.extraJavaOptions" in cfg.spark)
    for k, v in python_env(conf["spark.master"], sys.executable).items():
        os.environ.setdefault(k, v)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    bind_pyspark_classes(spark)  # PySpark's hot Java names without class-loader misses (cdc.spark.py4j_classes)
    spark.sparkContext.setLogLevel(os.environ.get("CDC_SPARK_LOG_LEVEL", "WARN"))
    ship_wheels(spark.sparkContext)
    return spark


_SHIPPED: set[str] = set()


def wheel_zips(py_files: str) -> list[tuple[str, str]]:
    """(wheel path, ``.zip`` name) for each wheel in ``spark.submit.pyFiles`` (pure)."""
    out = []
    for path in filter(None, (p.strip() for p in py_files.split(","))):
        name = os.path.basename(path.split("://", 1)[-1])
        if name.lower().endswith(".whl"):
            out.append((path, name[:-4] + ".zip"))
    return out


def ship_wheels(sc: Any) -> list[str]:
    """Put the wheels of ``--py-files`` on the executors' Python path.

    PySpark adds only ``.zip``/``.egg``/``.jar`` files of ``spark.submit.pyFiles`` to the workers' ``sys.path``
    (standalone and local masters; YARN puts every py-file on PYTHONPATH itself), so a wheel would be shipped but
    not importable. A pure wheel is a zip archive: each one is added again under a ``.zip`` name (``addPyFile``).
    Returns the added paths."""
    from pyspark import SparkFiles

    added = []
    for path, zip_name in wheel_zips(sc.getConf().get("spark.submit.pyFiles", "")):
        if zip_name in _SHIPPED:
            continue
        local = path[len("file:"):] if path.startswith("file:") else path
        candidates = [Path(local), Path(SparkFiles.getRootDirectory()) / os.path.basename(local)]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:  # a remote URI the driver cannot read: leave it to the cluster manager
            continue
        target = Path(tempfile.mkdtemp(prefix="cdc-wheel-")) / zip_name
        shutil.copyfile(found, target)
        sc.addPyFile(str(target))
        _SHIPPED.add(zip_name)
        added.append(str(target))
    return added
