"""Iceberg maintenance of one CDC pipeline (run by the ``cdc_<pipeline>_maintenance`` DAG).

    spark-submit [--py-files build/cdc_iceberg-*.whl] [--jars ICEBERG_JAR] jobs/maintenance.py --config FILE \
        [--table NAME ...] [--staging-retention-hours 72] [--tombstone-retention-hours 168] \
        [--snapshot-retention-hours 168] [--retain-last 5] [--orphan-retention-hours 72]

Per target table: expire snapshots, rewrite data files, rewrite position delete files, remove orphan files.
Per target's helper tables: drop staged batches whose ledger rows were committed before the staging retention,
delete tombstones older than the tombstone retention, expire their snapshots. The ledger and dead-letter tables keep
every row (their rows are the audit trail): their snapshots expire, their small files are rewritten (a ledger read
opens every file of its table: 0.26 s at 10 batches, 1.3 s at 600) and their orphan files are removed. One step
failing does not stop the others; the exit code is then 1 (Airflow retries). Last stdout line: a JSON summary. Exit codes as jobs/ingest.py (0, 2, 75, 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

if __package__ in (None, ""):  # a script: `cdc` shipped with --py-files (wheel/zip) wins over jobs/cdc beside it
    sys.path.sort(key=lambda p: not p.endswith((".whl", ".zip", ".egg")))

from cdc.common import cli_contract as cli  # noqa: E402
from cdc.common.sql import q  # noqa: E402
from cdc.schema.columns import DELETED_AT  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc.config.model import PipelineConfig, TableConfig


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Iceberg maintenance of a CDC pipeline")
    p.add_argument(cli.CONFIG, required=True, help="pipeline YAML file")
    p.add_argument(cli.TABLE, action="append", default=[], help="target table; repeatable; default: every table")
    for r in cli.MAINTENANCE_RETENTION:  # the flags and their defaults: cdc.common.cli_contract
        p.add_argument(r.flag, type=int if r.integer else float, default=r.default, help=r.description)
    return p.parse_args(argv)


def ts_literal(dt: datetime) -> str:
    """A TIMESTAMP literal naming its zone (UTC), so it means the same instant whatever the session time zone."""
    return "TIMESTAMP '" + dt.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S") + "Z'"


def helper_tables(cfg: "PipelineConfig", t: "TableConfig") -> tuple[str, str]:
    from cdc.config.names import names

    n = names(cfg, t)
    return n.staging, n.tombstones


class Maintenance:
    def __init__(self, spark: "SparkSession", cfg: "PipelineConfig", args: argparse.Namespace, now: datetime):
        self.spark, self.cfg, self.args, self.now = spark, cfg, args, now
        self.cat = cfg.catalog.name
        self.steps: list[dict[str, Any]] = []

    def hours_ago(self, hours: float) -> datetime:
        return self.now - timedelta(hours=hours)

    def step(self, table: str, action: str, fn: Callable[[], Any]) -> None:
        from cdc.common.errors import one_line

        t0 = time.monotonic()
        try:
            result, error = fn(), None
        except Exception as exc:  # noqa: BLE001 - one failing step must not stop the others
            result, error = None, one_line(exc)
            print(f"maintenance: {table}: {action} failed: {error}", file=sys.stderr)
        self.steps.append({"table": table, "action": action, "result": result, "error": error,
                           "seconds": round(time.monotonic() - t0, 3)})

    def exists(self, ident: str) -> bool:
        return bool(self.spark.catalog.tableExists(ident))

    def call(self, procedure: str, ident: str, **named: str) -> Any:
        """``CALL cat.system.<procedure>(table => 'ns.t', ...)``; returns the first result row as a dict."""
        local = ident.split(".", 1)[1]  # without the catalog
        extra = "".join(f", {k} => {v}" for k, v in named.items())
        rows = self.spark.sql(f"CALL {self.cat}.system.{procedure}(table => '{local}'{extra})").collect()
        return rows[0].asDict() if rows else None

    def expire(self, ident: str) -> None:
        self.step(ident, "expire_snapshots", lambda: self.call(
            "expire_snapshots", ident, older_than=ts_literal(self.hours_ago(self.args.snapshot_retention_hours)),
            retain_last=str(self.args.retain_last)))

    def target(self, ident: str) -> None:
        self.expire(ident)
        self.step(ident, "rewrite_data_files", lambda: self.call("rewrite_data_files", ident))
        self.step(ident, "rewrite_position_delete_files", lambda: self.call("rewrite_position_delete_files", ident))
        self.orphans(ident)

    def orphans(self, ident: str) -> None:
        from cdc.config.storage import on_object_storage

        # object storage: list the table's files through its FileIO (S3FileIO), not a Hadoop file system (no s3a)
        listing = ", prefix_listing => true" if on_object_storage(self.cfg.catalog.warehouse,
                                                                    self.cfg.catalog.properties) else ""
        self.step(ident, "remove_orphan_files", lambda: {"files": len(self.spark.sql(
            f"CALL {self.cat}.system.remove_orphan_files(table => '{ident.split('.', 1)[1]}', older_than => "
            f"{ts_literal(self.hours_ago(self.args.orphan_retention_hours))}{listing})").collect())})

    def old_committed_batches(self, t: "TableConfig") -> list[int]:
        from cdc.common.sql import lit

        ledger = f"{self.cat}.{self.cfg.metadata_namespace}.ledger"
        if not self.exists(ledger):
            return []
        cutoff = ts_literal(self.hours_ago(self.args.staging_retention_hours))
        rows = self.spark.sql(
            f"SELECT DISTINCT batch_id FROM {ledger} WHERE pipeline = {lit(self.cfg.pipeline)} "
            f"AND table_name = {lit(t.target)} AND status = 'committed' AND committed_at < {cutoff}").collect()
        return sorted(int(r.batch_id) for r in rows)

    def staging(self, t: "TableConfig", ident: str) -> None:
        def drop() -> dict[str, Any]:
            ids = self.old_committed_batches(t)
            if ids:  # staging is partitioned by batch_id: a metadata-only delete
                self.spark.sql(f"DELETE FROM {ident} WHERE batch_id IN ({', '.join(map(str, ids))})")
            return {"batches_dropped": len(ids)}

        self.step(ident, "drop_committed_batches", drop)
        self.expire(ident)

    def tombstones(self, t: "TableConfig", ident: str) -> None:
        cutoff = ts_literal(self.hours_ago(self.args.tombstone_retention_hours))
        self.step(ident, "gc_tombstones", lambda: self.gc_tombstones(t, ident, cutoff))
        self.expire(ident)

    def gc_tombstones(self, t: "TableConfig", ident: str, cutoff: str) -> dict[str, Any]:
        """Drop tombstones older than ``cutoff`` whose position every partition of the topic has passed (strictly), first
        raising the table's GC horizon to the newest of them: later batches ignore changes at or below the horizon
        for keys the table no longer knows, so a replay cannot resurrect a deleted row (``cdc.merge``). The
        partition bound (``gc_watermark``) keeps a lagging partition's first-time changes above the horizon.
        Horizon first: a crash in between leaves a horizon with its tombstones still there, which changes nothing."""
        from cdc.iceberg.tables import GC_HORIZON_PROPERTY, gc_horizon
        from cdc.positions.sql import position_value, tuple_cmp_literal
        from cdc.schema.columns import EPOCH, KAFKA_OFFSET, KAFKA_PARTITION, align, is_meta

        watermark = self.gc_watermark(t)
        if watermark is None:
            return {"older_than": cutoff, "dropped": 0, "skipped": "no committed positions for every partition yet"}
        fields = [f.name for f in self.spark.table(ident).schema.fields]
        ordering = [c for c in fields if is_meta(c) and c not in (KAFKA_PARTITION, KAFKA_OFFSET, DELETED_AT)]
        ordering.sort(key=lambda c: c != EPOCH)  # the epoch column (added later) leads the position
        watermark = align(watermark, len(ordering)) or watermark
        # strictly below: a partition that committed position W has read every event before W, not necessarily every
        # event AT W (a PK change is a delete and a create at one position; a batch may end between them)
        where = f"{q(DELETED_AT)} < {cutoff} AND {tuple_cmp_literal('t', ordering, watermark, '<')}"
        fields = ", ".join(f"'o{i}', {position_value('t', c)}" for i, c in enumerate(ordering))
        expr = f"max(named_struct({fields}))"
        row = self.spark.sql(f"SELECT count(*) AS n, {expr} AS p FROM {ident} t WHERE {where}").first()
        if not row["n"]:
            return {"older_than": cutoff, "dropped": 0, "watermark": list(watermark)}
        newest = tuple(int(v) for v in row["p"])
        horizon = max(newest, gc_horizon(self.spark, ident) or newest)
        self.spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('{GC_HORIZON_PROPERTY}' = '{json.dumps(list(horizon))}')")
        self.spark.sql(f"DELETE FROM {ident} t WHERE {where}")
        return {"older_than": cutoff, "dropped": int(row["n"]), "gc_horizon": list(horizon),
                "watermark": list(watermark)}

    def gc_watermark(self, t: "TableConfig") -> tuple[int, ...] | None:
        """The newest source position that every partition of the table's topic has passed (the least, over its
        partitions, of the newest position incremental batches committed from each: the cursor's, never a backfill's,
        which may have run ahead of it over changes the cursor has still to read); None while a partition that delivered changes has
        no recorded position (batches from before positions were recorded)."""
        from cdc.common.sql import lit
        from cdc.ledger.model import newest_positions
        from cdc.schema.columns import align

        ledger = f"{self.cat}.{self.cfg.metadata_namespace}.ledger"
        if not self.exists(ledger):
            return None
        rows = self.spark.sql(
            f"SELECT `partition`, max_position, events_read - events_skipped - dead_letters AS changes FROM {ledger} "
            f"WHERE pipeline = {lit(self.cfg.pipeline)} AND table_name = {lit(t.target)} AND topic = {lit(t.topic)} "
            "AND status = 'committed' AND mode = 'incremental'").collect()  # a backfill may run ahead of the cursor
        newest = newest_positions(rows)
        changed = {r["partition"] for r in rows if r["changes"]}
        if not newest or changed - set(newest):
            return None
        width = max(len(p) for p in newest.values())  # positions from before an epoch column belong to epoch 0
        return min(align(p, width) or p for p in newest.values())

    def run(self, tables: tuple["TableConfig", ...]) -> None:
        from cdc.config.names import changes_identifier

        for t in tables:
            target = f"{self.cat}.{t.target}"
            if self.exists(target):
                self.target(target)
            staging, tomb = helper_tables(self.cfg, t)
            if self.exists(staging):
                self.staging(t, staging)
            if self.exists(tomb):
                self.tombstones(t, tomb)
            changes = f"{self.cat}.{changes_identifier(self.cfg.metadata_namespace, t.target)}"
            if self.exists(changes):  # write_mode scd2's change log: never pruned (the versions come from it)
                self.target(changes)
        for name in ("ledger", "dead_letters"):
            ident = f"{self.cat}.{self.cfg.metadata_namespace}.{name}"
            if self.exists(ident):
                self.expire(ident)
                # Every batch adds a small ledger file and every run's ledger reads open them all: rewrite them
                # (bin-packing keeps every row; a run's ledger write that meets the rewrite is retried).
                self.step(ident, "rewrite_data_files", lambda ident=ident: self.call(  # per table: partial progress
                    "rewrite_data_files", ident,
                    options="map('min-input-files', '2', 'partial-progress.enabled', 'true')"))
                # The ingest job expires the ledger's old snapshots itself (cdc.ledger.expiry); files it could not
                # delete then (e.g. credentials without delete permission) are orphans.
                self.orphans(ident)


def main(argv: list[str] | None = None) -> int:
    """Run maintenance; print the summary (stdout) or one error line (stderr); report both to the result file."""
    args = parse_args(argv)
    from cdc.config.load import load_config

    try:
        cfg = load_config(args.config)
        from cdc.kafka.topics import resolve_pipeline

        cfg = resolve_pipeline(cfg)  # topic_pattern entries → the tables of the topics they match now
        tables = cfg.select(args.table or None)
        from cdc.spark.session import build_session

        spark = build_session(cfg, f"cdc-{cfg.pipeline}-maintenance")
        m = Maintenance(spark, cfg, args, datetime.now(timezone.utc))
        m.run(tables)
    except (Exception, KeyboardInterrupt) as exc:  # one line on stderr, the exit code of its class
        from cdc.run.outcome import job_failed

        return job_failed(exc, "maintenance")
    failed = [s for s in m.steps if s["error"]]
    line = json.dumps({"pipeline": cfg.pipeline, "mode": "maintenance", "steps": m.steps, "failed": len(failed)},
                      default=str)
    print(line, flush=True)
    if not failed:
        return cli.finish(cli.ExitCode.OK, json.loads(line))
    error = (f"ERROR [MaintenanceStepFailed] {len(failed)} maintenance step(s) failed, first: {failed[0]['table']} "
             f"{failed[0]['action']}: {failed[0]['error']}")  # exit 1, retried: the other steps did their part
    print(error, file=sys.stderr, flush=True)
    return cli.finish(cli.ExitCode.OTHER, json.loads(line), error)


if __name__ == "__main__":
    sys.exit(main())
