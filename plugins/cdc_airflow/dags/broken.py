"""The placeholder DAG of a pipeline file that does not load (``cdc_airflow.config.pipelines.PipelineFile`` with
``error``): the pipeline's DAG id ``cdc_<pipeline>`` (the file's stem when the name is unreadable), scheduled like
the pipeline (``@hourly`` when its schedule is unusable), whose one task ``config_error`` fails every interval,
without retries, with the error (file, key, what to write) and fires the pipeline's ``airflow.on_failure`` alert
(``kind: terminal``, ``error_class: ConfigError``; with no readable target the callback logs it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException

from cdc_airflow.config.options import AirflowConfig
from cdc_airflow.config.schedule import ingest_timetable
from cdc_airflow.config.settings import CdcSettings
from cdc_airflow.dags.common import START, default_args

if TYPE_CHECKING:
    from cdc_airflow.config.pipelines import PipelineFile


def broken_message(pf: "PipelineFile") -> str:
    """The task's error: the job's one-line error form (``ERROR [<class>] ...``) and what to do."""
    return (f"ERROR [{pf.error_class or 'ConfigError'}] {pf.error or f'{pf.path}: does not load'} -- Fix: change "
            f"{pf.path} as the error says; the pipeline's DAGs come back at the next parse of the DAG files (the "
            "other pipelines are not affected).")


def build_broken_dag(settings: CdcSettings, pf: "PipelineFile", dag_id: str) -> DAG:
    salvaged = pf.salvaged
    pipeline = salvaged.pipeline if salvaged else pf.path.stem
    message = broken_message(pf)
    with DAG(dag_id=dag_id, schedule=ingest_timetable(salvaged.schedule if salvaged else "@hourly"),
             start_date=START, catchup=False, max_active_runs=1,
             default_args=default_args(settings, pipeline, AirflowConfig(
                 on_failure=salvaged.on_failure if salvaged else None)),
             tags=["cdc", "config-error", f"pipeline:{pipeline}"],
             description=f"BROKEN CONFIG: {pf.error}"[:200],
             doc_md=f"`{pf.path}` does not load; this DAG fails every run until it does:\n\n```\n{message}\n```") as dag:
        @task(task_id="config_error", retries=0)
        def config_error() -> None:
            raise AirflowFailException(message)

        config_error()
    return dag
