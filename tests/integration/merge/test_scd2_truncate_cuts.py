"""scd2 history does not depend on where batches are cut around a truncate (real broker → Spark → Iceberg).

A truncate ends every version open at its position, whichever batch brings it and whichever batches bring the
changes around it (later re-creates, deletes and updates of those keys included)."""

from __future__ import annotations

import pytest

from tests.integration.events import pg, row
from tests.scenarios.test_write_modes import history, truncate

pytestmark = pytest.mark.integration

C1, T20, C1_25, D1 = pg("c", 1, row(1, "a"), 10), truncate(20), pg("c", 1, row(1, "again"), 25), pg("d", 1, row(1, "again"), 30)
C2, D2 = pg("c", 2, row(2, "b"), 5), pg("d", 2, row(2, "b"), 15)  # ended before the truncate: untouched by it
C3 = pg("c", 3, row(3, "c"), 12)  # current until the truncate
C4, U4 = pg("c", 4, row(4, "d"), 18), pg("u", 4, row(4, "d2"), 22)  # a new version after the truncate

EXPECTED = [(1, "a", None, 10, 20, False, "c"), (1, "again", None, 25, 30, False, "c"),
            (2, "b", None, 5, 15, False, "c"), (3, "c", None, 12, 20, False, "c"),
            (4, "d", None, 18, 20, False, "c"), (4, "d2", None, 22, None, True, "u")]

CUTS = {  # batches, each in Kafka order (one partition; a position older than an earlier one is a late change)
    "one_batch": [[C2, D2, C1, C3, C4, T20, U4, C1_25, D1]],
    "delete_later": [[C2, D2, C1, C3, C4, T20, U4, C1_25], [D1]],
    "truncate_with_recreate": [[C2, D2, C1, C3, C4], [T20, U4, C1_25], [D1]],
    "truncate_late": [[C2, D2, C1, C3, C4, U4, C1_25, D1], [T20]],
    "truncate_late_alone_then_more": [[C1, C3, C1_25, D1], [T20], [C2, D2, C4, U4]],
}


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_scd2_truncate_history_is_the_same_under_every_batch_cut(make_pipe, cut):
    p = make_pipe(write_mode="scd2")
    for batch in CUTS[cut]:
        p.send(*batch)
        assert p.run()["status"] == "committed"
    assert history(p) == EXPECTED
    assert p.run()["status"] == "empty"
