"""The committed-cursor rule (pure) and the cursor reset's plan."""

from cdc.ledger.model import FORGOTTEN, committed_cursor, cursor_sql, newest_positions, newest_resets
from cdc.run.reset import cursor_moves


def row(batch, part, end, mode="incremental", status="committed", topic="t", table="a.b"):
    return {"table_name": table, "batch_id": batch, "topic": topic, "partition": part, "end_offset": end,
            "mode": mode, "status": status}


def test_cursor_is_the_newest_committed_incremental_or_reset_row():
    rows = [row(1, 0, 10), row(2, 0, 20), row(3, 0, 99, mode="backfill"), row(4, 0, 30, status="staged"),
            row(2, 1, 7), row(5, 1, 0, mode="reset"), row(1, 0, 5, table="other")]
    assert committed_cursor(rows, "a.b") == {"t": {0: 20, 1: 0}}  # a reset may move it backwards


def test_a_forgotten_partition_has_no_cursor():
    assert committed_cursor([row(1, 0, 10), row(1, 3, 4), row(2, 3, FORGOTTEN, mode="reset")], "a.b") == {"t": {0: 10}}
    assert f"HAVING e > {FORGOTTEN}" in cursor_sql("l", "p", "a.b", "t")
    assert "max_by(end_offset, batch_id)" in cursor_sql("l", "p", "a.b", "t")


def test_reset_moves_only_partitions_beyond_their_end_or_below_their_start_or_gone_or_explicit():
    wm = {0: (0, 5), 1: (3, 40)}
    assert cursor_moves({0: 50, 1: 20, 2: 9}, wm, {}) == {0: (50, 0), 2: (9, FORGOTTEN)}
    assert cursor_moves({0: 2, 1: 1}, wm, {}) == {1: (1, 3)}  # offsets 1..2 deleted by retention: the gap accepted
    assert cursor_moves({0: 5, 1: 20}, wm, {1: 10}) == {1: (20, 10)}
    assert cursor_moves({0: 5, 1: 20}, wm, {}) == {}
    # the topic was deleted and created again (another Kafka topic id): every cursor moves, also one inside the log
    assert cursor_moves({0: 5, 1: 20}, wm, {}, recreated=True) == {0: (5, 0), 1: (20, 3)}
    assert cursor_moves({0: 0, 1: 20}, wm, {1: 4}, recreated=True) == {1: (20, 4)}


def test_newest_positions_per_partition_epoch_positions_win():
    rows = [{"partition": 0, "max_position": "[5, 9]"}, {"partition": 0, "max_position": "[7, 1]"},
            {"partition": 1, "max_position": None}, {"partition": 1, "max_position": "[90, 90]"},
            {"partition": 1, "max_position": "[1, 2, 3]"}]
    assert newest_positions(rows) == {0: (7, 1), 1: (1, 2, 3)}


def test_known_servers_per_partition_none_recorded_is_absent():
    from cdc.ledger.model import known_servers

    rows = [{"partition": 0, "server_ids": '["1"]'}, {"partition": 0, "server_ids": '["2", "1"]'},
            {"partition": 1, "server_ids": None}, {"partition": 2, "server_ids": "[]"}, {"partition": 3}]
    assert known_servers(rows) == {0: {"1", "2"}, 2: set()}


def test_a_reset_written_twice_moves_the_cursor_as_once():
    """``Ledger.reset_cursor`` retries its INSERT when Iceberg cannot tell whether the commit landed
    (CommitStateUnknownException); if it had, the reset's rows are there twice: same batch id, same ends."""
    once = [row(1, 0, 50), row(2, 0, 10, mode="reset"), row(2, 1, 4, mode="reset")]
    assert committed_cursor(once + once[1:], "a.b") == committed_cursor(once, "a.b") == {"t": {0: 10, 1: 4}}


def test_newest_resets_are_the_committed_reset_rows_before_the_batch_per_partition():
    rows = [row(2, 0, 0, mode="reset"), row(5, 0, 3, mode="reset"), row(7, 0, 1, mode="reset", status="claimed"),
            row(4, 1, 0, mode="reset"), row(9, 1, 0, mode="reset"), row(6, 2, 10)]
    assert newest_resets(rows, 9) == ((0, 5), (1, 4))  # the batch's own id and later ones do not count
    assert newest_resets([row(1, 0, 10)], 2) == ()
