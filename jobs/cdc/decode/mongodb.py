"""Debezium MongoDB events → the envelope shape of the relational connectors (pure functions).

The MongoDB connector sends documents as JSON *text* (MongoDB Extended JSON): ``after`` (and ``before`` with
pre-images) are strings, and the message key is ``{"id": "<_id as Extended JSON text>"}``. Here:

* The primary key is the column ``_id`` holding the key's text exactly as Debezium wrote it (e.g.
  ``{"$oid": "596e275826f08b2730779e1f"}`` or ``1004``); the document's own ``_id`` is replaced by it, so a row
  and its delete (which only has the key) agree.
* Top-level fields become columns. Extended JSON scalars are unwrapped: ``$numberInt``/``$numberLong`` → integer,
  ``$numberDouble`` → double, ``$numberDecimal``/``$oid``/``$symbol`` → text, ``$date`` → ISO-8601 UTC text.
  Nested documents and arrays stay as they are and are staged as compact JSON text (string columns).
* Updates with the full document (``after``: ``capture.mode`` ``*_update_full``, or oplog replacements) replace the
  row. Updates without it are applied field by field when every changed path is top level:
  ``updateDescription`` (change streams: ``updatedFields`` set, ``removedFields`` become NULL) and the oplog
  ``patch`` of Debezium 1.x (``$set`` / ``$unset``). Every other column keeps its stored value: it is reported as
  *unavailable*, the rule used for unchanged TOAST columns (``cdc.merge``). Refused with a ``DecodeError`` (dead
  letter, naming what to change): changes to nested paths (``a.b``), ``truncatedArrays``, oplog ``$v: 2`` diffs
  and other update operators. Use ``capture.mode: change_streams_update_full`` to get full documents.
* Tombstones carry ``{"_id": text}`` too (on compacted topics they delete that row).
* Format avro: ``cdc.decode.avro_connectors.MongoAvroDecoder`` hands the Avro datum (same shape as the JSON payload,
  documents still JSON text) to the same functions.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from cdc.common.errors import DecodeError
from cdc.decode.envelope import RowPlan, to_event
from cdc.decode.model import Event
from cdc.schema.columns import Column

KEY = "_id"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def is_mongodb(payload: Any) -> bool:
    """Is this decoded value a Debezium MongoDB change event?"""
    return (isinstance(payload, dict) and isinstance(payload.get("source"), dict)
            and payload["source"].get("connector") == "mongodb")


def key(doc: dict[str, Any]) -> dict[str, Any]:
    """The message key ``{"id": text}`` → ``{"_id": text}``."""
    if set(doc) == {"id"}:
        return {KEY: doc["id"] if isinstance(doc["id"], str) or doc["id"] is None else _text(doc["id"])}
    return doc


def tombstone_key(k: dict[str, Any] | None, columns: Sequence[Column] | None) -> dict[str, Any] | None:
    """A tombstone's message key in the row's terms: ``{"id": text}`` → ``{"_id": text}`` on a MongoDB table (bound
    columns with ``_id`` and without ``id``; a tombstone has no value to tell the connector by)."""
    names = {c.name for c in columns or ()}
    return key(k) if k is not None and set(k) == {"id"} and KEY in names and "id" not in names else k


def envelope(payload: dict[str, Any], k: dict[str, Any] | None) -> tuple[dict[str, Any], frozenset[str] | None]:
    """A MongoDB event as a relational envelope (``before``/``after`` dicts of columns), and for partial updates the
    set of columns the update sets (the others keep their value); None for full row images."""
    op = payload.get("op")
    out = {f: payload.get(f) for f in ("source", "op", "ts_ms") if f in payload}
    key_text = (k or {}).get(KEY)
    out["before"] = _row(payload.get("before"), key_text, "before")
    after = _row(payload.get("after"), key_text, "after")
    if op != "u" or after is not None:
        out["after"] = after
        return out, None
    for field in ("updateDescription", "patch"):
        if payload.get(field) is not None:
            row, present = (_update_description if field == "updateDescription" else _patch)(payload[field])
            if key_text is not None:
                row[KEY] = key_text
            out["after"] = row
            return out, None if present is None else frozenset(present | {KEY})
    raise DecodeError("MongoDB update without the document ('after'), 'updateDescription' or 'patch': set the "
                      "connector's capture.mode to change_streams_update_full")


def event(payload: dict[str, Any], k: dict[str, Any] | None, plan: RowPlan, schema_id: int | None = None) -> Event:
    """The Event of a MongoDB change event (``k``: the decoded message key ``{"id": text}``); for partial updates
    every column the update does not set is reported unavailable (it keeps its stored value)."""
    k = key(k) if k is not None else None
    env, present = envelope(payload, k)
    ev = to_event(env, k, plan, schema_id)
    if present is not None:
        ev.unavailable = tuple(c.name for c in plan.columns if c.name not in present)
    return ev


def document_columns(payload: dict[str, Any], k: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The columns a sample record shows (for the batch schema): its row image, or its partial update's fields."""
    env, _ = envelope(payload, k)
    return env.get("after") if env.get("after") is not None else env.get("before")


def _row(text: Any, key_text: str | None, what: str) -> dict[str, Any] | None:
    if text is None:
        return None
    doc = _loads(text, what)
    if not isinstance(doc, dict):
        raise DecodeError(f"MongoDB '{what}' is a JSON {type(doc).__name__}, not a document")
    row = {name: unwrap(v) for name, v in doc.items()}
    if KEY in row or key_text is not None:
        row[KEY] = key_text if key_text is not None else _text(doc[KEY])
    return row


def _update_description(desc: Any) -> tuple[dict[str, Any], set[str]]:
    if not isinstance(desc, dict):
        raise DecodeError("MongoDB 'updateDescription' is not an object")
    if desc.get("truncatedArrays"):
        raise DecodeError("MongoDB update truncates arrays (updateDescription.truncatedArrays): not supported without "
                          "the full document; set the connector's capture.mode to change_streams_update_full")
    updated = desc.get("updatedFields")
    updated = _loads(updated, "updateDescription.updatedFields") if updated is not None else {}
    if not isinstance(updated, dict):
        raise DecodeError("MongoDB 'updateDescription.updatedFields' is not a document")
    removed = list(desc.get("removedFields") or ())
    return _top_level({**{n: unwrap(v) for n, v in updated.items()}, **{n: None for n in removed}})


def _patch(text: Any) -> tuple[dict[str, Any], set[str] | None]:
    patch = _loads(text, "patch")
    if not isinstance(patch, dict):
        raise DecodeError("MongoDB 'patch' is not a document")
    if patch.get("$v") not in (None, 1) or "diff" in patch:
        raise DecodeError("MongoDB oplog patch in the $v: 2 (diff) format is not applied without the full document: "
                          "use a connector version with change streams and capture.mode change_streams_update_full")
    ops = [n for n in patch if n.startswith("$") and n != "$v"]
    if not ops:  # an oplog replacement: the whole new document (without _id)
        return {n: unwrap(v) for n, v in patch.items()}, None
    unsupported = [n for n in ops if n not in ("$set", "$unset")]
    if unsupported:
        raise DecodeError(f"MongoDB oplog patch with {unsupported[0]!r} (only $set/$unset are applied without the "
                          "full document): use a connector version with change streams and capture.mode "
                          "change_streams_update_full")
    fields = {n: unwrap(v) for n, v in (patch.get("$set") or {}).items()}
    fields.update({n: None for n in (patch.get("$unset") or {})})
    return _top_level(fields)


def _top_level(fields: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    nested = [n for n in fields if "." in n]
    if nested:
        raise DecodeError(f"MongoDB partial update of the nested field {nested[0]!r}: only top-level fields can be "
                          "applied without the full document; set the connector's capture.mode to "
                          "change_streams_update_full")
    return dict(fields), set(fields)


def unwrap(v: Any) -> Any:
    """An Extended JSON top-level value → a plain value (nested documents and arrays stay as they are)."""
    if not isinstance(v, dict) or len(v) != 1:
        return v
    (tag, inner), = v.items()
    if tag in ("$numberInt", "$numberLong"):
        return int(inner)
    if tag == "$numberDouble":
        return float(inner)
    if tag in ("$numberDecimal", "$oid", "$symbol"):
        return str(inner)
    if tag == "$date":
        if isinstance(inner, dict) and "$numberLong" in inner:
            inner = int(inner["$numberLong"])
        if isinstance(inner, int):
            return (_EPOCH + timedelta(milliseconds=inner)).isoformat().replace("+00:00", "Z")
        return inner
    return v


def _loads(text: Any, what: str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise DecodeError(f"MongoDB '{what}' is not valid JSON: {exc}") from None


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
