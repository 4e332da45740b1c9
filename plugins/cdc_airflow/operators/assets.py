"""Airflow assets of the CDC target tables: ``Asset(name="<namespace>.<table>", uri="iceberg://<catalog>/<ns>/<table>")``.

Each ingest task declares one ``AssetAlias`` per table of its pipeline as outlet and, when its batch committed data
(status ``committed`` and inserted + updated + deleted > 0), adds an event for its table's ``Asset`` through the
alias, with ``extra`` = snapshot id, batch id, mode, inserted/updated/deleted, events read and the batch's
high-water offsets (``{topic: {partition: end offset}}``). An alias rather than the asset itself because Airflow
emits an event for every plain ``Asset`` outlet of a successful task, empty batches included; through the alias
only batches that changed the table reach DAGs scheduled on the asset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from airflow.sdk import Asset, AssetAlias

    from cdc.config.model import PipelineConfig

EXTRA_KEYS = ("pipeline", "table", "mode", "batch_id", "snapshot_id", "inserted", "updated", "deleted", "events_read")


def asset_uri(catalog: str, target: str) -> str:
    """``iceberg://<catalog>/<namespace>/<table>`` (a multi-level namespace keeps one segment per level)."""
    return f"iceberg://{catalog}/{target.replace('.', '/')}"


def alias_name(pipeline: str, target: str) -> str:
    return f"cdc_{pipeline}:{target}"


def routed_alias_name(pipeline: str) -> str:
    """The one alias of a pipeline's ``topic_pattern`` tables (their names are known only at run time)."""
    return f"cdc_{pipeline}:topic_pattern"


def table_asset(cfg: "PipelineConfig", target: str) -> "Asset":
    from airflow.sdk import Asset

    return Asset(name=target, uri=asset_uri(cfg.catalog.name, target), group="cdc")


def table_assets(cfg: "PipelineConfig") -> list["Asset"]:
    return [table_asset(cfg, t.target) for t in cfg.tables if t.topic]  # topic_pattern entries: no name yet


def outlet_aliases(cfg: "PipelineConfig") -> list["AssetAlias"]:
    from airflow.sdk import AssetAlias

    routed = [AssetAlias(name=routed_alias_name(cfg.pipeline), group="cdc")] if cfg.has_patterns else []
    return [AssetAlias(name=alias_name(cfg.pipeline, t.target), group="cdc") for t in cfg.tables if t.topic] + routed


def event_extra(pipeline: str, table: Mapping[str, Any]) -> dict[str, Any] | None:
    """The asset event of one table summary of the job, or None when the batch changed nothing."""
    changed = sum(int(table.get(k) or 0) for k in ("inserted", "updated", "deleted"))
    if table.get("status") != "committed" or changed <= 0:
        return None
    topic = str(table.get("topic") or "")
    offsets = {str(r["partition"]): int(r["end"]) for r in table.get("ranges") or []}
    return {**{k: table.get(k) for k in EXTRA_KEYS}, "pipeline": pipeline, "offsets": {topic: offsets}}


def emit(context: Mapping[str, Any], cfg_pipeline: str, catalog: str, summary: Mapping[str, Any] | None) -> list[str]:
    """Add an asset event per committed table of ``summary`` through its alias; returns the tables emitted."""
    from airflow.sdk import Asset, AssetAlias

    emitted = []
    events = context["outlet_events"]
    for table in (summary or {}).get("tables") or []:
        extra = event_extra(cfg_pipeline, table)
        if extra is None:
            continue
        target = str(table["table"])
        # a table resolved from a topic_pattern has no alias of its own: the pipeline's routed alias carries it.
        # Airflow drops events of aliases the task does not declare and merges one asset's events of both aliases.
        for alias in (alias_name(cfg_pipeline, target), routed_alias_name(cfg_pipeline)):
            events[AssetAlias(alias)].add(Asset(name=target, uri=asset_uri(catalog, target), group="cdc"), extra=extra)
        emitted.append(target)
    return emitted
