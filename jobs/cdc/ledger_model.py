"""The ledger's model, pure and light (importable while Airflow parses DAG files): its columns, the names of the
pipeline's metadata tables and the committed-cursor rule. Used by the Spark job, the Airflow plan task, the status
view and maintenance.

The committed cursor is where the next incremental batch of a table starts, per topic partition.

The cursor of a partition is the ``end_offset`` of the newest (highest ``batch_id``) *committed* ledger row of mode
``incremental`` or ``reset`` for it. Backfills never move it. A ``reset`` row is written by
``jobs/ingest.py --reset-cursor`` when the topic's offsets no longer match the ledger (topic re-created, cluster moved):
it may move the cursor backwards, which "the highest end offset" could not express. Batches commit in ``batch_id``
order (a run finishes the oldest pending batch before planning a new one), so "newest" is well defined.

The Spark job (``cursor_sql``), the Airflow plan task and the status view (``committed_cursor`` over rows read with
pyiceberg) use this module, so they always agree.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from cdc.sql import lit

CURSOR_MODES = ("incremental", "reset")
FORGOTTEN = -1  # a reset row's end_offset for a partition that no longer exists: it has no cursor any more

LEDGER_COLUMNS = (
    ("pipeline", "string"), ("table_name", "string"), ("batch_id", "bigint"), ("mode", "string"),
    ("topic", "string"), ("partition", "int"), ("start_offset", "bigint"), ("end_offset", "bigint"),
    ("status", "string"), ("events_read", "bigint"), ("events_skipped", "bigint"), ("dead_letters", "bigint"),
    ("inserted", "bigint"), ("updated", "bigint"), ("deleted", "bigint"), ("target_snapshot_id", "bigint"),
    ("truncate_barrier", "string"), ("phase_seconds", "string"), ("staged_at", "timestamp"),
    ("committed_at", "timestamp"), ("run_id", "string"), ("owner", "string"), ("claimed_at", "timestamp"),
    # newest source position of the partition's changes in the batch (JSON list; NULL: none, or an older ledger)
    ("max_position", "string"),
)
DEAD_LETTER_COLUMNS = (
    ("pipeline", "string"), ("table_name", "string"), ("batch_id", "bigint"), ("topic", "string"),
    ("partition", "int"), ("offset", "bigint"), ("key", "binary"), ("value", "binary"), ("error_class", "string"),
    ("error_message", "string"), ("created_at", "timestamp"),
)


def ddl_of(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"`{n}` {t}" for n, t in columns)


def ledger_identifier(metadata_namespace: str) -> str:
    return f"{metadata_namespace}.ledger"


def dead_letters_identifier(metadata_namespace: str) -> str:
    return f"{metadata_namespace}.dead_letters"


def staging_identifier(metadata_namespace: str, target: str) -> str:
    return f"{metadata_namespace}.staging__{target.replace('.', '__')}"


def tombstones_identifier(metadata_namespace: str, target: str) -> str:
    return f"{metadata_namespace}.tombstones__{target.replace('.', '__')}"



def cursor_sql(ledger: str, pipeline: str, table: str, topic: str) -> str:
    """``partition, e`` rows: the cursor of each partition of ``topic`` for ``table``."""
    modes = ", ".join(lit(m) for m in CURSOR_MODES)
    return (f"SELECT `partition`, max_by(end_offset, batch_id) AS e FROM {ledger} WHERE pipeline = {lit(pipeline)} "
            f"AND table_name = {lit(table)} AND topic = {lit(topic)} AND status = 'committed' AND mode IN ({modes}) "
            f"GROUP BY `partition` HAVING e > {FORGOTTEN}")


def committed_cursor(rows: Iterable[Mapping[str, Any]], table_name: str) -> dict[str, dict[int, int]]:
    """topic → partition → cursor, from ledger rows (dicts with the ledger's columns)."""
    newest: dict[tuple[str, int], tuple[int, int]] = {}
    for r in rows:
        if r["table_name"] != table_name or r["status"] != "committed" or r.get("mode", "incremental") not in \
                CURSOR_MODES:
            continue
        k = (r["topic"], int(r["partition"]))
        if k not in newest or int(r["batch_id"]) > newest[k][0]:
            newest[k] = (int(r["batch_id"]), int(r["end_offset"]))
    out: dict[str, dict[int, int]] = {}
    for (topic, part), (_, end) in sorted(newest.items()):
        if end > FORGOTTEN:
            out.setdefault(topic, {})[part] = end
    return out


def newest_positions(rows: Iterable[Mapping[str, Any]]) -> dict[int, tuple[int, ...]]:
    """partition → the newest source position among ledger rows' ``max_position`` (JSON lists; rows without one are
    skipped). A longer position (one with the ordering-epoch column) is newer than a shorter one from before it."""
    import json

    out: dict[int, tuple[int, ...]] = {}
    for r in rows:
        if r["max_position"]:
            pos = tuple(json.loads(r["max_position"]))
            out[r["partition"]] = max(pos, out.get(r["partition"], pos), key=lambda t: (len(t), t))
    return out
