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
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import yaml

from devtools.debezium import (AvroSerializer, ChangeEventGenerator, GeneratorConfig, JsonSerializer,
                               compact_deletes, move_later, produce, redeliver, replay)
from tests.conftest import REPO, unique
from tests.integration.cli import run_cli

CRASH_POINTS = ("after_claim", "after_stage", "after_staged", "after_truncate", "after_merge", "before_commit",
                "after_commit")


@dataclass
class TableSpec:
    seed: int
    connector: str  # postgresql | mysql
    delete_mode: str  # hard | soft
    partitions: int
    replica_identity: str
    snapshot: int
    ops: int
    truncate_weight: float
    restarts: int  # connector restarts → redelivered windows
    adversarial: bool  # move_later (only without TOAST: a placeholder cannot be resolved before its base value)
    compacted: bool = False  # compacted topic: most deletes are gone, their tombstones remain (not adversarial)
    explicit_ordering: bool = False  # ordering: [source.lsn] instead of auto (PostgreSQL only)
    write_mode: str = "upsert"  # upsert | append | scd2 (append/scd2: tests/integration/mode_oracle.py)
    track_columns: tuple[str, ...] = ()  # scd2 only


@dataclass
class Scenario:
    seed: int
    fmt: str  # json | avro
    tables: list[TableSpec]
    batch_sizes: list[int]  # max_records_per_partition per run (the last one repeats)
    crash: str | None = None  # kill:<point> | sigkill:<seconds> | raise:<point> | None
    crash_run: int = 0  # which run crashes
    split: float = 1.0  # share of records produced before the first run (the rest after the crash run)
    gc: bool = False  # tombstone GC (zero retention) after every run (not adversarial: see cdc.merge GC horizon)
    tz: str = "UTC"  # time zone of the job subprocesses (lease ages must not depend on it)

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
            if tables[-1].write_mode != "upsert":
                tables[-1].compacted = False  # compacted-away deletes are not changes these modes can show
            if tables[-1].write_mode == "scd2" and mode.random() < 0.5:
                tables[-1].track_columns = ("name", "active")
        batch_sizes = [rng.choice((3, 7, 15, 30, 80)) for _ in range(3)]
        crash = None
        if crash_kinds and rng.random() < crash_odds:
            kind = rng.choice(crash_kinds)
            crash = f"sigkill:{rng.uniform(10, 40):.1f}" if kind == "sigkill" else f"{kind}:{rng.choice(CRASH_POINTS)}"
        return Scenario(seed=seed, fmt=rng.choice(("json", "json", "avro")), tables=tables, batch_sizes=batch_sizes,
                        crash=crash, crash_run=rng.randint(0, 1), split=rng.choice((1.0, 0.5)),
                        gc=not any(t.adversarial for t in tables) and rng.random() < 0.3,
                        tz=rng.choice(("UTC", "America/New_York", "Asia/Tokyo")))


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

    def describe(self) -> str:
        s = self.scenario
        kinds = ",".join(f"{t.connector[:2]}/{t.delete_mode}/p{t.partitions}/{t.replica_identity}"
                         f"{'/adv' if t.adversarial else ''}{'/compacted' if t.compacted else ''}"
                         f"{'/explicit' if t.explicit_ordering else ''}"
                         f"{'' if t.write_mode == 'upsert' else '/' + t.write_mode}"
                         f"{'/track' if t.track_columns else ''}" for t in s.tables)
        return (f"seed={s.seed} fmt={s.fmt} tables=[{kinds}] batches={s.batch_sizes} crash={s.crash} "
                f"{'gc ' if s.gc else ''}tz={s.tz} "
                f"runs={self.runs} {self.seconds:.0f}s")


def build_stream(spec: TableSpec) -> tuple[ChangeEventGenerator, list[Any]]:
    rng = random.Random(spec.seed ^ 0x5EED)
    toast = 0.0 if spec.adversarial else 0.3
    gen = ChangeEventGenerator(spec.seed, GeneratorConfig(
        connector=spec.connector, partitions=spec.partitions, replica_identity=spec.replica_identity,
        toast_fraction=toast, binlog_max_bytes=3_000,
        # PK changes with TOAST placeholders (resolved across batches through the key headers); one partition only:
        # a create merged before an unread change of its old key in a lagging partition is a documented limit
        toast_on_pk_change=spec.partitions == 1 and spec.write_mode == "upsert"))
    records = gen.snapshot(spec.snapshot)
    weights = {"insert": 4, "update": 5, "delete": 1.5, "change_pk": 0.5, "truncate": spec.truncate_weight}
    records += gen.random_ops(spec.ops, weights)
    records = redeliver(records, rng, restarts=spec.restarts, max_window=15)
    if spec.adversarial:
        records = move_later(records, rng, fraction=0.08, max_shift=25)
    assert replay(records) == gen.expected_rows(), "generator oracle and reference replay disagree"
    if spec.compacted:
        records = compact_deletes(records, rng)
    return gen, records


class Harness:
    """Drives scenarios against the session broker / Spark / warehouse (and a registry for Avro)."""

    def __init__(self, spark: Any, broker: Any, warehouse: Path, registry: Any = None, tmp: Path | None = None):
        self.spark, self.broker, self.warehouse, self.registry = spark, broker, Path(warehouse), registry
        self.tmp = Path(tmp or warehouse)

    # ------------------------------------------------------------------ setup

    def config_dict(self, scenario: Scenario, streams: list[Stream], meta: str) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "pipeline": "oracle", "kafka": {"bootstrap.servers": self.broker.bootstrap}, "format": scenario.fmt,
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(self.warehouse)},
            "metadata_namespace": meta,
            "spark": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
            "batch": {"read_timeout_seconds": 20, "chunk_size": 25},
            "tables": [{"topic": s.topic, "target": s.target, "delete_mode": s.spec.delete_mode,
                        "max_dead_letter_ratio": 0.0, "compacted": s.spec.compacted,
                        **({"ordering": ["source.lsn"]} if s.spec.explicit_ordering else {}),
                        **({"write_mode": s.spec.write_mode} if s.spec.write_mode != "upsert" else {}),
                        **({"track_columns": list(s.spec.track_columns)} if s.spec.track_columns else {})}
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
                ser = JsonSerializer()
            produce(self.broker.bootstrap, s.topic, s.records[part], ser)

    # ------------------------------------------------------------------ running

    def run_inprocess(self, raw: dict[str, Any], max_records: int) -> list[dict[str, Any]]:
        from cdc.config import parse_config
        from cdc.run import run_batch

        cfg = parse_config(raw).with_batch(max_records_per_partition=max_records)
        return run_batch(self.spark, cfg, list(cfg.tables))["tables"]

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
        run = 0
        while True:
            size = sizes[min(run, len(sizes) - 1)]
            if scenario.crash and run == scenario.crash_run and not out.crashed:
                out.crashed = True
                self.crash(scenario.crash, raw, size, scenario.tz)
                self.refresh(raw)
            else:
                results = self.run_inprocess(raw, size)
                if scenario.gc:
                    self.gc_tombstones(raw)
                if all(r["status"] == "empty" for r in results):
                    if produced_rest:
                        break
                    for s in streams:
                        self.produce(scenario, [s], slice(first[s.topic], None))
                    produced_rest = True
            run += 1
            if run > 60:
                out.mismatches.append("did not catch up within 60 runs")
                break
        out.runs = run
        for s in streams:
            out.mismatches += compare(self.spark, f"lake.{s.target}", s)
            out.mismatches += check_ledger(self.spark, raw, s, self.broker)

    def gc_tombstones(self, raw: dict[str, Any]) -> None:
        """Maintenance's tombstone GC with zero retention (in-process, ``jobs/maintenance.py``)."""
        import argparse
        from datetime import datetime, timedelta, timezone

        from cdc.config import parse_config

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
        if kind == "kill":
            res = self.run_cli(raw, size, env={"CDC_KILL_AT": arg, **tz})
            assert res.returncode in (0, -signal.SIGKILL), f"unexpected exit {res.returncode}: {res.stderr[-2000:]}"
        elif kind == "sigkill":
            res = self.run_cli(raw, size, env=tz or None, kill_after=float(arg))
            assert res.returncode in (0, -signal.SIGKILL), f"unexpected exit {res.returncode}: {res.stderr[-2000:]}"
        elif kind == "raise":
            raise_at(arg, lambda: self.run_inprocess(raw, size))
        else:
            raise ValueError(how)


def _maintenance() -> Any:
    import importlib.util
    import sys

    if "cdc_maintenance_harness" not in sys.modules:
        spec = importlib.util.spec_from_file_location("cdc_maintenance_harness", REPO / "jobs" / "maintenance.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        sys.modules["cdc_maintenance_harness"] = module
    return sys.modules["cdc_maintenance_harness"]


class Crash(BaseException):  # not Exception: must pass through the phase() wrappers
    """Stands in for the process dying at a crash point (in-process scenarios)."""


def raise_at(point: str, fn: Callable[[], Any]) -> bool:
    """Run ``fn`` with an exception raised at crash point ``point``; True if it got there. Afterwards the batch's
    owner counts as dead (as after a real kill), so the next run takes it over."""
    import cdc.apply
    import cdc.run

    def checkpoint(p: str) -> None:
        if p == point:
            raise Crash(p)

    saved = cdc.run.checkpoint, cdc.apply.checkpoint
    cdc.run.checkpoint = cdc.apply.checkpoint = checkpoint
    try:
        fn()
        return False
    except Crash:
        return True
    finally:
        cdc.run.checkpoint, cdc.apply.checkpoint = saved
        _owner_dead_once()


def _owner_dead_once() -> None:
    """Make the next run see pending batches of this (living) process as abandoned: rewrite ``owner``."""
    import os

    import cdc.run
    from cdc.ledger import owner_host

    original = getattr(cdc.run.owner_alive, "original", cdc.run.owner_alive)
    mine = f"{owner_host()}:{os.getpid()}:"

    def dead(owner: str, claimed_at: Any, lease: float) -> bool:
        if not owner.startswith(mine):  # another process's claim (e.g. a later test's "other host"): judged as usual
            return original(owner, claimed_at, lease)
        cdc.run.owner_alive = original
        return False

    dead.original = original  # type: ignore[attr-defined]
    cdc.run.owner_alive = dead


# ---------------------------------------------------------------------- comparison

def _read(spark: Any, table: str) -> tuple[list[dict[str, Any]], set[str]]:
    df = spark.table(table)
    sel = []
    for f in df.schema.fields:
        t = f.dataType.typeName()
        if t == "date":
            sel.append(f"unix_date(`{f.name}`) AS `{f.name}`")
        elif t.startswith("timestamp"):
            sel.append(f"unix_micros(CAST(`{f.name}` AS TIMESTAMP)) AS `{f.name}`")
        else:
            sel.append(f"`{f.name}`")
    return [r.asDict() for r in df.selectExpr(*sel).collect()], {f.name for f in df.schema.fields}


def _norm(v: Any) -> Any:
    if isinstance(v, Decimal):
        return v.normalize() if v == v.to_integral_value() else v
    return v


def compare(spark: Any, table: str, s: Stream) -> list[str]:
    """Row-by-row comparison with the oracle; returns human-readable mismatches (empty when equal)."""
    expected = s.gen.expected_rows()
    deleted = s.gen.deleted_keys()
    cols = [c.name for c in s.gen.table.columns]
    pk = s.gen.table.primary_key[0]
    if s.spec.write_mode != "upsert":  # a missing table is a mismatch whenever the stream held changes
        from tests.integration.mode_oracle import compare_mode

        try:
            rows, have = _read(spark, table)
        except Exception:  # noqa: BLE001 - not created: compared as empty
            rows, have = [], set()
        return compare_mode(rows, have, table, s.spec.write_mode, s.records, cols, pk, s.spec.track_columns)
    try:
        rows, have = _read(spark, table)
    except Exception as exc:  # the table may not exist when every event was dropped
        if expected:
            return [f"{table}: cannot read ({str(exc).splitlines()[0][:200]})"]
        return []
    bad = []
    soft = s.spec.delete_mode == "soft"
    if soft and rows and "__deleted" not in have:
        bad.append(f"{table}: soft mode but no __deleted column")
    live = {}
    for r in rows:
        if soft and r.get("__deleted"):
            if r[pk] in expected:
                bad.append(f"{table}: key {r[pk]} flagged deleted but exists in the source")
            elif r[pk] not in deleted:
                bad.append(f"{table}: key {r[pk]} flagged deleted but never existed")
            continue
        if r[pk] in live:
            bad.append(f"{table}: key {r[pk]} appears twice")
        live[r[pk]] = r
    for k in sorted(set(live) | set(expected)):
        if k not in expected:
            bad.append(f"{table}: extra row {k} (op {live[k].get('__op')}, batch {live[k].get('__batch_id')})")
        elif k not in live:
            bad.append(f"{table}: missing row {k}")
        else:
            for c in cols:
                a, b = _norm(live[k].get(c)), _norm(expected[k].get(c))
                if a != b:
                    bad.append(f"{table}: row {k} column {c}: table {str(a)[:60]!r} != source {str(b)[:60]!r}")
    return bad


def check_ledger(spark: Any, raw: dict[str, Any], s: Stream, broker: Any) -> list[str]:
    """Nothing pending; committed incremental ranges per partition are contiguous from 0 to the end."""
    from cdc.kafka.offsets import high_watermarks

    rows = spark.sql(f"SELECT * FROM lake.{raw['metadata_namespace']}.ledger WHERE table_name = '{s.target}' "
                     "ORDER BY batch_id").collect()
    bad = [f"{s.target}: batch {r.batch_id} left {r.status}" for r in rows if r.status != "committed"]
    ends = high_watermarks({"bootstrap.servers": broker.bootstrap}, s.topic)
    for p, end in ends.items():
        got = sorted((r.start_offset, r.end_offset) for r in rows if r.partition == p and r.mode == "incremental"
                     and r.status == "committed")
        pos = 0
        for a, b in got:
            if a != pos:
                bad.append(f"{s.target}: partition {p}: ledger range [{a}, {b}) does not start at {pos}")
            pos = b
        if pos != end:
            bad.append(f"{s.target}: partition {p}: ledger ends at {pos}, topic ends at {end}")
    return bad


def scenario_with(s: Scenario, **changes: Any) -> Scenario:
    return replace(s, **changes)
