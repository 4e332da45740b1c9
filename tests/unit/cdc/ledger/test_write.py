"""The ledger's rows as values and as SQL (``cdc.ledger.write``), pure."""

from __future__ import annotations

import json

from cdc.ledger.state import LedgerRange
from cdc.ledger.write import Held, claim_rows, commit_values, held_rows, rows_sql, sql_value


def test_sql_value_follows_the_column_s_type():
    assert sql_value("batch_id", 7) == "7L"
    assert sql_value("partition", 3) == "3"
    assert sql_value("claimed_at", 1_000_001) == "timestamp_micros(1000001)"
    assert sql_value("status", "it's") == "'it\\'s'"
    assert sql_value("target_snapshot_id", None) == "CAST(NULL AS BIGINT)"
    assert sql_value("a_newer_column", None) == "NULL"


def test_held_rows_are_the_claim_s_with_the_staged_and_committed_values():
    ranges = (LedgerRange("t", 0, 0, 10, 9, 1, 0, (7, 3), ("1",)), LedgerRange("t", 1, 5, 5, 0, 0, 0, None, ()))
    held = Held(4, "incremental", ranges, since=1, barrier=(4, 2), staged_at_us=123)
    claimed = claim_rows("p", "tb", 4, "incremental", ranges, "run", "me", 123)
    committed = commit_values({"inserted": 3}, None, {"merge": 1.23456}, 456)
    out = held_rows("p", "tb", held, "run", "me", committed)
    assert [{k: r[k] for k in claimed[0]} for r in out] == [{**c, "status": "committed"} for c in claimed]
    assert [(r["events_read"], r["max_position"], r["server_ids"], r["truncate_barrier"]) for r in out] == [
        (9, "[7, 3]", '["1"]', "[4, 2]"), (0, None, "[]", "[4, 2]")]
    assert (out[0]["staged_at"], out[0]["claimed_at"], out[0]["committed_at"]) == (123, 123, 456)
    assert (out[0]["inserted"], out[0]["deleted"], out[0]["target_snapshot_id"]) == (3, 0, None)
    assert json.loads(out[0]["phase_seconds"]) == {"merge": 1.235}


def test_rows_sql_renders_every_column_in_order():
    sql = rows_sql(claim_rows("p", "tb", 4, "incremental", [LedgerRange("t", 0, 0, 10)], "run", "me", 5), ["x"])
    assert sql.startswith("SELECT * FROM (VALUES ('p', 'tb', 4L, 'incremental', 't', 0, 0L, 10L, 'claimed', ")
    assert "timestamp_micros(5)" in sql and sql.endswith(", `x`)")
