"""cdc.decode.envelope: event classification, row images, TOAST placeholders."""

from __future__ import annotations

import base64

import pyarrow as pa
import pytest

from cdc.common.errors import DecodeError
from cdc.decode.connect_types import ConnectField
from cdc.decode.envelope import classify, row_plan, to_event
from cdc.decode.model import CHANGE, MESSAGE, TOMBSTONE, TRANSACTION
from cdc.schema.columns import Column
from tests.unit.cdc.decode import samples

COLS = [Column("id", pa.int32(), False), Column("name", pa.string()), Column("photo", pa.binary()),
        Column("tags", pa.list_(pa.string()))]
SCHEMALESS = row_plan(COLS, None, samples.PLACEHOLDER, json_text=True)
SOURCE = {"connector": "postgresql", "lsn": 1}


def test_tombstone_and_change_ops() -> None:
    assert to_event(None, {"id": 1}, SCHEMALESS).kind == TOMBSTONE
    for op in ("c", "u", "r"):
        e = to_event({"op": op, "after": {"id": 1, "name": "a"}, "before": None, "source": SOURCE, "ts_ms": 5},
                     {"id": 1}, SCHEMALESS)
        assert (e.kind, e.op, e.row, e.source, e.ts_ms) == (CHANGE, op, {"id": 1, "name": "a"}, SOURCE, 5)


def test_delete_fills_key_only_and_null_before() -> None:
    e = to_event({"op": "d", "before": {"id": None, "name": None}, "after": None, "source": SOURCE}, {"id": 7},
                 SCHEMALESS)
    assert e.row == {"id": 7, "name": None}
    e = to_event({"op": "d", "before": None, "after": None, "source": SOURCE}, {"id": 7}, SCHEMALESS)
    assert e.row == {"id": 7}
    assert to_event({"op": "d", "before": None, "source": SOURCE}, None, SCHEMALESS).row is None


def test_pg_doc_samples_delete_truncate_message_transaction() -> None:
    (delete,) = samples.relaxed("postgresql/pg_doc_delete.json.txt")
    e = to_event(delete["payload"], {"id": 1}, SCHEMALESS)
    assert (e.kind, e.op, e.row, e.source["lsn"]) == (CHANGE, "d", {"id": 1}, 46523128)
    (trunc,) = samples.relaxed("postgresql/pg_doc_truncate.json.txt")
    e = to_event(trunc["payload"], None, SCHEMALESS)
    assert (e.kind, e.op, e.row, e.key, e.source["table"]) == (CHANGE, "t", None, None, "customers")
    (trunc,) = samples.relaxed("mysql/mysql_doc_truncate.json.txt")  # duplicate key + trailing comma in the doc
    assert to_event(trunc["payload"], None, SCHEMALESS).source["pos"] == 484
    (msg,) = samples.relaxed("postgresql/pg_doc_message_transactional.json.txt")
    e = to_event(msg["payload"], None, SCHEMALESS)
    assert (e.kind, e.op, e.row, e.ts_ms) == (MESSAGE, "m", None, 1559033904961)
    begin, end = samples.relaxed("postgresql/pg_doc_transaction_boundary_events.json.txt")
    assert classify(begin) == (TRANSACTION, None) and classify(end) == (TRANSACTION, None)
    assert to_event(end, None, SCHEMALESS).kind == TRANSACTION
    # pg_doc_message_nontransactional.json.txt is truncated (no closing brace) and cannot be parsed: not used.


@pytest.mark.parametrize("value, reason", [
    ({"before": None, "after": {}, "source": SOURCE}, "no 'op' field"),
    ({"op": "x", "after": {}, "source": SOURCE}, "unknown op 'x'"),
    ({"op": "c", "after": {"id": 1}}, "no 'source' block"),
    ([1, 2], "not an object"),
    ("text", "not an object"),
    ({"op": "c", "after": None, "source": SOURCE}, "without an 'after'"),
])
def test_not_debezium(value: object, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        to_event(value, None, SCHEMALESS)


def test_unwrapped_records_are_rejected_clearly() -> None:
    doc = samples.load("unwrap-smt/pg_unwrap_addfields_rewrite_orders.json")
    with pytest.raises(DecodeError, match="ExtractNewRecordState.*not supported"):
        classify(doc["payload"])
    with pytest.raises(DecodeError, match="no 'op' field"):
        classify(samples.load("unwrap-smt/core_unwrapped_row.json"))


def test_toast_placeholder_blog_sample() -> None:
    value = samples.load("postgresql/pg_blog_0.10_update_toast_unavailable_value.json")
    cols = [Column(n, pa.int32() if n == "id" else pa.string()) for n in value["after"]]
    e = to_event(value, {"id": 1004}, row_plan(cols, None, samples.PLACEHOLDER))
    assert e.unavailable == ("biography",)
    assert e.row == {"id": 1004, "first_name": "Dana", "last_name": "Kretchmar", "email": "annek@noanswer.org",
                     "biography": None}
    assert e.source["lsn"] == 34650016 and e.source["snapshot"] == "false"


def test_toast_placeholder_bytes_and_lists() -> None:
    ph = samples.PLACEHOLDER
    row = {"id": 1, "name": "x", "photo": base64.b64encode(ph.encode()).decode(), "tags": [ph]}
    e = to_event({"op": "u", "after": row, "source": SOURCE}, None, SCHEMALESS)
    assert e.unavailable == ("photo", "tags") and e.row == {"id": 1, "name": "x", "photo": None, "tags": None}
    # Avro: raw bytes (no base64)
    struct = ConnectField("struct", fields=(ConnectField("bytes", field_name="photo"),
                                            ConnectField("string", field_name="name")))
    plan = row_plan(COLS, struct, "custom")
    e = to_event({"op": "u", "after": {"photo": b"custom", "name": "custom"}, "source": SOURCE}, None, plan)
    assert e.unavailable == ("name", "photo")  # in bound column order


def test_schemaless_coercion_errors_name_the_column() -> None:
    with pytest.raises(DecodeError, match="column 'id'.*str value cannot be converted to int32"):
        to_event({"op": "c", "after": {"id": "1"}, "source": SOURCE}, None, SCHEMALESS)
    with pytest.raises(DecodeError, match="column 'id'"):
        to_event({"op": "c", "after": {"id": 2**40}, "source": SOURCE}, None, SCHEMALESS)
    e = to_event({"op": "c", "after": {"name": {"a": [1]}}, "source": SOURCE}, None, SCHEMALESS)
    assert e.row == {"name": '{"a":[1]}'}


def test_field_outside_batch_schema() -> None:
    struct = ConnectField("struct", fields=(ConnectField("int32", field_name="id"),
                                            ConnectField("string", field_name="new_col")))
    plan = row_plan(COLS, struct, samples.PLACEHOLDER)
    assert to_event({"op": "c", "after": {"id": 1, "new_col": None}, "source": SOURCE}, None, plan).row == {"id": 1}
    with pytest.raises(DecodeError, match="'new_col' is not a column of this batch"):
        to_event({"op": "c", "after": {"id": 1, "new_col": "v"}, "source": SOURCE}, None, plan)


def test_source_type_that_does_not_fit_bound_column() -> None:
    from cdc.common.errors import UnboundColumns

    struct = ConnectField("struct", fields=(ConnectField("string", field_name="id"),))
    plan = row_plan(COLS, struct, samples.PLACEHOLDER)
    with pytest.raises(DecodeError, match="column 'id'.*string does not fit.*int32") as info:
        to_event({"op": "c", "after": {"id": "1"}, "source": SOURCE}, None, plan)
    assert not isinstance(info.value, UnboundColumns)  # no widening holds it: a dead letter
    # A type the bound column widens to (int32 -> int64): the job widens the batch schema and stages again.
    wider = row_plan(COLS, ConnectField("struct", fields=(ConnectField("int64", field_name="id"),)), samples.PLACEHOLDER)
    with pytest.raises(UnboundColumns, match="column 'id': source type int64 is wider than the batch column type int32"):
        to_event({"op": "c", "after": {"id": 1}, "source": SOURCE}, None, wider)
