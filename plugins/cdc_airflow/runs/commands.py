"""Pure functions: run parameters → job arguments, planning and summary folding.

No Airflow, Spark or Kafka imports: everything here is unit-tested with plain values. The job's flags, value formats
and exit codes come from the one contract module (``cdc.common.cli_contract``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from cdc.common import cli_contract as cli

MODES = ("incremental", "backfill", "dry_run")  # DAG param ``mode``; dry_run = the job's incremental + --dry-run


@dataclass(frozen=True)
class RunRequest:
    """The validated run parameters (DAG params), independent of Airflow. Timestamps are epoch milliseconds."""

    mode: str = "incremental"
    tables: tuple[str, ...] = ()
    max_records_per_partition: int | None = None
    start_offsets: cli.Offsets = field(default_factory=dict)
    end_offsets: cli.Offsets = field(default_factory=dict)
    start_ts_ms: int | None = None
    end_ts_ms: int | None = None

    @property
    def explicit_range(self) -> bool:
        return bool(self.start_offsets or self.end_offsets or self.start_ts_ms is not None
                    or self.end_ts_ms is not None)


@dataclass(frozen=True)
class TablePlan:
    """One mapped ingestion task."""

    table: str
    topic: str
    reason: str  # why it runs: "lag=123", "backfill", "explicit range"
    application_args: tuple[str, ...]

    def as_kwargs(self) -> dict[str, Any]:
        return {"table": self.table, "application_args": list(self.application_args)}


def ingest_args(config_path: str, table: str, topic: str, req: RunRequest) -> list[str]:
    """Arguments after ``jobs/ingest.py`` for one table, in the contract's canonical forms."""
    mode = "incremental" if req.mode == "dry_run" else req.mode
    args = [cli.CONFIG, config_path, cli.TABLE, table, cli.MODE, mode]
    if req.mode == "dry_run":
        args.append(cli.DRY_RUN)
    if req.max_records_per_partition:
        args += [cli.MAX_RECORDS, str(req.max_records_per_partition)]
    if topic in req.start_offsets:
        args += [cli.START_OFFSETS, cli.offsets_arg({topic: req.start_offsets[topic]})]
    if topic in req.end_offsets:
        args += [cli.END_OFFSETS, cli.offsets_arg({topic: req.end_offsets[topic]})]
    if req.start_ts_ms is not None:
        args += [cli.START_TIMESTAMP, cli.timestamp_arg(req.start_ts_ms)]
    if req.end_ts_ms is not None:
        args += [cli.END_TIMESTAMP, cli.timestamp_arg(req.end_ts_ms)]
    return args


def bootstrap_args(config_path: str, params: dict[str, Any]) -> list[str]:
    """``jobs/bootstrap.py`` arguments for the run's params (``tables``, ``replace``)."""
    args = [cli.CONFIG, config_path]
    for name in params.get("tables") or []:
        args += [cli.TABLE, name]
    return args + (["--replace"] if params.get("replace") else [])


def plan_tables(tables: Iterable[tuple[str, str]], req: RunRequest, config_path: str,
                lags: Mapping[str, Mapping[int, int]] | None) -> list[TablePlan]:
    """Which tables run. ``tables``: selected (name, topic); ``lags``: table → per-partition lag (incremental only).

    Backfill and explicit offset/timestamp ranges run every selected table; incremental runs only tables with lag.
    """
    plans: list[TablePlan] = []
    for name, topic in tables:
        if req.mode == "backfill":
            reason = "backfill"
        elif req.explicit_range:
            reason = "explicit range"
        else:
            total = sum((lags or {}).get(name, {}).values())
            if total <= 0:
                continue
            reason = f"lag={total}"
        plans.append(TablePlan(name, topic, reason, tuple(ingest_args(config_path, name, topic, req))))
    return plans


def summarize(summaries: Sequence[Mapping[str, Any] | None], planned: Sequence[str]) -> dict[str, Any]:
    """Fold the per-table job summaries of one DAG run into one report (missing = failed or skipped task)."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for s in summaries:
        for t in (s or {}).get("tables", []):
            seen.add(t.get("table", ""))
            rows.append({k: t.get(k) for k in ("table", "status", "batch_id", "events_read", "events_skipped",
                                               "dead_letters", "inserted", "updated", "deleted", "snapshot_id")}
                        | {"seconds": round(sum((t.get("seconds") or {}).values()), 3)})
    totals = {k: sum(int(r.get(k) or 0) for r in rows)
              for k in ("events_read", "events_skipped", "dead_letters", "inserted", "updated", "deleted")}
    return {"tables": rows, "totals": totals, "missing": sorted(set(planned) - seen)}
