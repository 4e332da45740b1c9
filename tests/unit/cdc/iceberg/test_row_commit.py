"""The pure half of ``cdc.iceberg.row_commit``: rows as Iceberg single-value JSON, timestamps as ISO text."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from cdc.iceberg.row_commit import iso_micros, rows_json


def test_iso_micros_keeps_every_microsecond_in_utc():
    micros = int(datetime(2026, 11, 28, 4, 5, 6, 7, tzinfo=timezone.utc).timestamp()) * 1_000_000 + 7
    assert iso_micros(micros) == "2026-11-28T04:05:06.000007+00:00"
    assert iso_micros(0) == "1970-01-01T00:00:00.000000+00:00"
    assert datetime.fromisoformat(iso_micros(1_795_838_400_123_456)).timestamp() == pytest.approx(1_795_838_400.123456)


def test_rows_json_keys_by_field_id_and_leaves_nulls_and_timestamps_out():
    ids = {"name": 1, "n": 2, "at": 3}
    out = json.loads(rows_json([{"name": "a", "n": 5, "at": 10}, {"name": None, "n": 2 ** 40}], ids,
                               frozenset({"at"})))
    assert out == [{"1": "a", "2": 5}, {"2": 2 ** 40}]


def test_rows_json_refuses_a_column_the_table_does_not_have():
    with pytest.raises(ValueError, match=r"columns \['other'\] are not in the table"):
        rows_json([{"name": "a", "other": 1}], {"name": 1}, frozenset())


def test_positions_go_to_the_jvm_as_lines_and_a_path_with_a_line_break_is_not_sent_so():
    from cdc.iceberg.row_commit import positions_text

    assert positions_text([("s3://b/data/a b.parquet", 0), ("file:/w/x.parquet", 12)]) == \
        "0 s3://b/data/a b.parquet\n12 file:/w/x.parquet"
    assert positions_text([]) == ""
    assert positions_text([("odd\nname", 1)]) is None and positions_text([("odd\rname", 1)]) is None
