"""Connectors beyond PostgreSQL and MySQL, end to end on the local broker: each connector's ordering across batches."""

from __future__ import annotations

from tests.integration.events import sqlserver


def test_sqlserver_auto_ordering_across_batches_ignores_an_older_lsn(make_pipe):
    p = make_pipe()
    p.send(sqlserver("r", 1, {"id": 1, "name": "snap", "bio": None}, "0000002d:00000a40:0003", None, None),
           sqlserver("r", 2, {"id": 2, "name": "snap2", "bio": None}, "0000002d:00000a40:0003", None, None),
           sqlserver("u", 1, {"id": 1, "name": "v2", "bio": None}, "0000002e:00000010:0002", "0000002e:00000008:0004"))
    first = p.run()
    assert first["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None), 2: ("snap2", None)}
    # second batch: a redelivered older change of key 1 (lower VLF, higher block/slot) and a newer change of key 2
    p.send(sqlserver("u", 1, {"id": 1, "name": "stale", "bio": None},
                     "0000002d:ffff0000:ffff", "0000002d:ffff0000:fff0"),
           sqlserver("u", 2, {"id": 2, "name": "v2", "bio": None}, "0000002e:00000010:0002", "0000002e:00000008:0005"))
    second = p.run()
    assert second["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None), 2: ("v2", None)}
    assert p.rows("__commit_lsn_vlf", "__commit_lsn_pos", "__change_lsn_vlf", "__change_lsn_pos",
                  "__event_serial_no") == {1: (0x2E, 0x10 << 16 | 2, 0x2E, 0x8 << 16 | 4, 1),
                                           2: (0x2E, 0x10 << 16 | 2, 0x2E, 0x8 << 16 | 5, 1)}


def test_sqlserver_explicit_change_lsn_ordering_is_not_a_dead_letter(make_pipe):
    p = make_pipe(ordering=["source.change_lsn"])
    p.send(sqlserver("c", 1, {"id": 1, "name": "v1", "bio": None}, "0000002d:00000a40:0005", "0000002d:00000a40:0002"))
    assert p.run()["dead_letters"] == 0
    p.send(sqlserver("u", 1, {"id": 1, "name": "stale", "bio": None},
                     "0000002d:00000a3f:ffff", "0000002d:00000a3f:fff0"),
           sqlserver("u", 1, {"id": 1, "name": "v2", "bio": None}, "0000002d:00000a41:0002", "0000002d:00000a41:0001"))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None)}
    assert p.rows("__ord_source_change_lsn") == {1: (0x2D << 48 | 0xA41 << 16 | 1,)}


def test_mongodb_documents_partial_updates_and_ordering_across_batches(make_pipe):
    """No primary_key configured: ``_id`` comes from the message key ({"id": "<_id>"}), so updates without the
    document and deletes (no ``after``) still find their row (the Avro twin configures primary_key: [_id])."""
    from tests.integration.events import mongodb

    p = make_pipe()
    doc = {"_id": {"$numberLong": "1004"}, "name": "Anne", "visits": {"$numberInt": "3"}, "bio": "b",
           "address": {"city": "Oslo"}}
    p.send(mongodb("c", "1004", doc, ts_s=100, ord=1), mongodb("c", "1005", {**doc, "name": "Bo"}, ts_s=100, ord=2))
    assert p.run()["dead_letters"] == 0

    def docs(*cols):
        return {r["_id"]: tuple(r[c] for c in cols) for r in p.spark.table(p.target).collect()}

    assert docs("name", "visits", "bio", "address") == {"1004": ("Anne", 3, "b", '{"city":"Oslo"}'),
                                                        "1005": ("Bo", 3, "b", '{"city":"Oslo"}')}
    # second batch: an update without the full document, an older (redelivered) full update, a delete
    p.send(mongodb("u", "1004", updated={"name": "Anne Marie"}, removed=["bio"], ts_s=101, ord=1),
           mongodb("u", "1004", {**doc, "name": "stale"}, ts_s=100, ord=5),
           mongodb("d", "1005", ts_s=101, ord=2))
    assert p.run()["dead_letters"] == 0
    assert docs("name", "visits", "bio", "address") == {"1004": ("Anne Marie", 3, None, '{"city":"Oslo"}')}
    assert docs("__oplog_ts_sec", "__oplog_ord") == {"1004": (101, 1)}
    assert p.spark.table(p.target).columns[0] == "_id"


def test_flattened_events_order_by_the_added_lsn_across_batches(make_pipe):
    from tests.integration.events import flattened

    p = make_pipe(envelope="flattened")
    p.send(flattened("c", 1, {"id": 1, "name": "a", "bio": None}, 100),
           flattened("c", 2, {"id": 2, "name": "b", "bio": "x"}, 101))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("a", None), 2: ("b", "x")}
    p.send(flattened("u", 1, {"id": 1, "name": "stale", "bio": None}, 90),
           flattened("d", 2, {"id": 2, "name": "b", "bio": "x"}, 120),
           flattened("u", 1, {"id": 1, "name": "a2", "bio": None}, 130))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("a2", None)}
    assert p.rows("__lsn", "__op") == {1: (130, "u")}
    from cdc.schema.columns import is_meta

    # the SMT's added fields are not columns (__deleted/__source_ts_ms went to the source block, not the row)
    assert [c for c in p.spark.table(p.target).columns if not is_meta(c)] == ["id", "name", "bio"]


def test_oracle_commit_scn_ordering_across_batches_with_scns_wider_than_63_bits(make_pipe):
    from tests.integration.events import oracle

    big = 2**64 + 10
    p = make_pipe()
    p.send(oracle("r", 1, {"id": 1, "name": "snap", "bio": None}, 5000, None),
           oracle("u", 1, {"id": 1, "name": "v2", "bio": None}, 4990, 5010))  # began before, committed after
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None)}
    p.send(oracle("u", 1, {"id": 1, "name": "stale", "bio": None}, 5008, 5009),
           oracle("u", 1, {"id": 1, "name": "big", "bio": None}, big, big + 1))
    assert p.run()["dead_letters"] == 0
    p.send(oracle("u", 1, {"id": 1, "name": "below-big", "bio": None}, 2**63 + 5, 2**63 + 6))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("big", None)}
    assert p.rows("__commit_scn_hi", "__commit_scn_lo", "__scn_hi", "__scn_lo") == {
        1: (divmod(big + 1, 10**18) + divmod(big, 10**18))}


def test_real_sqlserver_and_flattened_samples_end_to_end(make_pipe):
    """Real Debezium output (../shared/fixtures/debezium, sources in its SOURCES.md) produced byte for byte: a SQL
    Server 1.6.0 delete with Decimal and Timestamp columns (JsonConverter with schemas; soft delete keeps its before
    image) and an ExtractNewRecordState row (add.fields op,table,lsn,source.ts_ms; delete rewrite) of PostgreSQL."""
    from datetime import date, datetime
    from decimal import Decimal

    from tests.unit.cdc.decode.samples import raw

    p = make_pipe(delete_mode="soft")
    p.send((raw("misc/sqlserver_1.6.0_decimal_delete_key.json"), raw("misc/sqlserver_1.6.0_decimal_delete_value.json")))
    assert p.run()["dead_letters"] == 0
    got = [r.asDict() for r in p.spark.table(p.target).collect()]
    assert [{k: v for k, v in r.items() if not k.startswith("__") or k == "__deleted"} for r in got] == [
        {"empno": 11, "fname": "Yossi", "lname": "Mague", "job": "PFE", "mgr": 1, "hiredate": datetime(2019, 7, 9),
         "sal": Decimal("200000.0000"), "comm": Decimal("10.0000"), "dept": 3, "__deleted": True}]
    assert (got[0]["__op"], got[0]["__commit_lsn_vlf"], got[0]["__commit_lsn_pos"], got[0]["__change_lsn_pos"],
            got[0]["__event_serial_no"]) == ("d", 0x3A, 0x2F50 << 16 | 5, 0x2F50 << 16 | 2, 1)

    f = make_pipe(envelope="flattened", primary_key=["id"])  # the sample is a value only (no message key)
    f.send((None, raw("unwrap-smt/pg_unwrap_addfields_rewrite_orders.json")))
    assert f.run()["dead_letters"] == 0
    assert [tuple(r) for r in f.spark.sql(f"SELECT id, order_date, purchaser, quantity, product_id, __op, "
                                          f"__last_commit_lsn, __lsn FROM {f.target}").collect()] == [
        (10003, date(2016, 2, 19), 1002, 2, 106, "r", 33832959, 33832960)]  # a snapshot read: (S - 1, S)
