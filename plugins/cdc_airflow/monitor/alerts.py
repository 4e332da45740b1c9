"""Failure and freshness alerts of the CDC DAGs (``airflow.on_failure`` of the pipeline YAML, see
``cdc_airflow.config.options``).

Every task of ``cdc_<pipeline>`` and ``cdc_<pipeline>_maintenance`` gets ``CdcFailureCallback`` as
``on_failure_callback`` (Airflow calls it once a task has failed for good: a terminal error, or the last retry).
The callback builds one alert dict and hands it to the configured target:

    {"kind": "terminal" | "retries_exhausted" | "stale", "pipeline", "dag_id", "task_id", "run_id",
     "table" (None for pipeline-wide tasks), "error_class", "message" (one line), "log_url", "try_number",
     "max_tries"}

``terminal``: the job exited 2 (a person must act; never retried) or the task failed without retry on purpose;
``retries_exhausted``: a retryable failure (exit 75, other exits, ``AirflowTaskTimeout``) on its last try;
``stale``: the freshness check of ``publish`` (the run itself succeeded). A callable target gets the dict; a
notifier (``BaseNotifier`` subclass) is called like Airflow calls notifiers, with the task context, plus
``cdc_alert`` = the dict (usable in its templated fields).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Mapping

from cdc_airflow.config.options import Notifier

log = logging.getLogger(__name__)
_JOB_ERROR = re.compile(r"ERROR \[(\w+)\] ")


def one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def error_class(exc: BaseException | None) -> str:
    """The job's error class (``ERROR [BadRecordError] ...`` in the message) or the exception's class."""
    if exc is None:
        return "unknown"
    found = _JOB_ERROR.findall(str(exc))
    return found[-1] if found else type(exc).__name__


def failure_kind(exc: BaseException | None) -> str:
    from airflow.sdk.exceptions import AirflowFailException

    return "terminal" if isinstance(exc, AirflowFailException) else "retries_exhausted"


def task_table(context: Mapping[str, Any]) -> str | None:
    task, ti = context.get("task"), context.get("ti")
    table = getattr(task, "table", None) if task is not None else None
    if not table and ti is not None and getattr(ti, "map_index", -1) not in (None, -1):
        table = getattr(ti, "rendered_map_index", None)
    return table or None


def failure_alert(context: Mapping[str, Any], pipeline: str) -> dict[str, Any]:
    ti, exc = context.get("ti"), context.get("exception")
    message = str(exc) if exc is not None else "failed"
    return {
        "kind": failure_kind(exc if isinstance(exc, BaseException) else None), "pipeline": pipeline,
        "dag_id": getattr(ti, "dag_id", None), "task_id": getattr(ti, "task_id", None),
        "run_id": getattr(ti, "run_id", None), "table": task_table(context),
        "error_class": error_class(exc if isinstance(exc, BaseException) else None),
        "message": one_line(message), "log_url": _log_url(ti), "try_number": getattr(ti, "try_number", None),
        "max_tries": getattr(ti, "max_tries", None),
    }


def _log_url(ti: Any) -> str | None:
    try:
        return ti.log_url if ti is not None else None
    except Exception:  # noqa: BLE001
        return None


def import_string(path: str) -> Any:
    """``package.module.name`` or ``package.module:name`` → the object."""
    import importlib

    module, _, name = path.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(module), name)


def dispatch(target: str | Notifier | None, alert: dict[str, Any], context: Mapping[str, Any]) -> None:
    """Hand ``alert`` to the configured target (import errors and target errors are logged, never raised)."""
    if target is None:
        return
    try:
        if isinstance(target, Notifier):
            notifier = import_string(target.path)(**dict(target.kwargs))
            notifier({**dict(context), "cdc_alert": alert})
        else:
            import_string(target)(alert)
    except Exception:  # noqa: BLE001 - an alert must not change the task's outcome
        log.exception("on_failure target %s failed for alert %s", getattr(target, "path", target), alert)


class CdcFailureCallback:
    """``on_failure_callback`` of the CDC tasks (a callable object: picklable, comparable, shown in logs)."""

    def __init__(self, pipeline: str, target: str | Notifier | None) -> None:
        self.pipeline, self.target = pipeline, target

    def __call__(self, context: Mapping[str, Any]) -> None:
        alert = failure_alert(context, self.pipeline)
        log.error("CDC %s: %s %s%s: [%s] %s (log: %s)", alert["kind"], alert["dag_id"], alert["task_id"],
                  f" ({alert['table']})" if alert["table"] else "", alert["error_class"], alert["message"],
                  alert["log_url"])
        dispatch(self.target, alert, context)

    def __repr__(self) -> str:
        return f"CdcFailureCallback({self.pipeline!r})"


# ---- freshness -----------------------------------------------------------------------------------------------------

def time_lag_seconds(newest_source_ts_ms: int | None, now_ms: int | None = None) -> float | None:
    """now − newest committed source timestamp, in seconds (None: nothing committed yet)."""
    if newest_source_ts_ms is None:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return max(0.0, (now - int(newest_source_ts_ms)) / 1000)


def is_stale(freshness_minutes: float | None, time_lag: float | None, offset_lag: int | None) -> bool:
    """Stale: the topic has newer data (offset lag > 0) and the newest committed change is older than allowed.
    A table with nothing committed yet counts as stale once it has lag."""
    if not freshness_minutes or not offset_lag:
        return False
    return time_lag is None or time_lag > freshness_minutes * 60


def stale_alert(context: Mapping[str, Any], pipeline: str, table: str, freshness_minutes: float,
                time_lag: float | None, offset_lag: int) -> dict[str, Any]:
    ti = context.get("ti")
    behind = "nothing committed yet" if time_lag is None else f"newest committed change {human_duration(time_lag)} old"
    return {"kind": "stale", "pipeline": pipeline, "dag_id": getattr(ti, "dag_id", None),
            "task_id": getattr(ti, "task_id", None), "run_id": getattr(ti, "run_id", None), "table": table,
            "error_class": "Stale",
            "message": f"{table}: {behind} (freshness_minutes {freshness_minutes:g}) while the topic has "
                       f"{offset_lag} newer event(s)",
            "log_url": _log_url(ti), "try_number": getattr(ti, "try_number", None),
            "max_tries": getattr(ti, "max_tries", None)}


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"
