"""Vectorised Avro fast path: many Debezium records of one writer schema → staging columns, in Rust and Arrow.

Per-record Python decoding (fastavro + converters) tops out around 20-30k events/s per core. Here the datums of one
schema id (message bytes after the 5-byte Confluent header) are wrapped into an in-memory Avro object-container block
and decoded by ``polars-avro`` straight to Arrow; Debezium logical types are then converted with Arrow compute.

Each writer schema id is resolved to the same reader schema as the per-record path (``AvroDecoder.value_plan``)
and planned by ``cdc.decode.avro_group.GroupPlan``: reader defaults for fields the writer lacks, NULL for columns not
in the reader (dropped at the source), ``int → long`` / ``float → double`` promotions, the per-record TOAST rules.
Everything else goes back to the exact per-record path (``leftovers``): writer/reader pairs that need more than that
(see ``cdc.decode.avro_resolve``), nested/array/geometry/variable-scale/zoned columns, unknown ops, change events
without their row image, rows missing their key or ordering position (SQL Server LSNs and Oracle SCNs are computed
by ``cdc.positions.ordering`` itself per row, ``cdc.decode.avro_positions``), explicit ordering values that are not integers
(e.g. SQL Server LSN strings: the cast fails and the group goes back), and any decoding error. Both paths produce
identical staging rows (``tests/unit/cdc/decode/test_avro_batch*.py``, including a property test over random schema
histories). One difference: the message key is not decoded here, the key columns come from the row image (Debezium
always has them there for c/u/r/d with a before/after image); rows without them take the per-record path.
"""

from __future__ import annotations

import io
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from cdc.decode.avro import _HEADER
from cdc.decode.avro_group import GroupPlan, vector_converter
from cdc.decode.avro_positions import SOURCE_FIELDS, positions
from cdc.decode.model import CHANGE, MESSAGE, TOMBSTONE
from cdc.positions.ordering import SNAPSHOT_AT_ONE_POSITION, binlog_file_seq
from cdc.positions.regression import NO_SERVER
from cdc.schema.columns import (
    KAFKA_TS_MS,
    KIND,
    OFFSET,
    OP,
    PARTITION,
    SERVER_ID,
    SNAPSHOT_END,
    SNAPSHOT_END_MARKS,
    SOURCE_TS_MS,
    TOPIC,
    TS_MS,
    UNAVAILABLE,
)

Message = tuple[int, Any, Any, Any]  # (offset, timestamp ms or None, key bytes, value bytes)

def _zz(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def container(schema_json: str, datums: Sequence[bytes]) -> bytes:
    """An Avro object container file holding ``datums`` (schemaless bodies) in one uncompressed block."""
    sync = b"cdc-iceberg-sync"
    header = bytearray(b"Obj\x01") + _zz(2)
    for k, v in (("avro.schema", schema_json.encode()), ("avro.codec", b"null")):
        header += _zz(len(k)) + k.encode() + _zz(len(v)) + v
    header += _zz(0) + sync
    body = b"".join(datums)
    return bytes(header) + _zz(len(datums)) + _zz(len(body)) + body + sync


def stage_avro(spec: Any, topic: str, partition: int, msgs: Sequence[Message],
               staging_schema: pa.Schema) -> tuple[list[pa.RecordBatch], list[Message]]:
    """Fast-path what can be; return (staging batches, messages for the per-record path)."""
    decoder = spec.decoder
    groups: dict[int, list[Message]] = {}
    out: list[pa.RecordBatch] = []
    left: list[Message] = []
    tombstones: list[Message] = []
    for m in msgs:
        v = m[3]
        if v is None:  # compacted topics: the per-record path stages the tombstone's key (it may delete the row)
            (left if getattr(spec, "compacted", False) and m[2] is not None else tombstones).append(m)
        elif len(v) > 5 and v[0] == 0:
            groups.setdefault(_HEADER.unpack_from(v)[1], []).append(m)
        else:
            left.append(m)
    if tombstones:
        out.append(_meta_batch(spec, topic, partition, tombstones, staging_schema, TOMBSTONE, None))
    plans = decoder.__dict__.setdefault("_fast_groups", {})
    for sid, group in groups.items():  # in order of first appearance, like the per-record path builds its plans
        try:
            plan = plans.get(sid)
            if plan is None or plan.value_plan is not decoder.value_plan(sid):
                plan = plans[sid] = GroupPlan(decoder, sid, spec.ordering)
        except Exception:  # unknown schema id, registry trouble ...: the per-record path reports it exactly
            left.extend(group)
            continue
        if not plan.ok:
            left.extend(group)
            continue
        try:
            batch, rest = _decode_group(spec, topic, partition, group, plan, staging_schema)
        except Exception:
            left.extend(group)
            continue
        if batch is not None:
            out.append(batch)
        left.extend(rest)
    return out, left


def _meta_batch(spec: Any, topic: str, partition: int, msgs: Sequence[Message], schema: pa.Schema, kind: str,
                op: pa.Array | None) -> pa.RecordBatch:
    n = len(msgs)
    cols = {"batch_id": pa.array([spec.batch_id] * n, pa.int64()), TOPIC: pa.array([topic] * n, pa.string()),
            PARTITION: pa.array([partition] * n, pa.int32()),
            OFFSET: pa.array([m[0] for m in msgs], pa.int64()),
            KAFKA_TS_MS: pa.array([m[1] for m in msgs], pa.int64()),
            KIND: pa.array([kind] * n, pa.string()),
            OP: op if op is not None else pa.nulls(n, pa.string())}
    return pa.RecordBatch.from_arrays([cols.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema)


def _decode_group(spec: Any, topic: str, partition: int, group: Sequence[Message], plan: GroupPlan,
                  schema: pa.Schema) -> tuple[pa.RecordBatch | None, list[Message]]:
    import polars_avro

    data = container(plan.schema_json, [m[3][5:] for m in group])
    table = polars_avro.read_avro(io.BytesIO(data)).to_arrow()
    if table.num_rows != len(group):
        raise ValueError("row count mismatch")
    op = table.column("op").combine_chunks().cast(pa.string())
    is_d = pc.equal(op, "d")
    change = pc.is_in(op, pa.array(["c", "u", "d", "r"]))
    source = table.column("source").combine_chunks()
    ordering = _ordering(spec.ordering, source, table, op, partition, [m[0] for m in group])
    good = pc.or_(pc.is_in(op, pa.array(["t", "m"])), change)
    for a in ordering:
        good = pc.and_(good, pc.or_(pc.equal(op, "m"), pc.is_valid(a)))
    before, after = table.column("before").combine_chunks(), table.column("after").combine_chunks()
    cols: dict[str, pa.Array] = {}
    n = table.num_rows
    # a change needs its row image (else the per-record path reports it, or fills a delete from the message key)
    good = pc.and_(good, pc.or_(pc.invert(change), pc.if_else(is_d, pc.is_valid(before), pc.is_valid(after))))
    types = {f.name: f.type for f in schema}
    for name, conv in plan.convs.items():
        raw = pc.if_else(is_d, pc.struct_field(before, [name]), pc.struct_field(after, [name]))
        raw = pc.if_else(change, raw, pa.nulls(n, raw.type))
        cols[name] = conv(raw)
    for name, value in plan.consts.items():  # reader defaults (writer lacks the field) and dropped columns
        const = pa.array([value] * n, types[name])
        cols[name] = pc.if_else(change, const, pa.nulls(n, types[name])) if value is not None else const
    constant = {name: change.to_pylist() for name in plan.const_unavailable}  # the default is the placeholder
    unavailable = _toast(cols, plan.toast, spec.decoder.placeholder, n, [f.name for f in schema], constant)
    for k in spec.key:  # after TOAST: a placeholder key is filled from the message key by the per-record path
        good = pc.and_(good, pc.or_(pc.invert(change), pc.is_valid(cols[k])))
    keep = good.to_pylist()
    rest = [m for m, g in zip(group, keep) if not g]
    if not any(keep):
        return None, rest
    mask = pa.array(keep)
    kind = pc.if_else(pc.equal(op, "m"), MESSAGE, CHANGE)
    meta = _meta_batch(spec, topic, partition, group, schema, CHANGE, op)
    arrays = {f.name: meta.column(i) for i, f in enumerate(schema)}
    arrays[KIND] = kind
    arrays[OP] = op
    is_m = pc.equal(op, "m")
    for col_name, a in zip(spec.ordering.columns, ordering):
        arrays[col_name] = pc.if_else(is_m, pa.nulls(n, pa.int64()), a)
    arrays[SOURCE_TS_MS] = pc.if_else(is_m, pa.nulls(n, pa.int64()),
                                          pc.struct_field(source, ["ts_ms"]).cast(pa.int64()))
    arrays[TS_MS] = pc.if_else(is_m, pa.nulls(n, pa.int64()), table.column("ts_ms").combine_chunks()
                                   .cast(pa.int64())) if "ts_ms" in table.column_names else pa.nulls(n, pa.int64())
    arrays[SERVER_ID] = pc.if_else(is_m, pa.nulls(n, pa.string()), _servers(source))
    arrays[SNAPSHOT_END] = _snapshot_ends(source, op) if spec.ordering.kind in SNAPSHOT_AT_ONE_POSITION \
        else pa.array([False] * n, pa.bool_())
    arrays[UNAVAILABLE] = unavailable
    arrays.update(cols)
    batch = pa.RecordBatch.from_arrays([arrays[f.name].cast(f.type) for f in schema], schema=schema)
    return batch.filter(mask), rest


def _servers(source: pa.StructArray) -> pa.Array:
    """``cdc.positions.regression.server_identity`` of each ``source.server_id`` (text; NULL for 0 and missing ids)."""
    names = {source.type.field(i).name for i in range(source.type.num_fields)}
    if "server_id" not in names:
        return pa.nulls(len(source), pa.string())
    ids = pc.struct_field(source, ["server_id"]).cast(pa.string())
    return pc.if_else(pc.is_in(ids, pa.array(NO_SERVER, pa.string())), pa.nulls(len(source), pa.string()), ids)


def _snapshot_ends(source: pa.StructArray, op: pa.Array) -> pa.Array:
    """``SNAPSHOT_END`` of each record: a read whose ``source.snapshot`` ends a table's snapshot."""
    names = {source.type.field(i).name for i in range(source.type.num_fields)}
    if "snapshot" not in names:
        return pa.array([False] * len(source), pa.bool_())
    marks = pc.struct_field(source, ["snapshot"]).cast(pa.string())
    ends = pc.and_(pc.equal(op, "r"), pc.is_in(marks, pa.array(SNAPSHOT_END_MARKS, pa.string())))
    return pc.fill_null(ends, False)


def _ordering(ordering: Any, source: pa.StructArray, table: pa.Table, op: pa.Array, partition: int,
              offsets: Sequence[int]) -> list[pa.Array]:
    """The ordering columns (``cdc.positions.ordering.Ordering.values``, vectorised): the epoch, then the source position."""
    base = _source_ordering(ordering, source, table, op)
    if ordering.epochs is None:
        return base
    return [pa.array([ordering.epoch_of(partition, o) for o in offsets], pa.int64()), *base]


def _source_ordering(ordering: Any, source: pa.StructArray, table: pa.Table, op: pa.Array) -> list[pa.Array]:
    n = len(source)
    names = {source.type.field(i).name for i in range(source.type.num_fields)}

    def field(name: str) -> pa.Array:
        return pc.struct_field(source, [name]) if name in names else pa.nulls(n, pa.int64())

    if ordering.kind in ("postgresql", "postgresql_lsn"):
        seq = field("sequence").cast(pa.string()) if "sequence" in names else pa.nulls(n, pa.string())
        # an incremental snapshot's read has no lsn: the one its sequence gives (ordering.event_lsn)
        of_seq = pc.struct_field(pc.extract_regex(pc.fill_null(seq, ""), r',\s*"(?P<l>\d+)"\s*\]\s*$'), [0])
        of_seq = pc.if_else(pc.and_(pc.equal(op, "r"), pc.not_equal(of_seq, "")), of_seq, pa.nulls(n, pa.string()))
        lsn = pc.coalesce(field("lsn").cast(pa.int64()), of_seq.cast(pa.int64()))
        if ordering.kind == "postgresql_lsn":
            return [lsn]
    if ordering.kind == "postgresql":  # (last commit LSN, LSN): see cdc.positions.ordering.last_commit_lsn
        commit = pc.struct_field(pc.extract_regex(pc.fill_null(seq, ""), r'^\s*\[\s*(?:null|"(?P<c>\d+)")\s*,'),
                                 [0])
        commit = pc.if_else(pc.equal(commit, ""), pa.nulls(n, pa.string()), commit).cast(pa.int64())
        fallback = pc.if_else(pc.equal(op, "r"), pc.subtract(lsn, 1), lsn)
        return [pc.coalesce(commit, fallback), lsn]
    if ordering.kind == "mysql":
        files = field("file").cast(pa.string())
        seq = {f: binlog_file_seq(f) for f in pc.unique(files).drop_null().to_pylist()}
        file_seq = pa.array([seq.get(f) if f is not None else None for f in files.to_pylist()], pa.int64())
        return [file_seq, field("pos").cast(pa.int64()), pc.fill_null(field("row").cast(pa.int64()), 0)]
    if ordering.kind in SOURCE_FIELDS:  # SQL Server LSNs, Oracle SCNs: text, see cdc.decode.avro_positions
        return positions(ordering, field)
    out = []
    for path in ordering.paths:
        if path == "ts_ms":
            out.append(table.column("ts_ms").combine_chunks().cast(pa.int64()))
        else:
            out.append(field(path.split(".", 1)[1]).cast(pa.int64()))
    return out


def _toast(cols: dict[str, pa.Array], candidates: Sequence[str], placeholder: str, n: int,
           order: Sequence[str], constant: dict[str, list[bool]]) -> pa.Array:
    """Replace placeholder values by null; the per-row list of such columns in column ``order`` (None when there
    are none). ``constant``: columns already null because their reader default is the placeholder → their rows."""
    hits: dict[str, list[bool]] = dict(constant)
    for name in candidates:
        a = cols[name]
        text = pa.types.is_string(a.type) or pa.types.is_large_string(a.type)
        marker: Any = placeholder if text else placeholder.encode()
        mask = pc.fill_null(pc.equal(a, pa.scalar(marker, a.type)), False)
        if pc.any(mask).as_py():
            hits[name] = mask.to_pylist()
            cols[name] = pc.if_else(mask, pa.nulls(n, a.type), a)
    if not hits:
        return pa.nulls(n, pa.list_(pa.string()))
    names = [c for c in order if c in hits]
    return pa.array([[c for c in names if hits[c][i]] or None for i in range(n)], pa.list_(pa.string()))


__all__ = ["container", "stage_avro", "vector_converter"]  # vector_converter: re-exported from avro_group
