"""The correctness review's scenarios (issue 17) through the entry points a user runs: ``python jobs/ingest.py
--config ...`` and ``jobs/maintenance.py`` as real subprocesses on the local broker and a real warehouse, on hosts
whose time zone is not UTC (America/New_York, Asia/Tokyo).

The in-process twins (``test_correctness_scenarios.py``, ``test_json_scenarios.py``) pin each rule; these tests check
what the CLI makes of it: exit codes, the JSON summary (last stdout line), the one-line errors and the tables' rows.
Each Spark start costs 10-15 s, so one pipeline holds a table per scenario (1, 2, 5, 6, 7, 8, 11: each its own topic
and target) and one ``story`` of six job runs drives them all; scenarios 3 and 4 share ``two_hosts`` (three runs
of one table on three hosts). The stories only record; the tests (named after the scenarios) assert.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from confluent_kafka.admin import NewTopic

from tests.conftest import unique
from tests.integration.cli import REPO, finish, run_cli, start_job, summary_of
from tests.integration.events import PLACEHOLDER, mysql, pg, produce, row, tombstone
from tests.scenarios.reliability import pipeline, write
from tests.scenarios.test_json_scenarios import WITH_LEGACY, WITHOUT_LEGACY

pytestmark = pytest.mark.integration

NEW_YORK, TOKYO = {"TZ": "America/New_York"}, {"TZ": "Asia/Tokyo"}
MAINTENANCE = REPO / "jobs" / "maintenance.py"
F12, F1 = "mysql-bin.000012", "mysql-bin.000001"  # scenario 5: the binlog restarts at .000001 after a failover
SCENARIOS = ("s01", "s02", "s05", "s06", "s07", "s08", "s11")
TABLE_OPTIONS = {"s07": {"delete_mode": "soft"}, "s08": {"primary_key": ["id"]}}
PARTITIONS = {"s06": 2}
REPLAYED = ("s01", "s05", "s06")  # replays the issue names (1, 5) and a compacted one (seconds per table)


def error_lines(res: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR [")]


def read_rows(spark: Any, ident: str) -> dict[Any, dict[str, Any]] | None:
    """Every row of an Iceberg table another process wrote (by ``id``), or None while it does not exist."""
    if not spark.catalog.tableExists(ident):
        return None
    spark.catalog.refreshTable(ident)  # drop Iceberg's cached metadata: the jobs wrote it
    return {r["id"]: r.asDict() for r in spark.table(ident).collect()}


def project(rows: dict[Any, dict[str, Any]] | None, *cols: str) -> dict[Any, tuple] | None:
    return None if rows is None else {k: tuple(r[c] for c in cols) for k, r in sorted(rows.items())}


# ---- one pipeline, a table per scenario, one story of runs -------------------------------------------------------

@dataclass
class Story:
    targets: dict[str, str]
    topics: dict[str, str]
    runs: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # step -> scenario -> rows after it
    seconds: dict[str, float] = field(default_factory=dict)

    def entry(self, step: str, scenario: str) -> dict[str, Any]:
        """The summary entry of ``scenario``'s table in the run ``step`` (the run's stderr when there is none)."""
        res = self.runs[step]
        tables = (summary_of(res) or {}).get("tables") or []
        found = [t for t in tables if t.get("table") == self.targets[scenario]]
        assert len(found) == 1, (step, res.returncode, res.stdout[-2000:], res.stderr[-3000:])
        return found[0]

    def table(self, step: str, scenario: str, *cols: str) -> dict[Any, tuple] | None:
        return project(self.rows[step][scenario], *cols)


def waves(topics: dict[str, str]) -> list[dict[str, list[tuple[int, list]]]]:
    """The events each scenario's topic receives before the first, second and third incremental runs."""
    w1 = {
        "s01": [(0, [pg("c", 1, row(1, "a"), 100), pg("c", 3, row(3, "c"), 105), pg("c", 2, row(2, "b"), 110)])],
        "s02": [(0, [pg("c", 1, row(1, "a", "long text"), 10)])],
        "s05": [(0, [mysql("c", 1, row(1, "a"), F12, 900), mysql("c", 2, row(2, "b"), F12, 950)])],
        "s06": [(0, [pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 4, row(4, "moves"), 12)])],
        "s07": [(0, [pg("c", 1, row(1, "a", "current"), 10), pg("c", 2, row(2, "a", "before delete"), 10)])],
        "s08": [(0, [pg("c", i, {"id": i, "name": f"n{i}", "legacy": f"L{i}"}, 100 + i, WITH_LEGACY)
                     for i in range(1, 31)]
                 + [pg("c", i, {"id": i, "name": f"n{i}"}, 100 + i, WITHOUT_LEGACY) for i in range(31, 41)]
                 + [pg("u", i, {"id": i, "name": f"u{i}"}, 200 + i, WITHOUT_LEGACY) for i in range(1, 6)])],
        "s11": [(0, [pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(5)])],
    }
    w2 = {
        "s01": [(0, [pg("d", 1, row(1, "a"), 200), tombstone(1), pg("d", 3, row(3, "c"), 205), tombstone(3),
                     pg("u", 2, row(2, "b2"), 210)])],
        # UPDATE ... SET id = 2 WHERE id = 1 under REPLICA IDENTITY DEFAULT, bio (TOASTed) unchanged
        "s02": [(0, [pg("d", 1, {"id": 1, "name": None, "bio": None}, 20), tombstone(1),
                     pg("c", 2, row(2, "a", PLACEHOLDER), 20)])],
        "s05": [(0, [mysql("u", 1, row(1, "after failover"), F1, 4)])],  # RESET MASTER / a new primary
        # compaction removed the d events; key 4 moved to partition 1, where its newer change stays
        "s06": [(0, [tombstone(1), pg("c", 3, row(3, "c"), 30), tombstone(3), tombstone(4)]),
                (1, [pg("u", 4, row(4, "moved"), 50)])],
        "s07": [(0, [pg("u", 1, row(1, "x", "older"), 5), pg("u", 1, row(1, "b", PLACEHOLDER), 20),
                     pg("d", 2, row(2, "a", "before delete"), 20)])],
        "s08": [(0, [pg("c", 50, {"id": 50, "name": "late", "legacy": "old"}, 300, WITH_LEGACY),
                     pg("c", 51, {"id": 51, "name": "new"}, 301, WITHOUT_LEGACY)])],
        "s11": [],  # its topic is re-created instead (``recreate``)
    }
    w3 = {
        "s01": [(0, [pg("u", 1, row(1, "late"), 150), pg("c", 3, row(3, "again"), 300)])],
        "s05": [(0, [mysql("d", 2, row(2, "b"), F1, 80)])],
        "s06": [(0, [pg("u", 1, row(1, "replayed"), 10)])],  # a redelivery of what the tombstone followed
        "s07": [(0, [pg("u", 2, row(2, "b", PLACEHOLDER), 30)])],  # its real base (a re-insert) was never seen
    }
    return [w1, w2, w3]


def send(broker: Any, topics: dict[str, str], wave: dict[str, list[tuple[int, list]]]) -> None:
    for scenario, parts in wave.items():
        for partition, records in parts:
            produce(broker.bootstrap, topics[scenario], records, partition)


def create_topic(broker: Any, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    if not config:
        broker.create_topic(topic, partitions=partitions)
        return
    admin = broker.admin()  # kept alive until the futures resolve
    for f in admin.create_topics([NewTopic(topic, partitions, config=config)]).values():
        f.result(10)


def recreate(broker: Any, topic: str, records: list) -> None:
    """Delete ``topic`` and create it again with ``records``: its offsets restart at 0 (scenario 11)."""
    admin = broker.admin()
    for f in admin.delete_topics([topic]).values():
        f.result(10)
    deadline = time.monotonic() + 20
    while True:
        try:
            broker.create_topic(topic)
            break
        except Exception:  # noqa: BLE001 - the deletion may still be in progress
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    produce(broker.bootstrap, topic, records)


def maintenance(config: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return finish(start_job(config, *args, env=env, script=MAINTENANCE, master=None))


@pytest.fixture(scope="module")
def story(spark, broker, warehouse, tmp_path_factory) -> Story:
    topics = {s: unique(f"dbserver1.public.{s}_") for s in SCENARIOS}
    targets = {s: f"{unique('cli')}.{s}" for s in SCENARIOS}
    for s in SCENARIOS:
        create_topic(broker, topics[s], PARTITIONS.get(s, 1), {"cleanup.policy": "compact"} if s == "s06" else None)
    raw = {"pipeline": "cli_scenarios", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
           "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
           "metadata_namespace": unique("climeta"), "batch": {"read_timeout_seconds": 15, "table_concurrency": 2},
           "spark": {"spark.sql.shuffle.partitions": "2", "spark.master": "local[2]"},
           "tables": [{"topic": topics[s], "target": targets[s], **TABLE_OPTIONS.get(s, {})} for s in SCENARIOS]}
    config = tmp_path_factory.mktemp("correctness_cli") / "pipeline.yaml"
    config.write_text(yaml.safe_dump(raw))
    st = Story(targets, topics)

    def step(name: str, job: Callable[[], subprocess.CompletedProcess], read: tuple[str, ...] = ()) -> None:
        t0 = time.monotonic()
        res = st.runs[name] = job()
        st.seconds[name] = round(time.monotonic() - t0, 1)
        per_table = {t.get("table", "?").split(".")[-1]: round(sum((t.get("seconds") or {}).values()), 1)
                     for t in (summary_of(res) or {}).get("tables") or []}
        print(f"correctness CLI story: {name} exit {res.returncode} in {st.seconds[name]} s {per_table}", flush=True)
        st.rows[name] = {s: read_rows(spark, f"lake.{targets[s]}") for s in read}  # the tables the tests look at

    w1, w2, w3 = waves(topics)
    send(broker, topics, w1)
    step("first", lambda: run_cli(config, env=NEW_YORK), ("s01", "s02", "s06", "s08"))
    send(broker, topics, w2)
    recreate(broker, topics["s11"], [pg("c", 9, row(9, "new"), 100)])  # the old cursor (5) is now beyond its end
    step("failover", lambda: run_cli(config, env=NEW_YORK), SCENARIOS)
    step("gc", lambda: maintenance(config, "--table", targets["s01"], "--tombstone-retention-hours", "0", env=TOKYO))
    raw["tables"][SCENARIOS.index("s05")]["ordering_epoch"] = 1  # scenario 5's documented way on
    config.write_text(yaml.safe_dump(raw))
    send(broker, topics, w3)
    step("reset", lambda: run_cli(config, env=NEW_YORK, args=("--table", targets["s11"], "--reset-cursor")))
    step("after", lambda: run_cli(config, env=TOKYO), ("s01", "s05", "s06", "s07", "s11"))
    replayed = [a for s in REPLAYED for a in ("--table", targets[s])]  # their topics again, from offset 0
    step("replay", lambda: run_cli(config, env=NEW_YORK, args=("--mode", "backfill", *replayed)), REPLAYED)
    return st


def test_the_story_runs_end_to_end_with_the_worst_exit_code_cli(story):
    codes = {name: res.returncode for name, res in story.runs.items()}
    assert codes == {"first": 0, "failover": 2, "gc": 0, "reset": 0, "after": 0, "replay": 0}, (
        codes, {n: r.stderr[-2000:] for n, r in story.runs.items() if r.returncode})
    # the refused tables (5 and 11) are isolated: one ERROR line each, every other table committed
    assert len(error_lines(story.runs["failover"])) == 2, story.runs["failover"].stderr[-3000:]
    for s in ("s01", "s02", "s06", "s07", "s08"):
        assert story.entry("failover", s)["status"] == "committed", story.entry("failover", s)


def test_scenario_01_tombstone_gc_then_a_late_update_or_a_replay_does_not_resurrect_cli(story):
    assert story.table("first", "s01", "name") == {1: ("a",), 2: ("b",), 3: ("c",)}
    assert story.entry("failover", "s01")["deleted"] == 2
    assert story.table("failover", "s01", "name") == {2: ("b2",)}
    gc = story.runs["gc"]
    assert gc.returncode == 0, gc.stderr[-3000:]
    [step] = [s for s in summary_of(gc)["steps"] if s["action"] == "gc_tombstones"]
    assert step["error"] is None and step["result"]["dropped"] == 2, step
    after = story.entry("after", "s01")  # u(1)@150 from a lagging partition; c(3)@300 is a real re-insert
    assert (after["status"], after["inserted"], after["updated"]) == ("committed", 1, 0), after
    assert story.table("after", "s01", "name") == {2: ("b2",), 3: ("again",)}
    replay = story.entry("replay", "s01")
    assert (replay["status"], replay["mode"], replay["inserted"]) == ("committed", "backfill", 0), replay
    assert story.table("replay", "s01", "name") == {2: ("b2",), 3: ("again",)}


def test_scenario_02_pk_change_with_toast_takes_the_old_keys_value_cli(story):
    assert story.table("first", "s02", "name", "bio") == {1: ("a", "long text")}
    assert story.entry("failover", "s02")["status"] == "committed"
    assert story.table("failover", "s02", "name", "bio") == {2: ("a", "long text")}


def test_scenario_05_a_failover_is_refused_until_the_ordering_epoch_is_raised_in_the_yaml_cli(story):
    refused = story.entry("failover", "s05")
    assert (refused["status"], refused["error_class"], refused["exit_code"]) == ("failed", "PositionRegression", 2)
    [line] = [ln for ln in error_lines(story.runs["failover"]) if story.topics["s05"] in ln]
    assert line.startswith("ERROR [PositionRegression]") and story.targets["s05"] in line, line
    assert "partition 0" in line and "ordering_epoch" in line, line
    assert story.table("failover", "s05", "name") == {1: ("a",), 2: ("b",)}  # nothing merged
    after = story.entry("after", "s05")  # ordering_epoch: 1 in the YAML
    assert (after["status"], after["updated"], after["deleted"]) == ("committed", 1, 1), after
    assert story.table("after", "s05", "name", "__ordering_epoch") == {1: ("after failover", 1)}
    # a replay of the old epoch's offsets changes nothing, and its deletes stay deleted
    assert story.table("replay", "s05", "name", "__ordering_epoch") == {1: ("after failover", 1)}


def test_scenario_06_on_a_compacted_topic_a_kafka_tombstone_deletes_its_key_cli(story):
    assert story.table("first", "s06", "name") == {1: ("a",), 2: ("b",), 4: ("moves",)}
    assert story.entry("failover", "s06")["deleted"] == 1
    assert story.table("failover", "s06", "name") == {2: ("b",), 4: ("moved",)}
    assert story.table("after", "s06", "name") == {2: ("b",), 4: ("moved",)}  # the redelivery stays deleted
    assert story.table("replay", "s06", "name") == {2: ("b",), 4: ("moved",)}


def test_scenario_07_toast_is_carried_only_from_the_newest_older_live_change_cli(story):
    assert story.table("failover", "s07", "name", "bio", "__deleted") == {
        1: ("b", "current", False),  # not "older": that event is older than the stored row
        2: ("a", "before delete", True)}
    final = {1: ("b", "current", False), 2: ("b", None, False)}  # never from the deleted image
    assert story.table("after", "s07", "name", "bio", "__deleted") == final


def test_scenario_08_json_records_carrying_a_since_dropped_column_are_not_dead_lettered_cli(story):
    first = story.entry("first", "s08")
    assert (first["status"], first["events_read"], first["dead_letters"], first["inserted"]) == (
        "committed", 45, 0, 40), first
    expected = {i: (f"n{i}", f"L{i}") for i in range(6, 31)}
    expected.update({i: (f"u{i}", None) for i in range(1, 6)})
    expected.update({i: (f"n{i}", None) for i in range(31, 41)})
    assert story.table("first", "s08", "name", "legacy") == expected
    second = story.entry("failover", "s08")
    assert (second["inserted"], second["dead_letters"]) == (2, 0), second
    rows = story.table("failover", "s08", "name", "legacy")
    assert (rows[50], rows[51]) == (("late", "old"), ("new", None))


def test_scenario_11_cursor_beyond_the_high_watermark_is_refused_until_reset_cli(story):
    assert story.entry("first", "s11")["inserted"] == 5
    refused = story.entry("failover", "s11")
    assert (refused["status"], refused["error_class"], refused["exit_code"]) == ("failed", "TerminalError", 2)
    [line] = [ln for ln in error_lines(story.runs["failover"]) if story.topics["s11"] in ln]
    for part in (story.targets["s11"], "partition 0", "cursor 5", "high watermark 1", "--reset-cursor"):
        assert part in line, (part, line)
    assert sorted(story.rows["failover"]["s11"]) == [0, 1, 2, 3, 4]  # nothing read, nothing lost
    reset = story.runs["reset"]
    assert reset.returncode == 0, reset.stderr[-3000:]
    [entry] = summary_of(reset)["tables"]
    assert (entry["status"], entry["moves"]) == ("reset", [{"partition": 0, "from": 5, "to": 0}]), entry
    after = story.entry("after", "s11")  # the re-created topic's event is read
    assert (after["ranges"], after["inserted"]) == ([{"partition": 0, "start": 0, "end": 1}], 1), after
    assert story.table("after", "s11", "name") == {**{i: (f"n{i}",) for i in range(5)}, 9: ("new",)}


# ---- scenarios 3 and 4: one table, three hosts, two time zones ------------------------------------------------------

PAUSE = 30  # host-a's run stops at after_classify this long (it is frozen there well before the end)


@dataclass
class TwoHosts:
    raw: dict[str, Any]
    contender: subprocess.CompletedProcess | None = None
    holder_alive_after_contender: bool = False
    owners_after_contender: list[tuple[int, str, str]] = field(default_factory=list)
    taker: subprocess.CompletedProcess | None = None
    rows_after_taker: dict[Any, tuple] | None = None
    holder: subprocess.CompletedProcess | None = None
    rows_final: dict[Any, tuple] | None = None
    ledger_final: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def target(self) -> str:
        return self.raw["tables"][0]["target"]

    @property
    def ledger_name(self) -> str:
        return f"lake.{self.raw['metadata_namespace']}.ledger"


def ledger(spark: Any, name: str) -> list[tuple[int, str, str]]:
    if not spark.catalog.tableExists(name):
        return []
    spark.catalog.refreshTable(name)
    return [(r.batch_id, r.status, r.owner)
            for r in spark.sql(f"SELECT batch_id, status, owner FROM {name} ORDER BY batch_id").collect()]


def in_pause(pid: int) -> bool:
    """Is the job's main thread in ``time.sleep`` (``CDC_PAUSE_AT``), not waiting on Spark?"""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() in ("hrtimer_nanosleep", "do_nanosleep")
    except OSError:
        return False


@pytest.fixture(scope="module")
def two_hosts(spark, broker, warehouse, tmp_path_factory) -> TwoHosts:
    """host-a (New York) claims, stages and classifies batch 1, then freezes (SIGSTOP: a long GC pause, a suspended
    VM) before its MERGE; host-b (New York) runs while host-a's claim is seconds old; newer changes arrive; host-a's
    claim is made three hours old (the lease is the default hour); host-c (Tokyo) takes batch 1 over and commits it
    and the newer batch; host-a then wakes up and merges the batch 1 it classified before."""
    raw = pipeline(broker, warehouse)
    h = TwoHosts(raw)
    topic = raw["tables"][0]["topic"]
    produce(broker.bootstrap, topic, [pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(20)])
    config = write(raw, tmp_path_factory.mktemp("two_hosts"))
    holder = start_job(config, env={**NEW_YORK, "CDC_OWNER_HOST": "host-a", "CDC_PAUSE_AT": f"after_classify:{PAUSE}"})
    try:
        deadline, sleeping = time.monotonic() + 300, 0
        while sleeping < 2:  # staged, then twice seen in its pause: classified, not merged
            assert holder.poll() is None, finish(holder).stderr[-3000:]
            assert time.monotonic() < deadline, "host-a never reached its pause after classifying batch 1"
            staged = [r for r in ledger(spark, h.ledger_name) if r[1] == "staged"]
            sleeping = sleeping + 1 if staged and in_pause(holder.pid) else 0
            time.sleep(0.5)
        os.killpg(holder.pid, signal.SIGSTOP)  # host-a freezes: no lease renewals, no progress
        h.contender = run_cli(config, env={**NEW_YORK, "CDC_OWNER_HOST": "host-b"})
        h.holder_alive_after_contender = holder.poll() is None
        h.owners_after_contender = ledger(spark, h.ledger_name)
        produce(broker.bootstrap, topic, [pg("u", i, row(i, "v2"), 100 + i) for i in range(10)]
                + [rec for i in range(10, 15) for rec in (pg("d", i, row(i, f"n{i}"), 100 + i), tombstone(i))])
        # host-a stays frozen for hours (rather than waiting a lease out here)
        spark.sql(f"UPDATE {h.ledger_name} SET claimed_at = current_timestamp() - INTERVAL 3 HOURS")
        h.taker = run_cli(config, env={**TOKYO, "CDC_OWNER_HOST": "host-c"})
        h.rows_after_taker = project(read_rows(spark, f"lake.{h.target}"), "name")
    finally:
        try:
            os.killpg(holder.pid, signal.SIGCONT)  # host-a wakes up and goes on with its (stale) batch
        except ProcessLookupError:
            pass
        h.holder = finish(holder)
    h.rows_final = project(read_rows(spark, f"lake.{h.target}"), "name")
    h.ledger_final = ledger(spark, h.ledger_name)
    return h


TAKEN_OVER = {**{i: ("v2",) for i in range(10)}, **{i: (f"n{i}",) for i in range(15, 20)}}


def test_scenario_03_a_live_claim_on_another_host_blocks_in_new_york_and_a_dead_one_is_taken_over_in_tokyo_cli(
        two_hosts):
    h = two_hosts
    assert h.contender.returncode == 75, h.contender.stderr[-3000:]
    [line] = error_lines(h.contender)
    assert line.startswith("ERROR [ConcurrentRunError]") and "being processed by another run" in line, line
    assert h.target in line and "host-a:" in line, line  # judged alive (not: judged dead, then lost a take-over race)
    assert h.holder_alive_after_contender, h.holder.stderr[-3000:]
    assert [(b, s, o.split(":")[0]) for b, s, o in h.owners_after_contender] == [(1, "staged", "host-a")]
    assert h.taker.returncode == 0, h.taker.stderr[-3000:]  # Tokyo: a 3-hour-old claim is dead (not 9 h younger)
    [t] = summary_of(h.taker)["tables"]
    assert (t["status"], t["recovered_batch_id"], t["batch_id"], t["updated"], t["deleted"]) == (
        "committed", 1, 2, 10, 5), t
    assert h.rows_after_taker == TAKEN_OVER


def test_scenario_04_a_frozen_writer_that_lost_its_claim_cannot_regress_rows_cli(two_hosts):
    h = two_hosts
    assert h.rows_after_taker == TAKEN_OVER
    assert h.holder.returncode == 75, h.holder.stderr[-3000:]  # it merged late, then found its claim gone
    [line] = error_lines(h.holder)
    assert line.startswith("ERROR [ConcurrentRunError]") and "taken over by another run" in line, line
    assert h.rows_final == TAKEN_OVER  # no row went back to batch 1's values, no deleted key came back
    assert [(b, s, o.split(":")[0]) for b, s, o in h.ledger_final] == [(1, "committed", "host-c"),
                                                                      (2, "committed", "host-c")]
