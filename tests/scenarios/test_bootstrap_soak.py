"""Soak: a JDBC bootstrap racing ingest batches, with crashes at every crash point, on a real PostgreSQL 15 table,
the real local broker, Spark and Iceberg (``pytest -m slow tests/scenarios/test_bootstrap_soak.py -s``; in ``make
soak``, skipped by ``make test``).

Per seed: a random source history (inserts, updates, deletes, keys deleted and re-inserted, multi-statement
transactions, now and then a TRUNCATE) on ``public.customers`` in a fresh database, each transaction's Debezium
events (stamped with the real WAL positions, ``tests.integration.bootstrap.test_bootstrap_postgres.Source``) produced
right after it commits to a 2-partition topic keyed like Debezium; then a random interleaving of more transactions,
in-process ``run_batch`` batches (random ``max_records_per_partition``), real ``jobs/ingest.py`` runs (random
``CDC_KILL_AT`` among ``cdc.common.faults.POINTS``) and real ``jobs/bootstrap.py`` runs (random ``CDC_KILL_AT`` among
the bootstrap points or none, ``--replace`` when the target is non-empty). A bootstrap may pause (``CDC_PAUSE_AT``)
at one of its points while the test commits more transactions (produced before the bootstrap scans the topic: the
pause comes after the snapshot) and starts ingest runs, in-process or the CLI, which must refuse
(``ConcurrentRunError``, exit 75) without committing anything while the pause surely lasts (a run that may have
outlived the pause is judged by the end state only).

Checked along the way: each run's exit code and status (a bootstrap meeting a pending ingest batch: 75; one meeting
the claim of a bootstrap killed after its swap: ``recovered``; else bootstrapped, or killed), a swap leaves exactly
the rows of the source at the bootstrap's start, and every key of the target only moves forward through the versions
the source gave it (never a value it never had, never back to an older one). At the end: ingest until empty; the
table equals ``SELECT * FROM`` the source, the ledger has no pending row, and one committed bootstrap row per swap.

Knobs: ``CDC_SOAK_SCENARIOS`` (seeds, default 10), ``CDC_SOAK_SEED`` (first seed, default 1), ``CDC_SOAK_SEEDS`` (a
comma-separated list instead). Seed ``s``'s first bootstrap is killed at ``(none, *bootstrap points)[s % 5]`` and its
first ingest CLI at ``(none, *POINTS)[s % 8]``, so seeds 1..10 cover every crash point (``after_truncate`` fires
only in a batch holding a TRUNCATE: that run gets one first). A failing seed reproduces with
``CDC_SOAK_SEEDS=<seed>`` (the choices follow from the seed; timing may differ).
"""

from __future__ import annotations

import json
import os
import random
import time
import traceback
from collections import Counter
from pathlib import Path

import pytest

from cdc.common.faults import POINTS as INGEST_POINTS
from tests.conftest import unique
from tests.integration.bootstrap.test_bootstrap_postgres import Source, start_bootstrap, value_schema, write_config
from tests.integration.cli import finish, start_job, summary_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BOOTSTRAP_POINTS = ("bootstrap_after_snapshot", "bootstrap_after_stage", "bootstrap_before_swap",
                    "bootstrap_after_swap")
SHORT_PAUSE, LONG_PAUSE = 20.0, 90.0  # seconds: in-process refusals only / also an ingest CLI (a JVM starts)
BATCH_SIZES = (1, 2, 3, 5, 8, 20, None)


def produce(broker, topic: str, records) -> None:
    """Keyed like Debezium (one key → one partition), in order, with one idempotent producer."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for k, v, *part in records:  # a truncate (no key): the partition it was given
        p.produce(topic, key=k, value=v, partition=part[0] if part else json.loads(k)["payload"]["id"] % 2)
    assert p.flush(30) == 0, "records not delivered"


class History:
    """The source table's random history: every value each key ever had, in order (None: deleted)."""

    def __init__(self, src: Source, rng: random.Random, keys: int):
        self.src, self.rng = src, rng
        self.keys = list(range(1, keys + 1))
        self.live: dict[int, tuple] = {}
        self.versions: dict[int, list] = {k: [] for k in self.keys}
        self.n = 0
        self.stats: Counter = Counter()

    def tx(self) -> list:
        """One random transaction (1-4 statements, or now and then a TRUNCATE) run on the source; its events."""
        rng = self.rng
        if self.live and rng.random() < 0.06:
            return self.truncate()
        live = dict(self.live)
        changes = []
        for _ in range(rng.choice((1, 1, 1, 2, 3, 4))):
            dead = [k for k in self.keys if k not in live]
            op = rng.choice(["c"] * (3 if dead else 0) + ["u"] * (3 if live else 0) + ["d"] * (2 if live else 0))
            self.n += 1
            if op == "d":
                k = rng.choice(sorted(live))
                del live[k]
                changes.append(("d", k))
                self.versions[k].append(None)
            else:
                k = rng.choice(dead if op == "c" else sorted(live))
                value = (f"n{k}-{self.n}", rng.choice((f"b{self.n}", None, "")))
                self.stats["reinserts" if op == "c" and self.versions[k] else op] += 1
                live[k] = value
                changes.append((op, k, *value))
                self.versions[k].append(value)
            self.stats["d"] += op == "d"
        self.live = live
        self.stats["txs"] += 1
        self.stats["multi"] += len(changes) > 1
        evs = self.src.tx(*changes)
        self.stats["events"] += len(evs)
        return evs

    def truncate(self) -> list:
        """``TRUNCATE customers`` in a transaction of its own; its one event as Debezium streams it (op ``t``, no key,
        so whichever partition the producer picks)."""
        src = self.src
        with src.conn.transaction():
            xid = int(src.conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            src.conn.execute("TRUNCATE customers")
            lsn = src.lsn()
        commit = src.lsn()
        source = {"connector": "postgresql", "lsn": lsn, "txId": xid,
                  "sequence": json.dumps([str(src.last_commit), str(lsn)]), "ts_ms": 1700000000000}
        src.last_commit = commit
        payload = {"before": None, "after": None, "source": source, "op": "t", "ts_ms": source["ts_ms"] + 5}
        for k in self.live:
            self.versions[k].append(None)
        self.live = {}
        self.stats["txs"] += 1
        self.stats["truncates"] += 1
        self.stats["events"] += 1
        value = json.dumps({"schema": value_schema(), "payload": payload}).encode()
        return [(None, value, self.rng.randrange(2))]

    def forward(self, rows: dict[int, tuple], seen: dict[int, int], where: str) -> list[str]:
        """Problems if ``rows`` (the target) shows a key at a value it never had or older than ``seen`` (the
        version index each key was last seen at, updated)."""
        out = [f"{where}: key {k} = {v} is not a source key" for k, v in rows.items() if k not in self.versions]
        for k in self.keys:
            vs, lo = self.versions[k], seen.get(k, -1)
            if k in rows:
                if rows[k] not in vs:
                    out.append(f"{where}: key {k} = {rows[k]}, never a source value of it ({vs})")
                    continue
                i = vs.index(rows[k])
                if i < lo:
                    out.append(f"{where}: key {k} went back to {rows[k]} (version {i}) from {vs[lo]} (version {lo})")
                    continue
                seen[k] = i
            elif lo >= 0:
                gone = next((i for i in range(lo, len(vs)) if vs[i] is None), None)
                if gone is None:
                    out.append(f"{where}: key {k} is missing; last seen as {vs[lo]}, not deleted since")
                else:
                    seen[k] = gone
        return out


class Seed:
    """One seed's pipeline: database, topic, target, config; its runs and what they showed."""

    def __init__(self, seed: int, spark, broker, warehouse, postgres, tmp: Path):
        self.seed, self.spark, self.broker, self.pg = seed, spark, broker, postgres
        self.rng = random.Random(seed)
        self.db = unique("db")
        postgres.create_database(self.db)
        self.topic = unique("dbserver1.public.customers_")
        broker.create_topic(self.topic, partitions=2)
        self.target = f"{unique('t')}.customers"
        self.meta = unique("meta")
        self.config = write_config(tmp / f"seed{seed}.yaml", broker, warehouse, postgres, self.db, self.topic,
                                   self.meta, self.target)
        from cdc.config.load import load_config

        self.cfg = load_config(self.config)
        self.src = Source(postgres, self.db)
        self.history = History(self.src, self.rng, self.rng.randint(6, 24))
        self.seen: dict[int, int] = {}
        self.mismatches: list[str] = []
        self.log: Counter = Counter()
        self.bootstraps: list[str] = []
        self.clis: list[str] = []
        self.pauses: list[str] = []
        self.swaps = 0
        self.boot_kill = (None, *BOOTSTRAP_POINTS)[seed % 5]  # the first bootstrap's and ingest CLI's kill point
        self.cli_kill = (None, *INGEST_POINTS)[seed % 8]

    # -- reading the lake ------------------------------------------------------------------------------------------
    @property
    def fq(self) -> str:
        return f"lake.{self.target}"

    @property
    def ledger(self) -> str:
        return f"lake.{self.meta}.ledger"

    @property
    def stage(self) -> str:
        return f"lake.{self.meta}.bootstrap__{self.target.replace('.', '__')}"

    def exists(self, name: str) -> bool:
        self.spark.catalog.clearCache()
        return bool(self.spark.catalog.tableExists(name))

    def rows(self) -> dict[int, tuple]:
        if not self.exists(self.fq):
            return {}
        self.spark.catalog.refreshTable(self.fq)
        return {r["id"]: (r["name"], r["bio"]) for r in self.spark.table(self.fq).collect()}

    def snapshot_id(self, name: str) -> int | None:
        from cdc.bootstrap.claim import target_snapshot

        return target_snapshot(self.spark, name) if self.exists(name) else None

    def ledger_rows(self, where: str) -> list:
        if not self.exists(self.ledger):
            return []
        self.spark.catalog.refreshTable(self.ledger)
        return self.spark.sql(f"SELECT batch_id, mode, status, run_id FROM {self.ledger} WHERE table_name = "
                              f"'{self.target}' AND {where} ORDER BY batch_id").collect()

    def pending(self) -> list:
        return self.ledger_rows("status IN ('claimed', 'staged')")

    def committed(self) -> int:
        return len(self.ledger_rows("status = 'committed'"))

    def newest_swap(self) -> int | None:
        from cdc.bootstrap.claim import swapped

        found = swapped(self.spark, self.fq) if self.exists(self.fq) else None
        return found[1] if found else None

    def check_forward(self, where: str) -> None:
        self.mismatches += self.history.forward(self.rows(), self.seen, where)

    def fail(self, what: str) -> None:
        self.mismatches.append(what)

    # -- steps -----------------------------------------------------------------------------------------------------
    def txs(self, n: int) -> None:
        for _ in range(n):
            produce(self.broker, self.topic, self.history.tx())  # produced as it commits: before any scan

    def batches(self, n: int, size: int | None = None) -> list[str]:
        from cdc.run.batch import run_batch

        statuses = []
        for _ in range(n):
            m = size if size is not None else self.rng.choice(BATCH_SIZES)
            cfg = self.cfg.with_batch(max_records_per_partition=m) if m else self.cfg
            try:
                out = run_batch(self.spark, cfg, list(cfg.tables))["tables"][0]
            except Exception as exc:
                self.fail(f"in-process batch (max {m}) raised {type(exc).__name__}: {str(exc).splitlines()[0]}")
                return statuses
            self.log["batches"] += 1
            statuses.append(out["status"])
            self.check_forward(f"after batch {out.get('batch_id')} (max {m})")
            if out["status"] == "empty":
                break
        return statuses

    def ingest_cli(self) -> None:
        kill = self.cli_kill if not self.clis else self.rng.choice((None, *INGEST_POINTS))
        m = self.rng.choice(BATCH_SIZES)
        if kill == "after_truncate":  # reached only by a batch holding a TRUNCATE: one, within the batch
            produce(self.broker, self.topic, self.history.truncate())
            m = None
        elif kill:  # something to read, so the batch gets to its kill point
            self.txs(1)
        res = finish(start_job(self.config, *(("--max-records", str(m)) if m else ()),
                               env={"CDC_KILL_AT": kill} if kill else None))
        ok = (0, -9) if kill else (0,)
        what = f"kill@{kill.removeprefix('after_')}" if kill else "run"
        status = (summary_of(res) or {}).get("tables", [{}])[0].get("status") if res.returncode == 0 else None
        self.clis.append(f"{what}:{'killed' if res.returncode == -9 else status or res.returncode}")
        self.log["ingest_kills"] += res.returncode == -9
        if res.returncode not in ok:
            self.fail(f"ingest CLI (kill at {kill}, max {m}) exited {res.returncode}: {last_line(res.stderr)}")
        self.check_forward(f"after ingest CLI (kill at {kill})")

    def refuse_in_process(self, deadline: float) -> None:
        """An in-process batch while the bootstrap holds its claim: ConcurrentRunError (75), nothing committed."""
        from cdc.common.errors import ConcurrentRunError
        from cdc.run.batch import run_batch

        before = (self.snapshot_id(self.fq), self.committed())
        try:
            out = run_batch(self.spark, self.cfg, list(self.cfg.tables))["tables"][0]
            err = None
        except ConcurrentRunError as exc:
            out, err = None, exc
        except Exception as exc:
            self.fail(f"an ingest during a bootstrap raised {type(exc).__name__}: {str(exc).splitlines()[0]}")
            return
        if time.monotonic() > deadline:
            self.log["refusals_unjudged"] += 1  # the pause may have ended: only the end state judges it
            return
        if err is None:
            self.fail(f"an ingest during a bootstrap's pause ran (status {out['status']}, batch {out.get('batch_id')})"
                      " instead of refusing")
        elif err.exit_code != 75 or "bootstrap" not in str(err):
            self.fail(f"an ingest during a bootstrap refused with exit {err.exit_code}: {err}")
        if (self.snapshot_id(self.fq), self.committed()) != before:
            self.fail("an ingest during a bootstrap's pause changed the target or the ledger")
        self.log["refusals"] += 1

    def refuse_cli(self, deadline: float) -> None:
        before = (self.snapshot_id(self.fq), self.committed())
        res = finish(start_job(self.config))
        if time.monotonic() > deadline:
            self.log["refusals_unjudged"] += 1
            if res.returncode not in (0, 75):
                self.fail(f"an ingest CLI during a bootstrap exited {res.returncode}: {last_line(res.stderr)}")
            return
        if res.returncode != 75 or "bootstrap" not in res.stderr:
            self.fail(f"an ingest CLI during a bootstrap's pause exited {res.returncode} (75 expected): "
                      f"{last_line(res.stderr)}")
        if (self.snapshot_id(self.fq), self.committed()) != before:
            self.fail("an ingest CLI during a bootstrap's pause changed the target or the ledger")
        self.log["refusals_cli"] += 1

    def reached(self, point: str, swap0: int | None, stage0: int | None, rows: int) -> bool:
        if point == "bootstrap_after_snapshot":  # the exporting session idles in its transaction, export done
            return bool(self.pg.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cdc-bootstrap' AND state = "
                "'idle in transaction' AND query LIKE '%%pg_export_snapshot%%' AND datname = %s", (self.db,))[0][0])
        if point == "bootstrap_after_swap":
            return self.newest_swap() not in (None, swap0)
        if not self.exists(self.stage):  # after_stage, before_swap: this run's staging table holds the snapshot
            return False
        sid = self.snapshot_id(self.stage)
        return sid is not None and sid != stage0 and self.spark.table(self.stage).count() == rows

    def wait_for(self, proc, point: str, started: float, swap0, stage0, rows: int, timeout: float = 400
                 ) -> float | None:
        """Until the bootstrap reaches ``point``; a time before its pause there began (the start of the last poll
        that did not see it), or None when it ended first."""
        last = started
        while time.monotonic() - started < timeout:
            if proc.poll() is not None:
                return None
            t = time.monotonic()
            try:
                if self.reached(point, swap0, stage0, rows):
                    return last
            except Exception:  # a table being dropped or re-created under the poll
                pass
            last = t
            time.sleep(0.3)
        return None

    def bootstrap(self, kill: str | None = "random") -> str:
        """One bootstrap run (``kill``: its kill point, or drawn); how it ended."""
        rng = self.rng
        if kill == "random":
            kill = self.boot_kill if not self.bootstraps else rng.choice((None,) * 4 + BOOTSTRAP_POINTS)
        pending = self.pending()
        at_start = self.src.rows()
        target0, swap0 = self.snapshot_id(self.fq), self.newest_swap()
        stage0 = self.snapshot_id(self.stage)
        committed0 = self.committed()
        non_empty = bool(self.rows())
        if pending and pending[0]["mode"] != "bootstrap":
            expect = "refused"
        elif pending and swap0 is not None and self.swapped_by(pending[0]["run_id"]):
            expect = "recovered"
        else:
            expect = "killed" if kill else "bootstrapped"
        pause = None
        if expect in ("killed", "bootstrapped") and rng.random() < 0.7:
            before_kill = BOOTSTRAP_POINTS[:BOOTSTRAP_POINTS.index(kill)] if kill else BOOTSTRAP_POINTS
            if before_kill:
                pause = (rng.choice(before_kill), LONG_PAUSE if rng.random() < 0.25 else SHORT_PAUSE)
        env = {**({"CDC_KILL_AT": kill} if kill else {}),
               **({"CDC_PAUSE_AT": f"{pause[0]}:{pause[1]:g}"} if pause else {})}
        args = ("--replace",) if non_empty or rng.random() < 0.3 else ()
        started = time.monotonic()
        proc = start_bootstrap(self.config, *args, env=env)
        try:
            if pause:
                self.during(proc, pause, started, swap0, stage0, len(at_start))
            res = finish(proc)
        finally:
            if proc.poll() is None:
                finish(proc, timeout=1)
        status = (summary_of(res) or {}).get("tables", [{}])[0].get("status") if res.returncode == 0 else None
        got = {0: status, -9: "killed", 75: "refused"}.get(res.returncode, f"exit {res.returncode}")
        short = f"kill@{kill.removeprefix('bootstrap_')}" if kill else "run"
        self.bootstraps.append(f"{short}{'+pause@' + pause[0].removeprefix('bootstrap_') if pause else ''}:{got}")
        self.log["bootstrap_kills"] += got == "killed"
        if got != expect:
            self.fail(f"bootstrap (kill at {kill}, pause {pause}, pending {[tuple(r) for r in pending]}) ended "
                      f"{got}, {expect} expected: {last_line(res.stderr)}")
        swapped_now = got == "bootstrapped" or (got == "killed" and kill == "bootstrap_after_swap")
        self.swaps += swapped_now
        if swapped_now:
            rows = self.rows()
            if rows != at_start:
                self.fail(f"the swap of a bootstrap (kill at {kill}) left {diff(rows, at_start)} against the source "
                          "at its start")
            if got == "bootstrapped" and summary_of(res)["tables"][0]["rows"] != len(at_start):
                self.fail(f"bootstrap summary rows {summary_of(res)['tables'][0]['rows']} != {len(at_start)}")
        elif got in ("killed", "refused") and self.snapshot_id(self.fq) != target0:
            self.fail(f"a bootstrap that did not swap (kill at {kill}, {got}) changed the target")
        left = self.pending()
        if got == "killed" and not (left and left[0]["mode"] == "bootstrap"):
            self.fail(f"a bootstrap killed at {kill} left no claim: {[tuple(r) for r in left]}")
        if got in ("bootstrapped", "recovered") and (left or self.committed() != committed0 + 1):
            self.fail(f"a {got} bootstrap left pending {[tuple(r) for r in left]} / committed rows "
                      f"{committed0} -> {self.committed()}")
        self.check_forward(f"after bootstrap (kill at {kill}, {got})")
        return got

    def swapped_by(self, run_id: str) -> bool:
        from cdc.bootstrap.claim import swapped

        return swapped(self.spark, self.fq, run_id) is not None

    def during(self, proc, pause: tuple[str, float], started: float, swap0, stage0, rows: int) -> None:
        """While the bootstrap pauses at ``pause``: more transactions, ingest runs that must refuse."""
        point, seconds = pause
        lower = self.wait_for(proc, point, started, swap0, stage0, rows)
        if lower is None:
            self.fail(f"the bootstrap never paused at {point} (ended {proc.poll()})")
            return
        deadline = lower + seconds - 1.0  # the pause surely lasts until then
        actions = ["tx"] * self.rng.randint(0, 3) + ["inproc"] * self.rng.choice((0, 1, 1, 2))
        if seconds == LONG_PAUSE:
            actions.append("cli")
        self.rng.shuffle(actions)
        for a in actions:
            if a == "tx":
                self.txs(1)
            elif a == "inproc":
                self.refuse_in_process(deadline)
            else:
                self.refuse_cli(deadline)
        self.pauses.append(f"{point.removeprefix('bootstrap_')}:{seconds:g}s:{'+'.join(actions) or '-'}")

    # -- one seed --------------------------------------------------------------------------------------------------
    def run(self) -> None:
        rng = self.rng
        for _ in range(rng.randint(2, 6)):
            self.txs(1)
        steps = (["bootstrap"] * (2 if rng.random() < 0.6 else 1) + ["cli"] + ["batch"] * rng.randint(1, 3)
                 + ["tx"] * rng.randint(1, 3))
        rng.shuffle(steps)
        for step in steps:
            if step == "bootstrap":
                kill = "random" if self.bootstraps else self.boot_kill
                if self.bootstrap(kill) == "refused":  # an ingest batch pending: recover it, then the same again
                    self.batches(1)
                    self.bootstrap(kill)
            elif step == "cli":
                self.ingest_cli()
            elif step == "batch":
                self.batches(rng.randint(1, 3))
            else:
                self.txs(rng.randint(1, 3))
        for _ in range(60):  # the end: ingest until empty, then the oracle
            got = self.batches(1, size=rng.choice((5, 50)))
            if got in ([], ["empty"]):  # [] : it raised (a mismatch already)
                break
        else:
            self.fail("still not empty after 60 batches")
        rows, want = self.rows(), self.src.rows()
        if rows != want:
            self.fail(f"the table differs from SELECT * FROM the source: {diff(rows, want)}")
        if self.pending():
            self.fail(f"pending ledger rows at the end: {[tuple(r) for r in self.pending()]}")
        booted = len(self.ledger_rows("mode = 'bootstrap' AND status = 'committed'"))
        if booted != self.swaps:
            self.fail(f"{booted} committed bootstrap rows for {self.swaps} swaps")

    def describe(self) -> str:
        h = self.history.stats
        return (f"seed={self.seed} keys={len(self.history.keys)} txs={h['txs']} (multi {h['multi']}) "
                f"events={h['events']} (c {h['c']}, u {h['u']}, d {h['d']}, re-inserts {h['reinserts']}, "
                f"truncates {h['truncates']}) "
                f"bootstraps=[{', '.join(self.bootstraps)}] ingest_cli=[{', '.join(self.clis)}] "
                f"pauses=[{', '.join(self.pauses)}] refusals={self.log['refusals']} in-process + "
                f"{self.log['refusals_cli']} CLI ({self.log['refusals_unjudged']} unjudged) "
                f"batches={self.log['batches']}")


def last_line(text: str) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:400] if lines else ""


def diff(got: dict, want: dict) -> str:
    keys = sorted(set(got) | set(want), key=str)  # a row without a key: None
    bad = [f"{k}: {got.get(k, '-')} vs {want.get(k, '-')}" for k in keys if got.get(k) != want.get(k)]
    return f"{len(bad)} keys differ ({'; '.join(bad[:8])})"


@pytest.mark.timeout(0)
def test_bootstrap_soak(spark, broker, warehouse, postgres, tmp_path):
    n = int(os.environ.get("CDC_SOAK_SCENARIOS", "10"))
    first = int(os.environ.get("CDC_SOAK_SEED", "1"))
    seeds = [int(x) for x in os.environ.get("CDC_SOAK_SEEDS", "").split(",") if x.strip()] or list(
        range(first, first + n))
    t0 = time.monotonic()
    failures: dict[int, list[str]] = {}
    for i, seed in enumerate(seeds, 1):
        s0 = time.monotonic()
        s = Seed(seed, spark, broker, warehouse, postgres, tmp_path)
        try:
            s.run()
        except Exception:
            s.fail("the seed stopped: " + traceback.format_exc().strip().splitlines()[-1])
        finally:
            s.src.conn.close()
        print(f"[bootstrap-soak {i}/{len(seeds)}] {s.describe()} {time.monotonic() - s0:.0f}s "
              f"mismatches={len(s.mismatches)}", flush=True)
        for m in s.mismatches[:20]:
            print("    " + m, flush=True)
        if s.mismatches:
            failures[seed] = s.mismatches
    print(f"\nbootstrap soak: {len(seeds)} seeds, {sum(map(len, failures.values()))} mismatches in {len(failures)} "
          f"seeds, {(time.monotonic() - t0) / 60:.1f} min", flush=True)
    assert not failures, "failing seeds: " + ", ".join(map(str, failures))
