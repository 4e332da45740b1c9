"""``cdc.merge.apply``'s pure parts."""

from cdc.merge.apply import snapshot_barrier


def test_a_snapshot_ends_just_before_its_reads() -> None:
    """The truncate position a completed snapshot acts as: every read of it (all at one position) stays (the
    truncate keeps rows at or above it and changes above it), every older row goes."""
    assert snapshot_barrier((99, 100)) == (99, 99)
    assert snapshot_barrier((2, 7, 0)) == (2, 7, -1)
