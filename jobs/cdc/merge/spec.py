"""What one MERGE of a staged batch into its target is built from (``MergeSpec``): the tables, the key, the columns,
the ordering and the batch's conditions (barriers, compaction, row deltas). The SQL builders of ``cdc.merge.sql``
and ``cdc.merge.compaction`` take it; pure data."""

from __future__ import annotations

from dataclasses import dataclass

from cdc.schema.columns import Positioned


@dataclass(frozen=True)
class MergeSpec(Positioned):
    target: str  # catalog.namespace.table
    staging: str
    tombstones: str | None  # None in soft mode
    batch_id: int
    key: tuple[str, ...]
    columns: tuple[str, ...]  # row-image columns in table order (includes the key)
    ordering: tuple[str, ...]  # ordering columns, e.g. ("__lsn",)
    delete_mode: str = "hard"
    toast_columns: tuple[str, ...] = ()  # columns that were unavailable in some event of this batch
    barrier: tuple[int, ...] | None = None  # newest truncate position known (this batch or earlier)
    gc_horizon: tuple[int, ...] | None = None  # highest position whose tombstones maintenance dropped
    compacted: bool = False  # compacted topic: Kafka tombstones delete their key (compaction_deletes_sql)
    resets: tuple[tuple[int, int], ...] = ()  # compacted: (partition, batch id of its newest cursor reset before this)
    pk_moves: bool = False  # the batch has PK-move headers: __old_key/__new_key/__moved flow through (cdc.merge.pk_moves)
    key_filter: bool = False  # cut the target and tombstones to the batch's keys before joining them (``near``)
    locate_tombstones: bool = False  # classification names the file and row of each key's tombstone (hard deletes)
    locate_target: bool = False  # classification names the file and row of each key's target row (cdc.merge.target_write)
    one_task: bool = False  # the classification as one Spark task: a small batch into a small target (``relation``)

    @property
    def soft(self) -> bool:
        return self.delete_mode == "soft"
