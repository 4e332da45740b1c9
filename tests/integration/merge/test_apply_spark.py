"""``cdc.merge.apply`` helpers on real Spark."""

from __future__ import annotations

import pytest

from cdc.merge.apply import read_actions

pytestmark = pytest.mark.integration


def test_action_counts_of_a_few_rows_equal_the_aggregation(spark):
    """The counted path (a batch the driver could read) and the aggregation agree, on a checkpointed frame as
    ``apply_batch`` has it; an empty batch counts nothing either way."""
    actions = ["insert"] * 3 + ["update"] * 5 + ["skip"] + ["tombstone"] * 2
    df = spark.createDataFrame([(i, a) for i, a in enumerate(actions)], "id INT, __action STRING").localCheckpoint()
    assert read_actions(df, True)[0] == read_actions(df, False)[0] == {"insert": 3, "update": 5, "skip": 1,
                                                                       "tombstone": 2}
    empty = df.where("false")
    assert read_actions(empty, True) == read_actions(empty, False) == ({}, [])


def test_the_same_collect_gives_the_changes_located_columns(spark):
    """With ``located`` columns, the rows other than ``skip`` come back with those columns (and only they): what
    ``cdc.merge.tombstone_write`` and ``cdc.merge.target_write`` write, without a second Spark job."""
    rows = [(1, "insert", "f1", 0), (2, "delete", "f1", 1), (3, "tombstone", None, None), (4, "skip", "f2", 7)]
    df = spark.createDataFrame(rows, "id INT, __action STRING, __tombstone_file STRING, __tombstone_pos BIGINT")
    counts, changed = read_actions(df.localCheckpoint(), True, ("id", "__tombstone_file", "__tombstone_pos"))
    assert counts == {"insert": 1, "delete": 1, "tombstone": 1, "skip": 1}
    assert changed == [{"__action": "insert", "id": 1, "__tombstone_file": "f1", "__tombstone_pos": 0},
                       {"__action": "delete", "id": 2, "__tombstone_file": "f1", "__tombstone_pos": 1},
                       {"__action": "tombstone", "id": 3, "__tombstone_file": None, "__tombstone_pos": None}]
    assert read_actions(df, True, ())[1] == []
