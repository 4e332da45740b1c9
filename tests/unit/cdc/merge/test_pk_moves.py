"""PK moves (issue 17 scenario 2 across batches) as SQL text and as staged header values; the behaviour on real
tables: tests/scenarios/test_correctness_scenarios.py::test_scenario_02_*."""

from dataclasses import replace

import pyarrow as pa

from cdc.merge.pk_moves import delete_images_sql, fill_moved_sql, image_sql
from cdc.merge.sql import MergeSpec, changes_sql, classify_sql, merge_target_sql, merge_tombstones_sql, newest_sql
from cdc.schema.columns import (
    IMAGE,
    MOVED,
    NEW_KEY,
    OLD_KEY,
    STAGING_FIXED,
    Column,
    moved_column,
    staged_row_columns,
    staging_columns,
)

SPEC = MergeSpec(target="lake.inv.customers", staging="lake.meta.staging__inv__customers",
                 tombstones="lake.meta.tombstones__inv__customers", batch_id=7, key=("id",),
                 columns=("id", "name", "bio"), ordering=("__lsn",), toast_columns=("bio",), pk_moves=True)
ROW = [Column("id", pa.int32(), False), Column("name", pa.string()), Column("bio", pa.string())]


def test_staging_has_the_header_keys_as_structs_of_the_key_columns_and_they_are_not_row_columns():
    cols = staging_columns(ROW, ("__lsn",), ("id",))
    types = {c.name: c.arrow_type for c in cols}
    assert types[OLD_KEY] == types[NEW_KEY] == pa.struct([pa.field("id", pa.int32())])
    assert [c.name for c in staged_row_columns([*cols, moved_column(ROW, ("id",))])] == ["id", "name", "bio"]
    assert {OLD_KEY, NEW_KEY, MOVED} <= set(STAGING_FIXED)
    assert OLD_KEY not in {c.name for c in staging_columns(ROW, ("__lsn",))}  # no key: no header columns
    assert moved_column(ROW, ("id",)).arrow_type == pa.struct([pa.field("name", pa.string()),
                                                              pa.field("bio", pa.string())])


def test_without_moves_the_merge_sql_is_unchanged():
    plain = replace(SPEC, pk_moves=False)
    assert fill_moved_sql(plain, "CH") == "CH"
    for sql in (changes_sql(plain), newest_sql(plain, "X"), classify_sql(plain, "X"), merge_tombstones_sql(plain, "v")):
        assert OLD_KEY not in sql and MOVED not in sql


def test_changes_give_a_moves_delete_the_image_kept_in_staging_and_the_tombstone_stores_it():
    sql = changes_sql(SPEC)
    assert f"`__kind` = '{IMAGE}'" in sql and "i.`__moved`" in sql and "c.`__old_key`" in sql
    assert "s.`__moved`" in classify_sql(SPEC, "X") and "`__moved`" in newest_sql(SPEC, "X")
    assert "t.`__moved` = s.`__moved`" in merge_tombstones_sql(SPEC, "v")


def test_image_is_the_newest_older_change_with_the_value_if_newer_than_the_row_else_the_row_before_the_move():
    sql = image_sql(SPEC, "REQ", "CH", ["bio"])
    # only changes of the key strictly before the requested source position, never a delete or a placeholder
    assert "LEFT JOIN (CH) ch ON r.`id` = ch.`id` AND ((r.`__lsn` > coalesce(ch.`__lsn`, -9223372036854775808)))" in sql
    assert "ch.`__op` <> 'd' AND NOT array_contains(coalesce(ch.`__unavailable`, array()), 'bio')" in sql
    # the table row counts only while live and ordered before the move
    assert ("WHEN t.`id` IS NOT NULL AND ((p.`__lsn` > coalesce(t.`__lsn`, -9223372036854775808))) "
            "THEN named_struct('v', t.`bio`)") in sql


def test_a_moves_create_takes_the_batch_delete_then_the_tombstone_then_the_old_keys_image():
    sql = fill_moved_sql(SPEC, "CH")
    assert ("coalesce(IF(dm.`__moved` IS NULL, NULL, named_struct('v', dm.`__moved`.`bio`)), "
            "IF(tb.`__moved` IS NULL, NULL, named_struct('v', tb.`__moved`.`bio`)), im.`bio__img`)") in sql
    assert "LEFT JOIN lake.meta.tombstones__inv__customers tb ON" in sql
    assert "tb.`id` = c.`__old_key`.`id`" in sql and "(tb.`__lsn` = c.`__lsn`)" in sql  # same position only
    soft = fill_moved_sql(replace(SPEC, delete_mode="soft", tombstones=None), "CH")
    assert "LEFT JOIN lake.inv.customers tb ON" in soft and "coalesce(tb.`__deleted`, false)" in soft


def test_delete_images_and_soft_deletes_keep_the_old_keys_columns():
    assert "d.`__new_key` IS NOT NULL" in delete_images_sql(SPEC, "CH", ["name", "bio"])
    soft = merge_target_sql(replace(SPEC, delete_mode="soft", tombstones=None), "v")
    assert "s.`__moved` IS NOT NULL THEN UPDATE SET t.`name` = s.`__moved`.`name`, t.`bio` = s.`__moved`.`bio`" in soft


class _Decoder:
    def decode(self, key, value):
        from cdc.decode.json import JsonDecoder

        return JsonDecoder("t", "__debezium_unavailable_value").decode(key, value)


def test_header_keys_are_decoded_like_message_keys_into_change_rows_only():
    import json

    from cdc.schema.columns import arrow_schema
    from cdc.stage import headers

    class Spec:
        decoder = _Decoder()

    schema = arrow_schema(staging_columns(ROW, ("__lsn",), ("id",)))
    key = json.dumps({"schema": {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}]},
                      "payload": {"id": 1}}).encode()
    found: dict = {}
    headers.note(found, 5, [("__debezium.oldkey", key), ("other", b"x")])
    headers.note(found, 6, [("__debezium.newkey", b"not a key")])
    headers.note(found, 7, None)
    rows = {"batch_id": [1, 1, 1], "__topic": ["t"] * 3, "__partition": [0] * 3, "__offset": [5, 6, 7],
            "__kind": ["change", "change", "tombstone"]}
    batch = pa.RecordBatch.from_arrays([pa.array(rows.get(f.name, [None] * 3), f.type) for f in schema], schema=schema)
    out = list(headers.fill(Spec(), [batch], found))[0]
    assert out.column(schema.get_field_index(OLD_KEY)).to_pylist() == [{"id": 1}, None, None]
    assert out.column(schema.get_field_index(NEW_KEY)).to_pylist() == [None, None, None]  # undecodable: NULL


def test_avro_header_keys_are_staged_identically_by_both_avro_paths():
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from cdc.config.load import parse_config
    from cdc.decode.factory import make_decoder
    from cdc.positions.ordering import Ordering
    from cdc.schema.columns import arrow_schema
    from cdc.stage import headers
    from cdc.stage.reader import ReadSpec, stage_messages
    from devtools.debezium import AvroSerializer, ChangeEventGenerator, GeneratorConfig
    from devtools.debezium.model import Record
    from devtools.registry import LocalSchemaRegistry

    with LocalSchemaRegistry() as registry:
        topic = "pkmoves.avro"
        gen = ChangeEventGenerator(5, GeneratorConfig(partitions=1, toast_fraction=0.5, toast_on_pk_change=True,
                                                      replica_identity="default"))
        records = gen.snapshot(6)
        moves = [r for _ in range(3) for r in gen.change_pk()]
        records += moves + gen.random_ops(20)
        ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), topic=topic)
        msgs, found = [], {}
        for i, r in enumerate(records):
            msgs.append((i, 1_700_000_000_000 + i, *ser.serialize(r)))
            headers.note(found, i, [(n, ser.serialize(Record(k, None, 0, r.table))[0]) for n, k in r.headers])
        cfg = parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "x:1"}, "format": "avro",
                            "schema_registry": {"url": registry.url}, "catalog": {"warehouse": "/tmp/w"},
                            "tables": [{"topic": topic, "target": "a.b"}]})
        dec = make_decoder(cfg, cfg.tables[0])
        cols = dec.resolve_columns([], [])
        ordering = Ordering("postgresql")
        out = {}
        for fast in (True, False):
            spec = ReadSpec("a.b", {}, dec.bind(cols), ordering, ("id",), tuple(cols),
                            tuple(staging_columns(cols, ordering.columns, ("id",))), 7, fast_avro=fast)
            batches = list(headers.fill(spec, stage_messages(spec, topic, 0, msgs), found))
            out[fast] = pa.Table.from_batches(batches, arrow_schema(spec.staging_columns)).sort_by("__offset")
    assert out[True].equals(out[False])
    staged = out[True].to_pylist()
    creates = [r for r in staged if r["__op"] == "c" and r[OLD_KEY]]
    deletes = [r for r in staged if r["__op"] == "d" and r[NEW_KEY]]
    assert len(creates) == len(deletes) == sum(1 for r in records if r.op == "c" and r.headers) >= 3
    assert {(d["id"], d[NEW_KEY]["id"]) for d in deletes} == {(c[OLD_KEY]["id"], c["id"]) for c in creates}
    assert all(r[OLD_KEY] is None and r[NEW_KEY] is None for r in staged if r not in creates + deletes)


def test_connects_default_header_text_is_understood_for_integer_and_string_keys():
    """Kafka Connect's SimpleHeaderConverter (the default header.converter) writes Struct headers as text."""
    from cdc.stage.headers import connect_text_key

    ints = pa.struct([pa.field("id", pa.int64())])
    both = pa.struct([pa.field("tenant", pa.string()), pa.field("id", pa.int32())])
    assert connect_text_key(b"Struct{id=2}", ints) == {"id": 2}
    assert connect_text_key(b"Struct{id=-7}", ints) == {"id": -7}
    assert connect_text_key(b"Struct{tenant=acme,id=3}", both) == {"tenant": "acme", "id": 3}
    assert connect_text_key(b"Struct{id=x}", ints) is None  # not an integer
    assert connect_text_key(b"Struct{id=1,extra=2}", ints) is None  # not the key columns
    assert connect_text_key(b"Struct{id=1.5}", pa.struct([pa.field("id", pa.float64())])) is None  # ambiguous type
    assert connect_text_key(b'{"id": 2}', ints) is None  # JSON: left to the key decoder
