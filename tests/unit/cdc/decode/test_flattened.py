"""Records flattened by ExtractNewRecordState (``tables[].envelope: flattened``), from ../shared/fixtures/debezium/
unwrap-smt (real debezium-server-iceberg / -bigquery test records and Debezium's event-flattening doc blocks)."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from cdc.common.errors import ConfigError, DecodeError
from cdc.config.load import parse_config
from cdc.decode.factory import make_decoder
from cdc.decode.flattened import to_envelope
from cdc.decode.json import JsonDecoder
from cdc.positions.ordering import resolve
from tests.unit.cdc.decode.samples import load, path


def decoder(records, envelope="flattened"):
    dec = JsonDecoder("dbserver1.inventory.orders", "__debezium_unavailable_value")
    dec.envelope = envelope
    cols = dec.resolve_columns([(None, r) for r in records])
    return dec.bind(cols), cols


def doc_block(rel: str) -> dict:
    """A verbatim doc fragment: '...' lines dropped, a bare '"value": {...}' wrapped into an object."""
    text = "\n".join(line for line in path(rel).read_text().splitlines() if line.strip() != "...")
    text = re.sub(r",(\s*[}\]])", r"\1", text).strip()
    doc = json.loads(text if text.startswith("{") else "{" + text + "}")
    return doc.get("value", doc)


def test_real_flattened_snapshot_row_with_lsn_orders_as_postgresql():
    raw = json.dumps(load("unwrap-smt/pg_unwrap_addfields_rewrite_orders.json")).encode()
    dec, cols = decoder([raw])
    assert [(c.name, c.arrow_type) for c in cols] == [
        ("id", pa.int32()), ("order_date", pa.date32()), ("purchaser", pa.int32()), ("quantity", pa.int32()),
        ("product_id", pa.int32())]
    ev = dec.decode(None, raw)
    assert ev.kind == "change" and ev.op == "r"
    assert ev.row == {"id": 10003, "order_date": 16850, "purchaser": 1002, "quantity": 2, "product_id": 106}
    assert ev.source == {"table": "orders", "lsn": 33832960, "ts_ms": 1596309876678, "connector": "postgresql"}
    o = resolve("auto", ev.source["connector"], "inv.orders")
    assert o.values(ev.source, ev.ts_ms, ev.op) == (33832959, 33832960)  # a snapshot read: (S - 1, S)


def test_real_flattened_row_with_source_prefixed_fields():
    raw = json.dumps(load("unwrap-smt/pg_unwrap_addfields_temporal_types.json")).encode()
    dec, cols = decoder([raw])
    assert not any(c.name.startswith("__") for c in cols)
    ev = dec.decode(None, raw)
    assert ev.row["c_id"] == 2 and ev.row["c_date"] == 17424
    # __source_lsn / __source_txId / __db → source.lsn / txId / db
    assert ev.source["lsn"] == load("unwrap-smt/pg_unwrap_addfields_temporal_types.json")["payload"]["__source_lsn"]
    assert ev.source["db"] and "txId" in ev.source and ev.source["connector"] == "postgresql"


def test_doc_add_fields_and_delete_rewrite_blocks():
    added = doc_block("unwrap-smt/doc_event_flattening_add_fields.json.txt")
    env = to_envelope(added)
    assert env["op"] == "c" and env["after"] == {} and env["source"] == {
        "table": "MY_TABLE", "lsn": "123456789", "ts_ms": "123456789", "connector": "postgresql"}
    assert resolve("auto", "postgresql", "t").values(env["source"], op="c") == (123456789, 123456789)
    deleted = doc_block("unwrap-smt/doc_event_flattening_delete_rewrite.json.txt")
    dec, _ = decoder([json.dumps({"pk": 1, "cola": "x", "__deleted": "false"}).encode()])
    ev = dec.decode(json.dumps({"pk": 2}).encode(), json.dumps(deleted).encode())
    assert ev.op == "d" and ev.row == {"pk": 2, "cola": None}


def test_flattened_rows_without_op_are_upserts_and_positions_name_the_connector():
    assert to_envelope({"id": 1, "__deleted": "false"})["op"] == "u"
    assert to_envelope({"id": 1, "__file": "mysql-bin.000003", "__pos": 154, "__row": 0})["source"]["connector"] == \
        "mysql"
    assert to_envelope({"id": 1, "__source_commit_lsn": "0000002d:00000a40:0003"})["source"]["connector"] == \
        "sqlserver"
    assert to_envelope({"id": 1, "__scn": "2122184"})["source"]["connector"] == "oracle"
    assert to_envelope({"id": 1, "__source_connector": "mysql", "__lsn": 1})["source"]["connector"] == "mysql"
    assert to_envelope({"id": 1})["source"] == {"connector": None}  # no position: ordering must be configured
    with pytest.raises(DecodeError, match="__op 't'"):
        to_envelope({"__op": "t"})


def test_flattened_records_without_the_setting_are_refused_naming_it():
    raw = json.dumps(load("unwrap-smt/pg_unwrap_addfields_rewrite_orders.json")).encode()
    dec, _ = decoder([raw], envelope="debezium")
    with pytest.raises(DecodeError, match="envelope: flattened"):
        dec.decode(None, raw)


def test_envelope_setting_reaches_the_json_decoder_and_the_avro_factory():
    base = {"pipeline": "p", "kafka": {"bootstrap.servers": "x:1"}, "catalog": {"warehouse": "/tmp/w"}}
    cfg = parse_config({**base, "format": "json", "tables": [{"topic": "a", "target": "n.a", "envelope": "flattened"},
                                                             {"topic": "b", "target": "n.b"}]})
    assert [t.envelope for t in cfg.tables] == ["flattened", "debezium"]
    assert make_decoder(cfg, cfg.tables[0]).envelope == "flattened"
    assert make_decoder(cfg, cfg.tables[1]).envelope == "debezium"
    with pytest.raises(ConfigError, match="envelope"):
        parse_config({**base, "format": "json", "tables": [{"topic": "a", "target": "n.a", "envelope": "unwrap"}]})
    avro = parse_config({**base, "format": "avro", "schema_registry": {"url": "http://r"},
                         "tables": [{"topic": "a", "target": "n.a", "envelope": "flattened"}]})
    assert make_decoder(avro, avro.tables[0]).row_struct.__qualname__ == "FlattenedAvroDecoder.row_struct"
