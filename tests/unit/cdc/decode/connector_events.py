"""MongoDB and flattened (ExtractNewRecordState) events as the JsonConverter writes them, with their Connect schemas
(``schemas.enable=true``), so ``connect_avro.AvroWire`` can turn them into their AvroConverter twins.

MongoDB: the envelope of Debezium's MongoDB connector (2.x change streams): ``before``/``after`` as
``io.debezium.data.Json`` text, ``updateDescription`` (``removedFields``, ``updatedFields`` as JSON text,
``truncatedArrays``), the ``io.debezium.connector.mongo.Source`` block (``ts_ms``, ``ord``), key ``{id: string}``
(documentation/modules/ROOT/pages/connectors/mongodb.adoc). Flattened: a PostgreSQL row plus
``add.fields=op,lsn,source.ts_ms,source.sequence`` and ``delete.handling.mode=rewrite`` (``__deleted``), as in
../shared/fixtures/debezium/unwrap-smt.
"""

from __future__ import annotations

import json
from typing import Any

from tests.integration import events

JSON_TEXT = {"type": "string", "optional": True, "name": "io.debezium.data.Json", "version": 1}
MONGO_SOURCE = {"type": "struct", "name": "io.debezium.connector.mongo.Source", "optional": False, "field": "source",
                "fields": [{"type": "string", "optional": False, "field": f}
                           for f in ("version", "connector", "name")]
                + [{"type": "int64", "optional": False, "field": "ts_ms"},
                   {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
                    "parameters": {"allowed": "true,last,false,incremental"}, "default": "false", "field": "snapshot"},
                   {"type": "string", "optional": False, "field": "db"},
                   {"type": "string", "optional": True, "field": "sequence"},
                   {"type": "string", "optional": False, "field": "rs"},
                   {"type": "string", "optional": False, "field": "collection"},
                   {"type": "int32", "optional": False, "field": "ord"},
                   {"type": "string", "optional": True, "field": "lsid"},
                   {"type": "int64", "optional": True, "field": "txnNumber"}]}
UPDATE_DESCRIPTION = {
    "type": "struct", "name": "io.debezium.connector.mongodb.changestream.updatedescription", "optional": True,
    "field": "updateDescription", "version": 1, "fields": [
        {"type": "array", "items": {"type": "string", "optional": False}, "optional": True, "field": "removedFields"},
        {**JSON_TEXT, "field": "updatedFields"},
        {"type": "array", "optional": True, "field": "truncatedArrays", "items": {
            "type": "struct", "name": "io.debezium.connector.mongodb.changestream.truncatedarray", "optional": False,
            "version": 1, "fields": [{"type": "string", "optional": False, "field": "field"},
                                     {"type": "int32", "optional": False, "field": "size"}]}}]}
MONGO_ENVELOPE = {"type": "struct", "name": "fulfillment.inventory.customers.Envelope", "optional": False,
                  "fields": [{**JSON_TEXT, "field": "before"}, {**JSON_TEXT, "field": "after"}, UPDATE_DESCRIPTION,
                             MONGO_SOURCE, {"type": "string", "optional": True, "field": "op"},
                             {"type": "int64", "optional": True, "field": "ts_ms"}]}
MONGO_KEY = {"type": "struct", "name": "fulfillment.inventory.customers.Key", "optional": False,
             "fields": [{"type": "string", "optional": False, "field": "id"}]}
def mongo(op: str, id_text: str, doc: dict | None = None, ts_s: int = 1700000000, ord: int = 1,
          updated: dict | None = None, removed: list | None = None, truncated: list | None = None,
          schema: bool = True) -> tuple[bytes, bytes | None]:
    """A MongoDB change event as the JsonConverter writes it (value None: a tombstone)."""
    k = json.dumps({"schema": MONGO_KEY, "payload": {"id": id_text}} if schema else {"id": id_text}).encode()
    if op == "tombstone":
        return k, None
    source = {"version": "2.7.0.Final", "connector": "mongodb", "name": "fulfillment", "ts_ms": ts_s * 1000,
              "snapshot": "true" if op == "r" else "false", "db": "inventory", "sequence": None, "rs": "rs0",
              "collection": "customers", "ord": ord, "lsid": None, "txnNumber": None}
    payload: dict[str, Any] = {"before": None, "after": None if doc is None else json.dumps(doc),
                               "updateDescription": None, "source": source, "op": op, "ts_ms": ts_s * 1000 + 5}
    if updated is not None or removed is not None or truncated is not None:
        payload["updateDescription"] = {"removedFields": removed, "updatedFields": json.dumps(updated or {}),
                                        "truncatedArrays": truncated}
    return k, json.dumps({"schema": MONGO_ENVELOPE, "payload": payload} if schema else payload).encode()


def flat_schema(extra: list[dict] | None = None) -> dict:
    cols = [{"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "name"},
            {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1, "field": "born"},
            {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
             "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "amount"},
            {"type": "string", "optional": True, "field": "bio"}, *(extra or [])]
    added = [{"type": "string", "optional": True, "field": "__op"},
             {"type": "int64", "optional": True, "field": "__lsn"},
             {"type": "int64", "optional": True, "field": "__source_ts_ms"},
             {"type": "string", "optional": True, "field": "__source_sequence"},
             {"type": "string", "optional": True, "field": "__deleted"}]
    return {"type": "struct", "name": "dbserver1.public.customers.Value", "optional": False, "fields": cols + added}


def flat(op: str, key: int, row: dict | None, lsn: int, extra: list[dict] | None = None, commit: int | None = None):
    k = json.dumps({"schema": events.KEY_SCHEMA, "payload": {"id": key}}).encode()
    if row is None:
        return k, None
    value = {**row, "__op": op, "__lsn": lsn, "__source_ts_ms": 1_700_000_000_000 + lsn,
             "__source_sequence": json.dumps([None if commit is None else str(commit), str(lsn)]),
             "__deleted": "true" if op == "d" else "false"}
    return k, json.dumps({"schema": flat_schema(extra), "payload": value}).encode()
