"""``cdc.merge.target_write`` end to end: a batch the driver read changes the target by one row delta (no Spark MERGE)
that leaves exactly the rows the MERGE leaves, and a commit to the target since the classification sends the batch
through the MERGE, which fences it."""

from __future__ import annotations

import pytest

from tests.integration.events import PLACEHOLDER, pg, row

pytestmark = pytest.mark.integration

ROW = ("name", "bio", "__lsn", "__op", "__kafka_partition", "__kafka_offset", "__batch_id", "__source_ts_ms")



def summaries(p) -> list[dict]:
    """The target's snapshot summaries after its creation, oldest first."""
    p.spark.catalog.refreshTable(p.target)
    return [r[0] for r in p.spark.sql(f"SELECT summary FROM {p.target}.snapshots ORDER BY committed_at").collect()]


BATCHES = [
    [pg("r", i, row(i, f"n{i}", "bio"), 10) for i in range(1, 9)],
    [pg("u", 1, row(1, "one", "b1"), 20), pg("d", 2, row(2, "n2"), 21), pg("c", 9, row(9, "nine"), 22),
     pg("u", 3, row(3, "old"), 5),  # older than the table's row: skipped
     pg("u", 4, row(4, "four", PLACEHOLDER), 23),  # TOAST: keeps the table's bio
     pg("d", 99, row(99, "never"), 24)],  # no row: a tombstone only
    [pg("c", 2, row(2, "late"), 15),  # older than key 2's delete: stays deleted
     pg("c", 2, row(2, "back"), 30), pg("u", 1, row(1, "uno", "b2"), 31), pg("u", 1, row(1, "one-last", "b3"), 32),
     pg("d", 5, row(5, "n5"), 33), pg("d", 6, row(6, "n6"), 34), pg("u", 7, row(7, "seven"), 35)],
    [pg("d", 77, row(77, "never"), 40)],  # only a tombstone: the target does not change
]


def test_a_small_batch_changes_the_target_by_one_row_delta_leaving_what_the_merge_leaves(make_pipe):
    """The same batches into two targets, one with row deltas (the default) and one with ``row_deltas: false``:
    after every batch both hold the same rows, metadata columns included; the row-delta target's batch commits are
    no Spark write (no ``spark.app.id``) and carry the batch's ``cdc.*`` summary keys; an update replaces its row
    by a position delete; a batch that changes no row commits nothing to the target."""
    delta, merge = make_pipe(), make_pipe(batch={"row_deltas": False})
    for events in BATCHES:
        for p in (delta, merge):
            p.send(*events)
        a, b = delta.run(), merge.run()
        assert (a["inserted"], a["updated"], a["deleted"]) == (b["inserted"], b["updated"], b["deleted"])
        assert delta.rows(*ROW) == merge.rows(*ROW)
    assert delta.rows("name", "bio") == {1: ("one-last", "b3"), 2: ("back", None), 3: ("n3", "bio"),
                                         4: ("four", "bio"), 7: ("seven", None), 8: ("n8", "bio"), 9: ("nine", None)}
    by_delta, by_merge = summaries(delta), summaries(merge)
    assert ["spark.app.id" in s for s in by_delta] == [False] * 3
    assert ["spark.app.id" in s for s in by_merge[:3]] == [True] * 3
    assert [s.get("cdc.batch-id") for s in by_delta] == [s.get("cdc.batch-id") for s in by_merge[:3]] == ["1", "2", "3"]
    assert by_delta[1]["added-position-deletes"] == "3"  # updates of 1 and 4, delete of 2
    assert by_delta[1]["added-records"] == "3"  # 1, 4 and 9


def test_a_commit_to_the_target_since_the_classification_sends_the_batch_through_the_merge(make_pipe, monkeypatch):
    """Between this batch's classification and its write another writer commits a newer row for key 1: the row
    delta is refused (validated from the classified snapshot) and the MERGE, which re-checks every change against
    the table as it is, keeps the newer row and applies the rest."""
    import cdc.merge.apply

    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 10))
    p.run()
    p.send(pg("u", 1, row(1, "stale"), 20), pg("u", 2, row(2, "b2"), 20), pg("c", 3, row(3, "c"), 20))

    def newer_writer(point):
        if point == "after_classify":
            p.spark.sql(f"UPDATE {p.target} SET name = 'newer', __last_commit_lsn = 30, __lsn = 30 WHERE id = 1")

    monkeypatch.setattr(cdc.merge.apply, "checkpoint", newer_writer)
    s = p.run()
    assert (s["status"], s["inserted"], s["updated"]) == ("committed", 1, 2)  # counted as classified
    assert p.rows() == {1: ("newer", None), 2: ("b2", None), 3: ("c", None)}
    assert "spark.app.id" in summaries(p)[-1]  # written by the MERGE
