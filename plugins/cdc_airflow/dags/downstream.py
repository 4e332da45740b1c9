"""An example of a DAG downstream of a CDC pipeline, scheduled on its table assets (``cdc_<pipeline>_downstream``).

It runs when any table of the pipeline changed (``AssetAny``): the ingest tasks emit an asset event only for
batches that inserted, updated or deleted rows (``cdc_airflow.operators.assets``). Its task reads the rows that changed
between the snapshot before the first triggering event and the snapshot of the last one, with pyiceberg (no
Spark): the table as of the newest event's snapshot, filtered to the rows the events' batches wrote
(``__batch_id >= first batch``; every row carries the batch that last wrote it). Hard deletes leave no row, so they
are counted from the events. Replace the logging with your own dbt run, mart refresh, export...
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from airflow.sdk import DAG, AssetAny, get_current_context, task

from cdc_airflow.config.pipelines import load_pipeline
from cdc_airflow.dags.common import START
from cdc_airflow.monitor.ledger import load_table
from cdc_airflow.operators.assets import table_assets

if TYPE_CHECKING:
    from cdc.config.model import CatalogConfig, PipelineConfig

log = logging.getLogger(__name__)


def changes_by_table(events: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fold asset event extras into one change window per table: first batch, last snapshot, summed counts."""
    out: dict[str, dict[str, Any]] = {}
    for e in sorted(events, key=lambda e: (str(e.get("table")), int(e.get("batch_id") or 0))):
        if not e.get("table") or e.get("snapshot_id") is None:
            continue
        w = out.setdefault(str(e["table"]), {"first_batch": int(e["batch_id"]), "inserted": 0, "updated": 0,
                                            "deleted": 0, "batches": []})
        w["last_batch"], w["snapshot_id"] = int(e["batch_id"]), int(e["snapshot_id"])
        w["batches"].append(int(e["batch_id"]))
        for k in ("inserted", "updated", "deleted"):
            w[k] += int(e.get(k) or 0)
    return out


def changed_rows(catalog: "CatalogConfig", target: str, first_batch: int, snapshot_id: int,
                 columns: tuple[str, ...] = ("*",)) -> Any:
    """The rows of ``target`` as of ``snapshot_id`` written by batch ``first_batch`` or later (a pyarrow Table)."""
    from pyiceberg.expressions import GreaterThanOrEqual

    table = load_table(catalog, target)
    if table is None:
        raise LookupError(f"table {target} does not exist")
    return table.scan(snapshot_id=snapshot_id, row_filter=GreaterThanOrEqual("__batch_id", first_batch),
                      selected_fields=columns).to_arrow()


def triggering_extras(context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``extra`` of every asset event that triggered this run (empty for a manual run)."""
    out = []
    for events in (context.get("triggering_asset_events") or {}).values():
        for e in events:
            extra = dict(getattr(e, "extra", None) or {})
            extra.setdefault("table", getattr(getattr(e, "asset", None), "name", None))
            out.append(extra)
    return out


def report(cfg: "PipelineConfig", events: list[dict[str, Any]]) -> dict[str, Any]:
    result = {}
    for target, w in changes_by_table(events).items():
        rows = changed_rows(cfg.catalog, target, w["first_batch"], w["snapshot_id"], ("__batch_id",))
        result[target] = {**{k: v for k, v in w.items()}, "changed_rows": rows.num_rows}
        log.info("%s: %d row(s) changed by batch(es) %s (snapshot %s; events: +%d ~%d -%d)", target, rows.num_rows,
                 w["batches"], w["snapshot_id"], w["inserted"], w["updated"], w["deleted"])
    if not result:
        log.info("no CDC asset events triggered this run")
    return result


def build_downstream_dag(settings: Any, cfg: "PipelineConfig") -> DAG:
    config_path = str(cfg.source_path)
    with DAG(dag_id=f"cdc_{cfg.pipeline}_downstream", schedule=AssetAny(*table_assets(cfg)), start_date=START,
             catchup=False, max_active_runs=1, tags=["cdc", "example", f"pipeline:{cfg.pipeline}"],
             description=f"Example consumer of the CDC tables of {cfg.pipeline}: counts the changed rows",
             doc_md=__doc__) as dag:
        @task(task_id="changed_rows")
        def changed() -> dict[str, Any]:
            return report(load_pipeline(settings, config_path), triggering_extras(get_current_context()))

        changed()
    return dag
