"""Schema side of the vectorised Avro path: how the datums of one writer schema id become the bound columns.

``GroupPlan`` mirrors exactly what the per-record path does for that schema id (``AvroDecoder.value_plan``): the same
reader schema (the subject's newest when the batch schema was resolved, refreshed once for ids registered later), the
same bound columns and the same row plan (converters, TOAST markers). Per bound column it holds one of

* a vectorised converter of the writer's values (the column is in writer and reader; ``int → long`` and
  ``float → double`` promotions are casts),
* a constant: the reader default converted by the per-record row plan (in the reader, not in the writer), or NULL
  (not in the reader: dropped at the source, or a column only the table still has).

``ok`` is False when the pair needs anything more (see ``cdc.decode.avro_resolve.resolvable``), when the per-record
path would read with the writer schema alone, for nested/array/geometry/variable-scale/zoned columns, reader fields
that are not bound columns, and ordering fields present in only one of writer and reader: those records take the
per-record path.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from cdc.decode.avro import _row_struct, _strip_logical
from cdc.decode.avro_positions import SOURCE_FIELDS
from cdc.decode.avro_resolve import expanded, reader_defaults, record_fields, resolvable, row_record, same_fields
from cdc.decode.connect_types import ConnectField, arrow_type, from_avro
from cdc.decode.envelope import _NOT_TOASTABLE
from cdc.positions.ordering import PER_RECORD_KINDS
from cdc.schema.widening import accepts

VecConv = Callable[[pa.Array], pa.Array]

_STRINGISH = {None, "io.debezium.data.Json", "io.debezium.data.Uuid", "io.debezium.data.Enum",
              "io.debezium.data.EnumSet", "io.debezium.data.Xml", "io.debezium.data.Ltree",
              "io.debezium.time.ZonedTime"}
_SCALE = {  # logical name → (raw Arrow type, multiplier to µs, target kind)
    "io.debezium.time.Date": (pa.int32(), 1, "date"), "org.apache.kafka.connect.data.Date": (pa.int32(), 1, "date"),
    "io.debezium.time.MicroTimestamp": (pa.int64(), 1, "ts"), "io.debezium.time.Timestamp": (pa.int64(), 1000, "ts"),
    "org.apache.kafka.connect.data.Timestamp": (pa.int64(), 1000, "ts"),
    "io.debezium.time.MicroTime": (pa.int64(), 1, "int"), "io.debezium.time.Time": (pa.int32(), 1000, "int"),
    "org.apache.kafka.connect.data.Time": (pa.int32(), 1000, "int"),
}
_INTS = {"int8", "int16", "int32", "int64"}


def vector_converter(f: ConnectField, target: pa.DataType) -> VecConv | None:
    """Arrow-compute conversion of raw values of field ``f`` (or of a writer type promotable to it) to the bound
    column type, or None (not vectorisable)."""
    name = f.name
    if f.type in ("struct", "array", "map"):
        return None
    if name == "org.apache.kafka.connect.data.Decimal":
        if not pa.types.is_decimal(target) or int(f.parameters.get("scale", 0)) != target.scale:
            return None
        return lambda a: a.cast(target)
    if name in _SCALE:
        raw, mul, kind = _SCALE[name]

        def conv(a: pa.Array) -> pa.Array:
            a = a.cast(pa.int64())
            if mul != 1:
                a = pc.multiply_checked(a, mul)
            if kind == "date":
                return a.cast(pa.int32()).cast(pa.date32()).cast(target)
            if kind == "ts":
                return a.cast(pa.timestamp("us")).cast(target)
            return a.cast(target)

        return conv if (kind != "ts" or pa.types.is_timestamp(target) and target.tz is None) else None
    if name is not None and name not in _STRINGISH and name != "io.debezium.time.Year":
        return None
    if f.type in _INTS | {"float32", "float64", "boolean", "string", "bytes"}:
        return lambda a: a.cast(target)
    return None


def _ordering_fields(ordering: Any) -> tuple[set[str], set[str]]:
    """(source fields, envelope fields) the staging row reads besides the row image."""
    # server_id: cdc.positions.regression; snapshot: the end of a snapshot (SNAPSHOT_END)
    source, top = {"ts_ms", "server_id", "snapshot"}, {"op", "source", "ts_ms"}
    if ordering.kind == "postgresql_lsn":
        source.add("lsn")
    elif ordering.kind == "postgresql":
        source |= {"lsn", "sequence"}
    elif ordering.kind == "mysql":
        source |= {"file", "pos", "row"}
    elif ordering.kind in SOURCE_FIELDS:
        source |= set(SOURCE_FIELDS[ordering.kind])
    else:
        for path in ordering.paths:
            head, _, rest = path.partition(".")
            if head == "source":
                source.add(rest.split(".", 1)[0])
            else:
                top.add(head)
    return source, top


class GroupPlan:
    """Conversion plan for one writer schema id against the bound columns (``ok`` False → per-record path)."""

    def __init__(self, decoder: Any, sid: int, ordering: Any):
        self.ok = False
        self.value_plan = vp = decoder.value_plan(sid)  # DecodeError (unknown id, newer than the subject ...) → raise
        if vp.reader_id is None or vp.rows.extras:
            return  # read with the writer schema alone / reader fields that are not bound columns
        if ordering.kind in PER_RECORD_KINDS:
            return  # MongoDB: documents are JSON text (cdc.decode.avro_connectors decodes them per record)
        writer_json = json.loads(decoder._text(sid))
        reader_json = json.loads(decoder._text(vp.reader_id))
        w, r = expanded(_strip_logical(writer_json)), expanded(_strip_logical(reader_json))
        w_row, r_row = row_record(w, "after"), row_record(r, "after")
        if w_row is None or r_row is None or row_record(w, "before") != w_row or row_record(r, "before") != r_row:
            return
        if sid != vp.reader_id and not resolvable(w, r):
            return
        source_names, top_names = _ordering_fields(ordering)
        w_top, r_top = record_fields(w), record_fields(r)
        if not same_fields(w_top, r_top, top_names) or not {"op", "source", "before", "after"} <= set(w_top):
            return
        if not same_fields(record_fields(w_top["source"]["type"]), record_fields(r_top["source"]["type"]),
                           source_names):
            return
        reader = {f.field_name: f for f in _row_struct(from_avro(reader_json)).fields}
        writer = record_fields(w_row)
        self.convs: dict[str, VecConv] = {}
        self.consts: dict[str, Any] = {}  # column → constant value for every change row (None: NULL)
        self.const_unavailable: tuple[str, ...] = ()  # constant columns holding the TOAST placeholder
        missing = [c.name for c in vp.rows.columns if c.name in reader and c.name not in writer]
        raw = reader_defaults(r_row, missing) if missing else {}
        for c in vp.rows.columns:
            f = reader.get(c.name)
            if f is None:
                self.consts[c.name] = None
            elif c.name in writer:
                conv = vector_converter(f, c.arrow_type)
                if conv is None or not accepts(c.arrow_type, arrow_type(f)):
                    return
                self.convs[c.name] = conv
            else:
                row, unavailable = vp.rows.apply({c.name: raw[c.name]})  # DecodeError → raise (per-record path)
                pa.array([row[c.name]], c.arrow_type)  # does not fit → raise
                self.consts[c.name] = row[c.name]
                self.const_unavailable += unavailable
        self.toast = [n for n in self.convs if reader[n].name not in _NOT_TOASTABLE
                      and (pa.types.is_string(arrow_type(reader[n])) or pa.types.is_binary(arrow_type(reader[n])))]
        self.schema_json = json.dumps(_strip_logical(writer_json))
        self.ok = True


__all__ = ["GroupPlan", "vector_converter"]
