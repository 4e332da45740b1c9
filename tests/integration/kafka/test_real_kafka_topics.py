"""What a real Apache Kafka broker does to a topic under a running pipeline (``devtools.broker``: Kafka 4.3, KRaft):
partitions added, the topic deleted and created again, the log cleaner compacting away ``d`` events and then the
tombstones, and timestamp backfills on CreateTime and LogAppendTime topics."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from cdc.common.cli_contract import BackfillBounds, Bounds
from cdc.common.errors import TerminalError
from devtools.broker import read_topic
from tests.integration.events import pg, row, tombstone
from tests.integration.merge.test_compacted_tombstone_rows import add_partitions, live, recreate_topic

pytestmark = pytest.mark.integration


def ranges(s: dict) -> dict[int, tuple[int, int]]:
    return {r["partition"]: (r["start"], r["end"]) for r in s["ranges"]}


def test_partitions_added_while_the_pipeline_runs_are_read_from_offset_0_and_ordered_by_source_position(make_pipe):
    p = make_pipe()
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(1, 4)])
    assert p.run()["status"] == "committed"
    add_partitions(p, 3)
    # key 1's newer change lands in a new partition, key 2's older one does: position decides, not the partition
    p.send(pg("u", 1, row(1, "p0 older"), 40), pg("u", 2, row(2, "p0 newer"), 60))
    p.send(pg("u", 1, row(1, "p1 newer"), 50), pg("u", 2, row(2, "p1 older"), 45), partition=1)
    p.send(pg("c", 7, row(7, "p2 first"), 55), pg("u", 3, row(3, "p2"), 56), partition=2)
    s = p.run()
    assert s["status"] == "committed"
    assert ranges(s) == {0: (3, 5), 1: (0, 2), 2: (0, 2)}  # nothing of the new partitions skipped
    assert p.rows() == {1: ("p1 newer", None), 2: ("p0 newer", None), 3: ("p2", None), 7: ("p2 first", None)}
    cursor = {(r.partition, r.end_offset) for r in p.ledger() if r.status == "committed"}
    assert {(0, 5), (1, 2), (2, 2)} <= cursor  # the ledger carries the new partitions' cursors
    p.send(pg("u", 7, row(7, "p1 later"), 70), partition=1)
    s = p.run()
    assert ranges(s) == {0: (5, 5), 1: (2, 3), 2: (2, 2)} and p.rows()[7] == ("p1 later", None)


@pytest.mark.parametrize("new_records", [0, 2], ids=["empty", "fewer-records"])
def test_a_topic_deleted_and_created_again_is_refused_until_the_cursor_is_reset(make_pipe, new_records):
    p = make_pipe()
    p.send(*[pg("c", i, row(i, f"old{i}"), 10 + i) for i in range(5)])
    assert p.run()["status"] == "committed"
    recreate_topic(p)
    p.send(*[pg("c", 10 + i, row(10 + i, f"new{i}"), 100 + i) for i in range(new_records)])
    with pytest.raises(TerminalError) as refused:
        p.run()
    message = str(refused.value)
    assert (f"topic {p.topic} partition 0: the ledger's cursor 5 is beyond the partition's high watermark "
            f"{new_records}") in message
    assert "--reset-cursor" in message and "re-snapshot" in message and p.table.target in message
    assert len(p.rows()) == 5  # nothing read, nothing skipped
    reset = p.run(mode="reset")
    assert (reset["status"], reset["moves"]) == ("reset", [{"partition": 0, "from": 5, "to": 0}])
    p.send(pg("c", 20, row(20, "after"), 200))
    s = p.run()
    assert (s["status"], ranges(s)) == ("committed", {0: (0, new_records + 1)})
    assert p.rows() == {**{i: (f"old{i}", None) for i in range(5)},
                        **{10 + i: (f"new{i}", None) for i in range(new_records)}, 20: ("after", None)}


def test_a_topic_created_again_with_more_records_than_the_cursor_is_refused_by_its_topic_id(make_pipe):
    """The offsets look fine (cursor 2, high watermark 4): only Kafka's topic id tells the new topic from the old."""
    p = make_pipe()
    p.send(*[pg("c", i, row(i, f"old{i}"), 10 + i) for i in range(2)])
    assert p.run()["status"] == "committed"
    recreate_topic(p)
    p.send(*[pg("c", 10 + i, row(10 + i, f"new{i}"), 100 + i) for i in range(4)])
    with pytest.raises(TerminalError) as refused:
        p.run()
    message = str(refused.value)
    assert f"topic {p.topic} was deleted and created again" in message
    assert "partition 0: cursor 2, high watermark 4" in message and "--reset-cursor" in message
    assert "re-snapshot" in message and len(p.rows()) == 2  # nothing read, nothing skipped
    reset = p.run(mode="reset")
    assert (reset["status"], reset["moves"]) == ("reset", [{"partition": 0, "from": 2, "to": 0}])
    s = p.run()
    assert (s["status"], ranges(s)) == ("committed", {0: (0, 4)})
    assert p.rows() == {0: ("old0", None), 1: ("old1", None), **{10 + i: (f"new{i}", None) for i in range(4)}}
    assert p.run(mode="reset")["status"] == "unchanged"  # the new topic is the one the ledger knows now


# ------------------------------------------------------------------------------------------- the real log cleaner

CLEANER = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
           "min.compaction.lag.ms": "0"}


def offsets_of(p, partitions: int = 1) -> dict[int, tuple[bytes | None, bool]]:
    """offset → (key, has a value) of what the log holds now."""
    return {m.offset(): (m.key(), m.value() is not None)
            for m in read_topic(p.broker.bootstrap, p.topic, partitions, idle_timeout=1.5)}


def clean_until(p, done, what: str, timeout: float = 90) -> dict:
    """Roll segments (a later record of a filler key closes the active one, which the cleaner never touches) until
    ``done(offsets)``."""
    deadline = time.monotonic() + timeout
    filler = 0
    while True:
        held = offsets_of(p)
        if done(held):
            return held
        assert time.monotonic() < deadline, f"the log cleaner did not {what} within {timeout}s: {held}"
        filler += 1
        p.send(pg("u", 99, row(99, f"filler{filler}"), 1000 + filler))
        time.sleep(0.7)


def test_a_delete_whose_d_event_the_cleaner_removed_before_it_was_read_deletes_the_row(make_pipe):
    p = make_pipe(topic_config={**CLEANER, "delete.retention.ms": "600000"})  # tombstones stay
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 3, row(3, "c"), 12))
    assert p.run()["status"] == "committed"
    p.send(pg("u", 1, row(1, "a2"), 20), pg("d", 1, row(1, "a2"), 21), tombstone(1),  # offsets 3, 4, 5
           pg("u", 2, row(2, "b2"), 22))
    held = clean_until(p, lambda h: 4 not in h and 5 in h, "remove key 1's d event")
    assert held[5][1] is False and 3 not in held  # only key 1's tombstone is left of it
    s = p.run()
    assert (s["status"], s["deleted"]) == ("committed", 1)
    assert {k: v for k, v in live(p).items() if k != 99} == {2: "b2", 3: "c"}


def test_a_tombstone_the_cleaner_removed_after_delete_retention_resurrects_nothing(make_pipe):
    p = make_pipe(topic_config={**CLEANER, "delete.retention.ms": "500"})
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 3, row(3, "c"), 12))
    assert p.run()["status"] == "committed"
    p.send(pg("u", 2, row(2, "b2"), 20), pg("d", 2, row(2, "b2"), 21), tombstone(2))  # offsets 3, 4, 5
    assert p.run()["status"] == "committed" and 2 not in live(p)
    key2 = tombstone(2)[0]
    clean_until(p, lambda h: all(k != key2 for k, _ in h.values()), "remove key 2's records and its tombstone")
    s = p.run()  # reading on over the cleaned log
    assert s["status"] == "committed"
    replay = p.run(mode="backfill", bounds=BackfillBounds(default=Bounds(start_ts_ms=0)))  # the whole log again
    assert replay["status"] == "committed" and replay["events_read"] > 0
    assert p.run(mode="reset", bounds=BackfillBounds(default=Bounds(start_offsets={0: 0})))["status"] == "reset"  # and incrementally from offset 0
    assert p.run()["status"] == "committed"
    rows = live(p)
    assert {k: v for k, v in rows.items() if k != 99} == {1: "a", 3: "c"}


# ------------------------------------------------------------------------------------------- timestamp backfills

T0 = 1_000_000_000_000  # 2001-09-09: far from the wall clock
# Time-based retention goes by record timestamps: with the default 7 days the broker deletes a 2001 segment within a
# second (rolling the active one), so the CreateTime topic keeps its records for ever.
KEEP = {"retention.ms": "-1"}


def produce_at(p, records: list, timestamps: list[int | None], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": p.broker.bootstrap, "linger.ms": 0})
    for (k, v), ts in zip(records, timestamps):
        producer.produce(p.topic, key=k, value=v, partition=partition, **({"timestamp": ts} if ts else {}))
        producer.flush(10)


def test_a_timestamp_backfill_on_a_create_time_topic_reads_the_records_offsets_for_times_names(make_pipe):
    p = make_pipe(partitions=2, topic_config=KEEP)
    produce_at(p, [pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(6)], [T0 + 1000 * i for i in range(6)])
    produce_at(p, [pg("c", 10 + i, row(10 + i, f"m{i}"), 30 + i) for i in range(4)],
               [T0 + 500 + 2000 * i for i in range(4)], partition=1)  # T0+500, +2500, +4500, +6500
    s = p.run(mode="backfill", bounds=BackfillBounds(default=Bounds(start_ts_ms=T0 + 2000, end_ts_ms=T0 + 5000)))
    # partition 0: offsets 2, 3, 4 (T0+2000 .. T0+4000); partition 1: offsets 1, 2 (T0+2500, T0+4500)
    assert (s["status"], ranges(s), s["events_read"]) == ("committed", {0: (2, 5), 1: (1, 3)}, 5)
    assert sorted(p.rows()) == [2, 3, 4, 11, 12]
    later = p.run(mode="backfill", bounds=BackfillBounds(default=Bounds(start_ts_ms=T0 + 5000)))  # to the end
    assert ranges(later) == {0: (5, 6), 1: (3, 4)} and sorted(p.rows()) == [2, 3, 4, 5, 11, 12, 13]
    assert [r.mode for r in p.ledger()] == ["backfill"] * 4  # the incremental cursor did not move
    first = p.run()
    assert ranges(first) == {0: (0, 6), 1: (0, 4)} and len(p.rows()) == 10


def test_a_timestamp_backfill_on_a_log_append_time_topic_goes_by_the_brokers_time(make_pipe):
    p = make_pipe(topic_config={"message.timestamp.type": "LogAppendTime"})
    waves = [[pg("c", 3 * w + i, row(3 * w + i, f"w{w}"), 10 * w + i) for i in range(3)] for w in range(3)]
    for n, wave in enumerate(waves):
        produce_at(p, wave, [T0 + 1000 * n] * 3)  # the producer's CreateTime: overwritten by the broker
        time.sleep(1.2)
    msgs = read_topic(p.broker.bootstrap, p.topic, 1, expected=9)
    stamps = [m.timestamp() for m in msgs]
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    assert {kind for kind, _ in stamps} == {TIMESTAMP_LOG_APPEND_TIME}
    assert all(ts > T0 + 10**11 for _, ts in stamps)  # the broker's clock, not the producer's
    start, end = stamps[3][1], stamps[6][1]  # the second wave's first append time, the third's
    s = p.run(mode="backfill", bounds=BackfillBounds(default=Bounds(start_ts_ms=start, end_ts_ms=end)))
    assert (s["status"], ranges(s), s["events_read"]) == ("committed", {0: (3, 6)}, 3)
    assert sorted(p.rows()) == [3, 4, 5]
    by_create_time = p.run(mode="backfill",
                           bounds=BackfillBounds(default=Bounds(start_ts_ms=T0, end_ts_ms=T0 + 2001)))
    assert ranges(by_create_time) == {0: (0, 0)}  # every append time is after T0 + 2001: nothing
    assert sorted(p.rows()) == [3, 4, 5]
