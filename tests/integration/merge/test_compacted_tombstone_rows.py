"""Compacted topics on the real broker, Spark and Iceberg: a Kafka tombstone deletes its key's row whatever brought
the row, unless the row came from a later record of the tombstone's partition (``cdc.merge.compaction``): rows of a
JDBC bootstrap (partition -1), rows from before a ``--reset-cursor`` (the old topic's offsets, higher than the new
one's), rows from another partition (partitions were added); in upsert, append and scd2 mode."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


def recreate_topic(p, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    """Delete the pipe's topic and create it again (its offsets restart at 0, as after a topic was re-created or
    the cluster moved)."""
    admin = p.broker.admin()  # kept alive until its futures resolve
    for f in admin.delete_topics([p.topic]).values():
        f.result(10)
    deadline = time.monotonic() + 30
    while True:
        try:
            p.broker.create_topic(p.topic, partitions=partitions, config=config)
            return
        except Exception:  # noqa: BLE001 - the deletion may still be in progress
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def add_partitions(p, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    admin = p.broker.admin()  # kept alive until its futures resolve
    for f in admin.create_partitions([NewPartitions(p.topic, total)]).values():
        f.result(10)
    deadline = time.monotonic() + 20
    while len(admin.list_topics(topic=p.topic, timeout=10).topics[p.topic].partitions) < total:
        assert time.monotonic() < deadline, "the new partitions did not show up"
        time.sleep(0.2)
