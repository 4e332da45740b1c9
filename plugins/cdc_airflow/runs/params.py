"""DAG run parameters: JSON-schema ``Param`` specs (validated by Airflow, rendered in the trigger form) and the
cross-field checks JSON schema cannot express (``to_request``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Sequence

from cdc.common import cli_contract as cli
from cdc_airflow.runs.commands import MODES, RunRequest

TIMESTAMP_HELP = "ISO-8601 (no zone: UTC) or epoch milliseconds, e.g. 2024-05-01T08:00:00Z or 1714550400000"


def offsets_schema(topics: Sequence[str], open_names: bool = False) -> dict[str, Any]:
    return {
        "type": ["object", "null"],
        "propertyNames": {"type": "string"} if open_names else {"enum": list(topics)},
        "additionalProperties": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": r"^[0-9]+$"},
            "additionalProperties": {"type": "integer", "minimum": 0},
        },
    }


def param_specs(tables: Sequence[str], topics: Sequence[str], open_names: bool = False) -> dict[str, dict[str, Any]]:
    """Keyword arguments of one ``airflow.sdk.Param`` per run parameter (``default`` is the first argument).
    ``open_names``: the pipeline has ``topic_pattern`` entries, so table and topic names are not known at parse time
    (any name; the plan task checks them against the resolved tables)."""
    names = {"type": "string"} if open_names else {"type": "string", "enum": list(tables)}
    return {
        "mode": {
            "default": "incremental", "type": "string", "enum": list(MODES), "title": "Mode",
            "description": "incremental: continue from the committed offsets in the ledger; backfill: re-read the "
                           "given offset/timestamp range of every selected table and MERGE it again (idempotent); "
                           "dry_run: plan and read without writing targets or the ledger.",
        },
        "tables": {
            "default": [], "type": ["array", "null"], "title": "Tables",
            "items": names, "uniqueItems": True, "examples": list(tables),
            "description": "Subset of target tables (namespace.table). Empty: all tables of the pipeline.",
        },
        "max_records_per_partition": {
            "default": None, "type": ["integer", "null"], "minimum": 1, "title": "Max records per partition",
            "description": "Upper bound of offsets read per partition in this run (empty: the YAML's batch setting).",
        },
        "start_offsets": {
            "default": None, **offsets_schema(topics, open_names), "title": "Start offsets",
            "description": 'Inclusive start offset per topic and partition, e.g. {"dbserver1.public.orders": {"0": 100}}.',
        },
        "end_offsets": {
            "default": None, **offsets_schema(topics, open_names), "title": "End offsets",
            "description": 'Exclusive end offset per topic and partition, e.g. {"dbserver1.public.orders": {"0": 200}}.',
        },
        "start_timestamp": {
            "default": None, "type": ["string", "null"], "pattern": cli.TIMESTAMP_PATTERN, "title": "Start timestamp",
            "description": f"Start at the first record at or after this time: {TIMESTAMP_HELP}. "
                           "Not together with start offsets.",
        },
        "end_timestamp": {
            "default": None, "type": ["string", "null"], "pattern": cli.TIMESTAMP_PATTERN, "title": "End timestamp",
            "description": f"Stop before the first record at or after this time: {TIMESTAMP_HELP}.",
        },
    }


def to_request(params: Mapping[str, Any], table_topics: Mapping[str, str]) -> RunRequest:
    """Schema-valid params → ``RunRequest``; raises ``ValueError`` naming the parameter on cross-field errors."""
    mode = params.get("mode") or "incremental"
    if mode not in MODES:
        raise ValueError(f"param mode: must be one of {', '.join(MODES)}, got {mode!r}")
    tables = tuple(params.get("tables") or ())
    unknown = [t for t in tables if t not in table_topics]
    if unknown:
        raise ValueError(f"param tables: unknown table(s) {', '.join(unknown)} (known: {', '.join(table_topics)})")
    selected_topics = {table_topics[t] for t in (tables or table_topics)}
    try:
        start = cli.parse_offsets(params.get("start_offsets"), "param start_offsets")
        end = cli.parse_offsets(params.get("end_offsets"), "param end_offsets")
        ts = {k: cli.parse_timestamp(str(params[k]), f"param {k}") if params.get(k) else None
              for k in ("start_timestamp", "end_timestamp")}
    except cli.ArgumentError as exc:
        raise ValueError(str(exc)) from None
    for name, offs in (("start_offsets", start), ("end_offsets", end)):
        extra = sorted(set(offs) - selected_topics)
        if extra:
            raise ValueError(f"param {name}: topic {extra[0]} is not a topic of the selected tables")
    for topic, parts in end.items():
        for p, e in parts.items():
            s = start.get(topic, {}).get(p)
            if s is not None and e < s:
                raise ValueError(f"param end_offsets: {topic} partition {p}: end {e} is before start {s}")
    s_ts, e_ts = ts["start_timestamp"], ts["end_timestamp"]
    if s_ts is not None and e_ts is not None and e_ts <= s_ts:
        raise ValueError(f"param end_timestamp: must be after start_timestamp ({cli.iso(e_ts)} <= {cli.iso(s_ts)})")
    if start and s_ts is not None:
        raise ValueError("params start_offsets and start_timestamp: give one of them, not both")
    if end and e_ts is not None:
        raise ValueError("params end_offsets and end_timestamp: give one of them, not both")
    mrp = params.get("max_records_per_partition")
    return RunRequest(mode=mode, tables=tables, max_records_per_partition=int(mrp) if mrp else None,
                      start_offsets=start, end_offsets=end, start_ts_ms=s_ts, end_ts_ms=e_ts)


def backfill_interval_params(params: Mapping[str, Any], run_type: Any, start: datetime | None,
                             end: datetime | None) -> dict[str, Any]:
    """Runs created by Airflow's own backfill (``airflow backfill create``, the UI's "Run backfill", the REST API's
    ``/api/v2/backfills``) re-read their data interval: without an explicit range in the conf they become
    ``mode=backfill`` with ``start_timestamp``/``end_timestamp`` = the run's data interval. Other runs: unchanged."""
    out = dict(params)
    kind = getattr(run_type, "value", run_type)  # the Task SDK's DagRunType enum, or a plain string
    if kind != "backfill" or start is None or end is None:
        return out
    has_range = any(out.get(k) for k in ("start_offsets", "end_offsets", "start_timestamp", "end_timestamp"))
    if has_range or (out.get("mode") or "incremental") == "dry_run":
        return out
    out.update(mode="backfill", start_timestamp=start.isoformat(), end_timestamp=end.isoformat())
    return out
