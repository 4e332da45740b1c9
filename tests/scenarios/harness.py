"""Randomized oracle harness: seeded Debezium streams → the real job → Iceberg table == the generator's oracle.

A *scenario* is one pipeline (one or two tables, each with its own topic and seeded ``ChangeEventGenerator``) whose
stream mixes snapshot reads, inserts, updates, deletes, primary-key changes, TOAST placeholders and truncates, then
goes through delivery faults: connector restarts (redelivered windows, duplicates arriving after newer events) and,
in *adversarial* scenarios, events moved later than newer ones (``move_later``). The records are produced to the local
broker (JSON or Confluent Avro), then the job runs batch after batch with random ``max_records_per_partition`` until
it reports ``empty``. Optionally one run crashes:

* ``kill:<point>``   a real ``python jobs/ingest.py`` subprocess with ``CDC_KILL_AT=<point>`` (SIGKILLs itself there);
* ``sigkill:<secs>`` a real subprocess killed from outside (SIGKILL to its process group, JVM included) after <secs>;
* ``raise:<point>``  in-process: an exception at the crash point (cheap; the on-disk state is what a kill there
  leaves, because every Iceberg commit is atomic), then the next run takes the batch over as if its owner died.

Three more classes (issue 17): a *failover* (``TableSpec.failover``: halfway, the source's positions restart far
lower; the job must refuse with ``PositionRegression`` and, once ``ordering_epoch`` is raised, apply every later
change), a *stale writer* (``Scenario.fence``: a run stalls at a point while its claim is taken over and newer
batches commit, then goes on; it must not regress a row) and a *lost cursor* (``Scenario.cursor_reset``: the
ledger's cursor ends up beyond the high watermark; the job must refuse, and after ``--reset-cursor`` replay without
changing anything it had).

Further classes (issue 17, ``tests/scenarios/oracle_streams.py``): a nullable column added mid-stream (a new Avro
schema version; sometimes widened later), same-position updates of a key (ties: the later Kafka offset wins; upsert
tables only), schemaless JSON with ``column_types`` declaring its decimals, dates and timestamps
(``fmt="json-schemaless"``), runs under a non-UTC local zone (``tz``: subprocesses and in-process runs), and a MySQL
failover to a replica slightly behind (``TableSpec.server_failover``: a new ``server_id`` one binlog file back or at
a lower pos; refused where the server rule sees it, then ``ordering_epoch`` raised as for a failover).

Afterwards the table is compared with ``expected_rows()`` (hard deletes: table == oracle, row by row; soft deletes:
live rows == oracle, every other row is flagged ``__deleted`` and its key is in ``deleted_keys()``), and the ledger is
checked: nothing pending, incremental ranges contiguous per partition from 0 to the high watermark.

Reproduce one scenario: ``Scenario.random(seed)`` is deterministic; ``run_scenario(...)`` returns mismatches.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from devtools.debezium import AvroSerializer, ChangeEventGenerator, JsonSerializer, produce
from tests.conftest import unique
from tests.integration.cli import run_cli
from tests.scenarios.crashes import Refused, _maintenance, _owner_dead_once, local_zone, raise_at  # noqa: F401 (re-exported)
from tests.scenarios.oracle_check import check_ledger, compare
from tests.scenarios.oracle_streams import TableSpec, build_stream, draw_classes, draw_server_failover  # noqa: F401 (re-exported)

CRASH_POINTS = ("after_claim", "after_stage", "after_staged", "after_truncate", "after_merge", "before_commit",
                "after_commit")
FENCE_POINTS = ("after_stage", "after_staged", "after_classify", "after_merge", "before_commit")


@dataclass
class Scenario:
    seed: int
    fmt: str  # json | avro | json-schemaless (schemas.enable=false, decimals declared in column_types)
    tables: list[TableSpec]
    batch_sizes: list[int]  # max_records_per_partition per run (the last one repeats)
    crash: str | None = None  # kill:<point> | sigkill:<seconds> | raise:<point> | None
    crash_run: int = 0  # which run crashes
    split: float = 1.0  # share of records produced before the first run (the rest after the crash run)
    gc: bool = False  # tombstone GC (zero retention) after every run (not adversarial: see cdc.merge GC horizon)
    tz: str = "UTC"  # the local time zone of the runs, subprocesses and in-process (lease ages must not depend on it)
    fence: str | None = None  # a stale writer: paused at this point while its batch is taken over and newer ones commit
    cursor_reset: bool = False  # the first table's cursor moves beyond the high watermark once: refused, then reset

    @staticmethod
    def random(seed: int, crash_kinds: tuple[str, ...] = (), crash_odds: float = 0.0, size: str = "small") -> "Scenario":
        rng = random.Random(seed)
        n_tables = rng.choice((1, 1, 2))
        tables = []
        for i in range(n_tables):
            connector = rng.choice(("postgresql", "mysql"))
            adversarial = rng.random() < 0.3
            ops = rng.randint(20, 60) if size == "small" else rng.randint(60, 200)
            tables.append(TableSpec(
                seed=seed * 10 + i, connector=connector, delete_mode=rng.choice(("hard", "soft")),
                partitions=rng.choice((1, 2, 3)),
                replica_identity=rng.choice(("full", "default", "key")) if connector == "postgresql" else "full",
                snapshot=rng.randint(0, 12), ops=ops, truncate_weight=rng.choice((0.0, 0.0, 0.05, 0.15)),
                restarts=rng.randint(0, 3), adversarial=adversarial,
                compacted=not adversarial and rng.random() < 0.25,
                explicit_ordering=connector == "postgresql" and rng.random() < 0.15))
            mode = random.Random(f"mode-{seed}-{i}")  # its own stream: the draws above stay as they were
            tables[-1].write_mode = mode.choice(("upsert", "upsert", "append", "scd2"))
            if tables[-1].write_mode == "scd2" and mode.random() < 0.5:
                tables[-1].track_columns = ("name", "active")
        extra = random.Random(f"classes-{seed}")  # the later classes' own stream: the draws above stay as they were
        for t in tables:
            t.failover = t.write_mode == "upsert" and not t.explicit_ordering and extra.random() < 0.25
        fence = extra.choice(FENCE_POINTS) if extra.random() < 0.2 else None
        cursor_reset = extra.random() < 0.15
        for t in tables:
            draw_classes(t, extra)  # schema evolution, ties (tests/scenarios/oracle_streams.py)
        schemaless = extra.random() < 0.35
        for t in tables:
            draw_server_failover(t, extra)  # after the draws above: they stay as they were
        recreate = random.Random(f"recreate-{seed}")  # truncates across batch cuts: keys re-created after each
        for t in tables:
            t.recreate = t.truncate_weight > 0 and t.write_mode in ("scd2", "append") and recreate.random() < 0.5
        batch_sizes = [rng.choice((3, 7, 15, 30, 80)) for _ in range(3)]
        crash = None
        if crash_kinds and rng.random() < crash_odds:
            kind = rng.choice(crash_kinds)
            crash = f"sigkill:{rng.uniform(10, 40):.1f}" if kind == "sigkill" else f"{kind}:{rng.choice(CRASH_POINTS)}"
        fmt = rng.choice(("json", "json", "avro"))
        return Scenario(seed=seed, fmt="json-schemaless" if fmt == "json" and schemaless else fmt, tables=tables,
                        batch_sizes=batch_sizes,
                        crash=crash, crash_run=rng.randint(0, 1), split=rng.choice((1.0, 0.5)),
                        gc=not any(t.adversarial for t in tables) and rng.random() < 0.3,
                        tz=rng.choice(("UTC", "America/New_York", "Asia/Tokyo")), fence=fence,
                        cursor_reset=cursor_reset)


@dataclass
class Stream:
    spec: TableSpec
    gen: ChangeEventGenerator
    records: list[Any]
    topic: str
    target: str  # namespace.table


@dataclass
class Outcome:
    scenario: Scenario
    runs: int = 0
    crashed: bool = False
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0
    refused: list[str] = field(default_factory=list)  # provoked refusals taken the documented way on

    def describe(self) -> str:
        s = self.scenario
        kinds = ",".join(t.describe() for t in s.tables)
        return (f"seed={s.seed} fmt={s.fmt} tables=[{kinds}] batches={s.batch_sizes} crash={s.crash} "
                f"{f'fence={s.fence} ' if s.fence else ''}{'cursor-reset ' if s.cursor_reset else ''}"
                f"{'gc ' if s.gc else ''}tz={s.tz} merge={merge_path(s)} "
                f"{'refused=' + ','.join(self.refused) + ' ' if self.refused else ''}"
                f"runs={self.runs} {self.seconds:.0f}s")


# How a batch meets the target (cdc.merge.sql.relation, cdc.merge.sql.near, cdc.merge.bloom): chosen by the seed, so that existing
# seeds keep their scenarios: joined whole (the default for small targets: small batches in one Spark task, every
# other "whole" seed with the target broadcast instead) / cut to the batch's keys / in addition a bloom filter of the
# batch's keys on the MERGE's target scan (both are the default for targets of 1M rows and more). The first ones
# write a batch the driver read by row deltas (cdc.merge.target_write, the default), the last by MERGE statements.
MERGE_PATHS = {"whole": {}, "broadcast": {"one_task_max_target_rows": 0}, "key-filter": {"key_filter_min_target_rows": 0},
               "bloom": {"key_filter_min_target_rows": 0, "bloom_filter_min_target_rows": 1, "row_deltas": False}}


def merge_path(scenario: Scenario) -> str:
    path = ("whole", "key-filter", "bloom")[scenario.seed % 3]
    return "broadcast" if path == "whole" and scenario.seed // 3 % 2 else path


class Harness:
    """Drives scenarios against the session broker / Spark / warehouse (and a registry for Avro)."""

    def __init__(self, spark: Any, broker: Any, warehouse: Path, registry: Any = None, tmp: Path | None = None):
        self.spark, self.broker, self.warehouse, self.registry = spark, broker, Path(warehouse), registry
        self.tmp = Path(tmp or warehouse)

    # ------------------------------------------------------------------ setup

    def config_dict(self, scenario: Scenario, streams: list[Stream], meta: str) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "pipeline": "oracle", "kafka": {"bootstrap.servers": self.broker.bootstrap},
            "format": "avro" if scenario.fmt == "avro" else "json",
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(self.warehouse)},
            "metadata_namespace": meta,
            "spark": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
            "batch": {"read_timeout_seconds": 20, "chunk_size": 25, **MERGE_PATHS[merge_path(scenario)]},
            "tables": [{"topic": s.topic, "target": s.target, "delete_mode": s.spec.delete_mode,
                        "max_dead_letter_ratio": 0.0, "compacted": s.spec.compacted,
                        **({"ordering": ["source.lsn"]} if s.spec.explicit_ordering else {}),
                        **({"write_mode": s.spec.write_mode} if s.spec.write_mode != "upsert" else {}),
                        **({"track_columns": list(s.spec.track_columns)} if s.spec.track_columns else {}),
                        **({"column_types": declared_types(s.gen)} if scenario.fmt == "json-schemaless" else {})}
                       for s in streams],
        }
        if scenario.fmt == "avro":
            raw["schema_registry"] = {"url": self.registry.url}
        return raw

    def prepare(self, scenario: Scenario) -> tuple[list[Stream], dict[str, Any]]:
        streams = []
        for spec in scenario.tables:
            gen, records = build_stream(spec)
            topic = unique(f"oracle.{spec.connector}.t")
            self.broker.create_topic(topic, partitions=spec.partitions)
            streams.append(Stream(spec, gen, records, topic, f"{unique('o')}.t{len(streams)}"))
        return streams, self.config_dict(scenario, streams, unique("ometa"))

    def produce(self, scenario: Scenario, streams: list[Stream], part: slice) -> None:
        for s in streams:
            if scenario.fmt == "avro":
                from confluent_kafka.schema_registry import SchemaRegistryClient

                ser: Any = AvroSerializer(SchemaRegistryClient(self.registry.client_config), topic=s.topic)
            else:
                ser = JsonSerializer(schemas_enable=scenario.fmt == "json")
            produce(self.broker.bootstrap, s.topic, s.records[part], ser)

    # ------------------------------------------------------------------ running

    def run_inprocess(self, raw: dict[str, Any], max_records: int) -> list[dict[str, Any]]:
        from cdc.common.errors import TerminalError
        from cdc.config.load import parse_config
        from cdc.run.batch import run_batch

        cfg = parse_config(raw).with_batch(max_records_per_partition=max_records)
        try:
            return run_batch(self.spark, cfg, list(cfg.tables))["tables"]
        except TerminalError as exc:  # PositionRegression, a cursor beyond the end, ...
            raise Refused(f"{type(exc).__name__}: {exc}") from exc

    def run_cli(self, raw: dict[str, Any], max_records: int | None = None, env: dict[str, str] | None = None,
                kill_after: float | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        return run_cli(self.write_config(raw), max_records, env, kill_after, timeout)

    def write_config(self, raw: dict[str, Any]) -> Path:
        path = self.tmp / f"{unique('pipeline')}.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    def refresh(self, raw: dict[str, Any]) -> None:
        """Forget cached Iceberg metadata (another process wrote these tables)."""
        meta = raw["metadata_namespace"]
        names = [f"lake.{meta}.ledger", f"lake.{meta}.dead_letters"]
        for t in raw["tables"]:
            flat = t["target"].replace(".", "__")
            names += [f"lake.{t['target']}", f"lake.{meta}.staging__{flat}", f"lake.{meta}.tombstones__{flat}",
                      f"lake.{meta}.changes__{flat}"]
        for n in names:
            try:
                self.spark.catalog.refreshTable(n)
            except Exception:  # not created (yet)
                pass

    def run_scenario(self, scenario: Scenario) -> Outcome:
        """Run one scenario; a job error (any exception) is reported as a mismatch, not raised."""
        t0 = time.monotonic()
        out = Outcome(scenario)
        try:
            with local_zone(scenario.tz):  # the driver's zone; the Spark session's stays UTC (the job pins it)
                self._run(scenario, out)
        except Exception as exc:  # noqa: BLE001 - the report names the seed; the soak goes on
            out.mismatches.append(f"run failed: {type(exc).__name__}: {str(exc).splitlines()[0][:400]}")
        out.seconds = time.monotonic() - t0
        return out

    def _run(self, scenario: Scenario, out: Outcome) -> None:
        streams, raw = self.prepare(scenario)
        n = {s.topic: len(s.records) for s in streams}
        first = {s.topic: int(n[s.topic] * scenario.split) for s in streams}
        for s in streams:
            self.produce(scenario, [s], slice(0, first[s.topic]))
        produced_rest = scenario.split >= 1.0
        sizes = list(scenario.batch_sizes)
        fence_run = (1 - scenario.crash_run) if scenario.crash else scenario.crash_run
        fenced = moved = False
        run = 0
        while True:
            size = sizes[min(run, len(sizes) - 1)]
            try:
                if scenario.crash and run == scenario.crash_run and not out.crashed:
                    out.crashed = True
                    self.crash(scenario.crash, raw, size, scenario.tz)
                    self.refresh(raw)
                elif scenario.fence and run == fence_run and not fenced:
                    fenced = True
                    self.stale_writer(raw, size, scenario.fence)
                else:
                    results = self.run_inprocess(raw, size)
                    if scenario.gc:
                        self.gc_tombstones(raw)
                    if scenario.cursor_reset and not moved and self.move_cursor_beyond_the_end(raw, streams[0]):
                        moved = True  # once something is committed: the next run must refuse
                    elif all(r["status"] == "empty" for r in results):
                        if produced_rest:
                            break
                        for s in streams:
                            self.produce(scenario, [s], slice(first[s.topic], None))
                        produced_rest = True
            except Refused as exc:
                out.refused.append(self.way_on(raw, streams, str(exc)))
            run += 1
            if run > 60:
                out.mismatches.append("did not catch up within 60 runs")
                break
        out.runs = run
        for s in streams:
            out.mismatches += compare(self.spark, f"lake.{s.target}", s)
            out.mismatches += check_ledger(self.spark, raw, s, self.broker)

    def way_on(self, raw: dict[str, Any], streams: list[Stream], message: str) -> str:
        """The documented recovery for a refused batch the scenario provoked; anything else is re-raised."""
        for entry, s in zip(raw["tables"], streams):
            if f"table {s.target}:" not in message:
                continue
            if "PositionRegression" in message and (s.spec.failover or s.spec.server_failover):  # raise the epoch
                entry["ordering_epoch"] = entry.get("ordering_epoch", 0) + 1
                return "epoch"
            if "beyond the partition's high watermark" in message:  # --reset-cursor, then read on
                from cdc.config.load import parse_config
                from cdc.run.batch import run_batch

                cfg = parse_config(raw)
                run_batch(self.spark, cfg, [t for t in cfg.tables if t.target == s.target], mode="reset")
                return "reset"
        raise AssertionError(f"unexpected refusal: {message[:500]}")

    def move_cursor_beyond_the_end(self, raw: dict[str, Any], s: Stream) -> bool:
        """The broker lost partition 0's log / the topic was re-created (the local broker cannot delete a topic, so
        the cursor is moved past the end instead): the next run must refuse, naming the cursor and the watermark."""
        ledger = f"lake.{raw['metadata_namespace']}.ledger"
        where = f"table_name = '{s.target}' AND `partition` = 0 AND status = 'committed' AND mode = 'incremental'"
        newest = self.spark.sql(f"SELECT max(batch_id) AS b FROM {ledger} WHERE {where}").collect()[0]["b"]
        if newest is None:
            return False
        from cdc.kafka.offsets import high_watermarks

        end = high_watermarks({"bootstrap.servers": self.broker.bootstrap}, s.topic)[0]
        self.spark.sql(f"UPDATE {ledger} SET end_offset = {end + 40} WHERE {where} AND batch_id = {newest}")
        return True

    def stale_writer(self, raw: dict[str, Any], size: int, point: str) -> None:
        """Run A stalls at ``point`` (a long GC pause); meanwhile its claim counts as expired, run B takes the batch
        over and commits it, and a newer batch commits too. Then A goes on with what it had read: it must not
        regress a row, and it fails when it finds its claim gone (an error, not a mismatch)."""
        import cdc.merge.apply
        import cdc.run.batch
        from cdc.common.errors import CdcError

        saved = cdc.run.batch.checkpoint, cdc.merge.apply.checkpoint

        def stall(p: str) -> None:
            if p != point:
                return
            cdc.run.batch.checkpoint, cdc.merge.apply.checkpoint = saved  # B and the next run go through normally
            _owner_dead_once()
            for _ in range(2):
                try:
                    self.run_inprocess(raw, size)
                except Refused:
                    return  # e.g. a failover B must first be told about: A goes on against what B left

        cdc.run.batch.checkpoint = cdc.merge.apply.checkpoint = stall
        try:
            self.run_inprocess(raw, size)
        except CdcError:  # (a Refused is no CdcError: it reaches the caller, which takes the way on)
            pass  # A lost its claim
        finally:
            cdc.run.batch.checkpoint, cdc.merge.apply.checkpoint = saved
            self.refresh(raw)

    def gc_tombstones(self, raw: dict[str, Any]) -> None:
        """Maintenance's tombstone GC with zero retention (in-process, ``jobs/maintenance.py``)."""
        import argparse
        from datetime import datetime, timedelta, timezone

        from cdc.config.load import parse_config

        cfg = parse_config(raw)
        args = argparse.Namespace(config="-", table=[], staging_retention_hours=1e6, tombstone_retention_hours=0,
                                  snapshot_retention_hours=1e6, retain_last=100, orphan_retention_hours=1e6)
        m = _maintenance().Maintenance(self.spark, cfg, args, datetime.now(timezone.utc) + timedelta(hours=1))
        for t in cfg.tables:
            tomb = f"lake.{cfg.metadata_namespace}.tombstones__{t.target.replace('.', '__')}"
            if m.exists(tomb):
                m.step(tomb, "gc_tombstones", lambda: m.gc_tombstones(t, tomb, "TIMESTAMP '9999-01-01 00:00:00Z'"))
        failed = [s for s in m.steps if s["error"]]
        assert not failed, failed

    def crash(self, how: str, raw: dict[str, Any], size: int, zone: str = "UTC") -> None:
        kind, _, arg = how.partition(":")
        tz = {"TZ": zone} if zone != "UTC" else {}
        if kind in ("kill", "sigkill"):
            res = self.run_cli(raw, size, env={"CDC_KILL_AT": arg, **tz}) if kind == "kill" else \
                self.run_cli(raw, size, env=tz or None, kill_after=float(arg))
            if res.returncode == 2:  # refused (a provoked failover / lost cursor): the caller takes the way on
                raise Refused(res.stdout[-3000:] + res.stderr[-3000:])
            assert res.returncode in (0, -signal.SIGKILL), f"unexpected exit {res.returncode}: {res.stderr[-2000:]}"
        elif kind == "raise":
            raise_at(arg, lambda: self.run_inprocess(raw, size))
        else:
            raise ValueError(how)


def declared_types(gen: ChangeEventGenerator) -> dict[str, str]:
    """Schemaless JSON: ``column_types`` for the columns whose JSON values do not tell their type (Debezium's base64
    ``precise`` decimals, days, µs timestamps), in the newest schema version; the rest are inferred."""
    names = {"date": "date", "timestamp": "timestamp"}
    return {c.name: f"decimal({c.precision},{c.scale})" if c.kind == "decimal" else names[c.kind]
            for c in gen.table.columns if c.kind in ("decimal", "date", "timestamp")}


def scenario_with(s: Scenario, **changes: Any) -> Scenario:
    return replace(s, **changes)
