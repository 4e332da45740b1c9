"""A bootstrap's place in the ledger: it claims a batch id as an ingest batch does, so a bootstrap and an ingest never
work on one table at once, and whoever meets a bootstrap whose process died finishes it or withdraws it.

* **Claim** (``claim``): before the source is read, one ``claimed`` row of mode ``bootstrap`` (partition/offsets -1)
  under the table's next batch id, validated like an ingest claim (``cdc.ledger.ledger.Ledger.claim``): an ingest
  batch claimed since the bootstrap looked for pending batches makes it refuse (exit 75), and while the claim is
  pending every ingest run of the table refuses (exit 75) or, its owner dead, settles it first (``settle``).
* **Swap**: the one Iceberg commit that replaces the target's rows, validated as serializable from the target
  snapshot read after the claim; its summary names the bootstrap (``SUMMARY_KEY``: run id, batch id, horizon, rows).
* **Commit** (``commit``): the claim row becomes the committed bootstrap row (horizon in ``truncate_barrier``,
  ``cdc.ledger.model``). Every batch after it drops changes at or below the horizon.
* **Settle** (``settle``): a claim whose owner died. If the target holds its swap (a snapshot whose summary names
  its run), the swap is the bootstrap's result: the row is committed as the bootstrap would have. Otherwise the
  target was never touched: the claim is withdrawn. Either way its staging table is dropped. An ingest run settles
  before it plans, so no batch merges after a swap without its horizon.
"""

from __future__ import annotations

import json
from typing import Any

from cdc.common.errors import ConcurrentRunError
from cdc.common.sql import lit
from cdc.config.model import PipelineConfig, TableConfig
from cdc.config.names import bootstrap_identifier, names
from cdc.iceberg import snapshot_summary
from cdc.iceberg.row_commit import now_us
from cdc.iceberg.tables import exists, fresh_snapshot_id
from cdc.kafka.plan import OffsetRange
from cdc.ledger.lease import owner_alive, process_owner
from cdc.ledger.ledger import Ledger
from cdc.ledger.model import BOOTSTRAP_MODE, FORGOTTEN, bootstrap_row
from cdc.ledger.state import PendingBatch, TableState

SUMMARY_KEY = snapshot_summary.BOOTSTRAP  # the swap commit's summary: {"run_id", "batch_id", "horizon", ...}


def staging_name(cfg: PipelineConfig, t: TableConfig) -> str:
    return f"{cfg.catalog.name}.{bootstrap_identifier(cfg.metadata_namespace, t.target)}"


def claim(ledger: Ledger, t: TableConfig, state: TableState, run_id: str) -> int:
    """Claim the table's next batch id for this bootstrap, from ``state`` (a ledger read with no pending batch); its
    batch id. ``ConcurrentRunError`` (75) when an ingest run claimed one since."""
    batch_id = state.next_batch_id
    ledger.claim(t.target, batch_id, BOOTSTRAP_MODE, [OffsetRange(t.topic, FORGOTTEN, FORGOTTEN, FORGOTTEN)], run_id,
                 seen=state.snapshot_id, planned=state)
    return batch_id


def swapped(spark: Any, target: str, run_id: str | None = None) -> tuple[dict[str, Any], int] | None:
    """The bootstrap the target's newest swap commit records (``SUMMARY_KEY``), or the one of run ``run_id``, with
    that commit's snapshot id; None when there is none."""
    if not exists(spark, target):
        return None
    spark.catalog.refreshTable(target)
    rows = spark.sql(f"SELECT snapshot_id, summary['{SUMMARY_KEY}'] AS b FROM {target}.snapshots "
                     f"WHERE summary['{SUMMARY_KEY}'] IS NOT NULL ORDER BY committed_at DESC").collect()
    for r in rows:
        info = json.loads(r["b"])
        if run_id is None or info.get("run_id") == run_id:
            return info, int(r["snapshot_id"])
    return None


def commit(ledger: Ledger, t: TableConfig, batch_id: int, holder: str, info: dict[str, Any], snapshot_id: int | None,
           seconds: dict[str, float]) -> None:
    """Turn the claim row of ``batch_id`` (held by run ``holder``) into the committed bootstrap row of the swap
    ``info`` describes (its run id stays the swap's, as the target's summary names it)."""
    row = bootstrap_row(ledger.pipeline, t.target, t.topic, batch_id, info["horizon"], info["rows"], snapshot_id,
                        info["run_id"], process_owner(), seconds)
    sets = {k: row[k] for k in ("status", "inserted", "target_snapshot_id", "truncate_barrier", "phase_seconds",
                                "run_id", "owner")}
    ledger.update(t.target, batch_id, holder, {**sets, "committed_at": now_us()}, "bootstrap commit")


def refuse_while_running(t: TableConfig, pending: PendingBatch, lease_seconds: float, who: str) -> None:
    """``ConcurrentRunError`` while the bootstrap claiming ``pending`` is alive (same host: its process; else its
    lease)."""
    if pending.owner == process_owner() or not owner_alive(pending.owner, pending.claimed_at_us, lease_seconds):
        return
    raise ConcurrentRunError(
        f"table {t.target}: a bootstrap of the table (batch {pending.batch_id}, run {pending.run_id}, owner "
        f"{pending.owner}, claimed at {pending.claimed_at}) is in progress; this {who} run stops without writing. "
        "Retry when it has finished (if its process died, the next run finishes or withdraws it)")


def settle(spark: Any, cfg: PipelineConfig, t: TableConfig, ledger: Ledger, pending: PendingBatch,
           run_id: str) -> dict[str, Any] | None:
    """Finish or withdraw ``pending``, the claim of a bootstrap whose owner is dead (checked by the caller,
    ``refuse_while_running``): the swap's summary info when it was finished, None when it was withdrawn. Taken over
    first, so two runs settling it at once cannot both act (the loser gets ``ConcurrentRunError``)."""
    n = names(cfg, t)
    ledger.take_over(t.target, pending, run_id)
    found = swapped(spark, n.target, pending.run_id)
    if found is None:
        ledger.release(t.target, pending.batch_id, run_id)
    else:
        commit(ledger, t, pending.batch_id, run_id, found[0], found[1], {})
    spark.sql(f"DROP TABLE IF EXISTS {staging_name(cfg, t)} PURGE")
    return None if found is None else found[0]


def settled_warning(t: TableConfig, pending: PendingBatch, finished: bool) -> str:
    if finished:
        return (f"table {t.target}: the bootstrap of run {pending.run_id} (batch {pending.batch_id}) had replaced the "
                "target when its process died; its ledger row was finished by this run, before anything was merged")
    return (f"table {t.target}: the bootstrap of run {pending.run_id} (batch {pending.batch_id}) died before it "
            "replaced the target; its claim was withdrawn (the target is untouched; rerun the bootstrap)")


def recorded(spark: Any, ledger: str, pipeline: str, table: str, run_id: str) -> bool:
    spark.catalog.refreshTable(ledger)
    return spark.sql(f"SELECT 1 FROM {ledger} WHERE pipeline = {lit(pipeline)} AND table_name = {lit(table)} "
                     f"AND run_id = {lit(run_id)} AND mode = '{BOOTSTRAP_MODE}' AND status = 'committed'"
                     ).first() is not None


def target_snapshot(spark: Any, target: str) -> int | None:
    """The target's current snapshot (None: absent, or no snapshot yet): what the swap is validated from."""
    return fresh_snapshot_id(spark, target) if exists(spark, target) else None
