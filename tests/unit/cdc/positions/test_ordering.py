import json
from pathlib import Path

import pytest

from cdc.common.errors import OrderingError
from cdc.positions.ordering import Ordering, binlog_file_seq, from_columns, resolve


def test_postgres_orders_by_commit_then_lsn():
    o = resolve("auto", "postgresql", "inv.c")
    assert o.columns == ("__last_commit_lsn", "__lsn")
    # real 1.x/2.x events: sequence = [last commit LSN, LSN] (../shared/fixtures/debezium: pg_*_value.json)
    assert o.values({"lsn": 34466480, "sequence": '["34442256","34466480"]'}, op="u") == (34442256, 34466480)
    assert o.values({"lsn": 34466480}, op="u") == (34466480, 34466480)  # Debezium < 1.4: LSN order


def test_scenario_10_a_transaction_committed_after_the_snapshot_is_newer_than_the_snapshot_read():
    """Snapshot at LSN S = 2000. Transaction T began before it (its change at LSN 1500) and committed after it, the
    first transaction streamed after the snapshot (last commit LSN = S). By LSN alone T's change is older than the
    snapshot row and was skipped; by (last commit LSN, LSN) it is newer."""
    o = Ordering("postgresql")
    snapshot_row = o.values({"lsn": 2000, "sequence": '[null,"2000"]'}, op="r")
    in_flight = o.values({"lsn": 1500, "sequence": '["2000","1500"]'}, op="u")
    assert in_flight > snapshot_row
    assert Ordering("postgresql_lsn").values({"lsn": 1500}) < Ordering("postgresql_lsn").values({"lsn": 2000})
    later_tx = o.values({"lsn": 1600, "sequence": '["2400","1600"]'}, op="u")  # commits after T
    assert later_tx > in_flight


def test_legacy_postgres_tables_keep_lsn_ordering():
    o = Ordering("postgresql_lsn")
    assert o.columns == ("__lsn",)
    assert o.values({"lsn": 34466480, "sequence": '["1","34466480"]'}) == (34466480,)


def test_mysql_binlog_rotation_orders_by_file_number_then_pos_then_row():
    o = resolve("auto", "mysql", "inv.c")
    before_rotation = o.values({"file": "mysql-bin.000009", "pos": 987654, "row": 3})
    after_rotation = o.values({"file": "mysql-bin.000010", "pos": 4, "row": 0})
    assert before_rotation == (9, 987654, 3)
    assert after_rotation > before_rotation
    assert o.values({"file": "mysql-bin.000010", "pos": 4, "row": 1}) > after_rotation


def test_mysql_row_defaults_to_zero_when_absent():
    assert resolve("auto", "mysql", "t").values({"file": "binlog.000001", "pos": 154}) == (1, 154, 0)


def test_unknown_connector_needs_explicit_ordering():
    with pytest.raises(OrderingError, match="set 'ordering"):
        resolve("auto", "db2", "inv.c")


def test_explicit_paths_accept_integer_strings_and_envelope_ts():
    o = resolve(["source.change_lsn", "ts_ms"], None, "t")
    assert o.columns == ("__ord_source_change_lsn", "__ord_ts_ms")
    assert o.values({"change_lsn": "42"}, envelope_ts_ms=7) == (42, 7)


@pytest.mark.parametrize("source", [{}, {"lsn": None}, {"lsn": "abc"}, {"lsn": True}])
def test_missing_or_bad_lsn_is_an_ordering_error(source):
    with pytest.raises(OrderingError):
        Ordering("postgresql").values(source, op="u")


def test_binlog_file_seq_rejects_names_without_number():
    assert binlog_file_seq("mysql-bin.000123") == 123
    with pytest.raises(OrderingError):
        binlog_file_seq("mysql-bin")


def test_from_columns_recognises_existing_tables():
    assert from_columns(["id", "__lsn"]) == Ordering("postgresql_lsn")
    assert from_columns(["id", "__last_commit_lsn", "__lsn"]) == Ordering("postgresql")
    assert from_columns(["id", "__binlog_file_seq", "__binlog_pos", "__binlog_row"]) == Ordering("mysql")
    assert from_columns(["id"]) is None


def test_ordering_epochs_follow_the_kafka_offsets_where_each_epoch_started():
    o = Ordering("mysql").with_epoch(1, {0: 100, 1: 40})
    assert o.columns == ("__ordering_epoch", "__binlog_file_seq", "__binlog_pos", "__binlog_row")
    src = {"file": "mysql-bin.000001", "pos": 4, "row": 0}
    assert o.position(src, None, "u", 0, 100) == (1, 1, 4, 0)  # after the failover: new epoch
    assert o.position(src, None, "u", 0, 99) == (0, 1, 4, 0)  # a replay of older offsets keeps the old epoch
    assert o.position(src, None, "u", 2, 0) == (1, 1, 4, 0)  # a partition created later
    assert o.with_epoch(1, {0: 500}) == o  # known epoch: where it started does not move
    assert o.with_epoch(2, {0: 900}).epoch == 2
    assert Ordering("mysql").position(src, None, "u", 0, 5) == (1, 4, 0)  # no epoch column


def _far_back(kind, lead, hi, pos, partition=0):
    """Evaluate ``cdc.positions.regression.far_back_sql`` on one staged record (sqlite reads Spark's backtick quoting)."""
    import sqlite3

    from cdc.positions.ordering import Ordering
    from cdc.positions.regression import far_back_sql

    cols = Ordering(kind, epochs=((0, ()),) if lead else None).columns
    pred = far_back_sql(kind, cols, lead, {partition: hi})
    if pred is None:
        return False
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE s (__partition, " + ", ".join(f"`{c}`" for c in cols) + ")")
    db.execute(f"INSERT INTO s VALUES ({', '.join('?' * (len(cols) + 1))})", (partition, *pos))
    return db.execute(f"SELECT count(*) FROM s WHERE {pred}").fetchone()[0] == 1


def test_scenario_05_position_regressions_are_detected_far_below_only():
    before = (12, 900, 0)
    assert not _far_back("mysql", 0, before, (11, 50, 0))  # a restart redelivers from the previous file: fine
    assert not _far_back("mysql", 0, (3, 9, 0), (1, 50, 0))  # young log, small files: not "far"
    assert not _far_back("mysql", 0, (30, 9, 0), (20, 50, 0))  # not down to half
    assert not _far_back("postgresql", 0, (30, 30), (10, 10))  # tiny LSNs: a redelivery, not a new cluster
    assert _far_back("mysql", 0, before, (1, 4, 0))  # RESET MASTER
    assert not _far_back("mysql", 1, (0, 12, 900, 0), (1, 1, 4, 0))  # the new epoch: newer whatever the position
    assert _far_back("mysql", 1, (1, 12, 900, 0), (1, 1, 4, 0))  # a second failover within an epoch
    pg = (7_000_000_000, 7_000_000_100)
    assert not _far_back("postgresql", 0, pg, (6_999_000_000, 6_999_000_500))  # redelivery
    assert _far_back("postgresql", 0, pg, (22_000_000, 22_000_100))  # a new cluster
    assert not _far_back("explicit", 0, (99,), (1,))  # unknown meaning: not checked


@pytest.mark.parametrize("kind", ["mysql", "postgresql"])
def test_scenario_05_the_cheap_pre_check_never_misses_what_the_sql_finds(kind):
    import random

    from cdc.positions.regression import could_fall

    rng = random.Random(5)
    for _ in range(400):
        top = (rng.randint(1, 40), rng.randint(0, 10**4), 0) if kind == "mysql" else \
            (rng.randint(0, 1 << 34), rng.randint(0, 1 << 34))
        pos = tuple(rng.randint(0, v + 5) for v in top)
        sql_says = _far_back(kind, 0, top, pos)
        assert could_fall(kind, 0, {0: top}, {0: pos}) == sql_says, (top, pos)


def test_scenario_05_highest_position_is_the_committed_or_the_batchs_newest():
    from cdc.positions.regression import highest

    assert highest({0: (12, 5, 0), 1: None}, {0: (11, 9, 0), 1: (3, 1, 0), 2: (4, 4, 0)}, 3) == \
        {0: (12, 5, 0), 1: (3, 1, 0), 2: (4, 4, 0)}
    assert highest({0: (0, 1, 2, 0)}, {0: (12, 900, 0)}, 4) == {0: (0, 12, 900, 0)}  # pre-epoch ledger rows: epoch 0


def test_scenario_05_a_partition_without_committed_changes_is_judged_against_the_table():
    """Soak seed 220: a partition that committed nothing takes the table's highest position (positions of a shorter,
    pre-epoch width belong to epoch 0) and every server id committed from any partition; partitions that committed
    keep their own, and a table that committed nothing has nothing to judge by."""
    from cdc.positions.regression import judged_by_table

    previous, known = {0: (5, 100), 1: (9,)}, {0: {"1"}, 1: {"2"}}
    assert judged_by_table([1, 2, 3], previous, known, 2) == (
        {0: (5, 100), 1: (9,), 2: (5, 100), 3: (5, 100)}, {0: {"1"}, 1: {"2"}, 2: {"1", "2"}, 3: {"1", "2"}})
    assert judged_by_table([2], {0: (3, 9), 1: (4, 1)}, {}, 2) == ({0: (3, 9), 1: (4, 1), 2: (4, 1)}, {})
    assert judged_by_table([0], previous, known, 2) == (previous, known)
    assert judged_by_table([0, 1], {}, {}, 2) == ({}, {})
    # a table's first batch under a raised epoch: each partition also by the batch's other partitions' newest
    assert judged_by_table([0, 1, 2], {}, {}, 2, {0: (0, 90), 1: (0, 3), 2: None}) == (
        {0: (0, 3), 1: (0, 90), 2: (0, 90)}, {})


def test_scenario_05_a_raised_epoch_starts_where_positions_fell_else_the_batch_is_refused():
    from cdc.common.errors import PositionRegression
    from cdc.positions.ordering import Ordering
    from cdc.positions.regression import PENDING, settle

    hi = {0: (0, 12, 1000, 0), 1: (0, 12, 1100, 0)}
    raised = Ordering("mysql").with_epoch(1, {0: PENDING, 1: PENDING})
    got = settle("t", "x", raised, {0: (3, (0, 1, 4, 0))}, hi)
    assert got.epochs == ((1, ((0, 3), (1, PENDING))),)  # partition 1 has not shown the fall yet: still waiting
    assert [got.epoch_of(0, o) for o in (2, 3, 4)] == [0, 1, 1] and got.epoch_of(1, 10**9) == 0
    assert settle("t", "x", got, {}, hi) is got
    started = Ordering("mysql").with_epoch(1, {0: 5})  # a start already shown is not moved: a second failover
    with pytest.raises(PositionRegression, match="ordering_epoch to 2"):
        settle("t", "x", started, {0: (7, (1, 1, 4, 0))}, hi)
    with pytest.raises(PositionRegression, match="partition 0 offset 3.*ordering_epoch to 1"):
        settle("t", "x", Ordering("mysql"), {0: (3, (1, 4, 0))}, {0: (12, 1000, 0)})
    with pytest.raises(PositionRegression, match="ordering_epoch to 2"):  # a second failover: raise it again
        settle("t", "x", got, {0: (9, (1, 1, 4, 0))}, {0: (1, 12, 1000, 0)})


def test_scenario_05_a_server_never_seen_in_the_partition_below_what_it_reached_is_a_failover():
    """The server rule (cdc.positions.regression): a failover to a replica only slightly behind is no far fall."""
    from cdc.positions.regression import Fall, new_server_falls

    known, previous = {0: {"1"}}, {0: (12, 900, 0)}

    def falls(*firsts, known=known, previous=previous, width=3):
        return new_server_falls([(0, *f) for f in firsts], known, previous, width)

    assert falls(("2", 7, (12, 500, 0), None)) == {0: Fall(7, (12, 500, 0), (12, 900, 0), "2")}  # same file, lower
    assert falls(("2", 7, (11, 99_999, 0), None))[0].offset == 7  # one file back
    assert falls(("2", 7, (12, 950, 0), None)) == {}  # a new server ahead: the order holds (multi-source)
    assert falls(("2", 7, (12, 900, 0), None)) == {}  # equal: the later Kafka offset wins the tie anyway
    assert falls(("1", 7, (12, 500, 0), None)) == {}  # a known server below: a connector restart's redelivery
    assert falls(("0", 7, (12, 500, 0), None)) == {}  # snapshot reads carry server_id 0: no server
    # in the batch: below a change at an earlier offset, though above everything committed
    assert falls(("2", 7, (12, 950, 0), (12, 1000, 0))) == {0: Fall(7, (12, 950, 0), (12, 1000, 0), "2")}
    assert falls(("2", 9, (12, 500, 0), None), ("3", 5, (12, 600, 0), None))[0].server == "3"  # the first one
    # a partition whose ledger recorded no server ids (older ledger): compared within the batch only
    assert falls(("1", 7, (12, 500, 0), None), known={}) == {}
    assert falls(("1", 7, (12, 500, 0), (12, 600, 0)), known={})[0].reached == (12, 600, 0)
    # a partition whose committed changes were snapshot reads only (no server): compared with them
    assert falls(("1", 7, (12, 500, 0), None), known={0: set()})[0].reached == (12, 900, 0)
    # with the epoch column: a pre-epoch ledger position is epoch 0; a change of a newer epoch is never below
    assert falls(("2", 7, (0, 12, 500, 0), None), width=4)[0].reached == (0, 12, 900, 0)
    assert falls(("2", 7, (1, 1, 4, 0), None), width=4) == {}


def test_scenario_05_server_ids_are_staged_as_text_without_snapshot_zeros_and_new_ones_found_per_partition():
    from cdc.positions.regression import server_identity, unknown_servers

    assert [server_identity(v) for v in (223344, "7", 0, "0", None, "")] == ["223344", "7", None, None, None, None]
    assert unknown_servers({0: ("1", "2"), 1: ("1",), 2: None, 3: (), 4: ("5",)}, {0: {"1"}, 1: {"1"}, 3: {"9"}}) == \
        {0: frozenset({"2"}), 4: frozenset({"5"})}


def test_scenario_05_a_new_server_below_is_refused_naming_it_or_starts_the_raised_epoch_there():
    from cdc.common.errors import PositionRegression
    from cdc.positions.ordering import Ordering
    from cdc.positions.regression import PENDING, Fall, settle

    with pytest.raises(PositionRegression, match=r"partition 0 offset 7: .*server_id 2 .*never seen.*\[12, 500, 0\]"
                       r".*\[12, 900, 0\].*ordering_epoch to 1"):
        settle("t", "x", Ordering("mysql"), {0: Fall(7, (12, 500, 0), (12, 900, 0), "2")}, {0: (12, 950, 0)})
    raised = Ordering("mysql").with_epoch(1, {0: PENDING})
    got = settle("t", "x", raised, {0: Fall(7, (0, 12, 500, 0), (0, 12, 900, 0), "2")}, {0: (0, 12, 950, 0)})
    assert got.epochs == ((1, ((0, 7),)),)


# ---- connectors beyond PostgreSQL and MySQL ----------------------------------------------------------------------
FIXTURES = Path(__file__).resolve().parents[5] / "shared" / "fixtures" / "debezium"


def _payload(rel: str) -> dict:
    path = FIXTURES / rel
    if not path.exists():
        pytest.skip(f"sample events not present: {path}")
    return json.loads(path.read_text())["payload"]


def test_sqlserver_auto_orders_by_commit_lsn_change_lsn_event_serial_no_from_the_real_sample():
    # misc/sqlserver_1.6.0_decimal_delete_value.json: a real SQL Server 1.6.0.Final delete
    payload = _payload("misc/sqlserver_1.6.0_decimal_delete_value.json")
    o = resolve("auto", payload["source"]["connector"], "dbo.emp")
    assert o.kind == "sqlserver"
    assert o.columns == ("__commit_lsn_vlf", "__commit_lsn_pos", "__change_lsn_vlf", "__change_lsn_pos",
                         "__event_serial_no")
    # commit_lsn 0000003a:00002f50:0005, change_lsn 0000003a:00002f50:0002, event_serial_no 1
    assert o.values(payload["source"], payload["ts_ms"], payload["op"]) == (
        0x3A, 0x2F50 << 16 | 5, 0x3A, 0x2F50 << 16 | 2, 1)
    assert all(-(2**63) <= v < 2**63 for v in o.values(payload["source"]))


def test_sqlserver_lsns_compare_as_numbers_not_as_text_or_by_one_part():
    o = Ordering("sqlserver")

    def pos(commit, change, serial=1):
        return o.values({"commit_lsn": commit, "change_lsn": change, "event_serial_no": serial})

    # the slot is the least significant part; the block offset outweighs any slot; the VLF outweighs both
    assert pos("0000002d:00000a40:0003", "0000002d:00000a40:0002") < \
        pos("0000002d:00000a40:0004", "0000002d:00000a40:0001")
    assert pos("0000002d:00000a40:ffff", "0000002d:00000a40:0001") < \
        pos("0000002d:00000a41:0000", "0000002d:00000a41:0000")
    assert pos("0000002d:ffffffff:ffff", "0000002d:ffffffff:fff0") < \
        pos("0000002e:00000001:0001", "0000002e:00000001:0001")
    assert pos("ffffffff:ffffffff:ffff", "ffffffff:ffffffff:ffff") == (2**32 - 1, 2**48 - 1, 2**32 - 1, 2**48 - 1, 1)
    # one transaction: same commit LSN, changes ordered by change LSN then event serial number (update = 2 rows)
    assert pos("0000002d:00000b00:0005", "0000002d:00000a40:0002", 2) > pos("0000002d:00000b00:0005",
                                                                            "0000002d:00000a40:0002", 1)
    assert pos("0000002d:00000B00:0005", "0000002D:00000a40:0002") == pos("0000002d:00000b00:0005",
                                                                        "0000002d:00000a40:0002")


def test_sqlserver_snapshot_reads_precede_changes_streamed_after_the_snapshot():
    o = Ordering("sqlserver")
    snapshot = o.values({"commit_lsn": "0000002d:00000a40:0003", "change_lsn": None, "event_serial_no": None},
                        op="r")
    assert snapshot == (0x2D, 0xA40 << 16 | 3, 0, 0, 0)
    assert o.values({"commit_lsn": "0000002d:00000a48:0002", "change_lsn": "0000002d:00000a40:0010",
                     "event_serial_no": 1}, op="u") > snapshot


@pytest.mark.parametrize("source", [{}, {"commit_lsn": None}, {"commit_lsn": "2d:a40:3"}, {"commit_lsn": 45},
                                    {"commit_lsn": "0000002d:00000a40:0003", "change_lsn": "x"}])
def test_sqlserver_missing_or_malformed_lsn_is_an_ordering_error(source):
    with pytest.raises(OrderingError, match="commit_lsn|change_lsn"):
        Ordering("sqlserver").values(source, op="u")


def test_explicit_sqlserver_lsn_path_orders_lsn_strings_in_one_bigint():
    payload = _payload("misc/sqlserver_1.6.0_decimal_delete_value.json")
    o = resolve(["source.change_lsn"], None, "dbo.emp")
    assert o.columns == ("__ord_source_change_lsn",)
    (v,) = o.values(payload["source"])
    assert v == 0x3A << 48 | 0x2F50 << 16 | 2
    assert o.values({"change_lsn": "0000003a:00002f51:0000"}) > (v,)
    assert o.values({"change_lsn": "00007fff:ffffffff:ffff"}) == (2**63 - 1,)
    with pytest.raises(OrderingError, match="ordering: auto"):
        o.values({"change_lsn": "00008000:00000000:0000"})
    assert o.values({"change_lsn": "42"}) == (42,)  # integer strings as before


def test_oracle_orders_by_commit_scn_then_scn_split_below_2_to_the_63():
    o = resolve("auto", "oracle", "DEBEZIUM.CUSTOMERS")
    assert o.columns == ("__commit_scn_hi", "__commit_scn_lo", "__scn_hi", "__scn_lo")
    # the source block of Debezium's Oracle connector documentation (LogMiner): scn and commit_scn are strings
    src = {"version": "2.5.0.Final", "connector": "oracle", "name": "server1", "ts_ms": 1520085154000,
           "snapshot": "false", "db": "ORCLPDB1", "schema": "DEBEZIUM", "table": "CUSTOMERS",
           "txId": "6.28.807", "scn": "2122184", "commit_scn": "2122185", "lcr_position": None}
    assert o.values(src, op="u") == (0, 2122185, 0, 2122184)
    # a later transaction that began earlier (lower scn) but committed later is newer
    assert o.values({**src, "scn": "2122180", "commit_scn": "2122190"}) > o.values(src)
    big = 2**64 + 7  # wider than 63 bits: still exact and ordered
    assert o.values({"scn": str(big), "commit_scn": str(big + 1)}) == (
        (big + 1) // 10**18, (big + 1) % 10**18, big // 10**18, big % 10**18)
    assert o.values({"scn": str(big), "commit_scn": str(big + 1)}) > o.values({"scn": str(big - 5),
                                                                              "commit_scn": str(10**19 - 1)})
    assert all(0 <= v < 2**63 for v in o.values({"scn": "9" * 36, "commit_scn": "9" * 36}))


def test_oracle_without_commit_scn_orders_by_scn():
    o = Ordering("oracle")
    snapshot = o.values({"scn": "2122184", "snapshot": "true"}, op="r")  # snapshot reads carry no commit_scn
    assert snapshot == (0, 2122184, 0, 2122184)
    assert o.values({"scn": "2122190", "commit_scn": "2122191"}, op="u") > snapshot
    assert o.values({"scn": 2122184, "commit_scn": ""}) == snapshot
    for bad in ({}, {"scn": "21x"}, {"scn": "-1"}, {"scn": "5", "commit_scn": "z"}):
        with pytest.raises(OrderingError, match="scn"):
            o.values(bad)


def test_mongodb_orders_by_oplog_seconds_then_ord():
    o = resolve("auto", "mongodb", "inventory.customers")
    assert o.columns == ("__oplog_ts_sec", "__oplog_ord")
    src = {"connector": "mongodb", "ts_ms": 1558965508000, "ord": 31}
    assert o.values(src, op="u") == (1558965508, 31)
    assert o.values({**src, "ord": 32}) > o.values(src)
    assert o.values({**src, "ts_ms": 1558965509000, "ord": 1}) > o.values({**src, "ord": 32})
    with pytest.raises(OrderingError, match="ts_ms"):
        o.values({"ord": 1})


def test_from_columns_recognises_connector_orderings_and_is_meta_knows_their_columns():
    from cdc.schema.columns import is_meta

    for kind in ("sqlserver", "oracle", "mongodb"):
        cols = Ordering(kind).columns
        assert from_columns(["id", *cols]) == Ordering(kind)
        assert from_columns(["id", "__ordering_epoch", *cols]) == Ordering(kind, (), ())
        assert all(is_meta(c) for c in cols)
    assert not is_meta("commit_lsn") and not is_meta("scn")


def test_a_batch_s_ordering_is_the_setting_else_the_table_s_else_the_newest_sampled_change_s_connector():
    """``sampled_ordering`` with the real JSON decoder over real MySQL 2.7.0 samples (key and value)."""
    from cdc.decode.json import JsonDecoder
    from cdc.positions.ordering import sampled_ordering

    folder = FIXTURES / "mysql"
    if not folder.exists():
        pytest.skip(f"sample events not present: {folder}")
    change = ((folder / "mysql_real_2.7.0_snapshot_read_key.json").read_bytes(),
              (folder / "mysql_real_2.7.0_snapshot_read_value.json").read_bytes())
    decoder = JsonDecoder("t", "__debezium_unavailable_value")
    assert sampled_ordering("auto", "db.t", decoder, [change, (None, b"not json")], []).kind == "mysql"
    assert sampled_ordering(["source.pos"], "db.t", decoder, [change], []) == resolve(["source.pos"], None, "db.t")
    held = from_columns(resolve("auto", "postgresql", "db.t").columns)
    assert sampled_ordering("auto", "db.t", decoder, [change], list(held.columns)) == held  # the table's wins
    with pytest.raises(OrderingError, match="db.t"):  # no change event sampled: no connector to order by
        sampled_ordering("auto", "db.t", decoder, [(None, b"not json")], [])


def test_an_incremental_snapshot_read_is_ordered_where_its_chunk_was_emitted():
    """Debezium 3.6's incremental snapshot reads (signal ``execute-snapshot``) carry ``source.lsn = null`` and
    ``sequence = ["X","X"]``, X the stream position at which the chunk was emitted (recorded from a real connector:
    tests/scenarios/test_debezium_postgres.py). Changes streamed before the window are older, changes after it
    newer; a key changed inside the window gets no read at all (Debezium drops it from the chunk)."""
    o = Ordering("postgresql")
    read = o.values({"lsn": None, "sequence": '["22134912","22134912"]', "snapshot": "incremental"}, op="r")
    assert read == (22134912, 22134912)
    before = o.values({"lsn": 22133712, "sequence": '["22133712","22133712"]'}, op="u")
    after = o.values({"lsn": 22136800, "sequence": '["22136744","22136800"]'}, op="u")
    assert before < read < after
    assert Ordering("postgresql_lsn").values({"lsn": None, "sequence": '["22134912","22134912"]'}, op="r") == \
        (22134912,)
    with pytest.raises(OrderingError, match="source.lsn"):  # a change without any position stays an error
        o.values({"lsn": None, "sequence": None}, op="u")
