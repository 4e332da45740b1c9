"""Write ledger / dead-letter / target tables in a hadoop-catalog layout with pyiceberg (for status-view tests).

pyiceberg cannot write a hadoop catalog, so tables are written with a SqlCatalog (SQLite) at the location the
hadoop catalog uses (<warehouse>/<namespace>/<table>) and each new metadata file is copied to
metadata/v<N>.metadata.json with version-hint.text, as Spark's HadoopCatalog would leave them.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

LEDGER = pa.schema([
    ("pipeline", pa.string()), ("table_name", pa.string()), ("batch_id", pa.int64()), ("mode", pa.string()),
    ("topic", pa.string()), ("partition", pa.int32()), ("start_offset", pa.int64()), ("end_offset", pa.int64()),
    ("status", pa.string()), ("events_read", pa.int64()), ("events_skipped", pa.int64()),
    ("dead_letters", pa.int64()), ("inserted", pa.int64()), ("updated", pa.int64()), ("deleted", pa.int64()),
    ("target_snapshot_id", pa.int64()), ("truncate_barrier", pa.string()), ("phase_seconds", pa.string()),
    ("staged_at", pa.timestamp("us", tz="UTC")), ("committed_at", pa.timestamp("us", tz="UTC")),
])
DEAD_LETTERS = pa.schema([
    ("pipeline", pa.string()), ("table_name", pa.string()), ("batch_id", pa.int64()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
    ("error_class", pa.string()), ("error_message", pa.string()), ("created_at", pa.timestamp("us", tz="UTC")),
])
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


class HadoopLayoutWriter:
    def __init__(self, warehouse: Path):
        from pyiceberg.catalog.sql import SqlCatalog

        self.warehouse = warehouse
        warehouse.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog("w", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
        self.versions: dict[str, int] = {}

    def append(self, identifier: str, schema: pa.Schema, rows: list[dict[str, Any]]) -> None:
        ns, name = identifier.rsplit(".", 1)
        self.catalog.create_namespace_if_not_exists(ns)
        location = self.warehouse / ns / name
        table = self.catalog.create_table_if_not_exists(identifier, schema=schema, location=f"file://{location}")
        table.append(pa.Table.from_pylist(rows, schema=schema))
        table = self.catalog.load_table(identifier)
        version = self.versions.get(identifier, 0) + 1
        self.versions[identifier] = version
        src = table.metadata_location.removeprefix("file://")
        shutil.copy(src, location / "metadata" / f"v{version}.metadata.json")
        (location / "metadata" / "version-hint.text").write_text(str(version))


def ledger_row(table: str, batch_id: int, partition: int, start: int, end: int, status: str = "committed",
               mode: str = "incremental", pipeline: str = "demo", topic: str | None = None, **extra: Any
               ) -> dict[str, Any]:
    row = {"pipeline": pipeline, "table_name": table, "batch_id": batch_id, "mode": mode,
           "topic": topic or f"dbserver1.public.{table.split('.')[-1]}", "partition": partition,
           "start_offset": start, "end_offset": end, "status": status, "events_read": end - start,
           "events_skipped": 0, "dead_letters": 0, "inserted": 1, "updated": 1, "deleted": 0,
           "target_snapshot_id": 1000 + batch_id if status == "committed" else None, "truncate_barrier": None,
           "phase_seconds": '{"plan": 0.5, "read_stage": 1.0, "merge": 2.0, "commit": 0.5}', "staged_at": T0,
           "committed_at": T0 if status == "committed" else None}
    return row | extra
