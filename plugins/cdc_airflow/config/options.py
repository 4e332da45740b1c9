"""The pipeline YAML's ``airflow:`` section: settings only the Airflow side reads (the job never needs them).

    airflow:
      task_timeout_minutes: 45          # execution_timeout of each ingest task (default: sized from the batch caps)
      maintenance_timeout_minutes: 180  # execution_timeout of the maintenance task
      on_failure: my_alerts.cdc:page    # a callable "module:function" / "module.function", called with one dict
      # or an Airflow notifier (class path + keyword arguments), called with the task context + "cdc_alert":
      # on_failure: {notifier: airflow.providers.smtp.notifications.smtp.SmtpNotifier,
      #              kwargs: {to: oncall@example.com, subject: "CDC {{ cdc_alert.pipeline }} {{ cdc_alert.kind }}"}}
      freshness_minutes: 60             # every table; or per table: {inventory.orders: 30, inventory.customers: 240}
      tables_per_task: 10               # tables per ingest task (one spark-submit each; cdc_airflow.runs.grouping)

``cdc.config`` lets the ``airflow`` key through; this module validates it (unknown keys, types) when the DAG files
load the pipeline, so a typo turns the pipeline's DAG into the "broken config" DAG naming the file and the key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from cdc.config.model import PipelineConfig

KEYS = ("task_timeout_minutes", "maintenance_timeout_minutes", "on_failure", "freshness_minutes", "tables_per_task")
_PATH = re.compile(r"^[A-Za-z_][\w.]*([.:][A-Za-z_]\w*)$")
# Default ingest timeout: start-up/queueing allowance plus the largest batch read at a pessimistic rate.
STARTUP_MINUTES = 20
PESSIMISTIC_EVENTS_PER_SECOND = 1_000  # per partition: one reader task per chunk, chunks of one partition in a row
DEFAULT_MAINTENANCE_MINUTES = 180


@dataclass(frozen=True)
class Notifier:
    path: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AirflowConfig:
    task_timeout_minutes: float | None = None  # None: default_timeout_minutes(batch caps)
    maintenance_timeout_minutes: float = DEFAULT_MAINTENANCE_MINUTES
    on_failure: str | Notifier | None = None
    freshness_minutes: Mapping[str, float] = field(default_factory=dict)  # target table → minutes
    tables_per_task: int = 1  # planned tables per mapped ingest task (one Spark application per group)

    def ingest_timeout_minutes(self, max_records_per_partition: int) -> float:
        return self.task_timeout_minutes or default_timeout_minutes(max_records_per_partition)


def default_timeout_minutes(max_records_per_partition: int) -> float:
    """Start-up allowance + twice the time to read the per-partition cap at 1,000 events/s (500,000 → 37 min)."""
    return float(STARTUP_MINUTES + math.ceil(2 * max_records_per_partition / PESSIMISTIC_EVENTS_PER_SECOND / 60))


def parse_airflow(raw: Any, src: str, tables: list[str], routed: bool = False) -> AirflowConfig:
    """The ``airflow:`` mapping (``${ENV}`` already substituted) → ``AirflowConfig``; errors name file and key."""
    from cdc.common.errors import ConfigError

    def fail(key: str, msg: str) -> ConfigError:
        return ConfigError(f"{src}: key 'airflow{'.' + key if key else ''}': {msg}")

    if raw is None:
        return AirflowConfig()
    if not isinstance(raw, Mapping):
        raise fail("", f"must be a mapping, got {type(raw).__name__}")
    extra = sorted(set(raw) - set(KEYS))
    if extra:
        raise fail(str(extra[0]), f"unknown key (allowed: {', '.join(KEYS)})")

    def minutes(key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise fail(key, f"must be a number of minutes > 0, got {value!r}")
        return float(value)

    timeout = raw.get("task_timeout_minutes")
    maint = raw.get("maintenance_timeout_minutes", DEFAULT_MAINTENANCE_MINUTES)
    fresh_raw = raw.get("freshness_minutes")
    if fresh_raw is None:
        fresh: dict[str, float] = {}
    elif isinstance(fresh_raw, Mapping):
        unknown = sorted(set(fresh_raw) - set(tables))
        if unknown and not routed:  # routed: topic_pattern tables appear with their topics (cdc.config.routing)
            raise fail(f"freshness_minutes.{unknown[0]}", f"no such table (tables: {', '.join(tables)})")
        fresh = {str(t): minutes(f"freshness_minutes.{t}", v) for t, v in fresh_raw.items()}
    else:
        fresh = {t: minutes("freshness_minutes", fresh_raw) for t in tables}
    return AirflowConfig(
        task_timeout_minutes=None if timeout is None else minutes("task_timeout_minutes", timeout),
        maintenance_timeout_minutes=minutes("maintenance_timeout_minutes", maint),
        on_failure=_on_failure(raw.get("on_failure"), fail), freshness_minutes=fresh,
        tables_per_task=_count(raw.get("tables_per_task", 1), fail))


def _count(value: Any, fail: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail("tables_per_task", f"must be an integer >= 1, got {value!r}")
    return value


def _on_failure(value: Any, fail: Any) -> str | Notifier | None:
    if value is None:
        return None
    if isinstance(value, str):
        if not _PATH.match(value):
            raise fail("on_failure", f"must be a callable path like package.module:function, got {value!r}")
        return value
    if isinstance(value, Mapping):
        extra = sorted(set(value) - {"notifier", "kwargs"})
        if extra:
            raise fail(f"on_failure.{extra[0]}", "unknown key (allowed: notifier, kwargs)")
        path, kwargs = value.get("notifier"), value.get("kwargs") or {}
        if not isinstance(path, str) or not _PATH.match(path):
            raise fail("on_failure.notifier", f"must be a class path like package.module.Notifier, got {path!r}")
        if not isinstance(kwargs, Mapping):
            raise fail("on_failure.kwargs", "must be a mapping")
        return Notifier(path, dict(kwargs))
    raise fail("on_failure", f"must be a callable path or {{notifier: ..., kwargs: ...}}, got {value!r}")


def airflow_options(cfg: "PipelineConfig") -> AirflowConfig:
    """The pipeline's ``airflow:`` section (defaults when it has none)."""
    return parse_airflow(cfg.sections.get("airflow"), cfg.source_path, [t.target for t in cfg.tables],
                         any(t.topic_pattern for t in cfg.tables))


def validate(cfg: "PipelineConfig") -> None:
    """Raise ``ConfigError`` when the ``airflow:`` or ``metrics:`` section is invalid."""
    from cdc.observe.metrics import metrics_config

    airflow_options(cfg)
    metrics_config(cfg)
