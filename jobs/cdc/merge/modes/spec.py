"""Write modes other than the upsert mirror (``tables[].write_mode``): ``append`` (changelog) and ``scd2`` (history).

* ``append`` (``cdc.merge.modes.append``): one target row per distinct change event, inserted once: a change is
  identified by key + source position (the ordering columns) + op + row image, a keyless table's by Kafka partition
  + offset. Redeliveries, replays and reruns after a crash therefore never add a row twice (``MERGE ... WHEN NOT
  MATCHED THEN INSERT``).
* ``scd2`` (``cdc.merge.modes.scd2``): one target row per version of a key. Every distinct change is first kept in the
  table's change log (``changes__<ns>__<table>`` in the metadata namespace, append semantics, raw); then, for the
  keys the batch touched, the whole version chain is recomputed from the log with window functions and MERGEd over
  those keys' rows. The target is a function of the log, so duplicates, late changes and crash + rerun give the same
  table by construction.

Compacted topics (``cdc.merge.modes.compacted``: a Kafka tombstone stands for its compacted-away delete) and primary-key
changes with TOAST placeholders (``cdc.merge.modes.moves``: the new key takes the old key's value) apply to both modes.

Both modes keep their SQL in pure functions (tested by text and by table contents); ``cdc.merge.modes.runner`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.schema.columns import Positioned


@dataclass(frozen=True)
class ModeSpec(Positioned):
    target: str  # catalog.namespace.table
    staging: str
    batch_id: int
    key: tuple[str, ...]  # empty: a keyless table (append only; identity = Kafka partition/offset)
    columns: tuple[str, ...]  # row-image columns in table order
    ordering: tuple[str, ...]
    toast_columns: tuple[str, ...] = ()  # columns unavailable (TOAST placeholder) in some change
    log: str = ""  # scd2: the change log table
    track_columns: tuple[str, ...] = ()  # scd2: only changes of these open a version (empty: every update)
    compacted: bool = False  # compacted topic: Kafka tombstones stand for deletes (cdc.merge.modes.compacted)
    resets: tuple[tuple[int, int], ...] = ()  # compacted: (partition, batch id of its newest cursor reset before this)
    opaque_columns: tuple[str, ...] = ()  # row columns Spark cannot compare or group (maps): compared as JSON
