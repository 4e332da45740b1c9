"""DAG run parameters: JSON-schema ``Param`` specs (validated by Airflow, rendered in the trigger form) and the
cross-field checks JSON schema cannot express (``to_request``)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from cdc_airflow.commands import MODES, Offsets, RunRequest

TIMESTAMP_PATTERN = (r"^$|^\d{10,13}$|^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


def offsets_schema(topics: Sequence[str]) -> dict[str, Any]:
    return {
        "type": ["object", "null"],
        "propertyNames": {"enum": list(topics)},
        "additionalProperties": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": r"^[0-9]+$"},
            "additionalProperties": {"type": "integer", "minimum": 0},
        },
    }


def param_specs(tables: Sequence[str], topics: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Keyword arguments of one ``airflow.sdk.Param`` per run parameter (``default`` is the first argument)."""
    return {
        "mode": {
            "default": "incremental", "type": "string", "enum": list(MODES), "title": "Mode",
            "description": "incremental: continue from the committed offsets in the ledger; backfill: re-read the "
                           "given offset/timestamp range of every selected table and MERGE it again (idempotent); "
                           "dry_run: plan and read without writing targets or the ledger.",
        },
        "tables": {
            "default": [], "type": ["array", "null"], "title": "Tables",
            "items": {"type": "string", "enum": list(tables)}, "uniqueItems": True, "examples": list(tables),
            "description": "Subset of target tables (namespace.table). Empty: all tables of the pipeline.",
        },
        "max_records_per_partition": {
            "default": None, "type": ["integer", "null"], "minimum": 1, "title": "Max records per partition",
            "description": "Upper bound of offsets read per partition in this run (empty: the YAML's batch setting).",
        },
        "start_offsets": {
            "default": None, **offsets_schema(topics), "title": "Start offsets",
            "description": 'Inclusive start offset per topic and partition, e.g. {"dbserver1.public.orders": {"0": 100}}.',
        },
        "end_offsets": {
            "default": None, **offsets_schema(topics), "title": "End offsets",
            "description": 'Exclusive end offset per topic and partition, e.g. {"dbserver1.public.orders": {"0": 200}}.',
        },
        "start_timestamp": {
            "default": None, "type": ["string", "null"], "pattern": TIMESTAMP_PATTERN, "title": "Start timestamp",
            "description": "Start at the first record at or after this time (ISO-8601 or epoch ms). "
                           "Not together with start offsets.",
        },
        "end_timestamp": {
            "default": None, "type": ["string", "null"], "pattern": TIMESTAMP_PATTERN, "title": "End timestamp",
            "description": "Stop before the first record at or after this time (ISO-8601 or epoch ms).",
        },
    }


def parse_timestamp(value: str) -> datetime:
    if re.fullmatch(r"\d{10,13}", value):
        n = int(value)
        return datetime.fromtimestamp(n / 1000 if len(value) > 10 else n, tz=timezone.utc)
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _offsets(value: Any) -> Offsets:
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in (value or {}).items()}


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
    start, end = _offsets(params.get("start_offsets")), _offsets(params.get("end_offsets"))
    for name, offs in (("start_offsets", start), ("end_offsets", end)):
        extra = sorted(set(offs) - selected_topics)
        if extra:
            raise ValueError(f"param {name}: topic {extra[0]} is not a topic of the selected tables")
    for topic, parts in end.items():
        for p, e in parts.items():
            s = start.get(topic, {}).get(p)
            if s is not None and e < s:
                raise ValueError(f"param end_offsets: {topic} partition {p}: end {e} is before start {s}")
    ts = {k: (params.get(k) or None) for k in ("start_timestamp", "end_timestamp")}
    parsed = {}
    for k, v in ts.items():
        if v is not None:
            try:
                parsed[k] = parse_timestamp(str(v))
            except ValueError:
                raise ValueError(f"param {k}: not an ISO-8601 time or epoch milliseconds: {v!r}") from None
    if len(parsed) == 2 and parsed["end_timestamp"] <= parsed["start_timestamp"]:
        raise ValueError("param end_timestamp: must be after start_timestamp")
    if start and ts["start_timestamp"]:
        raise ValueError("params start_offsets and start_timestamp: give one of them, not both")
    if end and ts["end_timestamp"]:
        raise ValueError("params end_offsets and end_timestamp: give one of them, not both")
    mrp = params.get("max_records_per_partition")
    return RunRequest(mode=mode, tables=tables, max_records_per_partition=int(mrp) if mrp else None,
                      start_offsets=start, end_offsets=end, start_timestamp=ts["start_timestamp"],
                      end_timestamp=ts["end_timestamp"])


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
