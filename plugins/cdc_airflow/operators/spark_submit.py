"""spark-submit for CDC jobs, on the public API of apache-airflow-providers-apache-spark only.

``CdcSparkSubmitOperator`` is a ``SparkSubmitOperator`` that, before handing over to the provider's ``execute``:
passes the ``cdc`` wheel (``CDC_PY_FILES``) as ``--py-files``, the pipeline's jars as ``--jars`` (files: the Ivy cache, the
JDBC drivers here) or ``--packages`` (Maven coordinates, ``cdc.spark.jars``; checked before spark-submit starts), adds
local-mode Spark settings and asks the job for
its result (``$CDC_RESULT_FILE``, ``cdc.common.cli_contract``). Afterwards it maps the job's exit code (``ExitCode``): 2 →
``AirflowFailException`` (no retry), 75 and others → ``CdcJobError`` (retried); it returns the job's JSON summary.

The job reports through a file instead of through the provider's output handling or its subprocess, which are
private. Without a result (spark-submit failed before the job ended, or cluster deploy mode without
``CDC_RESULT_DIR``: the driver and its file are elsewhere) a failure is retried. With ``CDC_RESULT_DIR`` (a path or
URI both sides reach, e.g. under the warehouse) the job writes its result there (``cdc.common.result_file``). ``master``
(``CDC_SPARK_MASTER``) overrides the connection's master by handing the hook an environment connection
(``AIRFLOW_CONN_<ID>``): the base connection with another host.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

from cdc.common import cli_contract as cli
from cdc_airflow.config.settings import load_settings
from cdc_airflow.operators.assets import emit
from cdc_airflow.operators.lineage import namespaces, operator_lineage

DEFAULT_MASTER = "yarn"  # what SparkSubmitHook uses when the connection does not exist


class CdcJobError(AirflowException):
    """The job failed with a retryable or unknown exit code (Airflow retries it)."""


class CdcSparkSubmitOperator(SparkSubmitOperator):
    """Runs one CDC job script. ``table`` is only a label (map index); the job's arguments carry everything."""

    template_fields = (*SparkSubmitOperator.template_fields, "table")

    def __init__(self, *, table: str | None = None, master: str | None = None, conn_id: str = "spark_default",
                 pipeline_spark_conf: dict[str, str] | None = None, emit_assets: tuple[str, str] | None = None,
                 cdc_lineage: Any = None, cdc_jars: tuple[str, ...] | None = None, **kwargs: Any) -> None:
        self.spark_conn_id = conn_id  # the configured connection
        self.hook_conn_id = override_conn_id(conn_id, master) if master else conn_id  # what the hook resolves
        super().__init__(conn_id=self.hook_conn_id, **kwargs)
        self.table = table
        self.master = master
        self.pipeline_spark_conf = dict(pipeline_spark_conf or {})
        self.emit_assets = emit_assets  # (pipeline, catalog): asset events for committed data (operators.assets)
        self.cdc_lineage = cdc_lineage  # operators.lineage.LineageNamespaces: OpenLineage datasets (provider on)
        self.cdc_summary: dict[str, Any] | None = None
        self.cdc_jars = cdc_jars  # the Maven coordinates the job needs (cdc.spark.jars.for_config)

    def execute(self, context: Any) -> dict[str, Any] | None:  # type: ignore[override]
        settings = load_settings()
        base = base_connection(self.spark_conn_id)
        master = self.master or (connection_master(**base) if base else DEFAULT_MASTER)
        self.choose_jars(master, settings.iceberg_jar)
        self.py_files = self.py_files or required_py_files(master, settings.py_files)
        # Local mode: loopback driver, this interpreter for Python workers and the venv's spark-submit; a cluster
        # brings its own Python (PYSPARK_PYTHON in its image).
        self.conf = {**spark_conf(master, self.pipeline_spark_conf, sys.executable), **(self.conf or {})}
        if master.startswith("local"):
            self.env_vars = {**spark_env(sys.executable, os.environ.get("PATH")), **(self.env_vars or {})}
            if not self.driver_class_path:  # after every setting, so that the jar stays on the classpath: cdc.spark.localfs
                from cdc.spark import localfs

                self.conf = localfs.with_local_fs(self.conf, localfs.jar(), localfs.spark_defaults())
        shared = shared_result_location(context)  # CDC_RESULT_DIR: a place a driver in cluster deploy mode reaches
        if shared:  # the provider passes env_vars to such a driver (YARN appMasterEnv, Kubernetes driverEnv)
            self.env_vars = {**(self.env_vars or {}), cli.RESULT_FILE_ENV: shared}
        with tempfile.TemporaryDirectory(prefix="cdc-result-") as tmp:
            result_file = shared or str(Path(tmp) / "result.json")
            env = {cli.RESULT_FILE_ENV: result_file}  # inherited by spark-submit, i.e. the driver in client mode
            if self.master:
                env[conn_env_var(self.hook_conn_id)] = json.dumps(override_connection(base, self.master))
            failure = None
            with scoped_environ(env):
                try:
                    super().execute(context)
                except AirflowException as exc:  # the provider's "spark-submit failed": our result says why
                    failure = exc
            result = cli.read_result(result_file)
            push_partial(context, result)
            summary = job_outcome(result, failure)
        self.cdc_summary = summary
        if self.emit_assets:
            for table in emit(context, *self.emit_assets, summary):
                self.log.info("asset event for %s (committed data)", table)
        return summary

    def choose_jars(self, master: str, iceberg_jar: str | None) -> None:
        """``--jars`` / ``--packages`` as the job would choose them for a session of its own (unless given), then
        checked as the job checks them: a missing file or unknown coordinate fails the task (no retry), a repository
        out of reach is retried."""
        from cdc.common.errors import ConfigError
        from cdc.spark import jars

        if self.cdc_jars is not None and not self.jars and not self.packages:
            files = jars.local_files(ivy=jars.ivy_home(self.pipeline_spark_conf))
            chosen = job_jars(self.cdc_jars, master, self.pipeline_spark_conf, iceberg_jar, files)
            self.jars, self.packages = chosen.get("spark.jars"), chosen.get("spark.jars.packages")
        given = {"spark.jars": self.jars, "spark.jars.packages": self.packages}
        try:
            jars.preflight({**self.pipeline_spark_conf, **{k: v for k, v in given.items() if v}})
        except ConfigError as exc:
            raise AirflowFailException(f"terminal error (not retried): {exc}") from None
        except jars.JarsUnavailable as exc:
            raise CdcJobError(f"retryable error: {exc}") from None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Called by the OpenLineage provider (when installed): the topics read and the tables written."""
        return operator_lineage(self.cdc_lineage, self.cdc_summary)


PARTIAL_SUMMARY_KEY = "cdc_partial_summary"


def push_partial(context: Any, result: cli.JobResult | None) -> None:
    """A group of tables that failed in part (``cdc.run.group``): its per-table summary (committed and failed tables)
    as XCom ``cdc_partial_summary``, for ``publish`` and people, before the task fails."""
    if result is not None and result.summary and cli.outcome(result.exit_code) != "ok":
        context["ti"].xcom_push(key=PARTIAL_SUMMARY_KEY, value=result.summary)


def shared_result_location(context: Any) -> str | None:
    """``$CDC_RESULT_DIR/<dag>/<run>/<task>__<map index>__try<n>.json`` (``cdc.common.result_file``), or None when unset."""
    from cdc.common import result_file as results

    base = os.environ.get(results.RESULT_DIR_ENV)
    if not base:
        return None
    ti = context["ti"]
    return results.result_location(base, ti.dag_id, ti.run_id, ti.task_id, ti.map_index, ti.try_number)


def job_outcome(result: cli.JobResult | None, failure: AirflowException | None) -> dict[str, Any] | None:
    """The task's result from the job's report and spark-submit's failure (None: exited 0). Raises per the
    exit-code contract; returns the job's summary on success."""
    if result is None:
        if failure is not None:
            raise CdcJobError(f"failure (the job reported no result; retried): {failure}") from None
        return None
    kind = cli.outcome(result.exit_code)
    if kind == "ok" and failure is None:
        return result.summary
    msg = result.error or (str(failure) if failure else "no error message")
    if kind == "terminal":
        raise AirflowFailException(f"terminal error (exit {result.exit_code}, not retried): {msg}")
    label = "retryable error" if kind == "retryable" else "failure"
    raise CdcJobError(f"{label} (exit {result.exit_code}): {msg}")


def base_connection(conn_id: str) -> dict[str, Any] | None:
    """The configured Spark connection as plain fields, or None when it does not exist."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    return {"conn_type": conn.conn_type, "host": conn.host, "port": conn.port, "extra": conn.extra_dejson}


def connection_master(conn_type: str | None, host: str | None, port: int | None, **_: Any) -> str:
    """The master URL of a Spark connection, as documented for the provider's ``spark`` connection type: the host
    (``local[*]``, ``yarn``, ``spark://h:7077``, ``k8s://https://h``) or ``<conn_type>://<host>``, plus ``:port``."""
    if conn_type == "spark" and host and ("://" in host or not port):
        master = host
    else:
        master = f"{conn_type}://{host or ''}"
    return f"{master}:{port}" if port else master


def override_connection(base: Mapping[str, Any] | None, master: str) -> dict[str, Any]:
    """The base connection (its extras: deploy mode, queue, binary, namespace, Kerberos) with ``master`` instead."""
    return {"conn_type": "spark", "host": master, "extra": dict((base or {}).get("extra") or {})}


def override_conn_id(conn_id: str, master: str) -> str:
    """A connection id of its own per (connection, master), usable as an environment variable name."""
    digest = hashlib.sha256(f"{conn_id}\0{master}".encode()).hexdigest()[:10]
    return f"{re.sub(r'[^A-Za-z0-9_]', '_', conn_id)}_cdc_master_{digest}"


def conn_env_var(conn_id: str) -> str:
    return "AIRFLOW_CONN_" + conn_id.upper()


@contextlib.contextmanager
def scoped_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block (one task per process), then restore them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def required_py_files(master: str, py_files: str | None) -> str | None:
    """``--py-files``: the ``cdc`` wheel (``CDC_PY_FILES``, ``make wheel``). A local master needs none (the job and
    its Python workers import ``cdc`` from this host); a cluster's executors cannot run without it."""
    if py_files or master.startswith("local"):
        return py_files
    raise AirflowFailException(f"master {master}: set CDC_PY_FILES to the cdc wheel (make wheel: "
                               "build/cdc_iceberg-<version>-py3-none-any.whl) so executors can import the job")


def spark_conf(master: str, pipeline_spark: Mapping[str, str], python: str) -> dict[str, str]:
    """Spark settings for spark-submit: the pipeline's ``spark:`` block wins, local mode stays on loopback."""
    conf: dict[str, str] = {}
    if master.startswith("local"):
        from cdc.spark.session import LOCAL_DRIVER_JAVA_OPTIONS, LOCAL_SPARK_CONF  # here: not needed to parse DAG files

        conf["spark.driver.extraJavaOptions"] = LOCAL_DRIVER_JAVA_OPTIONS
        conf.update(LOCAL_SPARK_CONF)
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.ui.enabled"] = "false"
        conf["spark.pyspark.python"] = python
        conf["spark.pyspark.driver.python"] = python
    conf.update({str(k): str(v) for k, v in pipeline_spark.items()})
    return conf


def spark_env(python: str, path: str | None) -> dict[str, str]:
    """Environment of a local spark-submit: this interpreter for PySpark, and this interpreter's bin dir (a venv's
    pyspark ships spark-submit there) appended to PATH as a fallback for a spark-submit not otherwise on PATH."""
    bindir = os.path.dirname(python)
    parts = [p for p in (path or "").split(os.pathsep) if p]
    return {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python,
            "PATH": os.pathsep.join(parts if bindir in parts else [*parts, bindir])}


def submit_kwargs(settings: Any, cfg: Any, name: str) -> dict[str, Any]:
    """The SparkSubmitOperator arguments shared by the ingestion and maintenance DAGs."""
    from cdc.spark import jars

    return dict(conn_id=settings.spark_conn_id, master=settings.spark_master, pool=settings.pool,
                py_files=settings.py_files, cdc_jars=jars.for_config(cfg),
                pipeline_spark_conf=dict(cfg.spark), name=name, cdc_lineage=namespaces(cfg))


def job_jars(coords: tuple[str, ...], master: str, pipeline_spark: Mapping[str, str], iceberg_jar: str | None = None,
             files: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's jars for spark-submit (pure): ``spark.jars`` (local files) and/or ``spark.jars.packages`` (Maven
    coordinates), chosen as the job chooses them for a session of its own (``cdc.spark.jars.jar_conf``): nothing when
    the YAML brings its own, local files for a local master when every jar has one, else coordinates.
    ``iceberg_jar`` (``CDC_ICEBERG_JAR``): a file of the Iceberg runtime; ``files``: ``cdc.spark.jars.local_files``."""
    from cdc.spark import jars

    have = {**(files or {}), **({jars.ICEBERG_SPARK_RUNTIME: iceberg_jar} if iceberg_jar else {})}
    return jars.jar_conf(pipeline_spark, coords, master.startswith("local"), os.environ.get(jars.JARS_ENV, "auto"),
                         have)