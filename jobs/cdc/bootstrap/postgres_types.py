"""PostgreSQL column types → the Iceberg column the Debezium path creates for them, and how to read each over JDBC
so the values match what the Debezium decoders produce (pure).

The Debezium PostgreSQL connector's defaults (``decimal.handling.mode=precise``, ``time.precision.mode=adaptive``,
``binary.handling.mode=bytes``) turn a column into a Connect type, and ``cdc.decode.connect_types`` maps that to Arrow; the table
below is the composition, column by column (docs/types-and-evolution.md):

================================  ===========================  =========================================
PostgreSQL (``format_type``)      Debezium / Connect           Iceberg (Arrow)
================================  ===========================  =========================================
smallint, integer                 int16, int32                 int
bigint                            int64                        bigint
real / double precision           float32 / float64            float / double
boolean, bit(1)                   boolean                      boolean
text, varchar(n), char(n), name   string                       string
bytea                             bytes                        binary
numeric(p, s)  (p <= 38)          Decimal                      decimal(p, s)
numeric                           VariableScaleDecimal         decimal(38, 10)
money                             Decimal (scale 2)            decimal(38, 2)
date                              io.debezium.time.Date        date
time(p)                           Time / MicroTime             bigint (µs since midnight)
timestamp(p)                      Timestamp / MicroTimestamp   timestamp_ntz (wall clock)
timestamptz                       ZonedTimestamp               timestamp (UTC instant)
timetz                            ZonedTime                    string (UTC, ``HH:MM:SS[.f]Z``)
interval                          MicroDuration                bigint (µs, Debezium's arithmetic)
json, jsonb, uuid, xml, enums,    Json, Uuid, Xml, Enum,       string (the type's output text)
inet, cidr, macaddr(8), citext,   Ltree, string
ltree, int4/int8/num/date/ts
ranges
arrays of numbers, booleans, text array                        array<element>
================================  ===========================  =========================================

Refused with a message naming the column and why: ``tstzrange`` (Debezium's text is in the connector JVM's time
zone), ``hstore`` (Debezium's JSON lists the keys in Java ``HashMap`` order), arrays of other types (Debezium drops
``interval[]``, ``money[]``, ``name[]`` or sends them differently), geometry, ``bit(n > 1)``, ``numeric(p > 38)``
and anything else unknown: expose it through a view that casts it (``source_table`` may name a view when
``split_column`` is set).

Two of them are computed the way Debezium computes them, so the values match bit for bit: ``interval`` is
``MicroDuration.durationMicros`` in IEEE doubles (a month is 30.4375 days; the product is truncated, so some values
come out 1 µs below the exact count, as on the Debezium path); ``money`` goes through a double as the driver's
``PGmoney`` does, then to scale 2 with HALF_UP (``money.fraction.digits`` = 2).

**decimal.handling.mode.** ``bootstrap.decimal_handling_mode`` (``cdc.config.bootstrap``) says what the connector
does with ``numeric``/``decimal``/``money``, and the bootstrap does the same: ``precise`` (the default) as above;
``double``: Connect float64 → ``double`` (``BigDecimal.doubleValue``: PostgreSQL's ``::float8``, both correctly
rounded from the decimal text; ``NaN``/``±Infinity`` included); ``string``: Connect string → ``string``, Java's
``BigDecimal.toPlainString`` of the value at the column's scale (``12345678.91``, ``1.50``, money ``-1234.56``,
``0.0000001200``: never an exponent), ``NaN``/``Infinity``/``-Infinity`` as ``NAN``/``POSITIVE_INFINITY``/``NEGATIVE_INFINITY``. ``money`` in string mode
is the plain text of its value at scale 2 (``1000.00``: current Debezium versions parse money into a ``BigDecimal``;
older ones went through a double and sent ``Double.toString``, ``1000.0``: cast such a column in a view).

Each column is read with a PostgreSQL expression whose JDBC type Spark maps exactly (dates as day numbers,
timestamps as µs or ISO text, odd types as text) and converted to the target type with a Spark expression, so no
value passes through the JVM's or the session's time zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from cdc.common.errors import TerminalError
from cdc.common.sql import q
from cdc.iceberg.tables import spark_type

_INT_TYPES = {"smallint": pa.int32(), "integer": pa.int32(), "bigint": pa.int64()}
_SIMPLE = {**_INT_TYPES, "real": pa.float32(), "double precision": pa.float64(), "boolean": pa.bool_(),
           "bit(1)": pa.bool_(), "text": pa.string(), "name": pa.string(), "bytea": pa.binary(),
           "character varying": pa.string(), "character": pa.string(), "bpchar": pa.string()}
_AS_TEXT = {"json", "jsonb", "uuid", "xml", "inet", "cidr", "macaddr", "macaddr8", "citext", "ltree", "int4range",
            "int8range", "numrange", "daterange", "tsrange"}
_ARRAY_ELEMENTS = {"smallint", "integer", "bigint", "real", "double precision", "boolean", "text", "character varying",
                   "character", "bpchar"}  # the element types whose arrays Debezium sends as arrays of them
_REFUSED = {  # types with a Debezium representation SQL cannot reproduce exactly
    "tstzrange": "Debezium sends its text in the time zone of the connector's JVM, which the bootstrap cannot know",
    "hstore": "Debezium sends it as JSON with the keys in Java HashMap order (hstore.handling.mode=json), which the "
              "bootstrap cannot reproduce"}
MONEY = pa.decimal128(38, 2)  # Decimal with scale money.fraction.digits (2) and no precision: 38 (cdc.decode.connect_types)
_MAX_PRECISION = 38
VARIABLE_SCALE = pa.decimal128(38, 10)  # io.debezium.data.VariableScaleDecimal, as cdc.decode.connect_types maps it
DECIMAL_AS = {"double": pa.float64(), "string": pa.string()}  # decimal.handling.mode → what numeric columns arrive as


@dataclass(frozen=True)
class ColumnRead:
    """How one source column is read: ``select`` (PostgreSQL, aliased to the column) and ``convert`` (Spark SQL over
    the JDBC result, giving ``arrow_type``)."""

    name: str
    arrow_type: pa.DataType
    select: str
    convert: str


def quote_pg(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


quote_spark = q  # Spark SQL identifiers are quoted in one place (cdc.common.sql.q)


def base_type(pg_type: str) -> tuple[str, str]:
    """``character varying(20)`` → (``character varying``, ``(20)``); ``timestamp(3) without time zone`` →
    (``timestamp without time zone``, ``(3)``)."""
    m = re.match(r"^([a-z ]+?)\s*(\([^)]*\))?(\s+with(?:out)? time zone)?$", pg_type.strip())
    if not m:
        return pg_type.strip(), ""
    return (m.group(1) + (m.group(3) or "")).strip(), m.group(2) or ""


def arrow_type_of(pg_type: str, kind: str = "b", table: str = "", column: str = "",
                  decimal_mode: str = "precise") -> pa.DataType:
    """The Arrow type the Debezium path gives a column of this ``format_type`` (``kind``: pg_type.typtype, ``e`` for
    enums) under the connector's ``decimal.handling.mode``."""
    if pg_type.endswith("[]"):
        return pa.list_(arrow_type_of(pg_type[:-2], "b", table, column, decimal_mode))
    if kind == "e":
        return pa.string()
    base, mods = base_type(pg_type)
    if base in _REFUSED:
        raise unsupported(table, column, pg_type, _REFUSED[base])
    if pg_type in _SIMPLE:
        return _SIMPLE[pg_type]
    if base in ("character varying", "character", "bpchar") or base in _AS_TEXT or pg_type in _AS_TEXT:
        return pa.string()
    if base in ("numeric", "money") and decimal_mode in DECIMAL_AS:
        if decimal_mode == "string" and re.search(r",\s*-", mods):
            raise unsupported(table, column, pg_type, "Debezium's string of a negative-scale numeric is in scientific "
                                                      "notation (1.23E+4), which the bootstrap does not reproduce")
        return DECIMAL_AS[decimal_mode]
    if base == "numeric":
        if not mods:
            return VARIABLE_SCALE
        p, _, s = mods.strip("()").partition(",")
        precision, scale = int(p), int(s or 0)
        if precision > _MAX_PRECISION:
            raise unsupported(table, column, pg_type, f"precision above {_MAX_PRECISION} does not fit Iceberg")
        return pa.decimal128(precision, scale)
    if base == "money":
        return MONEY
    if base.startswith("interval"):  # interval, interval(p), interval day to second(p), ...
        return pa.int64()
    if base == "date":
        return pa.date32()
    if base == "time without time zone":
        return pa.int64()
    if base == "time with time zone":
        return pa.string()
    if base == "timestamp without time zone":
        return pa.timestamp("us")
    if base == "timestamp with time zone":
        return pa.timestamp("us", tz="UTC")
    raise unsupported(table, column, pg_type)


def unsupported(table: str, column: str, pg_type: str, why: str = "no mapping to the type the Debezium path "
                                                                    "produces") -> TerminalError:
    return TerminalError(f"bootstrap of {table}: column {column!r} has type {pg_type}: {why}; bootstrap from a view "
                         "that casts it (source_table, with split_column set), or load this table through Debezium's "
                         "own snapshot")


def column_read(name: str, pg_type: str, kind: str = "b", table: str = "", decimal_mode: str = "precise"
                ) -> ColumnRead:
    """The read plan of one column (see the module docstring)."""
    target = arrow_type_of(pg_type, kind, table, name, decimal_mode)
    col, out = quote_pg(name), quote_spark(name)
    base, _ = base_type(pg_type)
    if pg_type.endswith("[]"):
        if base_type(pg_type[:-2])[0] not in _ARRAY_ELEMENTS:
            raise unsupported(table, name, pg_type, "only arrays of numbers, booleans and text are read over JDBC "
                                                    "(Debezium drops or reshapes arrays of other types)")
        return ColumnRead(name, target, f"{col} AS {col}", f"CAST({out} AS {_spark_sql(target)}) AS {out}")
    if kind == "e" or base in _AS_TEXT or pg_type in _AS_TEXT:  # the output function's text, as Debezium gets it
        # (not ``::text``: inet's text cast adds the netmask, 192.168.0.1/32, where its output is 192.168.0.1)
        return ColumnRead(name, target, f"CASE WHEN {col} IS NULL THEN NULL ELSE format('%s', {col}) END AS {col}",
                          out)
    if base.startswith("interval"):
        return ColumnRead(name, target, f"{interval_micros(col)} AS {col}", f"{java_long(out)} AS {out}")
    if base in ("numeric", "money") and decimal_mode == "double":  # BigDecimal.doubleValue (NaN, ±Infinity too)
        value = f"{col}::numeric" if base == "money" else col
        return ColumnRead(name, target, f"{value}::float8 AS {col}", f"CAST({out} AS DOUBLE) AS {out}")
    if base in ("numeric", "money") and decimal_mode == "string":  # the value's text (BigDecimal.toPlainString)
        value = f"{col}::numeric" if base == "money" else col
        return ColumnRead(name, target, f"{value}::text AS {col}", f"{java_decimal_text(out)} AS {out}")
    if base == "money":  # PGmoney's double, then BigDecimal.valueOf(double).setScale(2, HALF_UP): Spark's cast
        return ColumnRead(name, target, f"{col}::numeric::float8 AS {col}", f"CAST({out} AS DECIMAL(38,2)) AS {out}")
    if base == "numeric" and target == VARIABLE_SCALE and "(" not in pg_type:
        return ColumnRead(name, target, f"{col}::text AS {col}", f"CAST({out} AS DECIMAL(38,10)) AS {out}")
    if base == "date":
        return ColumnRead(name, target, f"({col} - DATE '1970-01-01') AS {col}", f"date_from_unix_date({out}) AS {out}")
    if base == "time without time zone":
        return ColumnRead(name, target, f"(EXTRACT(EPOCH FROM {col}) * 1000000)::bigint AS {col}", out)
    if base == "time with time zone":
        utc = f"to_char(('2000-01-01'::date + {col}) AT TIME ZONE 'UTC', 'HH24:MI:SS.US')"
        return ColumnRead(name, target, f"regexp_replace({utc}, '\\.?0+$', '') || 'Z' AS {col}", out)
    if base == "timestamp without time zone":
        return ColumnRead(name, target, f"to_char({col}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US') AS {col}",
                          f"CAST({out} AS TIMESTAMP_NTZ) AS {out}")
    if base == "timestamp with time zone":
        return ColumnRead(name, target, f"(EXTRACT(EPOCH FROM {col}) * 1000000)::bigint AS {col}",
                          f"timestamp_micros({out}) AS {out}")
    return ColumnRead(name, target, f"{col} AS {col}", f"CAST({out} AS {_spark_sql(target)}) AS {out}")


def interval_micros(col: str) -> str:
    """PostgreSQL float8 expression of Debezium's ``MicroDuration.durationMicros`` (before the ``(long)`` cast) over
    the fields pgjdbc's ``PGInterval`` parses from the interval's text: ``((((y*12+m) * 30.4375 + d) * 24 + h) * 60
    + min) * 60 + (whole seconds + µs / 1e6)``, then * 1e6, each step an IEEE double operation as in Java. The
    fields come from ``EXTRACT`` (same signs as PGInterval's parse; seconds rounded to µs, exact on PostgreSQL
    13's double ``EXTRACT`` too)."""
    f = {u: f"EXTRACT({u} FROM {col})" for u in ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")}
    micros = f"round({f['SECOND']}::numeric * 1000000)"
    whole = f"trunc({micros} / 1000000)"
    seconds = f"({whole}::float8 + ({micros} - {whole} * 1000000)::float8 / 1000000::float8)"
    days = f"(({f['YEAR']} * 12 + {f['MONTH']})::float8 * 30.4375::float8 + {f['DAY']}::float8)"
    return (f"(((({days} * 24::float8 + {f['HOUR']}::float8) * 60::float8 + {f['MINUTE']}::float8) * 60::float8"
            f" + {seconds}) * 1000000::float8)")


def java_decimal_text(col: str) -> str:
    """Spark SQL: Java's ``BigDecimal.toPlainString`` of the decimal text ``col`` (``-0.00000012``: digits, an
    optional point and fraction, no exponent), as Debezium's ``string`` mode sends it (3.6.1: ``SpecialValueDecimal``,
    for PostgreSQL and MySQL alike; the real chain shows it, tests/scenarios/test_debezium_postgres_types.py): the
    text itself, never an exponent (``0.0000001200``); zero has no sign; PostgreSQL's ``NaN``/``Infinity``/
    ``-Infinity`` become Debezium's ``NAN``/``POSITIVE_INFINITY``/``NEGATIVE_INFINITY``."""
    plain = f"regexp_replace({col}, '^-', '')"
    unscaled = f"coalesce(nullif(regexp_replace(regexp_replace({plain}, '[.]', ''), '^0+', ''), ''), '0')"
    sign = f"CASE WHEN {col} LIKE '-%' AND {unscaled} <> '0' THEN '-' ELSE '' END"
    return (f"CASE WHEN {col} IS NULL THEN NULL WHEN {col} = 'NaN' THEN 'NAN' "
            f"WHEN {col} = 'Infinity' THEN 'POSITIVE_INFINITY' WHEN {col} = '-Infinity' THEN 'NEGATIVE_INFINITY' "
            f"ELSE concat({sign}, {plain}) END")


def java_long(col: str) -> str:
    """Spark SQL: Java's ``(long)`` of a double: truncated toward zero, saturating at the bigint range."""
    return (f"CASE WHEN {col} >= 9.223372036854775807E18 THEN 9223372036854775807L "
            f"WHEN {col} <= -9.223372036854775808E18 THEN -9223372036854775807L - 1 ELSE CAST({col} AS BIGINT) END")


def _spark_sql(t: pa.DataType) -> str:
    return spark_type(t).simpleString()


spark_sql = _spark_sql  # Spark SQL type name of an Arrow type (also cdc.bootstrap.mysql)


def lsn_to_int(text: str) -> int:
    """``16/B374D848`` (pg_lsn text) → 0x16B374D848, the number Debezium puts in ``source.lsn``."""
    hi, _, lo = text.strip().partition("/")
    if not lo:
        raise ValueError(f"not an LSN: {text!r}")
    return (int(hi, 16) << 32) | int(lo, 16)
