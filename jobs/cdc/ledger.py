"""The offsets ledger: one Iceberg row per (table, batch, topic, partition).

Lifecycle of a batch: rows are appended with ``status = 'staged'`` once its records are in the staging table, and
updated to ``'committed'`` (with counts and the target snapshot id) after the MERGE. A batch is done only when
committed. The next incremental batch of a partition starts at the highest committed ``end_offset`` of incremental
batches; a batch still ``staged`` is re-merged from the staging table (no Kafka read) before anything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from cdc.merge import lit


@dataclass(frozen=True)
class LedgerRange:
    topic: str
    partition: int
    start: int
    end: int
    events_read: int = 0
    events_skipped: int = 0
    dead_letters: int = 0


@dataclass(frozen=True)
class PendingBatch:
    batch_id: int
    mode: str
    ranges: tuple[LedgerRange, ...]
    truncate_barrier: tuple[int, ...] | None


def _barrier(text: str | None) -> tuple[int, ...] | None:
    return tuple(json.loads(text)) if text else None


class Ledger:
    def __init__(self, spark: Any, table_name: str, pipeline: str):
        self.spark, self.name, self.pipeline = spark, table_name, pipeline

    def _where(self, table: str) -> str:
        return f"pipeline = {lit(self.pipeline)} AND table_name = {lit(table)}"

    def committed_offsets(self, table: str, topic: str) -> dict[int, int]:
        """Incremental cursor: partition → end of the last committed incremental batch."""
        rows = self.spark.sql(
            f"SELECT `partition`, max(end_offset) AS e FROM {self.name} WHERE {self._where(table)} "
            f"AND topic = {lit(topic)} AND status = 'committed' AND mode = 'incremental' GROUP BY `partition`"
        ).collect()
        return {int(r["partition"]): int(r["e"]) for r in rows}

    def next_batch_id(self, table: str) -> int:
        row = self.spark.sql(f"SELECT max(batch_id) AS b FROM {self.name} WHERE {self._where(table)}").first()
        return 1 if row is None or row["b"] is None else int(row["b"]) + 1

    def pending(self, table: str) -> PendingBatch | None:
        """The batch that was staged but not committed (a run died during or before the merge)."""
        rows = self.spark.sql(
            f"SELECT * FROM {self.name} WHERE {self._where(table)} AND status = 'staged' ORDER BY batch_id, "
            "topic, `partition`").collect()
        if not rows:
            return None
        first = rows[0]["batch_id"]
        mine = [r for r in rows if r["batch_id"] == first]
        return PendingBatch(
            batch_id=int(first), mode=mine[0]["mode"],
            ranges=tuple(LedgerRange(r["topic"], r["partition"], r["start_offset"], r["end_offset"],
                                     r["events_read"], r["events_skipped"], r["dead_letters"]) for r in mine),
            truncate_barrier=_barrier(mine[0]["truncate_barrier"]),
        )

    def barrier(self, table: str, before_batch: int) -> tuple[int, ...] | None:
        """Newest truncate position recorded by earlier batches of the table."""
        rows = self.spark.sql(
            f"SELECT DISTINCT truncate_barrier FROM {self.name} WHERE {self._where(table)} "
            f"AND batch_id < {int(before_batch)} AND truncate_barrier IS NOT NULL").collect()
        found = [b for b in (_barrier(r[0]) for r in rows) if b]
        return max(found) if found else None

    def record_staged(self, table: str, batch_id: int, mode: str, ranges: Sequence[LedgerRange],
                      barrier: tuple[int, ...] | None) -> None:
        values = []
        for r in ranges:
            values.append(
                f"({lit(self.pipeline)}, {lit(table)}, {int(batch_id)}, {lit(mode)}, {lit(r.topic)}, "
                f"{int(r.partition)}, {int(r.start)}, {int(r.end)}, 'staged', {int(r.events_read)}, "
                f"{int(r.events_skipped)}, {int(r.dead_letters)}, NULL, NULL, NULL, NULL, "
                f"{lit(json.dumps(list(barrier))) if barrier else 'NULL'}, NULL, current_timestamp(), NULL)")
        self.spark.sql(f"INSERT INTO {self.name} VALUES {', '.join(values)}")

    def mark_committed(self, table: str, batch_id: int, counts: dict[str, int], snapshot_id: int | None,
                       barrier: tuple[int, ...] | None, phase_seconds: dict[str, float]) -> None:
        sets = [
            "status = 'committed'",
            *(f"{k} = {int(counts.get(k, 0))}" for k in ("inserted", "updated", "deleted")),
            f"target_snapshot_id = {int(snapshot_id) if snapshot_id is not None else 'NULL'}",
            f"truncate_barrier = {lit(json.dumps(list(barrier))) if barrier else 'NULL'}",
            f"phase_seconds = {lit(json.dumps({k: round(v, 3) for k, v in phase_seconds.items()}))}",
            "committed_at = current_timestamp()",
        ]
        self.spark.sql(f"UPDATE {self.name} SET {', '.join(sets)} WHERE {self._where(table)} "
                       f"AND batch_id = {int(batch_id)}")
