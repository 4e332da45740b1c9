"""Several tables in one job (one Spark application): failures isolated per table, ``batch.table_concurrency``
tables at a time, one exit code for the group.

Starting Spark (JVM, Iceberg jar, catalog) costs seconds per process, so a run of many small tables pays it once per
group instead of once per table (``airflow.tables_per_task`` groups the DAG's tables into one spark-submit each).
Each table still has its own batch, ledger rows, claim and summary entry; a table that fails is reported as

    {"table": ..., "topic": ..., "status": "failed", "error_class": "BadRecordError", "error": "<one line>",
     "exit_code": 2, "seconds": {"total": ...}}

and the other tables of the group run on. The job's exit code is the worst of its tables' (``worst_exit_code``):
terminal (2) over unclassified (1) over retryable (75). A group with a terminal table is therefore not retried by
Airflow; its retryable tables run again with the next scheduled run. With ``table_concurrency > 1`` tables run in
threads of the one driver (Spark runs jobs of several threads at once; the process's ledger writes take turns,
``cdc.ledger.ledger.ledger_lock``).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Mapping, Sequence

from cdc.common.cli_contract import ExitCode
from cdc.common.errors import CdcError
from cdc.config.model import PipelineConfig, TableConfig
from cdc.run.outcome import unwrap_task_error

FAILED = "failed"
# Most severe first: a person must act > unclassified (retried) > transient (retried).
_SEVERITY = (int(ExitCode.TERMINAL), int(ExitCode.OTHER), int(ExitCode.RETRYABLE))


def worst_exit_code(codes: Iterable[int]) -> int:
    """The exit code of a group from its tables' codes (0 = ok); pure."""
    found = {int(c) for c in codes if int(c) != int(ExitCode.OK)}
    for code in _SEVERITY:
        if code in found:
            return code
    return min(found) if found else int(ExitCode.OK)


def failed_entry(table: TableConfig, mode: str, exc: BaseException, seconds: float) -> dict[str, Any]:
    """The summary entry of a table whose run raised ``exc`` (a ``CdcError`` or anything else, exit 1)."""

    err = exc if isinstance(exc, CdcError) else unwrap_task_error(exc, f"table {table.target}")
    return {"table": table.target, "topic": table.topic, "status": FAILED, "mode": mode,
            "error_class": type(err).__name__, "error": " ".join(str(err).split()), "exit_code": int(err.exit_code),
            "seconds": {"total": round(seconds, 3)}}


def error_lines(summary: Mapping[str, Any]) -> list[str]:
    """One ``ERROR [Class] message`` line per failed table of a summary (pure)."""
    return [f"ERROR [{t['error_class']}] {t['error']}" for t in summary.get("tables", [])
            if t.get("status") == FAILED]


def exit_code_of(summary: Mapping[str, Any]) -> int:
    return worst_exit_code(int(t.get("exit_code") or 0) for t in summary.get("tables", []))


def table_session(spark: Any, cfg: PipelineConfig) -> Any:
    """The Spark session one table's thread runs in: its own (``newSession()``: the same SparkContext and settings,
    its own catalog cache) when tables run at once. Iceberg's row-level operations (the ledger's UPDATEs, MERGEs into
    the shared dead-letter table) fail when another thread of the same session commits to the same table between
    their scan and their commit ("Runtime file filtering is not possible: the table has been concurrently modified
    ... use independent Spark sessions in each thread"); from separate sessions the commits are retried and
    validated like those of separate processes."""
    return spark.newSession() if cfg.batch.table_concurrency > 1 else spark


def run_isolated(cfg: PipelineConfig, tables: Sequence[TableConfig], mode: str,
                 run_one: Callable[[TableConfig], dict[str, Any]]) -> dict[str, Any]:
    """Run ``run_one`` for every table (``cfg.batch.table_concurrency`` at a time), catching each table's error;
    the summary lists the tables in the given order."""

    def guarded(t: TableConfig) -> dict[str, Any]:
        t0 = time.monotonic()
        try:
            return run_one(t)
        except Exception as exc:  # noqa: BLE001 - isolated: reported in the summary, the exit code says it
            return failed_entry(t, mode, exc, time.monotonic() - t0)

    workers = max(1, min(cfg.batch.table_concurrency, len(tables)))
    if workers == 1:
        out = [guarded(t) for t in tables]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="cdc-table") as pool:
            out = list(pool.map(guarded, tables))
    return {"pipeline": cfg.pipeline, "mode": mode, "tables": out}
