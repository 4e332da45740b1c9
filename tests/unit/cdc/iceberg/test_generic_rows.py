"""cdc.generic_rows: the text the compiled reader returns, parsed into rows (pure)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from cdc.iceberg.generic_rows import micros, parse


def test_rows_come_back_by_column_name_with_nulls_and_filter_columns_dropped():
    text = "\n".join([
        "3 batch_id\t5 topic\t14 claimed_at",
        json.dumps({"1": "pipe", "3": 7, "5": "t", "14": "2026-11-29T09:00:00.000001+00:00"}),
        json.dumps({"3": 8}),
        "",
    ])
    rows = parse(text, ("batch_id", "topic", "claimed_at"), frozenset({"claimed_at"}))
    assert rows == [
        {"batch_id": 7, "topic": "t", "claimed_at": micros("2026-11-29T09:00:00.000001+00:00")},
        {"batch_id": 8, "topic": None, "claimed_at": None},
    ]


def test_no_rows():
    assert parse("3 batch_id\n", ("batch_id",), frozenset()) == []


@pytest.mark.parametrize("iso", ["1970-01-01T00:00:00+00:00", "2026-11-29T09:00:00.123456+00:00",
                                 "1969-12-31T23:59:59.999999+00:00", "2026-03-29T02:30:00.5+02:00"])
def test_micros_are_exact_whatever_the_zone(iso):
    dt = datetime.fromisoformat(iso)
    expected = round((dt - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds() * 1e6)
    assert micros(iso) == expected
