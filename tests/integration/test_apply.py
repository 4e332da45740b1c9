"""``cdc.apply`` helpers on real Spark."""

from __future__ import annotations

import pytest

from cdc.apply import action_counts

pytestmark = pytest.mark.integration


def test_action_counts_of_a_few_rows_equal_the_aggregation(spark):
    """The counted path (a batch the driver could read) and the aggregation agree, on a checkpointed frame as
    ``apply_batch`` has it; an empty batch counts nothing either way."""
    actions = ["insert"] * 3 + ["update"] * 5 + ["skip"] + ["tombstone"] * 2
    df = spark.createDataFrame([(i, a) for i, a in enumerate(actions)], "id INT, __action STRING").localCheckpoint()
    assert action_counts(df, True) == action_counts(df, False) == {"insert": 3, "update": 5, "skip": 1,
                                                                   "tombstone": 2}
    empty = df.where("false")
    assert action_counts(empty, True) == action_counts(empty, False) == {}
