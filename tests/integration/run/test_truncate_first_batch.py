"""TRUNCATE events (Debezium: op ``t``, a null Kafka key) never decide a table's key, write mode or ordering
(``cdc.run.evidence``), on the real broker, Spark and Iceberg.

A table's first batch whose newest record is a truncate is planned from its newest change with a key, so the target
is created keyed (upsert) and the truncate empties it. (The samples, the newest record of each range, used to show
only the truncate's null key: the target was created keyless, write_mode append, with the truncate as a row of NULL
id, and every later upsert batch was refused. Found by the bootstrap soak, tests/scenarios/test_bootstrap_soak.py,
seed 12.) A first batch of only a truncate creates nothing, like a batch of only tombstones: it is committed with its
truncate's position as the batch's truncate barrier in the ledger, so a later batch's older changes are dropped."""

from __future__ import annotations

import json

import pytest

from tests.integration.events import pg, row, tombstone

pytestmark = pytest.mark.integration


def incremental(p) -> list[tuple]:
    """(batch_id, partition, status, events_read, events_skipped, truncate_barrier) of the incremental batches."""
    return [(r["batch_id"], r["partition"], r["status"], r["events_read"], r["events_skipped"],
             json.loads(r["truncate_barrier"]) if r["truncate_barrier"] else None)
            for r in p.ledger() if r["mode"] == "incremental"]


def write_mode(p) -> str | None:
    from cdc.iceberg.tables import target_state

    p.spark.catalog.refreshTable(p.target)
    return target_state(p.spark, p.target).write_mode


def avro(p, registry):
    """``send`` as Confluent's AvroConverter writes the records."""
    from tests.unit.cdc.decode.connect_avro import AvroWire

    wire = AvroWire(registry.url, p.topic)
    return lambda *records, **kw: p.send(*(wire.record(*r) for r in records), **kw)


def test_a_first_batch_ending_in_a_truncate_creates_a_keyed_table(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": "x"}, 10), pg("c", 2, {"id": 2, "name": "b", "bio": "y"}, 20),
           pg("t", None, None, 30))
    p.run()
    assert p.rows() == {}
    p.send(pg("c", 3, {"id": 3, "name": "c", "bio": "z"}, 40))
    p.run()
    assert p.rows() == {3: ("c", "z")}
    assert write_mode(p) is None  # upsert


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_a_first_batch_of_only_a_truncate_creates_nothing_then_changes_upsert(make_pipe, registry, fmt):
    """Avro: no key schema is registered yet (a truncate has no key), so the registry shows no key either."""
    p = make_pipe(fmt=fmt, **({"schema_registry": {"url": registry.url}} if fmt == "avro" else {}))
    send = avro(p, registry) if fmt == "avro" else p.send
    send(pg("t", None, None, 30))
    s = p.run()
    assert (s["status"], s["events_read"], s["events_skipped"], s["inserted"], s["deleted"]) == \
        ("committed", 1, 0, 0, 0)
    assert not p.spark.catalog.tableExists(p.target)  # nothing decided the table's mode, key or ordering
    assert incremental(p) == [(1, 0, "committed", 1, 0, [30, 30])]
    send(pg("c", 1, row(1, "a"), 40), pg("c", 2, row(2, "b"), 50), pg("u", 1, row(1, "a2"), 60))
    s = p.run()
    assert (s["status"], s["inserted"]) == ("committed", 2)
    assert p.rows() == {1: ("a2", None), 2: ("b", None)}
    assert write_mode(p) is None  # upsert


def test_a_first_truncate_is_a_barrier_for_older_changes_of_later_batches(make_pipe):
    """The truncate (position 30) is in partition 0; changes from before it reach partition 1 only after its batch
    committed: they were truncated, the change after it stays."""
    p = make_pipe(partitions=2)
    p.send(tombstone(9), pg("t", None, None, 30))
    assert p.run()["status"] == "committed"
    assert not p.spark.catalog.tableExists(p.target)
    assert incremental(p) == [(1, 0, "committed", 2, 1, [30, 30]), (1, 1, "committed", 0, 0, [30, 30])]
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 20), pg("c", 3, row(3, "c"), 40), partition=1)
    s = p.run()
    assert (s["status"], s["inserted"]) == ("committed", 1)
    assert p.rows() == {3: ("c", None)}
    p.send(pg("u", 1, row(1, "a2"), 15), partition=1)  # still older than the truncate, in a later batch again
    p.run()
    assert p.rows() == {3: ("c", None)}


def test_a_first_batch_of_a_truncate_then_changes_keeps_the_changes_after_it(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 10), pg("t", None, None, 20), pg("c", 2, row(2, "b"), 30),
           pg("c", 3, row(3, "c"), 40))
    assert p.run()["status"] == "committed"
    assert p.rows() == {2: ("b", None), 3: ("c", None)}
    assert write_mode(p) is None


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_a_later_batch_ending_in_a_truncate_empties_the_table_and_keeps_its_key(make_pipe, registry, fmt):
    p = make_pipe(fmt=fmt, **({"schema_registry": {"url": registry.url}} if fmt == "avro" else {}))
    send = avro(p, registry) if fmt == "avro" else p.send
    send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 20))
    p.run()
    send(pg("c", 3, row(3, "c"), 30), pg("t", None, None, 40))
    s = p.run()
    assert s["status"] == "committed"
    assert p.rows() == {}
    send(pg("t", None, None, 50))  # a batch of only a truncate into the table: applied with its key
    assert p.run()["status"] == "committed"
    send(pg("c", 4, row(4, "d"), 60), pg("u", 4, row(4, "d2"), 70))
    p.run()
    assert p.rows() == {4: ("d2", None)}
    assert write_mode(p) is None


def test_a_claimed_batch_of_only_a_truncate_left_by_a_dead_run_keeps_its_barrier(make_pipe, monkeypatch):
    """The run dies right after its claim; the next run takes the batch over and commits it (the ledger's row-level
    update) with the truncate's barrier, which drops the older change of the next batch."""
    import cdc.run.batch

    class Died(BaseException):  # not Exception: passes the phase wrappers like a dead process
        pass

    def die(point: str) -> None:
        if point == "after_claim":
            raise Died(point)

    p = make_pipe()
    p.send(pg("t", None, None, 30))
    with monkeypatch.context() as m:
        m.setattr(cdc.run.batch, "checkpoint", die)
        with pytest.raises(Died):
            p.run()
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 40))  # 1: a redelivery from before the truncate
    s = p.run()
    assert (s["recovered_batch_id"], s["status"], s["batch_id"], s["inserted"]) == (1, "committed", 2, 1)
    assert incremental(p) == [(1, 0, "committed", 1, 0, [30, 30]), (2, 0, "committed", 2, 0, None)]
    assert p.rows() == {2: ("b", None)}
    assert write_mode(p) is None
