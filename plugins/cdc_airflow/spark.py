"""spark-submit for CDC jobs: a thin operator over ``SparkSubmitHook`` that maps the job's exit codes
(2 → AirflowFailException, no retry; 75 and others → retryable failure), captures the JSON summary line for XCom,
builds the ``cdc`` zip for ``--py-files`` and finds the Iceberg runtime jar."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import zipfile
from collections import deque
from pathlib import Path
from typing import Any, Iterator

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from cdc_airflow.commands import error_line, outcome, parse_summary, spark_conf, spark_env
from cdc_airflow.settings import ICEBERG_JAR_NAME, load_settings


class CdcJobError(AirflowException):
    """The job failed with a retryable or unknown exit code (Airflow retries it)."""


class CdcSparkSubmitHook(SparkSubmitHook):
    """SparkSubmitHook that keeps the job's output tail and an optional master override."""

    def __init__(self, *args: Any, master: str | None = None, **kwargs: Any) -> None:
        self._master_override = master  # read by _resolve_connection, called from super().__init__
        self.output: deque[str] = deque(maxlen=2000)
        super().__init__(*args, **kwargs)

    def _resolve_connection(self) -> dict[str, Any]:
        conn = super()._resolve_connection()
        if self._master_override:
            conn["master"] = self._master_override
        return conn

    @property
    def master(self) -> str:
        return str(self._connection["master"])

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        def tee() -> Iterator[Any]:
            for line in itr:
                self.output.append(str(line).rstrip("\n"))
                yield line

        super()._process_spark_submit_log(tee())

    def run(self, application: str) -> dict[str, Any] | None:
        """Submit and wait; returns the job's JSON summary. Raises per the job's exit-code contract."""
        try:
            self.submit(application)
        except AirflowException:
            rc = self._submit_sp.returncode if self._submit_sp is not None else None
            if rc is None:
                raise
            lines = list(self.output)
            msg = error_line(lines) or f"spark-submit exited with {rc}"
            kind = outcome(rc)
            if kind == "terminal":
                raise AirflowFailException(f"terminal error (exit 2, not retried): {msg}") from None
            label = "retryable error" if kind == "retryable" else "failure"
            raise CdcJobError(f"{label} (exit {rc}): {msg}") from None
        return parse_summary(self.output)


class CdcSparkSubmitOperator(SparkSubmitOperator):
    """Runs one CDC job script. ``table`` is only a label (map index); the job's arguments carry everything."""

    template_fields = (*SparkSubmitOperator.template_fields, "table")

    def __init__(self, *, table: str | None = None, master: str | None = None,
                 pipeline_spark_conf: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.master = master
        self.pipeline_spark_conf = dict(pipeline_spark_conf or {})

    def _get_hook(self) -> CdcSparkSubmitHook:
        return CdcSparkSubmitHook(
            master=self.master, conf=self.conf, conn_id=self._conn_id, files=self.files, py_files=self.py_files,
            archives=self._archives, driver_class_path=self.driver_class_path, jars=self.jars,
            java_class=self._java_class, packages=self.packages, exclude_packages=self.exclude_packages,
            repositories=self._repositories, total_executor_cores=self._total_executor_cores,
            executor_cores=self._executor_cores, executor_memory=self._executor_memory,
            driver_memory=self._driver_memory, keytab=self.keytab, principal=self.principal,
            proxy_user=self.proxy_user, name=self.name, num_executors=self._num_executors,
            status_poll_interval=self._status_poll_interval, application_args=self.application_args,
            env_vars=self.env_vars, verbose=self._verbose, spark_binary=self._spark_binary,
            properties_file=self.properties_file, yarn_queue=self._yarn_queue, deploy_mode=self._deploy_mode,
            use_krb5ccache=self._use_krb5ccache,
        )

    def execute(self, context: Any) -> dict[str, Any] | None:  # type: ignore[override]
        settings = load_settings()
        self.py_files = self.py_files or str(build_cdc_zip(settings.jobs_dir / "cdc", settings.build_dir))
        self.jars = self.jars or find_iceberg_jar()
        hook = self._hook = self._get_hook()
        # The master is only known once the connection is resolved. Local mode: loopback driver, this interpreter
        # for Python workers and the venv's spark-submit; a cluster brings its own Python (PYSPARK_PYTHON in image).
        hook._conf = {**spark_conf(hook.master, self.pipeline_spark_conf, sys.executable), **(self.conf or {})}
        if hook.master.startswith("local"):
            hook._env_vars = {**spark_env(sys.executable, os.environ.get("PATH")), **(self.env_vars or {})}
        summary = hook.run(self.application)
        if summary is None:
            self.log.warning("the job printed no JSON summary line")
        return summary


def find_iceberg_jar() -> str:
    """CDC_ICEBERG_JAR, else the Iceberg Spark runtime jar shipped in the snowpark_connect_deps_iceberg wheel."""
    override = load_settings().iceberg_jar
    if override:
        return override
    spec = importlib.util.find_spec("snowpark_connect_deps_iceberg")
    for base in (spec.submodule_search_locations or []) if spec else []:
        jar = Path(base) / "jars" / ICEBERG_JAR_NAME
        if jar.is_file():
            return str(jar)
    raise AirflowFailException(f"Iceberg runtime jar {ICEBERG_JAR_NAME} not found: install "
                               "snowpark-connect-deps-iceberg or set CDC_ICEBERG_JAR")


def build_cdc_zip(package_dir: Path, out_dir: Path) -> Path:
    """Zip the ``cdc`` package for --py-files. Content-addressed, so concurrent tasks share one file safely."""
    files = sorted(p for p in package_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix not in (".pyc", ".pyo"))
    if not files:
        raise AirflowFailException(f"no sources in {package_dir}: set CDC_HOME or CDC_PY_FILES")
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(package_dir)).encode() + b"\0" + p.read_bytes())
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"cdc-{digest.hexdigest()[:12]}.zip"
    if not target.exists():
        tmp = out_dir / f".{target.name}.{os.getpid()}.tmp"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for p in files:
                zf.write(p, f"{package_dir.name}/{p.relative_to(package_dir)}")
        os.replace(tmp, target)
    return target


def submit_kwargs(settings: Any, cfg: Any, name: str) -> dict[str, Any]:
    """The SparkSubmitOperator arguments shared by the ingestion and maintenance DAGs."""
    return dict(conn_id=settings.spark_conn_id, master=settings.spark_master, pool=settings.pool,
                py_files=settings.py_files, jars=settings.iceberg_jar, pipeline_spark_conf=dict(cfg.spark), name=name)
