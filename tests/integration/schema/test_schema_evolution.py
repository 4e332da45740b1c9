"""Schema evolution end to end: several writer schemas per batch, column additions/drops, safe widenings, and
incompatible changes that fail the batch before any write (real broker, registry, Spark and Iceberg)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cdc.common.errors import SchemaEvolutionError
from tests.scenarios.typed_events import (
    avro_decimal,
    avro_envelope,
    avro_event,
    decimal_b64,
    json_event,
    opt,
    register,
    wire,
)
from tests.unit.cdc.decode.test_avro import ITEM_ROW, item_envelope, item_schemas

pytestmark = pytest.mark.integration

DEC = "org.apache.kafka.connect.data.Decimal"


def f(field: str, type_: str, optional: bool = True, **extra) -> dict:
    return {"type": type_, "optional": optional, "field": field, **extra}


def dec(name: str, precision: int, scale: int) -> dict:
    return f(name, "bytes", name=DEC, parameters={"scale": str(scale), "connect.decimal.precision": str(precision)})


V1 = [f("id", "int32", False), f("name", "string"), f("qty", "int32"), dec("price", 10, 2), f("w", "float"),
      f("legacy", "string")]
V2 = [f("id", "int32", False), f("name", "string"), f("qty", "int64"), dec("price", 12, 2), f("w", "double"),
      f("note", "string")]  # legacy dropped, note added, qty/price/w widened


def v1(i: int, lsn: int, qty: int = 1, legacy: str = "x") -> tuple:
    return json_event(V1, {"id": i, "name": f"n{i}", "qty": qty, "price": decimal_b64("1.50", 2), "w": 0.5,
                           "legacy": legacy}, lsn)


def v2(i: int, lsn: int, qty: int, price: str, note: str, op: str = "c") -> tuple:
    return json_event(V2, {"id": i, "name": f"n{i}", "qty": qty, "price": decimal_b64(price, 2), "w": 0.25,
                           "note": note}, lsn, op)


def types(spark, table: str) -> dict[str, str]:
    return {fl.name: fl.dataType.simpleString() for fl in spark.table(table).schema.fields}


def snapshot_count(spark, table: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0]


def test_json_added_dropped_and_widened_columns_across_writer_schemas(make_pipe, spark):
    p = make_pipe(primary_key=["id"])
    p.send(v1(1, 10), v1(2, 11))
    assert p.run()["inserted"] == 2
    assert types(spark, p.target)["qty"] == "int" and types(spark, p.target)["price"] == "decimal(10,2)"
    # One batch with both writer schemas: an old-schema record, then the new schema (per-record schemas).
    p.send(v1(3, 12, legacy="z"), v2(4, 13, 2**40, "1234567890.12", "n4"), v2(1, 14, 5, "2.25", "n1", op="u"))
    s = p.run()
    assert (s["status"], s["inserted"], s["updated"], s["dead_letters"]) == ("committed", 2, 1, 0)
    t = types(spark, p.target)
    assert (t["qty"], t["price"], t["w"], t["legacy"], t["note"]) == ("bigint", "decimal(12,2)", "double", "string",
                                                                      "string")
    names = list(t)
    assert names[:6] == ["id", "name", "qty", "price", "w", "legacy"] and names[-1] == "note"  # appended, no reorder
    assert p.rows("qty", "price", "w", "legacy", "note") == {
        1: (5, Decimal("2.25"), 0.25, None, "n1"),  # dropped column: NULL from the new schema on
        2: (1, Decimal("1.50"), 0.5, "x", None),  # old row: NULL in the added column
        3: (1, Decimal("1.50"), 0.5, "z", None),
        4: (2**40, Decimal("1234567890.12"), 0.25, None, "n4"),
    }
    st = types(spark, f"{p.cfg.catalog.name}.{p.cfg.metadata_namespace}.staging__{p.table.target.replace('.', '__')}")
    assert (st["qty"], st["price"], st["w"], st["note"]) == ("bigint", "decimal(12,2)", "double", "string")


def test_json_field_addition_disabled_ignores_new_columns(make_pipe, spark):
    p = make_pipe(primary_key=["id"], allow_field_addition=False)
    p.send(v1(1, 10))
    p.run()
    p.send(v2(2, 11, 3, "9.99", "ignored"), v2(1, 12, 4, "1.00", "ignored too", op="u"))
    s = p.run()
    assert (s["inserted"], s["updated"], s["dead_letters"]) == (1, 1, 0)  # not dead letters: ignored
    assert "note" not in types(spark, p.target) and types(spark, p.target)["qty"] == "bigint"  # widening still applies
    assert p.rows("qty", "price") == {1: (4, Decimal("1.00")), 2: (3, Decimal("9.99"))}


def test_json_incompatible_change_fails_before_any_write(make_pipe, spark):
    p = make_pipe(primary_key=["id"])
    p.send(v1(1, 10))
    p.run()
    before = (snapshot_count(spark, p.target), p.rows("qty"))
    v3 = [f("id", "int32", False), f("qty", "string")]  # int → string at the source
    p.send(v1(2, 11), json_event(v3, {"id": 3, "qty": "three"}, 12), json_event(v3, {"id": 4, "qty": "4"}, 13))
    with pytest.raises(SchemaEvolutionError) as info:
        p.run()
    msg, err = str(info.value), info.value
    assert err.exit_code == 2
    for part in (p.table.target, "'qty'", "int → string", f"topic {p.topic} partition 0 offset 2"):
        assert part in msg, msg
    assert (err.column, err.partition, err.offset) == ("qty", 0, 2)
    assert (snapshot_count(spark, p.target), p.rows("qty")) == before  # target untouched
    assert [(r.batch_id, r.status) for r in p.ledger() if r.status in ("staged", "committed")] == [(1, "committed")]


@pytest.fixture
def avro_pipe(make_pipe, registry):
    def make(**table):
        return make_pipe(fmt="avro", schema_registry=registry.client_config, **table)
    return make


def test_avro_several_writer_schemas_resolve_to_newest_and_add_columns(avro_pipe, registry, spark):
    """Real Debezium MySQL item schemas (v2 appends four nullable columns): v1 and v2 records in one batch."""
    schema_v1, schema_v2 = item_schemas()
    p = avro_pipe(primary_key=["id"])
    sid1 = register(registry, f"{p.topic}-value", schema_v1)

    def item(schema, sid, i, pos, **extra):
        src_row = {**ITEM_ROW, "id": bytes([i]), "account_id": i, **extra}
        env = item_envelope(src_row)
        env["source"] = {**env["source"], "pos": pos}
        return None, wire(schema, sid, env)

    p.send(item(schema_v1, sid1, 1, 100), item(schema_v1, sid1, 2, 200))
    assert p.run()["inserted"] == 2
    sid2 = register(registry, f"{p.topic}-value", schema_v2)
    assert sid2 > sid1
    p.send(item(schema_v1, sid1, 3, 300),
           item(schema_v2, sid2, 4, 400, locale_id=5, notes='{"a": 1}'),
           item(schema_v2, sid2, 1, 500, language_id=7))
    s = p.run()
    assert (s["inserted"], s["updated"], s["dead_letters"]) == (2, 1, 0)
    t = types(spark, p.target)
    assert list(t)[-4:] == ["notes", "search_engine_id", "locale_id", "language_id"]
    assert (t["locale_id"], t["notes"], t["created"], t["id"]) == ("int", "string", "timestamp", "binary")
    got = {bytes(r["id"]): (r["account_id"], r["locale_id"], r["language_id"], r["notes"])
           for r in spark.table(p.target).collect()}
    assert got == {b"\x01": (1, None, 7, None), b"\x02": (2, None, None, None), b"\x03": (3, None, None, None),
                   b"\x04": (4, 5, None, '{"a": 1}')}
    micros = {bytes(r[0]): r[1] for r in spark.sql(f"SELECT id, unix_micros(created) FROM {p.target}").collect()}
    assert set(micros.values()) == {1679554810123456}  # ZonedTimestamp "2023-03-23T07:00:10.123456Z", exact


def test_avro_narrower_writer_lands_and_decimal_scale_change_fails(avro_pipe, registry, spark):
    fields = lambda qty, amount: [{"name": "id", "type": "long"}, opt("qty", qty), opt("amount", amount)]  # noqa
    s1 = avro_envelope(fields("long", avro_decimal(10, 2)))
    s2 = avro_envelope(fields("int", avro_decimal(10, 2)))  # narrowed at the source (compatibility NONE)
    s3 = avro_envelope(fields("int", avro_decimal(10, 3)))  # scale change
    p = avro_pipe(primary_key=["id"])
    subject = f"{p.topic}-value"
    id1 = register(registry, subject, s1)
    p.send(avro_event(s1, id1, {"id": 1, "qty": 2**40, "amount": Decimal("1.25")}, 10))
    p.run()
    id2 = register(registry, subject, s2)
    # An older-writer record (long) in the same batch as the newest (int) schema: decoded with its writer schema.
    p.send(avro_event(s1, id1, {"id": 2, "qty": 2**33, "amount": Decimal("2.50")}, 11),
           avro_event(s2, id2, {"id": 3, "qty": 7, "amount": Decimal("-3.75")}, 12))
    s = p.run()
    assert (s["inserted"], s["dead_letters"]) == (2, 0)
    assert types(spark, p.target)["qty"] == "bigint"  # never narrowed
    assert p.rows("qty", "amount") == {1: (2**40, Decimal("1.25")), 2: (2**33, Decimal("2.50")),
                                       3: (7, Decimal("-3.75"))}
    before = snapshot_count(spark, p.target)
    id3 = register(registry, subject, s3)
    p.send(avro_event(s2, id2, {"id": 4, "qty": 1, "amount": Decimal("1.00")}, 13),
           avro_event(s3, id3, {"id": 5, "qty": 1, "amount": Decimal("1.001")}, 14))
    with pytest.raises(SchemaEvolutionError) as info:
        p.run()
    msg = str(info.value)
    for part in (p.table.target, "'amount'", "decimal(10,2) → decimal(10,3)", "partition 0 offset 4"):
        assert part in msg, msg
    assert snapshot_count(spark, p.target) == before
    assert len(p.rows("qty")) == 3
