"""The manual bootstrap DAG of a pipeline, ``cdc_<pipeline>_bootstrap``: one spark-submit of ``jobs/bootstrap.py``
that loads the selected tables straight from their source database over JDBC (``tables[].bootstrap``), then the
ingestion DAG continues from Kafka. Only pipelines with at least one bootstrap table get it. Params: ``tables``
(subset of the bootstrap tables; empty: all) and ``replace`` (replace the rows of non-empty targets)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from airflow.sdk import DAG, Param, get_current_context, task

from cdc_airflow.config.options import airflow_options
from cdc_airflow.config.settings import CdcSettings
from cdc_airflow.dags.common import START, default_args
from cdc_airflow.runs.commands import bootstrap_args

if TYPE_CHECKING:
    from cdc.config.model import PipelineConfig

TIMEOUT = timedelta(hours=12)  # a large table's parallel JDBC read; the Airflow task timeout


def bootstrap_tables(cfg: "PipelineConfig") -> list[str]:
    """The pipeline's tables that have a ``bootstrap`` section (none: the pipeline gets no bootstrap DAG)."""
    return [t.target for t in cfg.tables if getattr(t, "bootstrap", None) is not None]


def bootstrap_params(names: list[str]) -> dict[str, Param]:
    return {
        "tables": Param([], type=["array", "null"], items={"type": "string", "enum": names}, examples=names,
                        uniqueItems=True, title="Tables", description="Tables to bootstrap (empty: every table "
                                                                      "with a bootstrap section)."),
        "replace": Param(False, type="boolean", title="Replace",
                         description="Replace the rows of targets that are not empty (otherwise they are refused)."),
    }


def build_bootstrap_dag(settings: CdcSettings, cfg: "PipelineConfig") -> DAG | None:
    """The bootstrap DAG, or None when no table of the pipeline has a bootstrap section."""
    from cdc_airflow.operators.spark_submit import CdcSparkSubmitOperator, submit_kwargs

    names = bootstrap_tables(cfg)
    if not names:
        return None
    config_path = str(cfg.source_path)
    options = airflow_options(cfg)
    with DAG(
        dag_id=f"cdc_{cfg.pipeline}_bootstrap",
        description=f"Initial load of CDC pipeline {cfg.pipeline} from the source database over JDBC",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=default_args(settings, cfg.pipeline, options),
        params=bootstrap_params(names),
        tags=["cdc", "bootstrap", f"pipeline:{cfg.pipeline}"],
    ) as dag:
        @task(task_id="arguments")
        def arguments() -> list[str]:
            return bootstrap_args(config_path, dict(get_current_context()["params"]))

        CdcSparkSubmitOperator(
            task_id="bootstrap",
            application=str(settings.jobs_dir / "bootstrap.py"),
            **submit_kwargs(settings, cfg, f"cdc-{cfg.pipeline}-bootstrap"),
            application_args=arguments(),
            execution_timeout=TIMEOUT,
        )
    return dag
