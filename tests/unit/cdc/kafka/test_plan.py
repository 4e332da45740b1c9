from cdc.kafka.plan import OffsetRange, cap_ranges, split_chunks
from cdc.ledger.state import LedgerRange


def test_cap_ranges_caps_each_partition_and_never_goes_backwards():
    ranges = cap_ranges("t", {0: 10, 1: 0, 2: 7}, {0: 15, 1: 1000, 2: 7}, max_records=100)
    assert ranges == [OffsetRange("t", 0, 10, 15), OffsetRange("t", 1, 0, 100), OffsetRange("t", 2, 7, 7)]
    assert [r.size for r in ranges] == [5, 100, 0]


def test_split_chunks_covers_the_range_exactly_once():
    chunks = split_chunks([OffsetRange("t", 0, 5, 30), OffsetRange("t", 1, 0, 0)], chunk_size=10)
    assert chunks == [OffsetRange("t", 0, 5, 15), OffsetRange("t", 0, 15, 25), OffsetRange("t", 0, 25, 30)]


def test_one_range_type_from_plan_to_ledger():
    """A ledger's range is a plan's range with the batch's counts: chunks split from it, its summary the plan's."""
    held = LedgerRange("t", 3, 0, 25, events_read=24, events_skipped=1)
    assert split_chunks([held], 10) == [OffsetRange("t", 3, 0, 10), OffsetRange("t", 3, 10, 20),
                                        OffsetRange("t", 3, 20, 25)]
    assert held.summary() == OffsetRange("t", 3, 0, 25).summary() == {"partition": 3, "start": 0, "end": 25}
