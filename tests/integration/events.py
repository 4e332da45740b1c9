"""A tiny, explicit Debezium JSON event builder for rule-by-rule merge tests.

The randomized generator in ``devtools.debezium`` covers realistic streams; here each test spells out its events
(op, key, row, log position) so the expected table is obvious from the test itself. Values are JsonConverter output
with ``schemas.enable=true``: a Connect schema per record, exactly the shape Debezium writes.
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer

PLACEHOLDER = "__debezium_unavailable_value"
COLUMNS = [("id", "int32", False), ("name", "string", True), ("bio", "string", True)]


def _struct(name: str, cols=COLUMNS, optional: bool = True) -> dict[str, Any]:
    return {"type": "struct", "name": name, "optional": optional,
            "fields": [{"type": t, "optional": o, "field": c} for c, t, o in cols]}


def value_schema(cols=COLUMNS) -> dict[str, Any]:
    source = {"type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False, "fields": [
        {"type": "string", "optional": False, "field": "connector"}, {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "string", "optional": True, "field": "file"}, {"type": "int64", "optional": True, "field": "pos"},
        {"type": "int32", "optional": True, "field": "row"}, {"type": "int64", "optional": False, "field": "ts_ms"}]}
    return {"type": "struct", "name": "dbserver1.public.customers.Envelope", "optional": False, "fields": [
        {**_struct("dbserver1.public.customers.Value", cols), "field": "before"},
        {**_struct("dbserver1.public.customers.Value", cols), "field": "after"},
        {**source, "field": "source"},
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"}]}


KEY_SCHEMA = {"type": "struct", "name": "dbserver1.public.customers.Key", "optional": False,
              "fields": [{"type": "int32", "optional": False, "field": "id"}]}


def row(i: int, name: str, bio: str | None = None) -> dict[str, Any]:
    """A row of the test table (``COLUMNS``)."""
    return {"id": i, "name": name, "bio": bio}


def pg(op: str, key: int | None, row: dict[str, Any] | None, lsn: int, cols=COLUMNS) -> tuple[bytes | None, bytes]:
    """A Postgres change event (``row`` is ``after`` for c/u/r, ``before`` for d)."""
    return _event(op, key, row, {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000 + lsn}, cols)


def mysql(op: str, key: int | None, row: dict[str, Any] | None, file: str, pos: int, r: int = 0,
          cols=COLUMNS, server_id: int | None = None) -> tuple[bytes | None, bytes]:
    """A MySQL change event; ``server_id``: the event's originating server (``source.server_id``), when given."""
    source = {"connector": "mysql", "file": file, "pos": pos, "row": r, "ts_ms": 1700000000000}
    return _event(op, key, row, source if server_id is None else {**source, "server_id": server_id}, cols)


def _event(op, key, row, source, cols) -> tuple[bytes | None, bytes]:
    before = row if op == "d" else None
    after = row if op in ("c", "u", "r") else None
    payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": source["ts_ms"] + 5}
    value = json.dumps({"schema": value_schema(cols), "payload": payload}).encode()
    k = None if key is None else json.dumps({"schema": KEY_SCHEMA, "payload": {"id": key}}).encode()
    return k, value


def tombstone(key: int) -> tuple[bytes, None]:
    return json.dumps({"schema": KEY_SCHEMA, "payload": {"id": key}}).encode(), None


def produce(bootstrap: str, topic: str, records, partition: int = 0) -> None:
    """Produce ``(key, value)`` or ``(key, value, headers)`` records (headers: a list of (name, bytes))."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for k, v, *h in records:
        p.produce(topic, key=k, value=v, partition=partition, headers=h[0] if h else None)
    p.flush(10)


def key_bytes(key: int) -> bytes:
    """A message key as JsonConverter writes it (also the value of Debezium's PK-change headers)."""
    return json.dumps({"schema": KEY_SCHEMA, "payload": {"id": key}}).encode()


def with_header(record: tuple, name: str, key: int) -> tuple:
    """``record`` with Debezium's ``__debezium.oldkey`` / ``__debezium.newkey`` header holding ``key``."""
    return (*record[:2], [(name, key_bytes(key))])


def pg_schemaless(op: str, key: int | None, row: dict[str, Any] | None, lsn: int) -> tuple[bytes | None, bytes]:
    """The same Postgres change event as ``pg`` with ``schemas.enable=false``: payload only, no Connect schema."""
    before = row if op == "d" else None
    after = row if op in ("c", "u", "r") else None
    source = {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000 + lsn}
    value = json.dumps({"before": before, "after": after, "source": source, "op": op, "ts_ms": source["ts_ms"] + 5})
    return (None if key is None else json.dumps({"id": key}).encode()), value.encode()


# ---- SQL Server (Debezium's io.debezium.connector.sqlserver.Source, as in ../shared/fixtures/debezium/misc) ----------
def _source_struct(name: str, *optional: tuple[str, str]) -> dict[str, Any]:
    """A Debezium ``Source`` struct: the fields every connector has, then its own optional position fields."""
    required = [("string", "version"), ("string", "connector"), ("string", "name"), ("int64", "ts_ms")]
    fields = [{"type": t, "optional": False, "field": f} for t, f in required]
    fields.append({"type": "string", "optional": True, "field": "snapshot"})
    fields += [{"type": "string", "optional": False, "field": f} for f in ("db", "schema", "table")]
    fields += [{"type": t, "optional": True, "field": f} for t, f in optional]
    return {"type": "struct", "name": name, "optional": False, "fields": fields}


SQLSERVER_SOURCE = _source_struct("io.debezium.connector.sqlserver.Source", ("string", "change_lsn"),
                                  ("string", "commit_lsn"), ("int64", "event_serial_no"))


def sqlserver(op: str, key: int | None, row: dict[str, Any] | None, commit_lsn: str, change_lsn: str | None,
              serial: int | None = 1, cols=COLUMNS) -> tuple[bytes | None, bytes]:
    """A SQL Server change event; LSNs are the connector's hex strings (``0000002d:00000a40:0003``)."""
    source = {"version": "2.5.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1700000000000,
              "snapshot": "true" if op == "r" else "false", "db": "testDB", "schema": "dbo", "table": "customers",
              "change_lsn": change_lsn, "commit_lsn": commit_lsn, "event_serial_no": serial}
    schema = value_schema(cols)
    schema = {**schema, "fields": [{**SQLSERVER_SOURCE, "field": "source"} if f["field"] == "source" else f
                                   for f in schema["fields"]]}
    before = row if op == "d" else None
    after = row if op in ("c", "u", "r") else None
    payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": source["ts_ms"] + 5}
    k = None if key is None else json.dumps({"schema": KEY_SCHEMA, "payload": {"id": key}}).encode()
    return k, json.dumps({"schema": schema, "payload": payload}).encode()


# ---- MongoDB (documents as Extended JSON text; key {"id": "<_id>"}, as in Debezium's MongoDB connector docs) ---------
def mongodb(op: str, id_text: str, doc: dict[str, Any] | None = None, ts_s: int = 1700000000, ord: int = 1,
            updated: dict[str, Any] | None = None, removed: list[str] | None = None) -> tuple[bytes, bytes]:
    """A MongoDB change event (schemas.enable=false): ``doc`` is the full document (c/r/u), ``updated``/``removed``
    an update without it (``updateDescription``)."""
    source = {"version": "2.5.0.Final", "connector": "mongodb", "name": "fulfillment", "ts_ms": ts_s * 1000,
              "snapshot": "false", "db": "inventory", "rs": "rs0", "collection": "customers", "ord": ord}
    payload: dict[str, Any] = {"before": None, "after": None if doc is None else json.dumps(doc), "source": source,
                               "op": op, "ts_ms": ts_s * 1000 + 5}
    if updated is not None or removed is not None:
        payload["updateDescription"] = {"updatedFields": json.dumps(updated or {}), "removedFields": removed,
                                        "truncatedArrays": None}
    return json.dumps({"id": id_text}).encode(), json.dumps(payload).encode()


# ---- ExtractNewRecordState output (add.fields=op,lsn,source.ts_ms; delete.handling.mode=rewrite), schemaless -------
def flattened(op: str, key: int, row: dict[str, Any], lsn: int) -> tuple[bytes, bytes]:
    """A flattened PostgreSQL record: the row plus ``__op``, ``__lsn``, ``__source_ts_ms`` and ``__deleted``."""
    value = {**row, "__op": op, "__lsn": lsn, "__source_ts_ms": 1700000000000 + lsn,
             "__deleted": "true" if op == "d" else "false"}
    return json.dumps({"id": key}).encode(), json.dumps(value).encode()


# ---- Oracle (LogMiner source block of Debezium's Oracle connector docs: scn / commit_scn as digit strings) ---------
ORACLE_SOURCE = _source_struct("io.debezium.connector.oracle.Source", ("string", "txId"), ("string", "scn"),
                               ("string", "commit_scn"))


def oracle(op: str, key: int | None, row: dict[str, Any] | None, scn: int, commit_scn: int | None,
           cols=COLUMNS) -> tuple[bytes | None, bytes]:
    """An Oracle change event; ``commit_scn`` None as in snapshot reads."""
    source = {"version": "2.5.0.Final", "connector": "oracle", "name": "server1", "ts_ms": 1700000000000,
              "snapshot": "true" if op == "r" else "false", "db": "ORCLPDB1", "schema": "DEBEZIUM",
              "table": "CUSTOMERS", "txId": None if op == "r" else "6.28.807", "scn": str(scn),
              "commit_scn": None if commit_scn is None else str(commit_scn)}
    schema = value_schema(cols)
    schema = {**schema, "fields": [{**ORACLE_SOURCE, "field": "source"} if f["field"] == "source" else f
                                   for f in schema["fields"]]}
    payload = {"before": row if op == "d" else None, "after": row if op in ("c", "u", "r") else None,
               "source": source, "op": op, "ts_ms": source["ts_ms"] + 5}
    k = None if key is None else json.dumps({"schema": KEY_SCHEMA, "payload": {"id": key}}).encode()
    return k, json.dumps({"schema": schema, "payload": payload}).encode()
