"""Records flattened by Debezium's ExtractNewRecordState SMT → the Debezium envelope shape (pure functions).

``tables[].envelope: flattened``. A flattened record is the row image itself plus the fields the SMT adds with
``add.fields`` (``__op``, ``__lsn``, ``__source_ts_ms``, ...) and, with ``delete.handling.mode=rewrite``
(``delete.tombstone.handling.mode=rewrite`` in 2.5+), ``__deleted`` ("true" on deletes, whose row is the old image).

* Every field whose name starts with ``__`` is an added field, never a column (a source column named ``__x`` cannot
  be ingested in this mode).
* ``__source_<f>`` and ``__<f>`` (other than ``__op``, ``__ts_ms``, ``__deleted``) become ``source.<f>``: the SMT
  names ``add.fields=lsn`` ``__lsn`` and ``source.lsn`` ``__source_lsn``. ``__ts_ms`` is the envelope ``ts_ms``.
* The op: ``d`` when ``__deleted`` is true, else ``__op``, else ``u`` (without ``add.fields=op`` creates, updates
  and snapshot reads are indistinguishable; they are all upserts).
* ``ordering: auto`` needs a log position among the added fields: the connector is ``__connector`` /
  ``__source_connector`` when added, else recognised from the position fields (``lsn`` → PostgreSQL, ``file`` and
  ``pos`` → MySQL, ``commit_lsn``/``change_lsn`` → SQL Server, ``scn`` → Oracle). PostgreSQL needs
  ``add.fields=op,lsn,source.sequence`` for commit ordering (``lsn`` alone: LSN order); MySQL ``file,pos,row``; SQL
  Server ``commit_lsn,change_lsn,event_serial_no``; Oracle ``scn,commit_scn``. Or give ``ordering: [source.<f>]``.
* Format avro (``cdc.decode.avro_connectors.FlattenedAvroDecoder``): the value schema registered by the
  AvroConverter is the same flat record; ``row_struct`` drops the added fields from it.
* Tombstones (a null value, ``drop.tombstones=false``) are tombstones; a delete without ``rewrite`` is only a
  tombstone, which deletes its key on compacted topics only (``tables[].compacted``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cdc.common.errors import DecodeError
from cdc.decode.connect_types import ConnectField

_ENVELOPE_FIELDS = {"__op": "op", "__ts_ms": "ts_ms"}


def split(record: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(row fields, added ``__`` fields) of a flattened record."""
    if not isinstance(record, dict):
        raise DecodeError(f"flattened record is a JSON {type(record).__name__}, not an object")
    row = {k: v for k, v in record.items() if not k.startswith("__")}
    return row, {k: v for k, v in record.items() if k.startswith("__")}


def to_envelope(record: Any) -> dict[str, Any]:
    """The Debezium envelope (``before``/``after``/``source``/``op``/``ts_ms``) of a flattened record."""
    row, added = split(record)
    source: dict[str, Any] = {}
    for name, v in added.items():
        if name in _ENVELOPE_FIELDS or name == "__deleted":
            continue
        f = name[2:]
        source[f[len("source_"):] if f.startswith("source_") else f] = v
    deleted = added.get("__deleted")
    op = "d" if deleted is True or str(deleted).lower() == "true" else added.get("__op") or "u"
    if op not in ("c", "u", "d", "r"):
        raise DecodeError(f"flattened record with __op {op!r}: only c, u, d and r are change events")
    source.setdefault("connector", infer_connector(source))
    return {"before": row if op == "d" else None, "after": None if op == "d" else row, "source": source,
            "op": op, "ts_ms": added.get("__ts_ms")}


def infer_connector(source: dict[str, Any]) -> str | None:
    """The connector whose log position the added fields hold (None: unknown; set ``ordering`` explicitly)."""
    if "commit_lsn" in source or "change_lsn" in source:
        return "sqlserver"
    if "scn" in source or "commit_scn" in source:
        return "oracle"
    if "lsn" in source:
        return "postgresql"
    if "file" in source and "pos" in source:
        return "mysql"
    return None


def row_schema_fields(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Connect schema fields of the row: those of the flattened struct that are not added fields."""
    return [f for f in fields if not str(f.get("field", "")).startswith("__")]


def row_struct(record: ConnectField) -> ConnectField | None:
    """The row struct of a flattened value schema (Avro): the record without its added ``__`` fields."""
    if record.type != "struct":
        return None
    return replace(record, field_name="after",
                   fields=tuple(f for f in record.fields if not str(f.field_name or "").startswith("__")))
