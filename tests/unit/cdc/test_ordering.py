import pytest

from cdc.errors import OrderingError
from cdc.ordering import Ordering, binlog_file_seq, from_columns, resolve


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
        resolve("auto", "sqlserver", "inv.c")


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


def test_scenario_05_position_regressions_are_detected_far_below_only():
    from cdc.errors import PositionRegression
    from cdc.regression import check

    before = {0: (12, 900, 0)}
    check("t", "x", "mysql", None, {0: (11, 50, 0)}, before)  # a restart redelivers from the previous file: fine
    with pytest.raises(PositionRegression, match="partition 0.*ordering_epoch to 1"):
        check("t", "x", "mysql", None, {0: (1, 4, 0)}, before)  # RESET MASTER
    check("t", "x", "mysql", 1, {0: (1, 1, 4, 0)}, {0: (12, 900, 0)})  # the new epoch: newer whatever the position
    pg = {0: (7_000_000_000, 7_000_000_100)}
    check("t", "x", "postgresql", None, {0: (6_999_000_000, 6_999_000_500)}, pg)  # redelivery
    with pytest.raises(PositionRegression):
        check("t", "x", "postgresql", None, {0: (22_000_000, 22_000_100)}, pg)  # a new cluster
    check("t", "x", "explicit", None, {0: (1,)}, {0: (99,)})  # unknown meaning: not checked
