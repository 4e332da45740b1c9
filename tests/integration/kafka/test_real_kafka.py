"""What a real Apache Kafka broker does to a pipeline (``devtools.broker``: Kafka 4.3, KRaft): retention deleting
records the pipeline has not read, a broker restart in the middle of a batch, a timestamp backfill whose end lies in
the future."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from cdc.common.errors import TerminalError
from tests.integration.events import pg, row

pytestmark = pytest.mark.integration


def low_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lw"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        c.close()


def test_records_deleted_by_retention_before_they_were_read_are_refused_naming_them_and_the_ways_back(make_pipe):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    p = make_pipe(topic_config={"segment.ms": "100"})
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(3)])
    assert p.run()["status"] == "committed"
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(3, 6)])  # never read: retention takes them
    shorter = ConfigResource(ConfigResource.Type.TOPIC, p.topic, incremental_configs=[
        ConfigEntry("retention.ms", "200", incremental_operation=AlterConfigOpType.SET)])
    admin = p.broker.admin()  # kept alive until its futures resolve
    for f in admin.incremental_alter_configs([shorter]).values():
        f.result(10)
    deadline = time.monotonic() + 60
    while low_watermark(p.broker.bootstrap, p.topic) <= 5 and time.monotonic() < deadline:
        time.sleep(0.5)
        p.send(pg("u", 0, row(0, "roll"), 99))  # a later record closes the segment; the cleaner deletes it
    low = low_watermark(p.broker.bootstrap, p.topic)
    assert low > 5
    with pytest.raises(TerminalError) as refused:
        p.run()
    message = str(refused.value)
    assert f"offsets 3..{low - 1} were deleted by retention" in message
    assert "incremental snapshot" in message and "jobs/bootstrap.py" in message and "--reset-cursor" in message
    assert p.rows() == {0: ("n0", None), 1: ("n1", None), 2: ("n2", None)}  # nothing merged, nothing skipped
    longer = ConfigResource(ConfigResource.Type.TOPIC, p.topic, incremental_configs=[
        ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([longer]).values():
        f.result(10)
    time.sleep(2)  # a retention check already under way may still delete
    low = low_watermark(p.broker.bootstrap, p.topic)
    reset = p.run(mode="reset")  # the explicit way to accept the loss: on from the low watermark
    assert (reset["status"], reset["moves"]) == ("reset", [{"partition": 0, "from": 3, "to": low}])
    p.send(pg("c", 7, row(7, "after"), 200))
    assert p.run()["status"] == "committed" and p.rows()[7] == ("after", None)


def test_a_broker_restart_in_the_middle_of_a_batch_commits_it_once(make_pipe, monkeypatch):
    """The broker goes down after the batch is claimed, before its records are read, and comes back: the reader
    reconnects, the batch commits once with every record."""
    import cdc.run.batch

    p = make_pipe(partitions=2)
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(0, 40, 2)], partition=0)
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(1, 40, 2)], partition=1)
    real = cdc.run.batch.checkpoint

    def restart_after_claim(point: str) -> None:
        if point == "after_claim":
            p.broker.restart(down_seconds=2)
        real(point)

    monkeypatch.setattr(cdc.run.batch, "checkpoint", restart_after_claim)
    s = p.run()
    assert (s["status"], s["events_read"], s["inserted"]) == ("committed", 40, 40)
    assert len(p.rows()) == 40 and [r.status for r in p.ledger()] == ["committed", "committed"]


def test_a_timestamp_backfill_ending_in_the_future_reads_to_the_end_of_the_log(make_pipe):
    """Kafka answers ListOffsets for a time after the newest record with "none": the backfill's end is then the
    high watermark, not offset 0."""
    p = make_pipe()
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(5)])
    from cdc.common.cli_contract import BackfillBounds, Bounds

    future = int(time.time() * 1000) + 86_400_000
    s = p.run(mode="backfill", bounds=BackfillBounds(default=Bounds(start_ts_ms=0, end_ts_ms=future)))
    assert (s["status"], s["events_read"]) == ("committed", 5)
    assert s["ranges"] == [{"partition": 0, "start": 0, "end": 5}]


def test_committed_batches_show_in_kafkas_consumer_group_lag(make_pipe):
    """After each committed incremental batch its end offsets are the consumer group cdc-iceberg.<pipeline>'s, as
    Kafka's lag tools read them; a backfill does not move them; ``batch.consumer_group_offsets: false`` commits none."""
    from cdc.common.cli_contract import BackfillBounds, Bounds
    from cdc.kafka.offsets import group_id

    def committed(p) -> list[int]:
        c = Consumer({"bootstrap.servers": p.broker.bootstrap, "group.id": group_id(p.cfg.pipeline)})
        try:
            return [tp.offset for tp in c.committed([TopicPartition(p.topic, i) for i in range(2)], timeout=10)]
        finally:
            c.close()

    p = make_pipe(partitions=2, batch={"consumer_group_offsets": True})
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(3)], partition=0)
    p.send(pg("c", 9, row(9, "x"), 20), partition=1)
    assert p.run()["status"] == "committed"
    assert committed(p) == [3, 1]
    p.run(mode="backfill", bounds=BackfillBounds(default=Bounds(), topics={p.topic: Bounds({0: 0}, {0: 1})}))
    assert committed(p) == [3, 1]  # a replay of old offsets is not the cursor
    off = make_pipe(batch={"consumer_group_offsets": False})
    off.send(pg("c", 1, row(1, "a"), 10))
    assert off.run()["status"] == "committed"
    c = Consumer({"bootstrap.servers": off.broker.bootstrap, "group.id": group_id(off.cfg.pipeline)})
    try:
        assert c.committed([TopicPartition(off.topic, 0)], timeout=10)[0].offset < 0  # nothing committed
    finally:
        c.close()
