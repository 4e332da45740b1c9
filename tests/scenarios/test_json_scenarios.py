"""JSON decoder correctness scenarios end to end (real broker, Spark and Iceberg).

Scenario 8: a batch whose older records carry a column the source has since dropped (their schema is not the one the
samples show) — nothing may be dead-lettered or dropped: the table keeps the column, with the value for the rows
whose schema has it and NULL for the others.
Scenario 12: schemaless JSON (``schemas.enable=false``) — Debezium's precise decimals (base64 of the unscaled value)
land as exact decimals through ``column_types``, and a column that is null in every sample is not frozen as string.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.integration import events
from tests.scenarios.typed_events import decimal_b64

pytestmark = pytest.mark.integration

WITH_LEGACY = [("id", "int32", False), ("name", "string", True), ("legacy", "string", True)]
WITHOUT_LEGACY = [("id", "int32", False), ("name", "string", True)]


def types(spark, table: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}


def dead_letters(p) -> list:
    return p.spark.sql(f"SELECT `offset`, error_class, error_message FROM {p.cfg.catalog.name}."
                       f"{p.cfg.metadata_namespace}.dead_letters ORDER BY `offset`").collect()


def test_scenario8_json_with_schemas_record_carrying_since_dropped_column_is_not_dead_lettered(make_pipe, spark):
    """A new topic whose first 30 of 45 events carry a column dropped later: one batch, all 45 land."""
    p = make_pipe(primary_key=["id"])
    p.send(*[events.pg("c", i, {"id": i, "name": f"n{i}", "legacy": f"L{i}"}, 100 + i, WITH_LEGACY)
             for i in range(1, 31)],
           *[events.pg("c", i, {"id": i, "name": f"n{i}"}, 100 + i, WITHOUT_LEGACY) for i in range(31, 41)],
           *[events.pg("u", i, {"id": i, "name": f"u{i}"}, 200 + i, WITHOUT_LEGACY) for i in range(1, 6)])
    s = p.run()
    assert (s["status"], s["events_read"], s["dead_letters"], s["inserted"]) == ("committed", 45, 0, 40), s
    assert dead_letters(p) == []
    assert list(types(spark, p.target))[:3] == ["id", "name", "legacy"]
    expected = {i: (f"n{i}", f"L{i}") for i in range(6, 31)}
    expected.update({i: (f"u{i}", None) for i in range(1, 6)})  # updated after the drop: NULL from then on
    expected.update({i: (f"n{i}", None) for i in range(31, 41)})  # written without the column
    assert p.rows("name", "legacy") == expected
    # Next batch: an old-schema straggler (e.g. a lagging partition) and a new-schema event; the table keeps the column.
    p.send(events.pg("c", 50, {"id": 50, "name": "late", "legacy": "old"}, 300, WITH_LEGACY),
           events.pg("c", 51, {"id": 51, "name": "new"}, 301, WITHOUT_LEGACY))
    s = p.run()
    assert (s["inserted"], s["dead_letters"]) == (2, 0)
    rows = p.rows("name", "legacy")
    assert (rows[50], rows[51]) == (("late", "old"), ("new", None))


def test_scenario8_json_record_with_a_wider_type_than_the_samples_widens_the_batch(make_pipe, spark):
    """A batch whose newest record (the sample) still has an int32 column while an earlier record of the batch was
    written after the source widened it to int64 (a redelivered older event last, as after a connector restart):
    the batch column widens and the value lands; before, the wider record was a dead letter (soak seed 197)."""
    narrow = [("id", "int32", False), ("name", "string", True), ("visits", "int32", True)]
    wide = [("id", "int32", False), ("name", "string", True), ("visits", "int64", True)]
    p = make_pipe(primary_key=["id"])
    p.send(*[events.pg("c", i, {"id": i, "name": f"n{i}", "visits": i}, 100 + i, narrow) for i in range(1, 4)],
           events.pg("u", 1, {"id": 1, "name": "big", "visits": 2**40}, 200, wide),
           events.pg("c", 3, {"id": 3, "name": "n3", "visits": 3}, 103, narrow))  # redelivered, newest offset
    s = p.run()
    assert (s["status"], s["events_read"], s["dead_letters"]) == ("committed", 5, 0), s
    assert dead_letters(p) == []
    assert types(spark, p.target)["visits"] == "bigint"
    assert p.rows("name", "visits") == {1: ("big", 2**40), 2: ("n2", 2), 3: ("n3", 3)}


def test_scenario8_schemaless_json_field_missing_from_the_samples_is_added_not_dropped(make_pipe, spark):
    p = make_pipe(primary_key=["id"])
    p.send(*[events.pg_schemaless("c", i, {"id": i, "name": f"n{i}", "legacy": i * 10}, 10 + i) for i in range(1, 4)],
           *[events.pg_schemaless("c", i, {"id": i, "name": f"n{i}"}, 10 + i) for i in range(4, 7)])
    s = p.run()
    assert (s["status"], s["inserted"], s["dead_letters"]) == ("committed", 6, 0), s
    assert types(spark, p.target)["legacy"] == "bigint"
    assert p.rows("name", "legacy") == {1: ("n1", 10), 2: ("n2", 20), 3: ("n3", 30), 4: ("n4", None),
                                        5: ("n5", None), 6: ("n6", None)}


def test_scenario12_schemaless_json_declared_decimals_are_exact_and_null_columns_are_not_frozen(make_pipe, spark):
    p = make_pipe(primary_key=["id"], column_types={"price": "decimal(10,2)", "paid": "timestamptz"})
    prices = {1: "5.00", 2: "-12345678.91", 3: "0.01", 4: "99999999.99"}
    p.send(*[events.pg_schemaless("c", i, {"id": i, "price": decimal_b64(v, 2), "paid": None, "bio": None}, 10 + i)
             for i, v in prices.items()])
    s = p.run()
    assert (s["status"], s["inserted"], s["dead_letters"]) == ("committed", 4, 0), s
    t = types(spark, p.target)
    assert (t["price"], t["paid"]) == ("decimal(10,2)", "timestamp")  # declared types, even while all null
    assert "bio" not in t  # null in every record so far: no type yet (not frozen as string)
    assert p.rows("price", "paid") == {i: (Decimal(v), None) for i, v in prices.items()}
    # Later batches: the first non-null value gives bio its type; decimal.handling.mode=string/double values also fit.
    p.send(events.pg_schemaless("u", 1, {"id": 1, "price": "7.25", "paid": "2023-03-23T07:00:10Z", "bio": 42}, 20),
           events.pg_schemaless("c", 5, {"id": 5, "price": 3.5, "paid": None, "bio": None}, 21))
    s = p.run()
    assert (s["inserted"], s["updated"], s["dead_letters"]) == (1, 1, 0), s
    assert types(spark, p.target)["bio"] == "bigint"
    got = p.rows("price", "bio")
    assert got == {1: (Decimal("7.25"), 42), 2: (Decimal("-12345678.91"), None), 3: (Decimal("0.01"), None),
                   4: (Decimal("99999999.99"), None), 5: (Decimal("3.50"), None)}
    paid = {r[0]: r[1] for r in spark.sql(f"SELECT id, unix_micros(paid) FROM {p.target}").collect()}
    assert paid[1] == 1679554810000000 and paid[5] is None
