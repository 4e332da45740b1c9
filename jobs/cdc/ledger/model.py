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

A ``bootstrap`` row (``BOOTSTRAP_MODE``, written by ``jobs/bootstrap.py`` once a JDBC bootstrap has replaced the
target) records the table's **bootstrap horizon**: the source position of the snapshot, as a JSON list in
``truncate_barrier`` (``max_position`` stays NULL: no partition delivered it), with ``partition``,
``start_offset`` and ``end_offset`` = -1 and the row count in ``inserted``. The horizon acts like a truncate at
that position: ``Ledger.barrier`` (the newest barrier of earlier batches) makes every later batch drop changes at
or below it (``cdc.merge.sql.changes_sql``), for every key. Bootstrap rows never move the cursor (``CURSOR_MODES``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from cdc.common.sql import lit

MAX_AGE_PROPERTY = "history.expire.max-snapshot-age-ms"  # Iceberg's own property, read by its ExpireSnapshots


MAX_AGE_MS = 24 * 3600 * 1000  # the ledger's, set at creation (cdc.ledger.tables.LEDGER_SETTINGS)


CURSOR_MODES = ("incremental", "reset")
BOOTSTRAP_MODE = "bootstrap"  # a JDBC bootstrap's row: its horizon, no offsets (see above)
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
    # the server ids of the partition's changes in the batch (``source.server_id``, JSON list of text, cdc.positions.regression;
    # NULL: no changes, or an older ledger)
    ("server_ids", "string"),
)
DEAD_LETTER_COLUMNS = (
    ("pipeline", "string"), ("table_name", "string"), ("batch_id", "bigint"), ("topic", "string"),
    ("partition", "int"), ("offset", "bigint"), ("key", "binary"), ("value", "binary"), ("error_class", "string"),
    ("error_message", "string"), ("created_at", "timestamp"),
)


def ddl_of(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"`{n}` {t}" for n, t in columns)



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


def known_servers(rows: Iterable[Mapping[str, Any]]) -> dict[int, frozenset[str]]:
    """partition → every server id among ledger rows' ``server_ids`` (JSON lists); a partition none of whose rows
    recorded ids is absent."""
    import json

    out: dict[int, frozenset[str]] = {}
    for r in rows:
        if r.get("server_ids") is not None:
            out[r["partition"]] = out.get(r["partition"], frozenset()) | frozenset(json.loads(r["server_ids"]))
    return out


def newest_resets(rows: Iterable[Mapping[str, Any]], batch_id: int) -> tuple[tuple[int, int], ...]:
    """(partition, batch id) of each partition's newest committed ``reset`` row before ``batch_id``, from one table's
    ledger rows (dicts with ``partition``, ``batch_id``, ``mode``, ``status``); pure."""
    newest: dict[int, int] = {}
    for r in rows:
        if r.get("mode") == "reset" and r["status"] == "committed" and int(r["batch_id"]) < batch_id:
            part = int(r["partition"])
            newest[part] = max(int(r["batch_id"]), newest.get(part, 0))
    return tuple(sorted(newest.items()))


def bootstrap_row(pipeline: str, table: str, topic: str, batch_id: int, horizon: Sequence[int] | None, rows: int,
                  snapshot_id: int | None, run_id: str, owner: str, seconds: Mapping[str, float]) -> dict[str, Any]:
    """The ledger row of a finished bootstrap (column → value; timestamps are filled in by the writer). No horizon
    (the topic held no change the snapshot saw): no barrier."""
    import json

    position = json.dumps([int(p) for p in horizon]) if horizon else None
    return {"pipeline": pipeline, "table_name": table, "batch_id": int(batch_id), "mode": BOOTSTRAP_MODE,
            "topic": topic, "partition": FORGOTTEN, "start_offset": FORGOTTEN, "end_offset": FORGOTTEN,
            "status": "committed", "events_read": 0, "events_skipped": 0, "dead_letters": 0, "inserted": int(rows),
            "updated": 0, "deleted": 0, "target_snapshot_id": snapshot_id, "truncate_barrier": position,
            "phase_seconds": json.dumps({k: round(v, 3) for k, v in seconds.items()}), "run_id": run_id,
            "owner": owner, "max_position": None}


def bootstrap_horizon(rows: Iterable[Mapping[str, Any]], table_name: str) -> tuple[int, ...] | None:
    """The table's bootstrap horizon (the newest committed bootstrap row's), or None when it was never
    bootstrapped."""
    import json

    found = [(int(r["batch_id"]), tuple(json.loads(r["truncate_barrier"]))) for r in rows
             if r["table_name"] == table_name and r.get("mode") == BOOTSTRAP_MODE and r["status"] == "committed"
             and r.get("truncate_barrier")]
    return max(found)[1] if found else None