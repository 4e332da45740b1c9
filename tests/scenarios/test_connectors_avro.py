"""Connectors in Avro, end to end on the local broker and the test schema registry: each connector's ordering across
batches (the JSON twins of these cases are in test_connectors.py). SQL Server and Oracle events go through the
vectorised Avro path, MongoDB and flattened events through the per-record one."""

from __future__ import annotations

from tests.integration import events
from tests.unit.cdc.decode.connect_avro import AvroWire
from tests.unit.cdc.decode.connector_events import flat, mongo


def avro_pipe(make_pipe, registry, **table):
    p = make_pipe(fmt="avro", schema_registry={"url": registry.url}, **table)
    wire = AvroWire(registry.url, p.topic)
    return p, lambda *records: p.send(*(wire.record(k, v) for k, v in records))


def test_sqlserver_avro_ordering_across_batches(make_pipe, registry):
    p, send = avro_pipe(make_pipe, registry)
    ss = events.sqlserver
    send(ss("r", 1, {"id": 1, "name": "snap", "bio": None}, "0000002d:00000a40:0003", None, None),
         ss("r", 2, {"id": 2, "name": "snap2", "bio": None}, "0000002d:00000a40:0003", None, None),
         ss("u", 1, {"id": 1, "name": "v2", "bio": None}, "0000002e:00000010:0002", "0000002e:00000008:0004"))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None), 2: ("snap2", None)}
    # an older change of key 1 (lower VLF, higher block/slot) and a newer change of key 2
    send(ss("u", 1, {"id": 1, "name": "stale", "bio": None}, "0000002d:ffff0000:ffff", "0000002d:ffff0000:fff0"),
         ss("u", 2, {"id": 2, "name": "v2", "bio": None}, "0000002e:00000010:0002", "0000002e:00000008:0005"))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None), 2: ("v2", None)}
    assert p.rows("__commit_lsn_vlf", "__commit_lsn_pos", "__change_lsn_vlf", "__change_lsn_pos",
                  "__event_serial_no") == {1: (0x2E, 0x10 << 16 | 2, 0x2E, 0x8 << 16 | 4, 1),
                                           2: (0x2E, 0x10 << 16 | 2, 0x2E, 0x8 << 16 | 5, 1)}


def test_oracle_avro_ordering_across_batches(make_pipe, registry):
    p, send = avro_pipe(make_pipe, registry)
    big = 2**64 + 10
    send(events.oracle("r", 1, {"id": 1, "name": "snap", "bio": None}, 5000, None),
         events.oracle("u", 1, {"id": 1, "name": "v2", "bio": None}, 4990, 5010))  # began before, committed after
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None)}
    send(events.oracle("u", 1, {"id": 1, "name": "stale", "bio": None}, 5008, 5009),
         events.oracle("u", 1, {"id": 1, "name": "big", "bio": None}, big, big + 1))
    assert p.run()["dead_letters"] == 0
    send(events.oracle("u", 1, {"id": 1, "name": "below-big", "bio": None}, 2**63 + 5, 2**63 + 6))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("big", None)}
    assert p.rows("__commit_scn_hi", "__commit_scn_lo", "__scn_hi", "__scn_lo") == {
        1: (divmod(big + 1, 10**18) + divmod(big, 10**18))}


def test_mongodb_avro_documents_partial_updates_and_ordering_across_batches(make_pipe, registry):
    p, send = avro_pipe(make_pipe, registry, primary_key=["_id"], max_dead_letter_ratio=0.5, compacted=True)
    doc = {"_id": {"$numberLong": "1004"}, "name": "Anne", "visits": {"$numberInt": "3"}, "bio": "b",
           "address": {"city": "Oslo"}}
    send(mongo("c", "1004", doc, ts_s=100, ord=1), mongo("c", "1005", {**doc, "name": "Bo"}, ts_s=100, ord=2))
    assert p.run()["dead_letters"] == 0
    assert p.rows("name", "visits", "bio", "address") == {"1004": ("Anne", 3, "b", '{"city":"Oslo"}'),
                                                          "1005": ("Bo", 3, "b", '{"city":"Oslo"}')}
    # an update without the full document, an older (redelivered) full update, a delete and a nested-path update
    # (a dead letter: it cannot be applied without the document)
    send(mongo("u", "1004", updated={"name": "Anne Marie"}, removed=["bio"], ts_s=101, ord=1),
         mongo("u", "1004", {**doc, "name": "stale"}, ts_s=100, ord=5),
         mongo("d", "1005", ts_s=101, ord=2),
         mongo("u", "1004", updated={"address.city": "Bergen"}, ts_s=102, ord=1))
    assert p.run()["dead_letters"] == 1
    assert p.rows("name", "visits", "bio", "address") == {"1004": ("Anne Marie", 3, None, '{"city":"Oslo"}')}
    assert p.rows("__oplog_ts_sec", "__oplog_ord") == {"1004": (101, 1)}
    # a full-document update (capture.mode change_streams_update_full) replaces the row in a later batch; on this
    # compacted topic a tombstone (key {"id": ...}) deletes its _id even though compaction dropped the delete event
    send(mongo("u", "1004", {**doc, "name": "Full", "visits": {"$numberInt": "9"}}, ts_s=103, ord=1,
               updated={"name": "Full"}),
         mongo("c", "1006", {**doc, "name": "Cy"}, ts_s=103, ord=2), mongo("tombstone", "1006"))
    assert p.run()["dead_letters"] == 0
    assert p.rows("name", "visits", "bio") == {"1004": ("Full", 9, "b")}


def test_flattened_avro_orders_by_the_added_lsn_across_batches(make_pipe, registry):
    p, send = avro_pipe(make_pipe, registry, envelope="flattened")
    row = {"id": 1, "name": "a", "born": None, "amount": None, "bio": None}
    send(flat("c", 1, row, 100), flat("c", 2, {**row, "id": 2, "name": "b", "bio": "x"}, 101))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("a", None), 2: ("b", "x")}
    send(flat("u", 1, {**row, "name": "stale"}, 90),
         flat("d", 2, {**row, "id": 2, "name": "b", "bio": "x"}, 120), flat("d", 2, None, 120),
         flat("u", 1, {**row, "name": "a2"}, 130))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("a2", None)}
    assert p.rows("__lsn", "__op") == {1: (130, "u")}
    from cdc.schema.columns import is_meta

    # the SMT's added fields are not columns
    assert [c for c in p.spark.table(p.target).columns if not is_meta(c)] == ["id", "name", "born", "amount", "bio"]


def test_keyless_avro_topic_is_appended_with_a_warning(make_pipe, registry):
    """A PostgreSQL table without a primary key in Avro (no message key, none configured): append mode, identified
    by partition/offset, with the summary warning (the vectorised Avro path: key columns come from the row image)."""
    p, send = avro_pipe(make_pipe, registry)
    rows = [("c", {"id": 1, "name": "a", "bio": None}, 1), ("c", {"id": 1, "name": "a", "bio": None}, 2),
            ("u", {"id": 1, "name": "b", "bio": "long"}, 3), ("d", {"id": 1, "name": "b", "bio": "long"}, 4)]
    keyless = [(None, events.pg(op, 1, r, lsn)[1]) for op, r, lsn in rows]
    send(*keyless)
    s = p.run()
    assert (s["status"], s["inserted"], s["dead_letters"]) == ("committed", 4, 0)
    assert any("no message key" in w and "append" in w for w in s["warnings"])
    send(keyless[1])  # the same change again is another record: a new row
    assert p.run()["inserted"] == 1
    got = p.spark.sql(f"SELECT __op, id, name, bio, __lsn, __kafka_offset FROM {p.target} ORDER BY __kafka_offset")
    assert [tuple(r) for r in got.collect()] == [("c", 1, "a", None, 1, 0), ("c", 1, "a", None, 2, 1),
                                                 ("u", 1, "b", "long", 3, 2), ("d", 1, "b", "long", 4, 3),
                                                 ("c", 1, "a", None, 2, 4)]
    assert p.run()["status"] == "empty"
