"""``cdc.write_distribution.unclustered``: which targets a MERGE writes without Iceberg's shuffle (pure)."""

from __future__ import annotations

import pytest

from cdc.write_distribution import NO_SHUFFLE, unclustered

MOR = {"write.merge.mode": "merge-on-read"}


def test_a_plain_merge_on_read_v2_table_is_written_where_the_join_leaves_its_rows():
    assert unclustered(2, partitioned=False, sort_fields=0, properties=MOR)
    assert NO_SHUFFLE == {"spark.sql.iceberg.distribution-mode": "none"}


@pytest.mark.parametrize("version, partitioned, sort_fields, properties", [
    (3, False, 0, MOR),  # deletion vectors: one per data file and commit, so Iceberg's clustering stays
    (2, True, 0, MOR),
    (2, False, 1, MOR),
    (2, False, 0, {}),  # copy-on-write (Iceberg's default)
    (2, False, 0, {"write.merge.mode": "copy-on-write"}),
    (2, False, 0, {**MOR, "write.merge.distribution-mode": "none"}),  # the user's choice, whatever it is
    (2, False, 0, {**MOR, "write.distribution-mode": "hash"}),
], ids=["v3", "partitioned", "sorted", "default-cow", "cow", "user-merge-mode", "user-write-mode"])
def test_any_other_table_keeps_icebergs_distribution(version, partitioned, sort_fields, properties):
    assert not unclustered(version, partitioned, sort_fields, properties)
