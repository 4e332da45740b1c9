from cdc.kafka.plan import Chunk, PartitionRange, cap_ranges, split_chunks


def test_cap_ranges_caps_each_partition_and_never_goes_backwards():
    ranges = cap_ranges({0: 10, 1: 0, 2: 7}, {0: 15, 1: 1000, 2: 7}, max_records=100)
    assert ranges == [PartitionRange(0, 10, 15), PartitionRange(1, 0, 100), PartitionRange(2, 7, 7)]
    assert [r.size for r in ranges] == [5, 100, 0]


def test_split_chunks_covers_the_range_exactly_once():
    chunks = split_chunks("t", [PartitionRange(0, 5, 30), PartitionRange(1, 0, 0)], chunk_size=10)
    assert chunks == [Chunk("t", 0, 5, 15), Chunk("t", 0, 15, 25), Chunk("t", 0, 25, 30)]
