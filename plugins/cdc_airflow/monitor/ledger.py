"""Read the Iceberg ledger, dead letters and target tables WITHOUT Spark (pyiceberg).

Hadoop catalogs have no pyiceberg implementation: a table is read with ``StaticTable.from_metadata`` on its newest
``metadata/vN.metadata.json`` (``version-hint.text`` can lag behind a concurrent commit, so a local warehouse is
listed). Other catalog types go through ``pyiceberg.catalog.load_catalog`` (the type each maps to:
``cdc.config.catalogs``) with the YAML's catalog properties under pyiceberg's names (``cdc.config.storage``: S3
endpoint, addressing, region and credentials for pyarrow's S3 file system; OAuth2 settings of a REST catalog).

pyiceberg is imported lazily: this module is imported while DAG files are parsed.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from cdc.config.model import CatalogConfig

from cdc.config.names import dead_letters_identifier, ledger_identifier  # noqa: E402,F401  (one home)

Row = dict[str, Any]
_VERSION = re.compile(r"^v(\d+)\.metadata\.json$")
_CATALOGS: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}


def _local_path(location: str) -> Path | None:
    if location.startswith("file:"):
        return Path(re.sub(r"^file:(//)?", "", location))
    return None if "://" in location else Path(location)


def latest_metadata(table_location: str, properties: Mapping[str, str] = {}) -> str | None:
    """Newest metadata JSON of a hadoop-catalog table, or None when the table does not exist."""
    local = _local_path(table_location)
    if local is not None:
        meta = local / "metadata"
        versions = [(int(m.group(1)), p.name) for p in meta.glob("v*.metadata.json") if (m := _VERSION.match(p.name))]
        return str(meta / max(versions)[1]) if versions else None
    from pyiceberg.io import load_file_io

    hint = f"{table_location.rstrip('/')}/metadata/version-hint.text"
    io = load_file_io(properties=dict(properties), location=hint)
    try:
        with io.new_input(hint).open() as f:
            version = f.read().decode().strip()
    except FileNotFoundError:
        return None
    name = version if version.endswith(".metadata.json") else f"v{version}.metadata.json"
    return f"{table_location.rstrip('/')}/metadata/{name}"


def load_table(catalog: "CatalogConfig", identifier: str) -> "Table | None":
    """``identifier`` is ``namespace.table`` inside the catalog; None when the table does not exist (yet)."""
    from cdc.config.storage import pyiceberg_properties

    props = pyiceberg_properties(catalog.warehouse, catalog.properties)
    if catalog.type == "hadoop":
        from pyiceberg.table import StaticTable

        warehouse = catalog.warehouse.replace("s3a://", "s3://").rstrip("/")
        location = f"{warehouse}/{identifier.replace('.', '/')}"
        metadata = latest_metadata(location, props)
        return StaticTable.from_metadata(metadata, properties=props) if metadata else None
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    props = catalog_properties(catalog)
    key = (catalog.name, tuple(sorted(props.items())))
    cat = _CATALOGS.get(key)
    if cat is None:
        cat = load_catalog(catalog.name, **props)
        # jdbc: one SQLAlchemy engine (connection pool) per database, not one per read; rest: one OAuth2 session
        # and config round trip; glue: one boto3 client
        _CATALOGS[key] = cat
    try:
        return cat.load_table(identifier)
    except NoSuchTableError:
        return None
    except Exception as exc:  # a jdbc catalog whose tables the job has not created yet: no table either
        if catalog.type == "jdbc" and _missing_catalog_tables(exc):
            _CATALOGS.pop(key, None)  # it probed the schema version before the job created the tables
            return None
        raise


def catalog_properties(catalog: "CatalogConfig") -> dict[str, str]:
    """pyiceberg ``load_catalog`` properties of a non-hadoop catalog (pure). ``jdbc``: pyiceberg's SQL catalog on
    the same database as Iceberg's Java ``JdbcCatalog`` (``cdc.iceberg.sql_catalog``: the SQLAlchemy URL)."""
    if catalog.type == "jdbc":
        from cdc.iceberg.sql_catalog import pyiceberg_properties

        return pyiceberg_properties(catalog)
    from cdc.config.catalogs import TYPES
    from cdc.config.storage import pyiceberg_properties

    props = pyiceberg_properties(catalog.warehouse, catalog.properties)
    return {**props, "type": TYPES[catalog.type].pyiceberg_type,
            **({"warehouse": catalog.warehouse} if catalog.warehouse else {})}


def _missing_catalog_tables(exc: BaseException) -> bool:
    text = str(exc)
    return "iceberg_tables" in text and ("does not exist" in text or "no such table" in text)


def read_rows(catalog: "CatalogConfig", identifier: str, pipeline: str | None = None,
              columns: Sequence[str] = ("*",), **equals: Any) -> list[Row]:
    """All rows (optionally where pipeline = ... and col = value ...) as dicts; [] when the table is missing."""
    table = load_table(catalog, identifier)
    if table is None or table.current_snapshot() is None:
        return []
    from pyiceberg.expressions import AlwaysTrue, And, EqualTo

    expr: Any = AlwaysTrue()
    for col, value in (({"pipeline": pipeline} if pipeline else {}) | equals).items():
        expr = And(expr, EqualTo(col, value))
    return table.scan(row_filter=expr, selected_fields=tuple(columns)).to_arrow().to_pylist()


def snapshot_id(catalog: "CatalogConfig", identifier: str) -> int | None:
    table = load_table(catalog, identifier)
    snap = table.current_snapshot() if table is not None else None
    return snap.snapshot_id if snap else None


# ---- pure functions over ledger rows -------------------------------------------------------------------------------

def committed_offsets(rows: Iterable[Row], table_name: str) -> dict[str, dict[int, int]]:
    """topic → partition → committed cursor (the job's own rule: ``cdc.ledger.model``)."""
    from cdc.ledger.model import committed_cursor

    return committed_cursor(rows, table_name)


def batches(rows: Iterable[Row], table_name: str, limit: int = 20) -> list[Row]:
    """Newest batches of a table, one dict per batch (partition rows folded; committed wins over staged)."""
    by_batch: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        if r["table_name"] == table_name:
            by_batch[r["batch_id"]].append(r)
    out: list[Row] = []
    for batch_id in sorted(by_batch, reverse=True)[:limit]:
        group = by_batch[batch_id]
        committed = [r for r in group if r["status"] == "committed"]
        use = committed or group
        parts: dict[tuple[str, int], Row] = {(r["topic"], r["partition"]): r for r in use}
        first = use[0]
        out.append({
            "batch_id": batch_id, "status": "committed" if committed else first["status"], "mode": first["mode"],
            "ranges": [{"topic": t, "partition": p, "start": r["start_offset"], "end": r["end_offset"]}
                       for (t, p), r in sorted(parts.items())],
            "events_read": sum(r["events_read"] or 0 for r in parts.values()),
            "events_skipped": sum(r["events_skipped"] or 0 for r in parts.values()),
            "dead_letters": sum(r["dead_letters"] or 0 for r in parts.values()),
            "inserted": first["inserted"], "updated": first["updated"], "deleted": first["deleted"],
            "target_snapshot_id": first.get("target_snapshot_id"),
            "phase_seconds": _json(first.get("phase_seconds")),
            "staged_at": _ts(min((r["staged_at"] for r in group if r.get("staged_at")), default=None)),
            "committed_at": _ts(max((r["committed_at"] for r in committed if r.get("committed_at")), default=None)),
        })
    return out


def _json(value: str | None) -> dict[str, float]:
    try:
        obj = json.loads(value) if value else {}
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def _ts(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None




def newest_source_ts_ms(catalog: "CatalogConfig", identifier: str, column: str = "__source_ts_ms") -> int | None:
    """The newest committed source timestamp of a target table (epoch ms): the largest upper bound of ``column``
    over the current snapshot's data files (manifest metadata only, no data read). None: no table / no rows."""
    table = load_table(catalog, identifier)
    if table is None or table.current_snapshot() is None:
        return None
    from pyiceberg.conversions import from_bytes

    try:
        fid = table.schema().find_field(column).field_id
    except ValueError:
        return None
    ftype = table.schema().find_type(fid)
    bounds = [from_bytes(ftype, f.file.upper_bounds[fid])
              for f in table.scan(selected_fields=(column,)).plan_files() if fid in (f.file.upper_bounds or {})]
    return int(max(bounds)) if bounds else None
