"""The ledger read a run decides from (``cdc.ledger.read``), on real Spark + Iceberg: Iceberg's generic reader in the
driver gives exactly the states the Spark query gives, at exactly one snapshot, without a Spark statement; and a
group's tables plan from one read."""

from __future__ import annotations

import pytest

from cdc.common.errors import ConcurrentRunError
from cdc.iceberg import generic_rows
from cdc.ledger.ledger import Ledger
from cdc.ledger.read import read_states
from cdc.ledger.state import LedgerRange
from tests.integration.events import pg
from tests.integration.iceberg.test_tables import sql_executions
from tests.integration.ledger.test_ledger_write import claim, ledger_of, staged_ranges

pytestmark = pytest.mark.integration


def busy_ledger(make_pipe):
    """A ledger holding, for three tables of one pipeline and one of another: committed batches with positions,
    server ids and a truncate barrier, a cursor reset, a released claim (a row-level DELETE) and a pending claim."""
    p, ledger = ledger_of(make_pipe)
    led = Ledger(p.spark, ledger, p.cfg.pipeline)
    a, b, c = p.table.target, "other.b", "other.c"
    for table in (a, b):
        held = claim(led, table, p.topic, f"{table}-1")
        led.mark_committed(table, 1, f"{table}-1", {"inserted": 3}, None, {}, held=led.mark_staged(
            table, 1, f"{table}-1", staged_ranges(p.topic), (9, 9), held=held))
    led.reset_cursor(a, p.topic, 2, {0: (10, 4)}, "reset-run")
    gone = led.state(b, None)
    led.claim(b, gone.next_batch_id, "incremental", [LedgerRange(p.topic, 0, 10, 12)], "released",
              seen=gone.snapshot_id)
    led.release(b, gone.next_batch_id, "released")
    claim(led, c, p.topic, "pending-run")
    claim(Ledger(p.spark, ledger, "another-pipeline"), a, p.topic, "elsewhere")
    return p, ledger, led, {a: p.topic, b: p.topic, c: None, "never.ran": p.topic}


def test_the_driver_read_gives_the_states_the_spark_query_gives_and_starts_no_statement(make_pipe, monkeypatch):
    p, ledger, led, tables = busy_ledger(make_pipe)
    led._fresh()
    before = sql_executions(p.spark)
    driver = read_states(p.spark, ledger, p.cfg.pipeline, tables)
    alone = {t: read_states(p.spark, ledger, p.cfg.pipeline, {t: topic})[t] for t, topic in tables.items()}
    assert sql_executions(p.spark) == before
    monkeypatch.setattr(generic_rows, "MAX_FILES", -1)  # every scan "has too many files": the Spark query
    query = read_states(p.spark, ledger, p.cfg.pipeline, tables)
    assert sql_executions(p.spark) > before
    assert driver == query == alone
    a, b, c = list(tables)[:3]
    assert driver[a].cursor == {0: 4, 1: 5} and driver[a].positions == {0: (7, 3)} and driver[a].pending is None
    assert driver[a].barrier_before(2) == (9, 9) and driver[a].owners(1) == {f"{a}-1"}
    assert driver[b].pending is None and driver[b].next_batch_id == 2  # the released claim's row is deleted
    assert driver[c].pending.run_id == "pending-run" and driver[c].pending.claimed_at_us > 0
    assert driver["never.ran"].next_batch_id == 1 and driver["never.ran"].pending is None


def test_states_are_those_of_the_snapshot_they_name(make_pipe):
    """Rows committed after the read's snapshot are not in it; a table that plans from such a state (a group's
    table, planning after the others) claims from that snapshot and is refused when another run claimed since."""
    p, ledger, led, tables = busy_ledger(make_pipe)
    led._fresh()
    a = p.table.target
    early = led.states(tables)
    other = Ledger(p.spark.newSession(), ledger, p.cfg.pipeline)
    mid = other.state(a, p.topic)
    other.claim(a, mid.next_batch_id, "incremental", [LedgerRange(p.topic, 0, 4, 9)], "run-b", seen=mid.snapshot_id)
    late = led.states(tables)
    assert late[a].snapshot_id != early[a].snapshot_id and late[a].pending.run_id == "run-b"
    assert early[a].pending is None  # nothing of run-b in the early read
    planned = early[a]
    with pytest.raises(ConcurrentRunError, match="run-b"):
        led.claim(a, planned.next_batch_id, "incremental", [LedgerRange(p.topic, 0, 4, 9)], "run-a", p.topic,
                  planned.cursor, seen=planned.snapshot_id, planned=planned)


def test_a_group_plans_every_table_from_one_ledger_read(make_pipe, monkeypatch):
    from cdc.config.load import parse_config
    from cdc.ledger import read as ledger_read
    from cdc.run.batch import run_batch

    pipes = [make_pipe() for _ in range(3)]
    p = pipes[0]
    raw = {"pipeline": "tests", "kafka": {"bootstrap.servers": p.broker.bootstrap}, "format": "json",
           "catalog": {"name": "lake", "type": "hadoop", "warehouse": p.cfg.catalog.warehouse},
           "metadata_namespace": p.cfg.metadata_namespace,
           "batch": {"read_timeout_seconds": 20, "table_concurrency": 2},
           "tables": [{"topic": q.topic, "target": q.table.target} for q in pipes]}
    cfg = parse_config(raw)
    for q in pipes:
        q.send(*(pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 4)))
    reads = []
    real = ledger_read.read_states
    monkeypatch.setattr(ledger_read, "read_states", lambda *a, **k: reads.append(dict(a[3])) or real(*a, **k))
    summary = run_batch(p.spark, cfg, list(cfg.tables), isolate=True)
    assert [t["status"] for t in summary["tables"]] == ["committed"] * 3
    assert reads == [{q.table.target: q.topic for q in pipes}]  # one read; no table read the ledger again
    for q in pipes:
        assert q.rows() == {i: (f"n{i}", None) for i in range(1, 4)}


@pytest.mark.parametrize("max_files", [generic_rows.MAX_FILES, -1], ids=["driver", "spark-query"])
def test_a_column_added_after_the_newest_snapshot_is_read_as_null(make_pipe, monkeypatch, max_files):
    """An upgrade adds a ledger column without a commit (``ensure_meta_tables``): the newest snapshot still has the
    older schema. Both reads see the table's columns (a query pinned to that snapshot would not know the column)."""
    monkeypatch.setattr(generic_rows, "MAX_FILES", max_files)
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    held = claim(led, table, p.topic, "run-1")
    led.mark_committed(table, 1, "run-1", {}, None, {}, held=led.mark_staged(
        table, 1, "run-1", staged_ranges(p.topic), None, held=held))
    p.spark.sql(f"ALTER TABLE {ledger} DROP COLUMN server_ids")
    p.spark.sql(f"UPDATE {ledger} SET owner = 'someone' WHERE batch_id = 1")  # a snapshot without the column
    p.spark.sql(f"ALTER TABLE {ledger} ADD COLUMN server_ids string")  # then the upgrade: no snapshot
    state = led.state(table, p.topic)
    assert state.cursor == {0: 10, 1: 5} and state.servers == {} and state.next_batch_id == 2


def test_a_group_read_plans_only_its_own_tables_files(make_pipe, monkeypatch):
    """The ledger is partitioned by table: a group's read plans the files of its tables' partitions only (a pipeline
    split into several groups, ``airflow.tables_per_task``, does not read the others' rows)."""
    p, ledger, led, tables = busy_ledger(make_pipe)
    a, b, c = list(tables)[:3]
    for other in ("other.d", "other.e"):  # more tables outside the group
        claim(led, other, p.topic, f"{other}-run")
    led._fresh()
    files = {r[0]: r[1] for r in p.spark.sql(
        f"SELECT `partition`.table_name, count(*) FROM {ledger}.files GROUP BY 1").collect()}
    assert files[c] >= 1
    monkeypatch.setattr(generic_rows, "MAX_FILES", files[a] + files[b])  # one file more: the Spark query
    before = sql_executions(p.spark)
    states = read_states(p.spark, ledger, p.cfg.pipeline, {a: p.topic, b: p.topic})
    assert sql_executions(p.spark) == before
    assert states[a].cursor == {0: 4, 1: 5} and states[b].next_batch_id == 2
