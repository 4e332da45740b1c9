"""Debezium envelope → ``Event`` (pure; shared by the Avro and JSON decoders).

``RowPlan`` converts one row image in place for a given (source row schema, bound columns) pair and detects
unchanged-TOAST placeholders; decoders build one plan per source schema and reuse it for every record.
``to_event`` classifies a decoded envelope (change / tombstone / message / transaction) and builds the ``Event``.

Records flattened by the ExtractNewRecordState (unwrap) SMT are read with ``tables[].envelope: flattened``
(``cdc.decode.flattened`` turns them into this envelope first); without it they are rejected with a ``DecodeError``
that says so.
"""

from __future__ import annotations

import base64
import json
import re
from decimal import Decimal
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from cdc.common.errors import DecodeError, UnboundColumns
from cdc.decode.connect_types import (
    JSON_FLOATS,
    ConnectField,
    arrow_type,
    converter,
    fit_decimal,
    identity,
    parse_zoned_timestamp,
    to_bytes,
)
from cdc.decode.model import CHANGE, CHANGE_OPS, MESSAGE, TOMBSTONE, TRANSACTION, Event
from cdc.schema.columns import Column
from cdc.schema.widening import accepts, widens

_UNWRAP_MARKERS = ("__op", "__deleted", "__table", "__source_ts_ms", "__lsn", "__db")

# (column, converter or None, TOAST marker or None)
Step = tuple[str, Callable[[Any], Any] | None, Any]


class RowPlan:
    """Converts row dicts of one source schema into Arrow-ready rows of the bound columns (in place).

    ``extras``: fields of the source schema that are not bound columns (name → type, for messages); ``open_row``
    (schemaless rows): every field that is not a bound column is an extra. Extras are removed from the row; one
    holding a value raises ``UnboundColumns`` (the job widens the batch schema with the record's columns)."""

    def __init__(self, columns: Sequence[Column], steps: list[Step], extras: Mapping[str, str] | Sequence[str] = (),
                 open_row: bool = False):
        self.columns = list(columns)
        self.names = frozenset(c.name for c in columns)
        self.steps = steps
        self.extras = dict(extras) if isinstance(extras, Mapping) else {n: "?" for n in extras}
        self.open_row = open_row

    def apply(self, row: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        unavailable: tuple[str, ...] = ()
        for name, conv, marker in self.steps:
            v = row.get(name)
            if v is None:
                continue
            if marker is not None and v == marker:
                row[name] = None
                unavailable += (name,)
            elif conv is not None:
                try:
                    row[name] = conv(v)
                except UnboundColumns:
                    raise
                except DecodeError as exc:
                    raise DecodeError(f"column {name!r}: {exc}") from None
                except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as exc:
                    raise DecodeError(f"column {name!r}: cannot convert {type(v).__name__} value "
                                      f"({type(exc).__name__}: {exc})") from None
        extras = [n for n in row if n not in self.names] if self.open_row else [n for n in self.extras if n in row]
        unbound = []
        for name in extras:
            v = row.pop(name)
            if v is not None:
                unbound.append(f"field {name!r} is not a column of this batch "
                               f"({self.extras.get(name) or _json_type(v)} in the record)")
        if unbound:  # one message per schema: the job widens the batch schema with one record of each
            raise UnboundColumns("; ".join(unbound) + ": the batch schema came from the batch's newest records and "
                                 "the table; the job adds the record's columns and stages the batch again")
        return row, unavailable


def _json_type(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "array"}.get(
        type(v), type(v).__name__)


def row_plan(columns: Sequence[Column], source: ConnectField | None, placeholder: str,
             json_text: bool = False, variable_scale: tuple[int, int] | None = None,
             ignore_extra: bool = False) -> RowPlan:
    """Plan for rows described by ``source`` (a struct), or by the bound column types when ``source`` is None
    (schemaless JSON: values are coerced from JSON types). ``json_text``: values as Kafka's JsonConverter writes them
    (bytes as base64 text, special floats as strings). ``ignore_extra``: source fields that are not bound
    columns are dropped silently (else a value in one raises ``UnboundColumns``; schemaless rows too)."""
    steps: list[Step] = []
    by_name = {f.field_name: f for f in source.fields} if source is not None else {}
    for col in columns:
        f = by_name.pop(col.name, None)
        if source is None:
            steps.append((col.name, _coercer(col.arrow_type), _marker(col.arrow_type, placeholder, json_text)))
            continue
        if f is None:
            continue
        kw = {"variable_scale": variable_scale} if variable_scale else {}
        src_type = arrow_type(f, **kw)
        if not accepts(col.arrow_type, src_type):
            steps.append((col.name, _refuse(col, src_type), None))
            continue
        conv = converter(f, json_text=json_text, **kw)
        marker = _marker(src_type, placeholder, json_text) if f.name not in _NOT_TOASTABLE else None
        if conv is not identity or marker is not None:
            steps.append((col.name, None if conv is identity else conv, marker))
    if ignore_extra:  # extras stay in the row dict, unused: only bound columns are staged
        return RowPlan(columns, steps)
    if source is None:
        return RowPlan(columns, steps, open_row=True)
    return RowPlan(columns, steps, {n: _type_label(f) for n, f in by_name.items() if n})


def _type_label(f: ConnectField) -> str:
    try:
        return str(arrow_type(f))
    except DecodeError:
        return f.type


_NOT_TOASTABLE = {"org.apache.kafka.connect.data.Decimal", "io.debezium.data.VariableScaleDecimal"}


def _marker(t: pa.DataType, placeholder: str, json_text: bool) -> Any:
    """The raw value Debezium sends for an unchanged TOASTed column of this type."""
    raw = placeholder.encode()
    as_bytes: Any = base64.b64encode(raw).decode() if json_text else raw
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return placeholder
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return as_bytes
    if pa.types.is_list(t):
        inner = _marker(t.value_type, placeholder, json_text)
        return None if inner is None else [inner]
    return None


def _refuse(col: Column, src_type: pa.DataType) -> Callable[[Any], Any]:
    """A value whose source type the bound column cannot hold. When the column can be widened to it (the record was
    written after the source widened the column, the batch's samples before), ``UnboundColumns``: the job widens the
    batch schema with the record's columns and stages again; otherwise a ``DecodeError`` (a dead letter)."""
    widening = widens(col.arrow_type, src_type)

    def refuse(v: Any) -> Any:
        if widening:
            raise UnboundColumns(f"column {col.name!r}: source type {src_type} is wider than the batch column type "
                                 f"{col.arrow_type}: the batch schema came from the batch's newest records and the "
                                 "table; the job widens the column and stages the batch again")
        raise DecodeError(f"{type(v).__name__} value of source type {src_type} does not fit the batch column type "
                          f"{col.arrow_type}")
    return refuse


def _coercer(t: pa.DataType) -> Callable[[Any], Any] | None:
    """Schemaless JSON value → Arrow-ready value of ``t`` (strict: wrong JSON types raise)."""
    if pa.types.is_integer(t):
        lo, hi = (-(2**31), 2**31 - 1) if t.bit_width <= 32 else (-(2**63), 2**63 - 1)
        return lambda v: v if type(v) is int and lo <= v <= hi else _bad(v, t)
    if pa.types.is_floating(t):
        return lambda v: (float(v) if type(v) in (int, float) else JSON_FLOATS[v] if type(v) is str and v in JSON_FLOATS
                          else _bad(v, t))  # the JsonConverter's "NaN" / "Infinity" / "-Infinity" too
    if pa.types.is_boolean(t):
        return lambda v: v if type(v) is bool else _bad(v, t)
    if pa.types.is_string(t):
        return lambda v: v if type(v) is str else json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if pa.types.is_binary(t):
        return to_bytes
    if pa.types.is_decimal(t):
        return lambda v: json_decimal(v, t.precision, t.scale)
    if pa.types.is_timestamp(t) and t.tz is not None:  # µs, or a ZonedTimestamp ISO-8601 string
        return lambda v: v if type(v) is int else parse_zoned_timestamp(v) if type(v) is str else _bad(v, t)
    if pa.types.is_date32(t) or pa.types.is_timestamp(t):
        return lambda v: v if type(v) is int else _bad(v, t)  # already days / µs (model conventions)
    if pa.types.is_list(t):
        inner = _coercer(t.value_type)
        return lambda v: [None if x is None else inner(x) for x in v] if type(v) is list else _bad(v, t)
    return lambda v: v if isinstance(v, (dict, list)) else _bad(v, t)


_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")


def json_decimal(v: Any, precision: int, scale: int) -> Decimal:
    """A schemaless JSON value of a ``decimal(precision, scale)`` column, exactly (never rounded).

    Debezium's ``decimal.handling.mode``: ``precise`` (default) sends base64 text of the big-endian two's-complement
    unscaled value; ``string`` sends the plain number (always with ``scale`` fractional digits when scale > 0);
    ``double`` a JSON number. Text that is valid base64 is read as ``precise`` (so ``string`` mode is only
    unambiguous for scale > 0, see docs/types-and-evolution.md); other text and numbers as the number they spell."""
    if type(v) is str and v and _BASE64.match(v):
        d = Decimal(int.from_bytes(base64.b64decode(v), "big", signed=True)).scaleb(-scale)
    elif type(v) in (int, float, str):
        d = Decimal(str(v).strip())
    else:
        return _bad(v, pa.decimal128(precision, scale))
    return fit_decimal(d, precision, scale)


def _bad(v: Any, t: pa.DataType) -> Any:
    raise DecodeError(f"{type(v).__name__} value cannot be converted to {t}")


def classify(value: Any) -> tuple[str, str | None]:
    """(kind, op) of a decoded, non-null Debezium value; DecodeError if it is not a Debezium event."""
    if not isinstance(value, dict):
        raise DecodeError(f"not a Debezium change event: the value is a {type(value).__name__}, not an object")
    op = value.get("op")
    if not isinstance(value.get("source"), dict) or op is None:
        if op is None and value.get("status") in ("BEGIN", "END") and "id" in value:
            return TRANSACTION, None
        found = [m for m in _UNWRAP_MARKERS if m in value]
        if found:
            raise DecodeError(f"record looks flattened by the ExtractNewRecordState (unwrap) SMT (field {found[0]!r}): "
                              "not supported with 'envelope: debezium'; set 'envelope: flattened' for this table "
                              "(format json), or remove the SMT from the connector")
        if op is None:
            raise DecodeError("not a Debezium change event: no 'op' field")
        if op not in CHANGE_OPS and op != "m":
            raise DecodeError(f"not a Debezium change event: unknown op {op!r}")
        raise DecodeError("not a Debezium change event: no 'source' block")
    if op == "m":
        return MESSAGE, op
    if op not in CHANGE_OPS:
        raise DecodeError(f"not a Debezium change event: unknown op {op!r}")
    return CHANGE, op


def to_event(value: Any, key: dict[str, Any] | None, plan: RowPlan, schema_id: int | None = None) -> Event:
    """Build the Event of one decoded value (``None`` = tombstone). Row images are converted with ``plan``."""
    if value is None:
        return Event(TOMBSTONE, key=key, schema_id=schema_id)
    kind, op = classify(value)
    if kind == TRANSACTION:
        return Event(TRANSACTION, key=key, ts_ms=value.get("ts_ms"), schema_id=schema_id)
    source: dict[str, Any] = value["source"]
    ts_ms = value.get("ts_ms")
    if kind == MESSAGE or op == "t":
        return Event(kind, op=op, key=key, source=source, ts_ms=ts_ms, schema_id=schema_id)
    unavailable: tuple[str, ...] = ()
    if op == "d":
        row = value.get("before")
        if row is not None:
            row, unavailable = plan.apply(row)
        if key:
            row = fill_key(row, key, plan.names)
    else:
        row = value.get("after")
        if not isinstance(row, dict):
            if source.get("connector") == "mongodb":
                raise DecodeError("MongoDB event (documents as JSON text) on a topic whose newest value schema is "
                                  "not the MongoDB connector's: give MongoDB collections their own topics")
            raise DecodeError(f"op {op!r} event without an 'after' row image")
        row, unavailable = plan.apply(row)
    return Event(CHANGE, op=op, row=row, key=key, source=source, ts_ms=ts_ms, unavailable=unavailable,
                 schema_id=schema_id)


def fill_key(row: dict[str, Any] | None, key: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """Delete images: fill missing primary-key values from the (converted) message key."""
    row = {} if row is None else row
    for k, v in key.items():
        if k in names and row.get(k) is None:
            row[k] = v
    return row
