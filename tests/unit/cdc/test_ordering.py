import pytest

from cdc.errors import OrderingError
from cdc.ordering import Ordering, binlog_file_seq, from_columns, resolve


def test_postgres_orders_by_lsn():
    o = resolve("auto", "postgresql", "inv.c")
    assert o.columns == ("__lsn",)
    assert o.values({"lsn": 34466480, "connector": "postgresql"}) == (34466480,)


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
        Ordering("postgresql").values(source)


def test_binlog_file_seq_rejects_names_without_number():
    assert binlog_file_seq("mysql-bin.000123") == 123
    with pytest.raises(OrderingError):
        binlog_file_seq("mysql-bin")


def test_from_columns_recognises_existing_tables():
    assert from_columns(["id", "__lsn"]) == Ordering("postgresql")
    assert from_columns(["id", "__binlog_file_seq", "__binlog_pos", "__binlog_row"]) == Ordering("mysql")
    assert from_columns(["id"]) is None
