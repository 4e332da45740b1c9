"""Debezium's primary-key-change headers, passed from Kafka records to the staged rows (``cdc.merge.pk_moves``).

PostgreSQL's ``UPDATE ... SET id = 2 WHERE id = 1`` arrives as a delete of the old key carrying the header
``__debezium.newkey`` and a create of the new key carrying ``__debezium.oldkey``; each header's value is the other
key serialised like a message key (the connector's header converter set to the key converter). The reader notes
the headers of a partition's records by offset and, after the records were staged by either decoding path (per record
or vectorised Avro), fills ``__old_key`` / ``__new_key`` of the change rows with the header key decoded exactly as
message keys are (``Decoder.decode(key_bytes, None).key``). Both decoding paths therefore stage identical rows. A
header that does not decode into the key columns leaves the column NULL (the move is then resolved only as far as the
same-position rule of ``cdc.merge.sql.moved_toast_sql`` allows).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import pyarrow as pa

from cdc.schema.columns import KIND, NEW_KEY, OFFSET, OLD_KEY

OLD_KEY_HEADER, NEW_KEY_HEADER = "__debezium.oldkey", "__debezium.newkey"
_COLUMN = {OLD_KEY_HEADER: OLD_KEY, NEW_KEY_HEADER: NEW_KEY}


def note(found: dict[int, dict[str, bytes]], offset: int, headers: Any) -> None:
    """Remember the PK-move headers of the record at ``offset`` (``headers``: confluent-kafka's list of pairs)."""
    if not headers:
        return
    for name, value in headers:
        column = _COLUMN.get(name)
        if column is not None and value is not None:
            found.setdefault(offset, {})[column] = bytes(value)


def fill(spec: Any, batches: Iterable[pa.RecordBatch], found: dict[int, dict[str, bytes]]) -> Iterator[pa.RecordBatch]:
    """``batches`` with ``__old_key`` / ``__new_key`` of the noted records' change rows filled in."""
    for batch in batches:
        if found and OLD_KEY in batch.schema.names:
            batch = _filled(spec, batch, found)
        yield batch


def _filled(spec: Any, batch: pa.RecordBatch, found: dict[int, dict[str, bytes]]) -> pa.RecordBatch:
    offsets = batch.column(batch.schema.get_field_index(OFFSET)).to_pylist()
    kinds = batch.column(batch.schema.get_field_index(KIND)).to_pylist()
    hits = [(i, found[o]) for i, (o, k) in enumerate(zip(offsets, kinds)) if o in found and k == "change"]
    if not hits:
        return batch
    for column in (OLD_KEY, NEW_KEY):
        i = batch.schema.get_field_index(column)
        field = batch.schema.field(i)
        values = batch.column(i).to_pylist()
        for row, headers in hits:
            if column in headers:
                values[row] = decode_key(spec, headers[column], field.type)
        batch = batch.set_column(i, field, pa.array(values, type=field.type))
    return batch


def connect_text_key(raw: bytes, struct: pa.StructType) -> dict[str, Any] | None:
    """Kafka Connect's default header converter (``SimpleHeaderConverter``) writes a Struct header as its text,
    ``Struct{id=2}`` / ``Struct{tenant=a,id=2}``: parsed for integer and string key columns only (other types, or a
    string holding ``,`` or ``=``, are ambiguous in that text: None)."""
    text = raw.decode("utf-8", "replace")
    if not (text.startswith("Struct{") and text.endswith("}")):
        return None
    pairs = [p.split("=", 1) for p in text[len("Struct{"):-1].split(",")] if len(text) > len("Struct{}") else []
    if any(len(p) != 2 for p in pairs) or len(pairs) != len(struct):
        return None
    found = dict(pairs)
    value: dict[str, Any] = {}
    for f in struct:
        v = found.get(f.name)
        if v is None:
            return None
        if pa.types.is_integer(f.type):
            if not v.lstrip("-").isdigit():
                return None
            value[f.name] = int(v)
        elif pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            value[f.name] = v
        else:
            return None
    return value


def decode_key(spec: Any, raw: bytes, struct: pa.StructType) -> dict[str, Any] | None:
    """The header's key as a value of ``struct`` (the key columns), None when it does not decode or fit. Headers
    serialised like message keys (``header.converter`` = the key converter) and Connect's default header text
    (``Struct{id=2}``, :func:`connect_text_key`) are understood."""
    text_key = connect_text_key(raw, struct)
    if text_key is not None:
        return text_key
    try:
        key = spec.decoder.decode(raw, None).key or {}
        value = {f.name: key.get(f.name) for f in struct}
        if any(v is None for v in value.values()):
            return None
        pa.array([value], type=struct)
        return value
    except Exception:  # a header in another format (e.g. Connect's SimpleHeaderConverter text): not a move we can use
        return None
