"""Kafka Connect / Debezium schema types → Arrow types and per-value converters (pure; shared by both decoders).

Both formats are first turned into ``ConnectField`` descriptions (``from_connect_json`` for the JsonConverter's
embedded schema, ``from_avro`` for a Confluent AvroConverter schema, where Connect semantics travel as
``connect.name`` / ``connect.parameters`` / ``connect.type`` attributes and Avro ``logicalType``). ``arrow_type``
maps a field to its Arrow type; ``converter`` returns a function turning one *raw decoded* value (what fastavro or
``json.loads`` produced) into the Arrow-ready value described in ``cdc.decode.model``. Converters accept both raw
forms where they differ (bytes vs base64 text, ``Decimal`` vs unscaled bytes); ``None`` always passes through.

Choices worth knowing:

* Time of day (``io.debezium.time.Time``/``MicroTime``/``NanoTime``, ``org.apache.kafka.connect.data.Time``) becomes
  ``int64`` **microseconds since midnight**: Spark 3.5 has no TIME type and Iceberg ``time`` does not round-trip
  through Spark. ``io.debezium.time.ZonedTime`` stays the ISO string Debezium sends.
* Timestamps without zone (``Timestamp``/``MicroTimestamp``/``NanoTimestamp``, Connect ``Timestamp``) become
  ``timestamp('us')`` (wall clock); ``ZonedTimestamp`` strings become ``timestamp('us', 'UTC')``. All conversions
  are integer arithmetic: nanoseconds are floored to microseconds, fractional seconds beyond 6 digits are dropped.
* PostgreSQL ``±infinity`` timestamps arrive as sentinel µs (PgJDBC's ``DATE_POSITIVE/NEGATIVE_INFINITY``) and pass
  through; ``timestamptz`` ones as the strings ``infinity``/``-infinity``, mapped to the same (``ZONED_INFINITY``).
  A value beyond int64 µs, or a string that is no ISO-8601 instant, raises ``DecodeError`` → dead letter. Float ``NaN``/``Infinity`` pass through as floats;
  Kafka's JsonConverter writes them as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, which ``converter(...,
  json_text=True)`` turns back into the floats.
* ``VariableScaleDecimal`` has no fixed scale: it becomes ``decimal128(38, 10)`` (``VARIABLE_SCALE_DECIMAL``,
  overridable per call). A value with more than 10 significant fractional digits, or too many digits, raises
  ``DecodeError`` (never rounded). ``Decimal`` without a precision gets precision 38.
* Maps become ``map<K, V>`` (value: a dict, or a list of (key, value) pairs for non-string keys).
* Geometry/Geography/Point become ``struct<wkb: binary, srid: int32>`` (Point's x/y are dropped; they are in wkb).
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from dataclasses import dataclass, field, replace
from decimal import Context, Decimal
from typing import Any, Callable, Mapping

import pyarrow as pa

from cdc.common.errors import DecodeError
from cdc.schema.columns import Column

Converter = Callable[[Any], Any]

MAX_PRECISION = 38
VARIABLE_SCALE_DECIMAL: tuple[int, int] = (38, 10)  # (precision, scale) for io.debezium.data.VariableScaleDecimal
INT64_MAX = 2**63 - 1

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE = "io.debezium.data.VariableScaleDecimal"
_DATES = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
_TIME_FACTORS = {  # raw unit → microseconds: (multiplier, divisor)
    "io.debezium.time.Time": (1000, 1), "org.apache.kafka.connect.data.Time": (1000, 1),
    "io.debezium.time.MicroTime": (1, 1), "io.debezium.time.NanoTime": (1, 1000),
}
_TIMESTAMP_FACTORS = {
    "io.debezium.time.Timestamp": (1000, 1), "org.apache.kafka.connect.data.Timestamp": (1000, 1),
    "io.debezium.time.MicroTimestamp": (1, 1), "io.debezium.time.NanoTimestamp": (1, 1000),
}
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
_GEOMETRY = {"io.debezium.data.geometry.Geometry", "io.debezium.data.geometry.Geography",
             "io.debezium.data.geometry.Point"}
GEOMETRY_TYPE = pa.struct([pa.field("wkb", pa.binary()), pa.field("srid", pa.int32())])
_PRIMITIVES: dict[str, pa.DataType] = {
    "int8": pa.int32(), "int16": pa.int32(), "int32": pa.int32(), "int64": pa.int64(),
    "float32": pa.float32(), "float64": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
    "bytes": pa.binary(), "float": pa.float32(), "double": pa.float64(),  # JsonConverter spells floats this way
}
# Other semantic names (Json, Uuid, Enum, EnumSet, Xml, Ltree, Year, Bits, ZonedTime ...) keep the primitive's type.


@dataclass(frozen=True)
class ConnectField:
    """A Kafka Connect schema node: ``type`` is the Connect type, ``name`` the semantic (logical) name."""

    type: str
    name: str | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    optional: bool = True
    field_name: str | None = None  # the name of this field inside its struct
    items: "ConnectField | None" = None  # array
    keys: "ConnectField | None" = None  # map
    values: "ConnectField | None" = None  # map
    fields: tuple["ConnectField", ...] = ()  # struct

    def child(self, name: str) -> "ConnectField | None":
        return next((f for f in self.fields if f.field_name == name), None)


# ------------------------------------------------------------------------------- schema → ConnectField

def from_connect_json(schema: Mapping[str, Any], field_name: str | None = None) -> ConnectField:
    """A JsonConverter schema node (``{"type": "struct", "fields": [...], "optional": ..., "name": ...}``)."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("type"), str):
        raise DecodeError(f"invalid Connect schema node for {field_name or 'value'}: {str(schema)[:80]}")
    t = schema["type"]
    sub = {k: from_connect_json(schema[k]) for k in ("items", "keys", "values") if isinstance(schema.get(k), Mapping)}
    fields = tuple(from_connect_json(f, f.get("field")) for f in schema.get("fields") or ())
    return ConnectField(type=t, name=schema.get("name"), parameters=dict(schema.get("parameters") or {}),
                        optional=bool(schema.get("optional", True)), field_name=field_name or schema.get("field"),
                        fields=fields, **sub)


_AVRO_PRIMITIVES = {"boolean": "boolean", "int": "int32", "long": "int64", "float": "float32",
                    "double": "float64", "bytes": "bytes", "string": "string"}
_AVRO_LOGICAL = {  # used only when the schema carries no connect.name
    "date": "org.apache.kafka.connect.data.Date", "time-millis": "org.apache.kafka.connect.data.Time",
    "time-micros": "io.debezium.time.MicroTime", "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "timestamp-micros": "io.debezium.time.MicroTimestamp", "local-timestamp-millis": "io.debezium.time.Timestamp",
    "local-timestamp-micros": "io.debezium.time.MicroTimestamp", "uuid": "io.debezium.data.Uuid",
}


def from_avro(schema: Any, field_name: str | None = None, named: dict[str, ConnectField] | None = None,
              namespace: str = "") -> ConnectField:
    """An Avro schema (JSON form, as registered) → ConnectField. Only ``["null", X]`` unions are supported."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return ConnectField(_AVRO_PRIMITIVES[schema], optional=False, field_name=field_name)
        ref = named.get(schema) or named.get(f"{namespace}.{schema}")
        if ref is None:
            raise DecodeError(f"Avro schema: unknown type {schema!r} for field {field_name!r}")
        return replace(ref, field_name=field_name)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise DecodeError(f"Avro schema: union {schema!r} of field {field_name!r} is not supported "
                              "(only [\"null\", T])")
        return replace(from_avro(branches[0], field_name, named, namespace), optional=len(schema) > 1)
    if not isinstance(schema, Mapping):
        raise DecodeError(f"Avro schema: invalid node for field {field_name!r}")
    t = schema.get("type")
    params = dict(schema.get("connect.parameters") or {})
    semantic = schema.get("connect.name")
    if t == "record":
        full, ns = _fullname(schema, namespace)
        placeholder = ConnectField("struct", semantic or full, field_name=field_name, optional=False)
        named[full] = named[full.rsplit(".", 1)[-1]] = placeholder  # lets recursive refs resolve to a struct
        fields = tuple(from_avro(f["type"], f["name"], named, ns) for f in schema.get("fields", ()))
        node = replace(placeholder, fields=fields)
        named[full] = named[full.rsplit(".", 1)[-1]] = node
        return node
    if t in ("enum", "fixed"):
        full, _ = _fullname(schema, namespace)
        node = ConnectField("string" if t == "enum" else "bytes", semantic, params, False, field_name)
        if t == "fixed" and schema.get("logicalType") == "decimal":
            node = _avro_decimal(schema, params, field_name)
        named[full] = named[full.rsplit(".", 1)[-1]] = node
        return node
    if t == "array":
        return ConnectField("array", semantic, params, False, field_name, items=from_avro(schema["items"], None,
                                                                                        named, namespace))
    if t == "map":
        return ConnectField("map", semantic, params, False, field_name, keys=ConnectField("string", optional=False),
                            values=from_avro(schema["values"], None, named, namespace))
    if isinstance(t, (Mapping, list)):  # {"type": {"type": ...}} nesting
        return from_avro(t, field_name, named, namespace)
    if t not in _AVRO_PRIMITIVES:
        return replace(from_avro(t, field_name, named, namespace), optional=False)
    logical = schema.get("logicalType")
    if logical == "decimal" or semantic == DECIMAL:
        return _avro_decimal(schema, params, field_name)
    ctype = schema.get("connect.type") if schema.get("connect.type") in ("int8", "int16") else _AVRO_PRIMITIVES[t]
    return ConnectField(ctype, semantic or _AVRO_LOGICAL.get(logical or ""), params, False, field_name)


def _fullname(schema: Mapping[str, Any], namespace: str) -> tuple[str, str]:
    name = str(schema.get("name", ""))
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    ns = schema.get("namespace", namespace) or ""
    return (f"{ns}.{name}" if ns else name), ns


def _avro_decimal(schema: Mapping[str, Any], params: dict[str, str], field_name: str | None) -> ConnectField:
    p = dict(params)
    p.setdefault("scale", str(schema.get("scale", 0)))
    if "connect.decimal.precision" not in p and "precision" in schema and int(schema["precision"]) <= MAX_PRECISION:
        p["connect.decimal.precision"] = str(schema["precision"])  # Connect writes 64 when it has no precision
    return ConnectField("bytes", DECIMAL, p, False, field_name)


# -------------------------------------------------------------------------------- ConnectField → Arrow

def arrow_type(f: ConnectField, variable_scale: tuple[int, int] = VARIABLE_SCALE_DECIMAL) -> pa.DataType:
    """The Arrow type of a Connect field (see the module docstring for the mapping)."""
    n = f.name
    if n == DECIMAL:
        return pa.decimal128(*_decimal_ps(f))
    if n == VARIABLE_SCALE:
        return pa.decimal128(*variable_scale)
    if n in _DATES:
        return pa.date32()
    if n in _TIME_FACTORS:
        return pa.int64()
    if n in _TIMESTAMP_FACTORS:
        return pa.timestamp("us")
    if n == ZONED_TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if n in _GEOMETRY:
        return GEOMETRY_TYPE
    if f.type in _PRIMITIVES:
        return _PRIMITIVES[f.type]
    if f.type == "array" and f.items is not None:
        return pa.list_(arrow_type(f.items, variable_scale))
    if f.type == "map" and f.keys is not None and f.values is not None:
        return pa.map_(arrow_type(f.keys, variable_scale), arrow_type(f.values, variable_scale))
    if f.type == "struct":
        return pa.struct([pa.field(c.field_name or f"f{i}", arrow_type(c, variable_scale), nullable=True)
                          for i, c in enumerate(f.fields)])
    raise DecodeError(f"unsupported Connect type {f.type!r} (name {n!r}) for field {f.field_name!r}")


def columns_of(struct: ConnectField, variable_scale: tuple[int, int] = VARIABLE_SCALE_DECIMAL) -> list[Column]:
    """The columns of a row struct (e.g. the envelope's ``after`` schema)."""
    return [Column(c.field_name or f"f{i}", arrow_type(c, variable_scale), c.optional, c.name)
            for i, c in enumerate(struct.fields)]


def _decimal_ps(f: ConnectField) -> tuple[int, int]:
    scale = int(f.parameters.get("scale", 0))
    precision = int(f.parameters.get("connect.decimal.precision", MAX_PRECISION))
    return min(max(precision, scale, 1), MAX_PRECISION), scale


# ------------------------------------------------------------------------------------------ converters

def identity(v: Any) -> Any:
    """The converter of types whose raw value is already Arrow-ready (decoders may skip calling it)."""
    return v


FLOAT_TYPES = ("float32", "float64", "float", "double")
JSON_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def json_float(v: Any) -> Any:
    """A float as Kafka's JsonConverter writes it: a number, or ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``."""
    if type(v) is str:
        try:
            return JSON_FLOATS[v]
        except KeyError:
            raise DecodeError(f"float value {v!r} is not a number") from None
    return v


def converter(f: ConnectField, variable_scale: tuple[int, int] = VARIABLE_SCALE_DECIMAL,
              json_text: bool = False) -> Converter:
    """Raw decoded value → Arrow-ready value for ``arrow_type(f)``. ``json_text``: values as Kafka's JsonConverter
    writes them (special floats as strings). Raises DecodeError/ValueError/TypeError."""
    n = f.name
    if json_text and f.type in FLOAT_TYPES:
        return json_float
    if n == DECIMAL:
        precision, scale = _decimal_ps(f)
        return _decimal_converter(precision, scale)
    if n == VARIABLE_SCALE:
        return _variable_scale_converter(*variable_scale)
    if n in _TIME_FACTORS:
        return _scaler(*_TIME_FACTORS[n])
    if n in _TIMESTAMP_FACTORS:
        return _scaler(*_TIMESTAMP_FACTORS[n])
    if n == ZONED_TIMESTAMP:
        return parse_zoned_timestamp
    if n in _GEOMETRY:
        return lambda v: {"wkb": to_bytes(v["wkb"]), "srid": v.get("srid")}
    if f.type == "bytes":
        return to_bytes
    if f.type == "array" and f.items is not None:
        item = converter(f.items, variable_scale, json_text)
        if item is identity:
            return identity
        return lambda v: [None if x is None else item(x) for x in v]
    if f.type == "map" and f.keys is not None and f.values is not None:
        kc, vc = converter(f.keys, variable_scale, json_text), converter(f.values, variable_scale, json_text)
        if kc is identity and vc is identity:
            return lambda v: v if isinstance(v, dict) else [tuple(p) for p in v]
        return lambda v: ({k: None if x is None else vc(x) for k, x in v.items()} if isinstance(v, dict)
                          else [(kc(k), None if x is None else vc(x)) for k, x in v])
    if f.type == "struct":
        convs = [(c.field_name, converter(c, variable_scale, json_text)) for c in f.fields]
        return lambda v: {name: (None if v.get(name) is None else conv(v[name])) for name, conv in convs}
    return identity


def to_bytes(v: Any) -> bytes:
    """bytes as decoded: Avro gives bytes, the JsonConverter gives base64 text."""
    if isinstance(v, str):
        return base64.b64decode(v, validate=True)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    raise TypeError(f"expected bytes or base64 text, got {type(v).__name__}")


_EXACT = Context(prec=200)


def fit_decimal(d: Decimal, precision: int, scale: int) -> Decimal:
    """``d`` with exactly ``scale`` fractional digits, or DecodeError if that loses digits or needs > precision."""
    if not d.is_finite():
        raise DecodeError(f"decimal value {d} is not finite")
    if d.as_tuple().exponent != -scale:
        q = d.quantize(Decimal(1).scaleb(-scale), context=_EXACT)
        if q != d:
            raise DecodeError(f"decimal value {d} has more than {scale} fractional digits")
        d = q
    if len(d.as_tuple().digits) > precision and d != 0:
        raise DecodeError(f"decimal value {d} does not fit decimal({precision},{scale})")
    return d


def _unscaled(v: Any) -> int:
    return int.from_bytes(to_bytes(v), "big", signed=True)


def _decimal_converter(precision: int, scale: int) -> Converter:
    limit = 10**precision

    def convert(v: Any) -> Decimal:
        if isinstance(v, Decimal):  # fastavro with logicalType decimal
            return fit_decimal(v, precision, scale)
        n = _unscaled(v)  # Avro bytes / JSON base64 of the big-endian two's-complement unscaled value
        if abs(n) >= limit:
            raise DecodeError(f"decimal value {n}e-{scale} does not fit decimal({precision},{scale})")
        return Decimal(f"{n}e-{scale}")

    return convert


def _variable_scale_converter(precision: int, target_scale: int) -> Converter:
    limit = 10**precision

    def convert(v: Any) -> Decimal:
        if isinstance(v, Decimal):
            return fit_decimal(v, precision, target_scale)
        scale, n = int(v["scale"]), _unscaled(v["value"])
        if scale > target_scale:
            n, rest = divmod(n, 10 ** (scale - target_scale))
            if rest:
                raise DecodeError(f"variable-scale decimal {n}e-{scale} has more than {target_scale} fractional "
                                  "digits (decimal128(38, 10) target)")
        else:
            n *= 10 ** (target_scale - scale)
        if abs(n) >= limit:
            raise DecodeError(f"variable-scale decimal does not fit decimal({precision},{target_scale})")
        return Decimal(f"{n}e-{target_scale}")

    return convert


def _scaler(mul: int, div: int) -> Converter:
    if mul == 1 and div == 1:
        return _checked_int
    if div == 1:
        def scale_up(v: Any) -> int:
            r = int(v) * mul
            if -INT64_MAX - 1 <= r <= INT64_MAX:
                return r
            raise DecodeError(f"temporal value {v} overflows int64 microseconds (infinity sentinel?)")
        return scale_up
    return lambda v: int(v) // div  # floor: exact for negative (pre-1970) values too


def _checked_int(v: Any) -> int:
    if type(v) is int:
        return v
    raise TypeError(f"expected an integer, got {type(v).__name__}")


_ZONED = re.compile(r"^([+-]?\d{4,})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d{1,9}))?)?"
                    r"(Z|[+-]\d\d(?::?\d\d(?::?\d\d)?)?)$")


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
# timestamptz ±infinity → the µs Debezium sends for timestamp ±infinity (PgJDBC's PGStatement.DATE_*_INFINITY)
ZONED_INFINITY = {"infinity": 9223372036825200000, "-infinity": -9223372036832400000}
_MICROSECOND = dt.timedelta(microseconds=1)


def parse_zoned_timestamp(v: str) -> int:
    """ISO-8601 instant with offset ("2025-01-30T08:00:00.123456789+01:00") → µs since epoch UTC (exact)."""
    try:  # fast path (C): truncates fractions beyond µs, exact timedelta arithmetic
        parsed = dt.datetime.fromisoformat(v)
        if parsed.tzinfo is not None:
            return (parsed - _EPOCH) // _MICROSECOND
    except (ValueError, TypeError):
        pass  # years outside 1..9999, or not a timestamp: the exact parser decides
    if v in ("infinity", "-infinity"):
        return ZONED_INFINITY[v]
    m = _ZONED.match(v) if isinstance(v, str) else None
    if m is None:
        raise DecodeError(f"not an ISO-8601 timestamp with offset: {str(v)[:40]!r}")
    y, mo, d, h, mi, s, frac, off = m.groups()
    seconds = days_from_civil(int(y), int(mo), int(d)) * 86400 + int(h) * 3600 + int(mi) * 60 + int(s or 0)
    if off != "Z":
        digits = off[1:].replace(":", "")
        sign = -1 if off[0] == "-" else 1
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60 + int(digits[4:6] or 0))
    micros = seconds * 1_000_000 + int((frac or "").ljust(6, "0")[:6])
    if not -INT64_MAX - 1 <= micros <= INT64_MAX:  # PostgreSQL's timestamptz reaches year 294276, int64 µs 294247
        raise DecodeError(f"timestamp {v!r} is outside the int64 microsecond range (years -290308..294247)")
    return micros


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date, any year (H. Hinnant's algorithm)."""
    if not (1 <= m <= 12 and 1 <= d <= 31):
        raise DecodeError(f"invalid date {y}-{m}-{d}")
    y -= m <= 2
    era = y // 400  # floor division (the C original truncates, hence its y - 399 for negative years)
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468
