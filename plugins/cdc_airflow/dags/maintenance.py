"""The daily maintenance DAG of one pipeline: one spark-submit of ``jobs/maintenance.py`` that expires snapshots,
rewrites data and position-delete files, removes orphan files on the targets, drops committed staging batches
and garbage-collects tombstones older than the retention params."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from cdc.common import cli_contract as cli
from cdc_airflow.config.options import airflow_options
from cdc_airflow.config.settings import CdcSettings
from cdc_airflow.dags.common import START, default_args

if TYPE_CHECKING:
    from cdc.config.model import PipelineConfig

def maintenance_params(names: list[str], open_names: bool = False) -> dict[str, Param]:
    """The DAG's params: the job's retention settings (``cdc.common.cli_contract.MAINTENANCE_RETENTION``) and a
    subset of tables."""
    params = {r.param: Param(r.default, type="integer" if r.integer else "number", minimum=1, description=r.description,
                             title=r.param.replace("_", " ").capitalize()) for r in cli.MAINTENANCE_RETENTION}
    items = {"type": "string"} if open_names else {"type": "string", "enum": names}  # open: topic_pattern tables
    params["tables"] = Param([], type=["array", "null"], items=items, examples=names,
                             uniqueItems=True, title="Tables", description="Subset of targets (empty: all).")
    return params


def args_from_params(config_path: str, params: dict[str, Any]) -> list[str]:
    if params["orphan_retention_hours"] < cli.MIN_ORPHAN_RETENTION_HOURS:
        raise AirflowFailException(f"param orphan_retention_hours: below {cli.MIN_ORPHAN_RETENTION_HOURS} h risks "
                                   "deleting files of running jobs")
    return cli.maintenance_args(config_path, params.get("tables") or [],
                                **{r.param: params[r.param] for r in cli.MAINTENANCE_RETENTION})


def build_maintenance_dag(settings: CdcSettings, cfg: "PipelineConfig") -> DAG:
    from cdc_airflow.operators.spark_submit import CdcSparkSubmitOperator, submit_kwargs

    config_path = str(cfg.source_path)
    names = [t.target for t in cfg.tables if t.topic]  # topic_pattern tables resolve when the job runs
    options = airflow_options(cfg)
    with DAG(
        dag_id=f"cdc_{cfg.pipeline}_maintenance",
        description=f"Iceberg maintenance of CDC pipeline {cfg.pipeline}",
        schedule=settings.maintenance_schedule,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=default_args(settings, cfg.pipeline, options),
        params=maintenance_params(names, cfg.has_patterns),
        tags=["cdc", "maintenance", f"pipeline:{cfg.pipeline}"],
    ) as dag:
        @task(task_id="arguments")
        def arguments() -> list[str]:
            return args_from_params(config_path, dict(get_current_context()["params"]))

        CdcSparkSubmitOperator(
            task_id="maintain",
            application=settings.maintenance_app,
            **submit_kwargs(settings, cfg, f"cdc-{cfg.pipeline}-maintenance"),
            application_args=arguments(),
            execution_timeout=timedelta(minutes=options.maintenance_timeout_minutes),
        )
    return dag
