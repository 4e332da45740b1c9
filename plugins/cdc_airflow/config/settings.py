"""Deployment settings read from the environment (one place, all documented).

| variable              | default                                   | meaning                                          |
| --------------------- | ----------------------------------------- | ------------------------------------------------ |
| CDC_HOME              | the repository root (parent of plugins/)  | where jobs/ lives                                |
| CDC_PIPELINES_DIR     | $CDC_HOME/pipelines                       | one DAG per *.yaml / *.yml file                  |
| CDC_SPARK_POOL        | cdc_spark                                 | Airflow pool bounding concurrent Spark jobs      |
| CDC_SPARK_CONN_ID     | spark_default                             | SparkSubmitHook connection                       |
| CDC_SPARK_MASTER      | (unset: the connection's master)          | overrides the master, e.g. local[*]              |
| CDC_ICEBERG_JAR       | (none: Maven coordinates, cdc.spark.jars) | a local Iceberg runtime jar file for --jars      |
| CDC_POSTGRES_JDBC_JAR | /usr/share/java/postgresql.jar            | added to --jars for a jdbc catalog on PostgreSQL |
|                       |                                           | (cdc.spark.jars; skipped when the file is absent)      |
| CDC_PY_FILES          | (unset: none; required for a cluster)     | --py-files: the cdc wheel (make wheel), e.g.     |
|                       |                                           | baked into an image                              |
| CDC_RETRIES           | 3                                         | retries of retryable failures                    |
| CDC_RESULT_DIR        | (unset: a local temporary file)           | where jobs write their result: a path or URI    |
|                       |                                           | a cluster-deploy-mode driver reaches (s3://...)  |
| CDC_MAINTENANCE_SCHEDULE | @daily                                 | schedule of the maintenance DAGs                 |
| CDC_SCHEDULE          | (unset: each YAML's ``schedule``)         | override every ingestion DAG's schedule; ``none``: |
|                       |                                           | manual/API triggers only (the demo uses this)    |
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CdcSettings:
    home: Path
    pipelines_dir: Path
    pool: str
    spark_conn_id: str
    spark_master: str | None
    iceberg_jar: str | None
    py_files: str | None
    retries: int
    maintenance_schedule: str
    schedule_override: str | None = None  # CDC_SCHEDULE; "none" → no schedule

    def ingest_schedule(self, yaml_schedule: str | None) -> str | None:
        """The ingestion DAG's schedule: the pipeline YAML's, unless CDC_SCHEDULE overrides it."""
        if not self.schedule_override:
            return yaml_schedule
        return None if self.schedule_override.strip().lower() in ("none", "null", "manual") else self.schedule_override

    @property
    def jobs_dir(self) -> Path:
        return self.home / "jobs"

    @property
    def ingest_app(self) -> str:
        return str(self.jobs_dir / "ingest.py")

    @property
    def maintenance_app(self) -> str:
        return str(self.jobs_dir / "maintenance.py")

    @property
    def build_dir(self) -> Path:
        return self.home / "build"


def load_settings(env: dict[str, str] | None = None) -> CdcSettings:
    e = dict(os.environ) if env is None else env
    home = Path(e.get("CDC_HOME") or Path(__file__).resolve().parents[3])  # <home>/plugins/cdc_airflow/config/
    return CdcSettings(
        home=home,
        pipelines_dir=Path(e.get("CDC_PIPELINES_DIR") or home / "pipelines"),
        pool=e.get("CDC_SPARK_POOL") or "cdc_spark",
        spark_conn_id=e.get("CDC_SPARK_CONN_ID") or "spark_default",
        spark_master=e.get("CDC_SPARK_MASTER") or None,
        iceberg_jar=e.get("CDC_ICEBERG_JAR") or None,
        py_files=e.get("CDC_PY_FILES") or None,
        retries=int(e.get("CDC_RETRIES") or 3),
        maintenance_schedule=e.get("CDC_MAINTENANCE_SCHEDULE") or "@daily",
        schedule_override=e.get("CDC_SCHEDULE") or None,
    )


def ensure_import_paths(settings: CdcSettings) -> None:
    """Make ``cdc`` (jobs/) importable in the DAG processor, workers and the API server."""
    jobs = str(settings.jobs_dir)
    if jobs not in sys.path:
        sys.path.append(jobs)
