"""Schema evolution through the vectorised Avro path: every record must stage exactly as the per-record path
(fastavro, resolved to the subject's newest schema) stages it: reader defaults for fields the writer lacks, NULL
for columns dropped at the source, widened types. Also checks the vectorised path really takes these records (it is
the performance path) instead of handing them back."""

from __future__ import annotations

import copy
import itertools

import fastavro
import pyarrow as pa
import pytest

from cdc.schema.columns import Column
from devtools.registry import LocalSchemaRegistry
from tests.unit.cdc.decode import samples
from tests.unit.cdc.decode.avro_history import (
    PLACEHOLDER,
    envelope,
    fast_share,
    first_difference,
    key_schema,
    pg_source,
    register,
    stage_both,
    wire,
)

_topics = itertools.count()


@pytest.fixture(scope="module")
def registry():
    with LocalSchemaRegistry() as r:
        yield r


def _topic(name: str) -> str:
    return f"evo{next(_topics)}.{name}"


def _history(url: str, topic: str, versions: list[dict], key: dict) -> list[tuple[int, object]]:
    register(url, f"{topic}-key", key)
    return [(register(url, f"{topic}-value", v), fastavro.parse_schema(copy.deepcopy(v))) for v in versions]


def _pg_messages(url, topic, versions, rows_by_version):
    """c events: version i writes rows_by_version[i]; then a u, a d and a tombstone of the first row of the last."""
    ns = topic.replace("-", "_")
    ids = _history(url, topic, versions, key_schema(ns))
    kparsed = fastavro.parse_schema(key_schema(ns))
    kid = register(url, f"{topic}-key", key_schema(ns))
    msgs, lsn = [], 100
    for (sid, parsed), rows in zip(ids, rows_by_version):
        for row in rows:
            lsn += 1
            for op, before, after in (("c", None, row), ("u", row, row), ("d", row, None)):
                value = {"before": before, "after": after, "source": pg_source(lsn), "op": op, "ts_ms": lsn}
                msgs.append((len(msgs), None, wire(kid, kparsed, {"id": row["id"]}), wire(sid, parsed, value)))
    msgs.append((len(msgs), None, wire(kid, kparsed, {"id": 1}), None))
    return msgs


def _assert_same(out):
    assert out[True].num_rows == out[False].num_rows
    assert out[True].equals(out[False]), first_difference(out[True], out[False])


def test_reader_default_of_a_field_the_writer_lacks_when_after_names_the_row_record(registry):
    """(a) ``after`` is ``["null", "Value"]`` (a reference, as in every real Debezium schema): records written before
    a column with a non-null default was added get that default, not NULL."""
    topic = _topic("defaults")
    ns = topic.replace("-", "_")
    v1 = envelope(ns, [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"], "default": None}])
    v2 = envelope(ns, v1["fields"][0]["type"][1]["fields"] + [
        {"name": "status", "type": {"type": "string", "connect.default": "TO_DO"}, "default": "TO_DO"},
        {"name": "rank", "type": ["int", "null"], "default": 3}])
    msgs = _pg_messages(registry.url, topic, [v1, v2], [[{"id": 1, "name": "a"}, {"id": 2, "name": None}],
                                                        [{"id": 3, "name": "c", "status": "DONE", "rank": None}]])
    out = stage_both(registry.url, topic, msgs)
    _assert_same(out)
    changes = out[False].filter(pa.compute.equal(out[False].column("__kind"), "change"))
    assert changes.column("status").to_pylist() == ["TO_DO"] * 6 + ["DONE"] * 3
    assert changes.column("rank").to_pylist() == [3] * 6 + [None] * 3
    assert fast_share(registry.url, topic, msgs) == (len(msgs), 0)


def test_column_dropped_at_the_source_is_null_for_records_of_older_writers(registry):
    """(b) the table still has ``legacy`` (dropped from the newest schema): the per-record path resolves old records
    to the newest schema, so ``legacy`` is NULL for them too, not the old writer's value."""
    topic = _topic("dropped")
    ns = topic.replace("-", "_")
    fields = [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"], "default": None},
              {"name": "legacy", "type": ["null", "string"], "default": None}]
    v1, v2 = envelope(ns, fields), envelope(ns, fields[:2])
    msgs = _pg_messages(registry.url, topic, [v1, v2], [[{"id": 1, "name": "a", "legacy": "old"}],
                                                        [{"id": 2, "name": "b"}]])
    table = [Column("id", pa.int64(), False), Column("name", pa.string()), Column("legacy", pa.string())]
    out = stage_both(registry.url, topic, msgs, existing=table)
    _assert_same(out)
    changes = out[False].filter(pa.compute.equal(out[False].column("__kind"), "change"))
    assert changes.column("legacy").to_pylist() == [None] * 6
    assert fast_share(registry.url, topic, msgs, existing=table) == (len(msgs), 0)


def test_widened_columns_and_toast_placeholders_of_older_writers(registry):
    topic = _topic("widened")
    ns = topic.replace("-", "_")
    v1 = envelope(ns, [{"name": "id", "type": "int"}, {"name": "n", "type": ["null", "int"], "default": None},
                       {"name": "x", "type": "float"}, {"name": "t", "type": ["null", "string"], "default": None}])
    v2 = envelope(ns, [{"name": "id", "type": "long"}, {"name": "n", "type": ["null", "long"], "default": None},
                       {"name": "x", "type": "double"}, {"name": "t", "type": ["null", "string"], "default": None}])
    msgs = _pg_messages(registry.url, topic, [v1, v2],
                        [[{"id": 1, "n": -5, "x": 0.1, "t": PLACEHOLDER}, {"id": 2, "n": None, "x": 2.5, "t": "t"}],
                         [{"id": 2**40, "n": 2**40, "x": 0.1, "t": PLACEHOLDER}]])
    table = [Column("id", pa.int32(), False), Column("n", pa.int32()), Column("x", pa.float32()),
             Column("t", pa.string())]
    out = stage_both(registry.url, topic, msgs, existing=table)
    _assert_same(out)
    changes = out[False].filter(pa.compute.equal(out[False].column("__kind"), "change"))
    assert changes.column("n").to_pylist()[::3] == [-5, None, 2**40]
    assert changes.column("__unavailable").to_pylist()[::3] == [["t"], None, ["t"]]
    assert fast_share(registry.url, topic, msgs, existing=table) == (len(msgs), 0)


def test_bytes_and_decimal_defaults_are_read_as_the_bytes_they_encode(registry):
    """Avro writes bytes defaults as ISO-8859-1 strings (fastavro returns that str): older records get the bytes
    (b"\\xff\\x01") and the decimal those bytes encode (unscaled 256, scale 2 → 2.56), not a dead letter."""
    from decimal import Decimal

    topic = _topic("bytes_defaults")
    ns = topic.replace("-", "_")
    dec = {"type": "bytes", "scale": 2, "precision": 10, "logicalType": "decimal",
           "connect.name": "org.apache.kafka.connect.data.Decimal",
           "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"}}
    v1 = envelope(ns, [{"name": "id", "type": "long"}])
    v2 = envelope(ns, [{"name": "id", "type": "long"}, {"name": "blob", "type": "bytes", "default": "\u00ff\u0001"},
                       {"name": "amount", "type": [dec, "null"], "default": "\u0001\u0000"}])
    msgs = _pg_messages(registry.url, topic, [v1, v2], [[{"id": 1}], [{"id": 2, "blob": b"b", "amount": None}]])
    out = stage_both(registry.url, topic, msgs)
    _assert_same(out)
    creates = out[False].filter(pa.compute.equal(out[False].column("__op"), "c"))
    assert creates.column("blob").to_pylist() == [b"\xff\x01", b"b"]
    assert creates.column("amount").to_pylist() == [Decimal("2.56"), None]
    assert fast_share(registry.url, topic, msgs) == (len(msgs), 0)


# ------------------------------------------------------------------------------------- real Debezium schemas

def _mysql_source(pos: int, row: int = 0, server_id: int = 223344) -> dict:
    return {"version": "1.9.7.Final", "connector": "mysql", "name": "dbserver1", "ts_ms": 1_700_000_000_000,
            "snapshot": "false", "db": "inventory", "sequence": None, "table": "customers", "server_id": server_id,
            "gtid": None, "file": "mysql-bin.000003", "pos": pos, "row": row, "thread": None, "query": None}


def _value_fields(schema: dict) -> list:
    before = next(f for f in schema["fields"] if f["name"] == "before")
    return next(t for t in before["type"] if isinstance(t, dict))["fields"]


def _real(rel: str, namespace: str) -> dict:
    text = samples.after_license(rel)
    import json

    schema = json.loads(text)
    schema["namespace"] = namespace  # unique schema text per test: registry ids are global
    return schema


@pytest.mark.parametrize("seed", [0, 1])
def test_real_mysql_customers_schema_with_added_defaulted_and_dropped_columns(registry, seed):
    """Base: the real Debezium MySQL ``customers`` envelope (after = ["null", "Value"]). v2 adds a nullable column
    and a column with a non-null default; v3 drops ``email`` and widens ``id`` int → long."""
    topic = _topic("customers")
    ns = topic.replace("-", "_")
    v1 = _real("avro/mysql_value_envelope_customers.avsc", ns)
    v2 = copy.deepcopy(v1)
    _value_fields(v2).extend([{"name": "loyalty", "type": ["null", "long"], "default": None},
                              {"name": "tier", "type": "string", "default": "basic"}])
    v3 = copy.deepcopy(v2)
    _value_fields(v3)[:] = [f for f in _value_fields(v3) if f["name"] != "email"]
    _value_fields(v3)[0]["type"] = "long"
    ids = _history(registry.url, topic, [v1, v2, v3], key_schema(ns, "int"))
    kid = register(registry.url, f"{topic}-key", key_schema(ns, "int"))
    kparsed = fastavro.parse_schema(key_schema(ns, "int"))
    msgs, pos = [], 1000
    for version, (sid, parsed) in enumerate(ids * 2 if seed else ids):
        version %= 3
        for i in range(4):
            pos += 10
            row = {"id": 10 * version + i, "first_name": f"f{i}", "last_name": PLACEHOLDER if i == 1 else "l",
                   "email": f"e{i}@x", "loyalty": None if i % 2 else i, "tier": "gold"}
            for op, before, after in (("r", None, row), ("u", row, row), ("d", row, None)):
                server = (223344, 0, 7, 2**32 - 1)[i]  # 0: snapshot reads (no server)
                value = {"before": before, "after": after, "source": _mysql_source(pos, i, server), "op": op,
                         "ts_ms": pos, "transaction": None}
                msgs.append((len(msgs), pos, wire(kid, kparsed, {"id": row["id"]}), wire(sid, parsed, value)))
        msgs.append((len(msgs), None, None, wire(sid, parsed, {"before": None, "after": None, "op": "t",
                                                                "source": _mysql_source(pos + 5), "ts_ms": 1,
                                                                "transaction": None})))
    table = [Column("id", pa.int32(), False), Column("first_name", pa.string(), False),
             Column("last_name", pa.string(), False), Column("email", pa.string(), False)]
    out = stage_both(registry.url, topic, msgs, existing=table, connector="mysql")
    _assert_same(out)
    changes = out[False].filter(pa.compute.equal(out[False].column("__op"), "r"))
    assert changes.column("tier").to_pylist()[:4] == ["basic"] * 4  # v1 records: the reader default
    assert changes.column("email").to_pylist() == [None] * len(changes)  # dropped in the newest schema
    assert changes.column("__server_id").to_pylist()[:4] == ["223344", None, "7", "4294967295"]  # cdc.positions.regression
    assert fast_share(registry.url, topic, msgs, existing=table, connector="mysql") == (len(msgs), 0)


def test_real_mysql_item_schemas_v1_v2_and_a_v3_with_a_default_and_a_drop(registry):
    """Base: the real v1 → v2 (4 nullable columns added) Debezium item envelopes; v3 adds ``priority`` with a
    non-null default and drops ``page``."""
    topic = _topic("item")
    ns = topic.replace("-", "_")
    v1 = _real("avro/mysql_value_envelope_item_v1_old.avsc", ns)
    v2 = _real("avro/mysql_value_envelope_item_v2_new_columns_added.avsc", ns)
    v3 = copy.deepcopy(v2)
    _value_fields(v3)[:] = [f for f in _value_fields(v3) if f["name"] != "page"]
    _value_fields(v3).append({"name": "priority", "type": "int", "default": 3})
    ids = _history(registry.url, topic, [v1, v2, v3], key_schema(ns, "bytes"))
    kid = register(registry.url, f"{topic}-key", key_schema(ns, "bytes"))
    kparsed = fastavro.parse_schema(key_schema(ns, "bytes"))
    msgs = []
    for version, (sid, parsed) in enumerate(ids):
        for i in range(3):
            pos = 100 * version + i
            row = {"id": bytes([version, i]), "account_id": i, "title": PLACEHOLDER if i == 2 else "t",
                   "page": "p", "created": "2024-01-02T03:04:05Z", "created_by": 1,
                   "updated": "2024-01-02T03:04:05.123456Z", "updated_by": 2, "status": "IN_REVIEW",
                   "deleted": False, "locale_id": i, "priority": 9}
            for op, before, after in (("c", None, row), ("d", row, None)):
                value = {"before": before, "after": after, "source": _mysql_source(pos, i), "op": op,
                         "ts_ms": pos, "transaction": None}
                msgs.append((len(msgs), pos, wire(kid, kparsed, {"id": row["id"]}), wire(sid, parsed, value)))
    from cdc.decode.avro import _row_struct
    from cdc.decode.connect_types import columns_of, from_avro

    table = columns_of(_row_struct(from_avro(v1)))
    out = stage_both(registry.url, topic, msgs, existing=table, connector="mysql")
    _assert_same(out)
    creates = out[False].filter(pa.compute.equal(out[False].column("__op"), "c"))
    assert creates.column("priority").to_pylist() == [3] * 6 + [9] * 3
    assert creates.column("page").to_pylist() == [None] * 9
    assert creates.column("__unavailable").to_pylist() == [None, None, ["title"]] * 3
