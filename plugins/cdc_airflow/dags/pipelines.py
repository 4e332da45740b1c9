"""All DAGs of ``dags/cdc_pipelines.py``: per pipeline file its ingest DAG (and bootstrap DAG), or, for a file that
does not load or whose DAGs fail to build, its placeholder DAG (``cdc_airflow.dags.broken``). One file never
affects another: every failure is caught per file, and a DAG half-built when its factory raised is dropped
from Airflow's auto-registration."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from airflow.sdk import DAG

from cdc_airflow.config.pipelines import PipelineFile, load_pipelines
from cdc_airflow.config.salvage import salvage, stem_name
from cdc_airflow.config.settings import CdcSettings
from cdc_airflow.dags.bootstrap import build_bootstrap_dag
from cdc_airflow.dags.broken import build_broken_dag
from cdc_airflow.dags.ingest import build_ingest_dag


def pipeline_dags(settings: CdcSettings) -> dict[str, DAG]:
    """DAG id → DAG: the good pipelines' first (their ids win), then one placeholder per broken file."""
    dags: dict[str, DAG] = {}
    broken: list[PipelineFile] = []
    for pf in load_pipelines(settings):
        if pf.config is None:
            broken.append(pf)
            continue
        cfg = pf.config
        try:
            built = _isolated(lambda: [build_ingest_dag(settings, cfg), build_bootstrap_dag(settings, cfg)])
        except Exception as exc:  # noqa: BLE001 - this file's DAGs only
            broken.append(replace(pf, config=None, error=f"{pf.path}: its DAGs fail to build: "
                                  f"{type(exc).__name__}: {exc}", error_class=type(exc).__name__,
                                  salvaged=salvage(pf.path, settings)))
            continue
        dags.update((d.dag_id, d) for d in built if d is not None)
    for pf in broken:
        dag_id = broken_dag_id(pf, set(dags))
        dags[dag_id] = build_broken_dag(settings, pf, dag_id)
    return dags


def broken_dag_id(pf: PipelineFile, taken: set[str]) -> str:
    """``cdc_<pipeline>`` (the id the pipeline's DAG had while it loaded), else ``cdc_<file stem>``, else numbered."""
    names = [pf.salvaged.pipeline] if pf.salvaged else []
    for name in (*names, stem_name(pf.path)):
        if f"cdc_{name}" not in taken:
            return f"cdc_{name}"
    n = 2
    while f"cdc_{stem_name(pf.path)}_{n}" in taken:
        n += 1
    return f"cdc_{stem_name(pf.path)}_{n}"


def _isolated(build: Callable[[], Any]) -> Any:
    """``build()``; when it raises, the DAGs it registered with Airflow's DAG context are withdrawn."""
    from airflow.sdk.definitions._internal.contextmanager import DagContext

    before = set(DagContext.autoregistered_dags)
    try:
        return build()
    except Exception:
        DagContext.autoregistered_dags.intersection_update(before)
        raise
