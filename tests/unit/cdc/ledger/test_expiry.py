"""``cdc.ledger.expiry.older_than``: how many snapshots of a time-ordered log are older than the cutoff."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cdc.ledger.expiry import expirable, older_than


def test_counts_the_entries_strictly_older_than_the_cutoff():
    times = [10, 20, 20, 30]
    assert [older_than(len(times), times.__getitem__, c) for c in (5, 10, 11, 20, 21, 31)] == [0, 0, 1, 1, 3, 4]
    assert older_than(0, times.__getitem__, 100) == 0


@given(st.lists(st.integers(0, 1000)).map(sorted), st.integers(-1, 1001))
def test_agrees_with_counting_them_one_by_one(times, cutoff):
    looked = []
    got = older_than(len(times), lambda i: looked.append(i) or times[i], cutoff)
    assert got == sum(t < cutoff for t in times)
    assert len(looked) <= max(1, len(times)).bit_length()  # a binary search: a long history costs a few lookups


def test_what_expires_leaves_iceberg_s_minimum_and_the_current_snapshot():
    assert expirable(count=200, due=150, min_keep=1) == 150
    assert expirable(count=200, due=200, min_keep=1) == 199  # the current snapshot stays
    assert expirable(count=200, due=200, min_keep=0) == 199
    assert expirable(count=200, due=150, min_keep=120) == 80
    assert expirable(count=200, due=150, min_keep=500) == 0
