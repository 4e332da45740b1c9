"""Every PostgreSQL type Debezium's PostgreSQL connector emits, on the real chain (PostgreSQL 15 → Debezium 3.6.1 in a
Kafka Connect worker → Kafka → the job → Iceberg), in both converters: Kafka's JsonConverter with schemas and
Confluent's AvroConverter through the schema registry. The oracle is ``SELECT *`` of the source table, each value
mapped by the documented mapping (docs/types-and-evolution.md, "Type mapping" and "Debezium's PostgreSQL values");
where that mapping differs from the value PostgreSQL prints, the test says so next to the column."""

from __future__ import annotations

import datetime as dt
import re
import struct
from decimal import Decimal

import pytest

from tests.scenarios.debezium_chain import CONVERTERS, Source, connect_worker, converter_registry

pytestmark = pytest.mark.integration

EPOCH = dt.datetime(1970, 1, 1)
# Debezium's ±infinity values (docs/types-and-evolution.md): timestamps are PgJDBC's PGStatement.DATE_POSITIVE/
# NEGATIVE_INFINITY (µs; the ms of timestamp(0-3) ×1000 give the same), dates PostgreSQL's own day numbers INT_MAX/
# INT_MIN moved from 2000-01-01 to 1970-01-01 in int32 arithmetic (so +infinity < -infinity).
TS_INFINITY = {"infinity": 9223372036825200000, "-infinity": -9223372036832400000}
DATE_INFINITY = {"infinity": -2147472692, "-infinity": -2147472691}


@pytest.fixture(scope="module")
def connect(broker):
    yield from connect_worker(broker)


_PG_TIMESTAMP = re.compile(r"(\d{4,})-(\d\d)-(\d\d)(?: (\d\d):(\d\d):(\d\d)(?:\.(\d+))?)?(?:[+-]00)?( BC)?")


def unix_days(text: str) -> int:
    """A ``date`` as days since 1970, any year (BC: year 1 BC is year 0, proleptic Gregorian, as PostgreSQL counts)."""
    return DATE_INFINITY[text] if text in DATE_INFINITY else unix_micros(text) // 86_400_000_000


def unix_micros(text: str) -> int:
    """A ``timestamp``/``timestamptz`` (read in UTC) as µs since 1970 (the target's value, read as unix_micros)."""
    if text in TS_INFINITY:
        return TS_INFINITY[text]
    m = _PG_TIMESTAMP.fullmatch(text)
    assert m, text
    y, mo, d, h, mi, sec, frac, bc = m.groups()
    year = 1 - int(y) if bc else int(y)
    seconds = civil_days(year, int(mo), int(d)) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + int(sec or 0)
    return seconds * 1_000_000 + int((frac or "").ljust(6, "0"))


def civil_days(y: int, m: int, d: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date: Python's date arithmetic, shifted by 400-year cycles
    (146097 days each) into the years it can hold."""
    cycles = (y - 2000) // 400
    return (dt.date(y - 400 * cycles, m, d) - EPOCH.date()).days + 146097 * cycles


def micros_of_day(text: str) -> int:
    """``time``: µs since midnight (``bigint``; Spark has no TIME type); ``24:00:00`` is 86,400,000,000."""
    h, m, s = text.split(":")
    whole, _, frac = s.partition(".")
    return ((int(h) * 60 + int(m)) * 60 + int(whole)) * 1_000_000 + int(frac.ljust(6, "0"))


def zoned_time(text: str) -> str:
    """``timetz``: Debezium's ZonedTime, kept as the string it sends: the time in UTC, ``HH:MM:SS[.fraction]Z``
    (fraction without trailing zeros)."""
    m = re.fullmatch(r"(\d\d):(\d\d):(\d\d)(?:\.(\d+))?([+-]\d\d)(?::(\d\d))?", text)
    assert m, text
    h, mi, s, frac, oh, om = m.groups()
    sign = -1 if oh[0] == "-" else 1
    seconds = int(h) * 3600 + int(mi) * 60 + int(s) - sign * (abs(int(oh)) * 3600 + int(om or 0) * 60)
    seconds %= 86400
    out = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    frac = (frac or "").rstrip("0")
    return f"{out}.{frac}Z" if frac else f"{out}Z"


def money(text: str) -> Decimal:
    """``money`` (lc_monetary C: ``-$1,234.50``) → ``decimal(38,2)``."""
    return Decimal(re.sub(r"[$,]", "", text))


def micro_duration(text: str) -> int:
    """``interval`` → Debezium's MicroDuration (``bigint`` µs): a month is 30.4375 days, in IEEE doubles,
    truncated (docs/types-and-evolution.md); ``text`` is PostgreSQL's ``IntervalStyle=postgres`` output."""
    parts = {"year": 0, "mon": 0, "day": 0}
    for n, unit in re.findall(r"(-?\d+) (year|mon|day)s?", text):
        parts[unit] = int(n)
    hours = minutes = 0
    seconds = 0.0
    t = re.search(r"(-?)(\d+):(\d\d):(\d\d(?:\.\d+)?)", text)
    if t:
        sign = -1 if t.group(1) else 1
        hours, minutes, seconds = sign * int(t.group(2)), sign * int(t.group(3)), sign * float(t.group(4))
    days = (parts["year"] * 12 + parts["mon"]) * 30.4375 + parts["day"]
    return int(((((days * 24 + hours) * 60) + minutes) * 60 + seconds) * 1e6)


def float32(v: float) -> float:
    """``real`` → Iceberg ``float``: the float32 value (psycopg reads PostgreSQL's text into a double)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def no_nan(v: Decimal) -> Decimal | None:
    """``numeric`` ``NaN`` with ``decimal.handling.mode=precise``: Debezium sends NULL (a Connect Decimal has no
    NaN), so the target holds NULL where ``SELECT *`` shows NaN (documented)."""
    return None if v.is_nan() else v


# column → (PostgreSQL type, documented Iceberg type as Spark prints it)
COLUMNS = {
    "n_num": ("numeric(12,3)", "decimal(12,3)"), "n_free": ("numeric", "decimal(38,10)"),
    "d_dbl": ("double precision", "double"), "r_real": ("real", "float"), "m_money": ("money", "decimal(38,2)"),
    "i_intv": ("interval", "bigint"), "s_small": ("smallint", "int"), "b_big": ("bigint", "bigint"),
    "bo": ("boolean", "boolean"), "a_int": ("int[]", "array<int>"), "a_text": ("text[]", "array<string>"),
    "j": ("json", "string"), "jb": ("jsonb", "string"), "u": ("uuid", "string"), "by": ("bytea", "binary"),
    "ip": ("inet", "string"), "net": ("cidr", "string"), "t": ("time", "bigint"), "t3": ("time(3)", "bigint"),
    "tz": ("timetz", "string"), "dt": ("date", "date"), "ts": ("timestamp", "timestamp_ntz"),
    "ts3": ("timestamp(3)", "timestamp_ntz"), "tstz": ("timestamptz", "timestamp"), "vc": ("varchar(10)", "string"),
    "ch": ("char(5)", "string"), "x": ("xml", "string"), "e": ("mood", "string"),
}
EXPECT = {"n_num": no_nan, "r_real": float32, "n_free": no_nan, "m_money": money, "i_intv": micro_duration, "t": micros_of_day,
          "t3": micros_of_day, "tz": zoned_time, "dt": unix_days, "ts": unix_micros, "ts3": unix_micros,
          "tstz": unix_micros}
TEXT_TYPES = ("json", "jsonb", "interval", "money", "inet", "cidr", "uuid", "xml", "date", "timestamp",
              "timestamptz", "time", "timetz")
# Dates and timestamps are compared as day / µs numbers: Python's datetime cannot hold year 294247 (infinity).
LAKE_EXPRS = {"dt": "unix_date(dt)", "ts": "unix_micros(CAST(ts AS TIMESTAMP))",
              "ts3": "unix_micros(CAST(ts3 AS TIMESTAMP))", "tstz": "unix_micros(tstz)"}

ROWS = [  # one row per tuple, columns in COLUMNS order
    ("123456789.125", "1.5", "1.25", "1.5", "12.34", "'1 year 2 months 3 days 04:05:06.789'", "-32768",
     "9223372036854775807", "true", "'{1,2,NULL}'", "'{a,\"b c\",NULL}'", "'{\"a\": 1,  \"z\": [true]}'",
     "'{\"b\": [1, 2], \"a\": null}'", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'\\x00ff10'", "'192.168.0.1'",
     "'10.0.0.0/8'", "'04:05:06.789012'", "'23:59:59.999'", "'04:05:06.5+02'", "'2024-02-29'",
     "'2024-02-29 12:34:56.123456'", "'2024-02-29 12:34:56.123'", "'2024-02-29 12:34:56.123456+02'", "'abc'", "'ab'",
     "'<a>1</a>'", "'ok'"),
    ("'NaN'", "'NaN'", "'Infinity'", "'-Infinity'", "-0.01", "'-1 day -00:00:01'", "0", "-9223372036854775808",
     "false", "'{}'", "'{}'", "'null'", "'[]'", "'00000000-0000-0000-0000-000000000000'", "''", "'::1'",
     "'2001:db8::/32'", "'00:00:00'", "'00:00:00'", "'00:00:00+00'", "'0001-01-01'", "'0001-01-01 00:00:00'",
     "'0001-01-01 00:00:00'", "'0001-01-01 00:00:00+00'", "''", "''", "'<b/>'", "'sad'"),
    ("-0.001", "123456789012345678901234.0123456789", "'NaN'", "'NaN'", "92233720368547758.07", "'100 hours'", "1",
     "1", "NULL", "'{NULL}'", "'{\"\"}'", "'\"s\"'", "'3.5'", "NULL", "'\\x'", "'fe80::1/64'", "'192.168.1.0/24'",
     "'23:59:59.999999'", "'12:00:00.001'", "'23:59:59.999999-11'", "'9999-12-31'", "'9999-12-31 23:59:59.999999'",
     "'9999-12-31 23:59:59.999'", "'9999-12-31 23:59:59.999999+00'", "'éàü✓'", "'ü'", "NULL", "'happy'"),
    ("0", "-0.0000000001", "-0.0", "1e-38", "-92233720368547758.08", "'-3 years 1 mon'", "32767", "0", "true",
     "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "'24:00:00'", "NULL", "'00:00:00.000001+14'",
     "'infinity'", "'infinity'", "'-infinity'", "'infinity'", "NULL", "NULL", "NULL", "NULL"),
    ("NULL",) * 17 + ("NULL", "NULL", "NULL", "'-infinity'", "'-infinity'", "'infinity'", "'-infinity'",
                      "NULL", "NULL", "NULL", "NULL"),
    ("NULL",) * 20 + ("'4713-11-24 BC'", "'0044-03-15 12:00:00.5 BC'", "'0001-12-31 23:59:59.999 BC'",
                      "'0044-03-15 12:00:00.000001+00 BC'", "NULL", "NULL", "NULL", "NULL"),
    ("NULL",) * 20 + ("'5874897-12-31'", "'12345-06-07 08:09:10.123456'", "'99999-12-31 23:59:59.999'",
                      "'12345-06-07 08:09:10.123456+00'", "NULL", "NULL", "NULL", "NULL"),
]


# A second table: the types Debezium sends as strings, Bits, a Point struct, and arrays of more element types.
MORE = {  # column → (PostgreSQL type, documented Iceberg type)
    "mac": ("macaddr", "string"), "mac8": ("macaddr8", "string"), "r4": ("int4range", "string"),
    "r8": ("int8range", "string"), "rn": ("numrange", "string"), "rts": ("tsrange", "string"),
    "rd": ("daterange", "string"), "b1": ("bit(1)", "boolean"), "b5": ("bit(5)", "binary"), "vb": ("varbit", "binary"),
    "pt": ("point", "struct<wkb:binary,srid:int>"), "tv": ("tsvector", "string"), "nm": ("name", "string"),
    "a_small": ("smallint[]", "array<int>"), "a_big": ("bigint[]", "array<bigint>"),
    "a_dbl": ("double precision[]", "array<double>"), "a_bool": ("boolean[]", "array<boolean>"),
    "a_num": ("numeric[]", "array<decimal(38,10)>"), "a_uuid": ("uuid[]", "array<string>"),
    "a_date": ("date[]", "array<date>"), "a_ts": ("timestamp[]", "array<timestamp_ntz>"),
    "a_vc": ("varchar(5)[]", "array<string>"), "a_json": ("jsonb[]", "array<string>"), "a_ch": ("char(3)[]", "array<string>"),
}
MORE_ROWS = [
    ("'08:00:2b:01:02:03'", "'08:00:2b:01:02:03:04:05'", "'[1,5)'", "'(,10]'", "'[1.5,2.25)'",
     "'[2024-01-01 00:00,2024-02-01 00:00)'", "'[2024-01-01,2024-02-01)'", "B'1'", "B'10110'", "B'1101'",
     "'(1.5,-2.25)'", "'a fat cat'", "'nm'", "'{1,-2}'", "'{9223372036854775807}'", "'{1.5,NaN,-Infinity}'",
     "'{true,false,NULL}'", "'{1.5,2.25,NULL}'", "'{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'", "'{2024-02-29,0001-01-01}'",
     "'{\"2024-02-29 12:34:56.5\"}'", "'{ab,cd}'", "ARRAY['{\"a\":1}'::jsonb, '[]']", "'{x,yz}'"),
    ("'ff:ff:ff:ff:ff:ff'", "NULL", "'empty'", "'[5,)'", "'(-1,1]'", "NULL", "NULL", "B'0'", "B'00001'", "B''",
     "'(-0,1e300)'", "''", "'名前'", "'{}'", "'{NULL}'", "'{}'", "'{}'", "'{}'", "'{}'", "'{}'", "'{}'", "'{\"\"}'",
     "'{}'", "'{\"\"}'"),
]


def wkb_point(text: str) -> tuple[bytes, None]:
    """``point`` → Debezium's Point struct as ``struct<wkb, srid>``: the WKB of the point (x/y dropped), no SRID."""
    x, y = (float(c) for c in text.strip("()").split(","))
    return struct.pack("<bIdd", 1, 1, x, y), None


def bits(text: str) -> bytes:
    """``bit(n)``/``varbit`` (n > 1) → Debezium's Bits: the bit string's value as little-endian bytes."""
    return int(text, 2).to_bytes((len(text) + 7) // 8, "little") if text else b""


MORE_EXPECT = {"pt": wkb_point, "b5": bits, "vb": bits, "b1": lambda v: v == "1"}
MORE_TEXT = ("macaddr", "macaddr8", "int4range", "int8range", "numrange", "tsrange", "daterange", "bit", "varbit",
             "point", "tsvector", "jsonb", "uuid")


def insert(src: Source, *rows: int) -> None:
    src.sql("INSERT INTO types VALUES " + ", ".join(f"({i}, {', '.join(ROWS[i - 1])})" for i in rows))


@pytest.mark.parametrize("converter", CONVERTERS)
def test_every_postgres_type_snapshot_and_streamed_equals_select_star(request, postgres, broker, connect, spark,
                                                                      warehouse, converter):
    """One table with a column of every type (values at the types' ends: NaN, ±Infinity, year 1 and 9999, date and
    timestamp ±infinity, 24:00:00, the smallest and largest integers and money amounts, empty arrays and strings):
    rows read by the initial snapshot and rows streamed, then updates and a delete, land exactly as the documented
    mapping says; nothing is a dead letter."""
    more = ", ".join(f"{c} {t}" for c, (t, _) in MORE.items())
    src = Source(postgres, broker, connect, spark, warehouse,
                 {"types": "id int PRIMARY KEY", "more": f"id int PRIMARY KEY, {more}"},
                 registry=converter_registry(request, converter))
    src.sql("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    for name, (pg_type, _) in COLUMNS.items():
        src.sql(f"ALTER TABLE types ADD COLUMN {name} {pg_type}")
    insert(src, 1, 2)
    src.sql(f"INSERT INTO more VALUES (1, {', '.join(MORE_ROWS[0])})")
    src.start()
    try:
        insert(src, 3, 4, 5, 6, 7)
        src.sql(f"INSERT INTO more VALUES (2, {', '.join(MORE_ROWS[0])}), (3, {', '.join(MORE_ROWS[1])}), "
                f"(4, {', '.join(['NULL'] * len(MORE))})")
        src.ingest_clean()
        for table, columns in (("types", COLUMNS), ("more", MORE)):
            types = src.lake_types(table)
            assert {c: types[c] for c in ("id", *columns)} == {"id": "int", **{c: t for c, (_, t) in columns.items()}}
        expected = src.source_rows("types", EXPECT, TEXT_TYPES)
        assert src.lake_rows("types", LAKE_EXPRS) == expected
        assert expected[2][0] is None and expected[3][2] == "NaN"  # the NaN numeric is NULL, the NaN double NaN
        expected = src.source_rows("more", MORE_EXPECT, MORE_TEXT)
        nm = list(MORE).index("nm")
        assert expected[2][nm] == "nm" and expected[3][nm] == "名前"
        for key in (2, 3):  # a `name` value streamed through pgoutput: Debezium 3.6.1 sends NULL (documented)
            expected[key] = expected[key][:nm] + (None,) + expected[key][nm + 1:]
        assert src.lake_rows("more") == expected

        # streamed updates move values between rows (every column's update path), and a delete
        cols = ", ".join(COLUMNS)
        src.sql(f"UPDATE types SET ({cols}) = (SELECT {cols} FROM types WHERE id = 1) WHERE id = 5")
        src.sql(f"UPDATE types SET ({cols}) = (SELECT {cols} FROM types WHERE id = 4) WHERE id = 1")
        src.sql("DELETE FROM types WHERE id = 3")
        src.ingest_clean()
        assert src.lake_rows("types", LAKE_EXPRS) == src.source_rows("types", EXPECT, TEXT_TYPES)
    finally:
        src.stop()


DECIMAL_TABLE = "id int PRIMARY KEY, n numeric(12,3), f numeric, m money, s numeric(20,10)"
DECIMAL_ROWS = ["(1, 123456789.125, 1.5, 12.34, 0.00000012)", "(2, -0.001, 'NaN', -0.01, -0.0000001)",
                "(3, 0, 0.0000001, 0, 0)", "(4, 'NaN', 'Infinity', 92233720368547758.07, 'NaN')",
                "(5, NULL, '-Infinity', -92233720368547758.08, 1234567890.0123456789)",
                "(6, 99999.5, 123456789012345678901234.0123456789, 1000, 0.000001)",
                "(7, NULL, 0.0000000, NULL, -0.00000012)"]
JAVA_SPECIALS = {"NaN": "NAN", "Infinity": "POSITIVE_INFINITY", "-Infinity": "NEGATIVE_INFINITY"}


def as_double(text: str) -> float:
    """``decimal.handling.mode=double``: the value correctly rounded to a double (``BigDecimal.doubleValue``)."""
    return float(Decimal(re.sub(r"[$,]", "", text)))


def as_string(text: str) -> str:
    """``decimal.handling.mode=string``: Java's ``BigDecimal.toPlainString`` at the column's scale (Debezium 3.6.1
    never sends an exponent: ``0.0000001200``, not ``1.200E-7``), which is PostgreSQL's own text; NaN/±Infinity
    as Debezium spells them."""
    return JAVA_SPECIALS.get(text) or re.sub(r"[$,]", "", text)


@pytest.mark.parametrize("converter", CONVERTERS)
def test_decimal_handling_modes_string_and_double(request, postgres, broker, connect, spark, warehouse, converter):
    """``decimal.handling.mode=string`` and ``double`` (``precise`` is the test above): ``numeric(p,s)``, ``numeric``
    and ``money`` become ``string`` / ``double`` columns holding what the mode sends (NaN and ±Infinity kept, unlike
    ``precise``), snapshot and streamed rows alike."""
    registry = converter_registry(request, converter)
    sources = {mode: Source(postgres, broker, connect, spark, warehouse, {"amounts": DECIMAL_TABLE},
                            registry=registry, **{"decimal.handling.mode": mode}) for mode in ("string", "double")}
    try:
        for src in sources.values():
            src.sql("INSERT INTO amounts VALUES " + ", ".join(DECIMAL_ROWS[:3]))
            src.start()
        for src in sources.values():
            src.sql("INSERT INTO amounts VALUES " + ", ".join(DECIMAL_ROWS[3:]))
            src.sql("UPDATE amounts SET n = n + 1 WHERE id = 1")
            src.ingest_clean()
        for mode, convert, spark_type in (("string", as_string, "string"), ("double", as_double, "double")):
            src = sources[mode]
            types = src.lake_types("amounts")
            assert [types[c] for c in "nfms"] == [spark_type] * 4, (mode, types)
            expected = src.source_rows("amounts", dict.fromkeys("nfms", convert), ("numeric", "money"))
            assert src.lake_rows("amounts") == expected, mode
        assert sources["string"].lake_rows("amounts")[3] == ("0.000", "0.0000001", "0.00", "0.0000000000")
        assert sources["double"].lake_rows("amounts")[4][:2] == ("NaN", float("inf"))
    finally:
        for src in sources.values():
            src.stop()


@pytest.mark.parametrize("converter", CONVERTERS)
def test_a_value_the_mapping_cannot_hold_is_a_dead_letter_naming_the_column(request, postgres, broker, connect,
                                                                            spark, warehouse, converter):
    """Values the documented mapping cannot hold: a ``numeric`` (no scale: ``decimal(38,10)``) with 11 fractional
    digits (never rounded), and PostgreSQL's last ``timestamptz`` (year 294276, beyond int64 µs). Each row is a
    dead letter whose error names the column and why, also as the newest record of the table's first batch; every
    other row lands and the table equals ``SELECT *`` without them; a later update of those rows repairs them."""
    src = Source(postgres, broker, connect, spark, warehouse,
                 {"measures": "id int PRIMARY KEY, v numeric, at timestamptz"},
                 registry=converter_registry(request, converter),
                 table_settings={"measures": {"max_dead_letter_ratio": 0.5}})  # 2 of 5 records
    src.sql("INSERT INTO measures VALUES (1, 1.5, '2024-01-01 00:00+00'), (2, -0.0000000001, NULL)")
    src.start()
    try:
        src.sql("INSERT INTO measures VALUES (5, 1, '294276-12-31 23:59:59.999999+00')")
        src.sql("INSERT INTO measures VALUES (3, 2.25, NULL), (4, 1.00000000001, NULL)")  # 4: the newest record
        summary = src.ingest()
        [table] = summary["tables"]
        assert table["status"] == "committed" and table["dead_letters"] == 2, table
        errors = sorted(src.dead_letter_errors(), key=lambda e: "'at'" in e)
        assert "'v'" in errors[0] and "fractional digits" in errors[0], errors
        assert "'at'" in errors[1] and "outside the int64 microsecond range" in errors[1], errors
        lake, source = {"at": "unix_micros(at)"}, ({"at": unix_micros}, ("timestamptz",))  # as µs: year 294276
        expected = src.source_rows("measures", *source)
        assert src.lake_rows("measures", lake) == {k: v for k, v in expected.items() if k not in (4, 5)}
        src.sql("UPDATE measures SET v = 4 WHERE id = 4")
        src.sql("UPDATE measures SET at = '294247-01-01 00:00+00' WHERE id = 5")  # fits
        [table] = src.ingest()["tables"]
        assert table["status"] == "committed" and table["dead_letters"] == 0, table
        assert src.lake_rows("measures", lake) == src.source_rows("measures", *source)
    finally:
        src.stop()


MODES_TABLE = ("id int PRIMARY KEY, t time, ts timestamp, ts3 timestamp(3), tstz timestamptz, d date, i interval, "
               "b bytea, h hstore, lt ltree, ci citext")
MODES_ROWS = ["'04:05:06.789012', '2024-02-29 12:34:56.123456', '1960-01-01 00:00:00.001', "
              "'2024-02-29 12:34:56.123456+02', '1900-03-01', '1 year 2 months 3 days 04:05:06.789', '\\x00ff10', "
              "'a=>1, b=>NULL, \"c d\"=>\"x\"', 'top.sci.astro', 'MiXeD'",
              "'23:59:59.999999', '1969-12-31 23:59:59.999999', '0001-01-01 00:00:00', "
              "'1969-12-31 23:59:59.999999+00', '0001-01-01', '-1 day -00:00:01.5', '', '', 'a', ''"]


def to_millis(micros: int) -> int:
    """``time.precision.mode=connect``: Connect Time/Timestamp carry milliseconds; Debezium floors the µs."""
    return micros // 1000 * 1000


def iso_interval(text: str) -> str:
    """``interval.handling.mode=string``: Debezium's Interval text ``P<y>Y<m>M<d>DT<h>H<m>M<s>S`` of the fields
    PostgreSQL prints (signs per field, seconds with their fraction)."""
    parts = {"year": 0, "mon": 0, "day": 0}
    for n, unit in re.findall(r"(-?\d+) (year|mon|day)s?", text):
        parts[unit] = int(n)
    sign, h, mi, s = re.search(r"(-?)(\d+):(\d\d):(\d\d(?:\.\d+)?)", text).groups()
    seconds = Decimal(sign + s).normalize()
    return (f"P{parts['year']}Y{parts['mon']}M{parts['day']}DT{int(sign + h)}H{int(sign + mi)}M"
            f"{seconds:f}S")


def hstore_map(text: str) -> dict[str, str | None]:
    """``hstore.handling.mode=map``: ``map<string,string>`` of the pairs (NULL values kept)."""
    pairs = re.findall(r'"((?:[^"\\]|\\.)*)"=>(NULL|"(?:[^"\\]|\\.)*")', text)
    return {k: None if v == "NULL" else v[1:-1] for k, v in pairs}


@pytest.mark.parametrize("converter", CONVERTERS)
def test_connector_modes_connect_time_string_interval_hex_binary_and_hstore_map(request, postgres, broker, connect,
                                                                               spark, warehouse, converter):
    """Other connector settings (``time.precision.mode=connect``, ``interval.handling.mode=string``,
    ``binary.handling.mode=hex``, ``hstore.handling.mode=map``) and extension types (hstore, ltree, citext): Connect
    Time/Timestamp/Date (milliseconds: the µs are gone at the source), the ISO interval text, hex text, a
    ``map<string,string>``; snapshot and streamed rows equal ``SELECT *`` by that mapping."""
    src = Source(postgres, broker, connect, spark, warehouse, {"modes": "id int PRIMARY KEY"},
                 registry=converter_registry(request, converter),
                 **{"time.precision.mode": "connect", "interval.handling.mode": "string",
                    "binary.handling.mode": "hex", "hstore.handling.mode": "map"})
    for extension in ("hstore", "ltree", "citext"):
        src.sql(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    for column in MODES_TABLE.split(", ")[1:]:
        src.sql(f"ALTER TABLE modes ADD COLUMN {column}")
    src.sql(f"INSERT INTO modes VALUES (1, {MODES_ROWS[0]})")
    src.start()
    try:
        src.sql(f"INSERT INTO modes VALUES (2, {MODES_ROWS[0]}), (3, {MODES_ROWS[1]}), "
                f"(4, {', '.join(['NULL'] * 10)})")
        src.ingest_clean()
        types = src.lake_types("modes")
        assert [types[c] for c in ("t", "ts", "ts3", "tstz", "d", "i", "b", "h", "lt", "ci")] == [
            "bigint", "timestamp_ntz", "timestamp_ntz", "timestamp", "date", "string", "string", "map<string,string>",
            "string", "string"]
        lake = {c: f"unix_micros(CAST({c} AS TIMESTAMP))" for c in ("ts", "ts3")} | {"tstz": "unix_micros(tstz)"}
        expect = {"t": lambda v: to_millis(micros_of_day(v)), "ts": lambda v: to_millis(unix_micros(v)),
                  "ts3": lambda v: to_millis(unix_micros(v)), "tstz": unix_micros, "i": iso_interval,
                  "b": bytes.hex, "h": hstore_map}
        expected = src.source_rows("modes", expect, ("time", "timestamp", "timestamptz", "interval"))
        assert src.lake_rows("modes", lake) == expected
        assert expected[3][1] == -1000 and expected[3][5] == "P0Y0M-1DT0H0M-1.5S"  # floored; per-field signs
    finally:
        src.stop()
