"""Discover pipeline YAML files and load them with the job's own config loader (``cdc.config``, pyyaml only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_airflow.config.options import validate
from cdc_airflow.config.salvage import Salvaged, salvage
from cdc_airflow.config.schedule import schedule_problem
from cdc_airflow.config.settings import CdcSettings, ensure_import_paths

if TYPE_CHECKING:
    from cdc.config.model import PipelineConfig
    from cdc.kafka.topics import Routes


@dataclass(frozen=True)
class PipelineFile:
    path: Path
    config: "PipelineConfig | None"
    error: str | None = None  # a file that does not load: the error, naming the file and the key
    error_class: str | None = None  # ConfigError, or the class of an unexpected error of the loader
    salvaged: Salvaged | None = None  # a file that does not load: its name, schedule, on_failure where readable


def pipeline_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p.resolve() for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def load_pipelines(settings: CdcSettings) -> list[PipelineFile]:
    """Every YAML in the pipelines folder; a broken file yields an entry with ``error`` and what could be salvaged
    from it (``cdc_airflow.config.salvage``), whatever the loader raised: the others still load. The schedule is
    checked here as Airflow checks it, so an invalid cron string is an error of its own file."""
    ensure_import_paths(settings)
    from cdc.common.errors import CdcError, ConfigError
    from cdc.config.load import load_config

    out: list[PipelineFile] = []
    for path in pipeline_files(settings.pipelines_dir):
        try:
            cfg = load_config(path)
            validate(cfg)  # the airflow: and metrics: sections
            effective = settings.ingest_schedule(cfg.schedule)
            if (problem := schedule_problem(effective)) is not None:
                where = "key 'schedule'" if effective == cfg.schedule else "CDC_SCHEDULE (overrides key 'schedule')"
                raise ConfigError(f"{path}: {where}: {problem}")
            out.append(PipelineFile(path, cfg))
        except Exception as exc:  # noqa: BLE001 - one file never takes the other pipelines down
            error = str(exc) if isinstance(exc, CdcError) else \
                f"{path}: the config loader failed: {type(exc).__name__}: {exc}"
            out.append(PipelineFile(path, None, error, type(exc).__name__, salvage(path, settings)))
    return out


def load_pipeline(settings: CdcSettings, config_path: str) -> "PipelineConfig":
    ensure_import_paths(settings)
    from cdc.config.load import load_config

    return load_config(config_path)


def resolve_routes(cfg: "PipelineConfig") -> "Routes":
    """``cfg`` with its ``topic_pattern`` entries resolved against the broker's topics now (``cdc.config.routing``), for
    tasks at run time (never at DAG parse time): the tables that run, and the ambiguous topics set aside (two
    patterns, a shared target or helper tables: ``Routes.unresolved``), which the run reports as failed tables.
    Another config error fails the task without retries; an unreachable broker is retried."""
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from cdc.common.errors import CdcError
    from cdc.kafka.topics import route_pipeline

    try:
        return route_pipeline(cfg)
    except CdcError as exc:
        if exc.retryable:
            raise AirflowException(str(exc)) from exc
        raise AirflowFailException(str(exc)) from None
