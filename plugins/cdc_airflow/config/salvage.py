"""What can still be read from a pipeline YAML that does not load: its pipeline name, schedule and
``airflow.on_failure``, so that its placeholder DAG keeps the pipeline's DAG id, runs on the pipeline's schedule
(``@hourly`` when that is unusable) and alerts the pipeline's target. Whatever cannot be read falls back to a
default (the file's stem, hourly, no target: the failure callback then only logs)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_airflow.config.options import Notifier, parse_airflow
from cdc_airflow.config.schedule import HOURLY, schedule_problem
from cdc_airflow.config.settings import CdcSettings

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Salvaged:
    pipeline: str  # the YAML's ``pipeline`` when it is a valid name, else the file's stem (made a valid DAG id part)
    schedule: str | None  # the DAG's schedule: the pipeline's (or CDC_SCHEDULE) when usable, else @hourly
    on_failure: str | Notifier | None = None  # airflow.on_failure when it parses, else None (the callback logs)


def stem_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem) or "pipeline"


def salvage(path: Path, settings: CdcSettings) -> Salvaged:
    raw = _raw(path)
    name = raw.get("pipeline")
    name = name if isinstance(name, str) and _NAME.match(name) else stem_name(path)
    schedule = settings.ingest_schedule(raw.get("schedule", HOURLY))
    if schedule_problem(schedule) is not None:
        schedule = HOURLY
    return Salvaged(name, schedule, _on_failure(raw.get("airflow")))


def _raw(path: Path) -> dict[Any, Any]:
    import yaml

    try:
        raw = yaml.safe_load(path.read_text())
    except Exception:  # noqa: BLE001 - unreadable, not YAML: nothing to salvage
        return {}
    return raw if isinstance(raw, dict) else {}


def _on_failure(section: Any) -> str | Notifier | None:
    """``airflow.on_failure`` as ``cdc_airflow.config.options`` reads it (``${ENV}`` substituted), or None."""
    import os

    from cdc.config.load import _Parser

    if not isinstance(section, dict) or section.get("on_failure") is None:
        return None
    try:
        value = _Parser("<salvage>", os.environ).subst(section["on_failure"], "airflow.on_failure")
        return parse_airflow({"on_failure": value}, "<salvage>", []).on_failure
    except Exception:  # noqa: BLE001 - an unusable target: the callback logs with defaults
        return None
