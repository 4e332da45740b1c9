"""What every CDC DAG shares: its ``start_date`` and its ``default_args`` (retries with exponential backoff; with a
pipeline, the ``on_failure_callback`` of ``airflow.on_failure``). The DAG factories import these from here, never
from each other."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from cdc_airflow.config.options import AirflowConfig
from cdc_airflow.config.settings import CdcSettings
from cdc_airflow.monitor.alerts import CdcFailureCallback

START = datetime(2024, 1, 1)


def default_args(settings: CdcSettings, pipeline: str | None = None,
                 options: AirflowConfig | None = None) -> dict[str, Any]:
    """Retries with exponential backoff; terminal job errors raise AirflowFailException and skip them. With a
    pipeline, every task reports its final failure through ``CdcFailureCallback`` (``airflow.on_failure``)."""
    args: dict[str, Any] = {
        "owner": "cdc",
        "retries": settings.retries,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
    }
    if pipeline is not None:
        args["on_failure_callback"] = CdcFailureCallback(pipeline, (options or AirflowConfig()).on_failure)
    return args
