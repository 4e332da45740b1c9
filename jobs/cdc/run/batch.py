"""One micro-batch per table: plan → read & stage → merge → ledger. The front door is ``run_batch``.

Each phase is timed; an error names the phase, the table and (where known) topic/partition/offset. A batch left
``staged`` by a run that died is re-merged first (no Kafka read), then a new batch is planned.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import replace
from typing import Any, Sequence

from cdc.bootstrap import claim as bootstrap_claim
from cdc.common.cli_contract import BackfillBounds, Bounds
from cdc.common.errors import CdcError, ConcurrentRunError
from cdc.common.faults import checkpoint
from cdc.config.model import PipelineConfig, TableConfig
from cdc.config.names import TableNames, names
from cdc.iceberg.snapshot_summary import batch_summary, commit_properties
from cdc.iceberg.tables import existing_columns
from cdc.kafka.offsets import commit_group, group_id, is_compacted
from cdc.kafka.plan import (
    OffsetRange,
    cap_ranges,
    plan_backfill,
    split_chunks,
)
from cdc.ledger.expiry import keep_history_short
from cdc.ledger.lease import LeaseKeeper, owner_alive, process_owner, renewal_interval
from cdc.ledger.ledger import Ledger
from cdc.ledger.model import BOOTSTRAP_MODE
from cdc.ledger.state import LedgerRange, PendingBatch, TableState
from cdc.ledger.write import Held
from cdc.merge.apply import apply_batch
from cdc.merge.modes.runner import effective_mode, keyless_warning
from cdc.observe import progress
from cdc.positions import regression
from cdc.positions.ordering import Ordering
from cdc.run.group import run_isolated, table_session
from cdc.run.identity import plan_checked
from cdc.run.meta import open_ledger
from cdc.run.outcome import TableResult, phase
from cdc.run.reset import reset_cursor
from cdc.run.schema import BatchSchema, Idle, plan_schema
from cdc.schema.columns import (
    POSTGRES_COMMIT_ORDERING,
    staged_row_columns,
    staging_columns,
)
from cdc.stage.reader import ReadSpec
from cdc.stage.stage import (
    check_dead_letter_ratio,
    record_dead_letters,
    stage,
    staged_key_and_ordering,
    unbound_columns,
)
from cdc.stage.stats import BatchStats, PartitionCounts, batch_stats


def run_batch(spark: Any, cfg: PipelineConfig, tables: list[TableConfig], mode: str = "incremental",
              dry_run: bool = False, bounds: BackfillBounds | None = None, isolate: bool = False,
              failed: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Run one batch for each table (backfill: batches until the requested range is done); return the summary.

    ``isolate`` (the CLI): with several tables, a table that fails is reported in the summary (``status: failed``,
    its error and exit code) and the others still run, ``batch.table_concurrency`` at a time (``cdc.run.group``);
    otherwise the first error is raised. ``failed``: summary entries of tables that failed before the run (ambiguous
    ``topic_pattern`` topics, ``cdc.kafka.topics.Routes``), listed after the others; with them one table is isolated
    too."""
    progress.start_run(cfg)
    ledger = open_ledger(spark, cfg, dry_run)  # creates the metadata tables; a dry run writes nothing (cdc.run.meta)
    if isolate and (len(tables) > 1 or failed):  # one table's failure does not stop the others (cdc.run.group)

        # every table plans from one ledger read (Ledger.states) instead of a read each
        planned = ledger.states({t.target: t.topic for t in tables}) if mode == "incremental" else {}

        def one(t: TableConfig) -> dict[str, Any]:
            own = table_session(spark, cfg)
            return run_table(own, cfg, t, ledger if own is spark else type(ledger)(own, ledger.name, cfg.pipeline), mode,
                             dry_run, bounds, planned.get(t.target))

        summary = run_isolated(cfg, tables, mode, one)
    else:
        summary = {"pipeline": cfg.pipeline, "mode": mode,
                   "tables": [run_table(spark, cfg, t, ledger, mode, dry_run, bounds) for t in tables]}
    if not dry_run:
        keep_history_short(spark, ledger.name)
    return {**summary, "tables": [*summary["tables"], *failed]}


def run_table(spark: Any, cfg: PipelineConfig, t: TableConfig, ledger: Ledger, mode: str, dry_run: bool,
              bounds: BackfillBounds | None, state: TableState | None = None) -> dict[str, Any]:
    """One table's batch (backfill: batches) in ``mode``; its summary entry. ``state``: the table's ledger as read
    for its group (incremental; None: read it now)."""
    runner = TableRun(spark, cfg, t, ledger)
    if mode == "reset":
        return reset_cursor(runner, (bounds.for_topic(t.topic) if bounds else Bounds()).start_offsets)
    if mode == "backfill":
        return runner.backfill(bounds.for_topic(t.topic) if bounds is not None else Bounds(), dry_run).summary()
    return runner.incremental(dry_run, state).summary()


class TableRun:
    def __init__(self, spark: Any, cfg: PipelineConfig, table: TableConfig, ledger: Ledger):
        self.spark, self.cfg, self.t, self.ledger = spark, cfg, table, ledger
        self.names: TableNames = names(cfg, table)
        self.run_id = uuid.uuid4().hex
        self.cursor: dict[int, int] | None = None  # committed offsets the incremental plan started from
        self._compacted: bool | None = None
        # newest committed source positions, read with the cursor (the claim fails if they moved since)
        self.positions: dict[int, tuple[int, ...]] | None = None
        self.servers: dict[int, frozenset[str]] | None = None  # and the server ids committed (cdc.positions.regression)
        self.peers = False  # a raised ordering_epoch meets a table that committed nothing (cdc.positions.regression)
        self.planned: TableState | None = None  # the ledger as the incremental plan read it (next batch id)
        self.claimed: TableState | None = None  # the ledger as of the claim (Ledger.claim; truncate barriers)
        self.held: Held | None = None  # this run's claim as the ledger holds it (None: recovered, or updated in place)

    def incremental(self, dry_run: bool, state: TableState | None = None) -> TableResult:
        result = TableResult(self.t.target, self.t.topic)
        if state is None:  # before the phases: a refusal logs no phase
            state = self.ledger.state(self.t.target, self.t.topic)
        if not dry_run and self.recover(result, state.pending):
            state = self.ledger.state(self.t.target, self.t.topic)  # after the recovered batch
        with phase(result, "plan"):
            self.planned, self.cursor, self.positions, self.servers = state, state.cursor, state.positions, \
                state.servers
            ranges = plan_checked(self, state.cursor, dry_run)  # a re-created topic is refused (cdc.run.identity)
        self.run_ranges(result, ranges, "incremental", dry_run)
        return result

    def backfill(self, bounds: Bounds, dry_run: bool) -> TableResult:
        total = TableResult(self.t.target, self.t.topic, mode="backfill")
        if not dry_run:
            self.recover(total, self.ledger.pending(self.t.target))
        with phase(total, "plan"):
            full = plan_backfill(self.cfg.kafka, self.t.topic, bounds, self.cfg.batch.read_timeout_seconds)
        starts = {r.partition: r.start for r in full}
        ends = {r.partition: r.end for r in full}
        total.ranges = full
        while True:
            ranges = cap_ranges(self.t.topic, starts, ends, self.cfg.batch.max_records_per_partition)
            if not any(r.size for r in ranges):
                break
            part = TableResult(self.t.target, self.t.topic, mode="backfill")
            self.run_ranges(part, ranges, "backfill", dry_run)
            total.add(part)
            total.status, total.batch_id, total.snapshot_id = part.status, part.batch_id, part.snapshot_id
            if dry_run:
                break
            starts = {r.partition: r.end for r in ranges}
        return total

    def recover(self, result: TableResult, pending: PendingBatch | None) -> bool:
        """Finish ``pending``, a batch a dead run left claimed or staged (or refuse while its owner is still
        running); whether there was one. A bootstrap's claim is settled (``cdc.bootstrap.claim``): its ledger row
        finished when its swap committed, else withdrawn; while its bootstrap runs, this run refuses."""
        if pending is None:
            return False
        lease = self.cfg.batch.claim_timeout_minutes * 60
        if pending.mode == BOOTSTRAP_MODE:  # a bootstrap in flight, or one whose process died
            bootstrap_claim.refuse_while_running(self.t, pending, lease, "ingest")
            with phase(result, "recover"):
                info = bootstrap_claim.settle(self.spark, self.cfg, self.t, self.ledger, pending, self.run_id)
            result.warnings.append(bootstrap_claim.settled_warning(self.t, pending, info is not None))
            return True
        if pending.owner != process_owner() and owner_alive(pending.owner, pending.claimed_at_us, lease):
            raise ConcurrentRunError(
                f"table {self.t.target}: batch {pending.batch_id} is being processed by another run (owner "
                f"{pending.owner}, claimed at {pending.claimed_at}); retry later. If that run is dead, the batch is "
                f"taken over after batch.claim_timeout_minutes ({self.cfg.batch.claim_timeout_minutes:g})")
        with phase(result, "recover"):
            self.ledger.take_over(self.t.target, pending, self.run_id)
        checkpoint("after_claim")
        result.recovered_batch_id = pending.batch_id
        ranges = list(pending.ranges)
        with self.lease(pending.batch_id):
            if pending.status == "claimed":  # staging may be partial: read the same ranges again
                self.stage_and_merge(TableResult(self.t.target, self.t.topic), pending.batch_id, ranges, pending.mode)
                return True
            with phase(result, "recover"):
                self.spark.catalog.refreshTable(self.names.staging)  # staged by another process: not a cached copy
                key, ordering = staged_key_and_ordering(self.spark, self.names.staging)
                if ordering.kind == "postgresql" and POSTGRES_COMMIT_ORDERING[0] not in {
                        c.name for c in existing_columns(self.spark, self.names.staging)}:
                    ordering = replace(ordering, kind="postgresql_lsn")  # staged before commit ordering existed
                schema = BatchSchema(staged_row_columns(existing_columns(self.spark, self.names.staging)), key,
                                     ordering)
            self.merge_and_commit(TableResult(self.t.target, self.t.topic, ranges=ranges),  # snapshot summary
                                  pending.batch_id, schema)
        return True

    def lease(self, batch_id: int) -> LeaseKeeper:
        """Keep this run's claim of ``batch_id`` fresh while the block runs (runs on other hosts wait for it)."""
        return LeaseKeeper(lambda: self.ledger.renew(self.t.target, batch_id, self.run_id),
                           renewal_interval(self.cfg.batch.claim_timeout_minutes * 60),
                           f"table {self.t.target} batch {batch_id}")

    def run_ranges(self, result: TableResult, ranges: list[OffsetRange], mode: str, dry_run: bool) -> None:
        result.ranges = ranges
        if not any(r.size for r in ranges):
            result.status = "empty"
            return
        if dry_run:
            with phase(result, "plan"):
                self.batch_schema(ranges)
                result.batch_id = self.planned_state().next_batch_id
            result.status = "dry_run"
            result.events_read = sum(r.size for r in ranges)
            return
        with phase(result, "plan"):
            schema = self.batch_schema(ranges)  # before the claim: schema errors leave no ledger rows
            planned = self.planned_state()
            batch_id = planned.next_batch_id
            claimed = tuple(ranges)
            self.claimed = self.ledger.claim(self.t.target, batch_id, mode, claimed, self.run_id,
                              topic=self.t.topic, cursor=self.cursor if mode == "incremental" else None,
                              seen=planned.snapshot_id, planned=planned)
            self.held = None if self.claimed.snapshot_id is None else Held(
                batch_id, mode, claimed, since=self.claimed.snapshot_id)  # the marks rewrite the rows from there
        checkpoint("after_claim")
        try:
            with self.lease(batch_id):
                self.stage_and_merge(result, batch_id, ranges, mode, schema)
            if mode == "incremental":
                self.publish_offsets(result.warnings, ranges)
        except CdcError:
            with contextlib.suppress(Exception):  # best effort: a later run takes a leftover claim over anyway
                self.ledger.release(self.t.target, batch_id, self.run_id)  # only if still 'claimed'
            raise

    def planned_state(self) -> TableState:
        """The ledger a new batch is planned from (its id, the snapshot its claim is checked from): the incremental
        plan's read (once), else read now."""
        planned, self.planned = self.planned, None
        return planned if planned is not None else self.ledger.state(self.t.target, None)

    def stage_and_merge(self, result: TableResult, batch_id: int, ranges: list[OffsetRange], mode: str,
                        schema: BatchSchema | None = None) -> None:
        result.batch_id = batch_id
        result.ranges = ranges
        if schema is None:
            with phase(result, "plan"):
                schema = self.batch_schema(ranges)
        if schema.idle is not None:
            self.commit_idle(result, batch_id, ranges, schema.idle)
            return
        row_cols, key, ordering, decoder = schema.columns, schema.key, schema.ordering, schema.decoder
        spec = ReadSpec(
            table=self.t.target, kafka_conf=dict(self.cfg.kafka), decoder=decoder.bind(row_cols), ordering=ordering,
            key=tuple(key), row_columns=tuple(row_cols),
            staging_columns=tuple(staging_columns(row_cols, ordering.columns, key)), batch_id=batch_id,
            on_bad_record=self.t.on_bad_record, timeout_seconds=self.cfg.batch.read_timeout_seconds,
            max_record_bytes=self.t.max_record_bytes, compacted=self.compacted(result))
        with phase(result, "read_stage"):
            chunks = split_chunks(ranges, self.cfg.batch.chunk_size)
            stats = self.stage_batch(spec, chunks)
            while stats.dead_letters and (wider := unbound_columns(self.spark, self.names.staging, batch_id, decoder,
                                                                 row_cols, self.t)):
                row_cols = wider  # records of schemas the samples did not show: stage again with their columns
                spec = replace(spec, decoder=decoder.bind(row_cols), row_columns=tuple(row_cols),
                               staging_columns=tuple(staging_columns(row_cols, ordering.columns, key)))
                stats = self.stage_batch(spec, chunks)
            counts = stats.partitions
            if stats.dead_letters:
                record_dead_letters(self.spark, self.names, self.cfg.pipeline, self.t.target, batch_id)
            check_dead_letter_ratio(self.t.target, counts, self.t.max_dead_letter_ratio, self.names.dead_letters,
                                    batch_id)
            if mode == "incremental":  # before anything is merged: a failover must not skip changes silently
                settled = self.settle_regressions(batch_id, ordering, counts)
                if settled != ordering:  # a raised ordering_epoch starts where positions fell: stage again
                    ordering, spec = settled, replace(spec, ordering=settled)
                    stats = self.stage_batch(spec, chunks)
                    counts = stats.partitions
        checkpoint("after_stage")
        with phase(result, "ledger"):
            zero = PartitionCounts(0, 0, 0, 0)
            self.held = self.ledger.mark_staged(self.t.target, batch_id, self.run_id, [
                LedgerRange(r.topic, r.partition, r.start, r.end, c.events_read, c.events_skipped,
                            c.dead_letters, c.max_position, c.server_ids)
                for r in ranges for c in [counts.get(r.partition, zero)]], stats.truncate, held=self.held)
        checkpoint("after_staged")
        result.events_read = sum(c.events_read for c in counts.values())
        result.events_skipped = sum(c.events_skipped for c in counts.values())
        result.dead_letters = sum(c.dead_letters for c in counts.values())
        self.merge_and_commit(result, batch_id, BatchSchema(row_cols, key, ordering), stats)

    def stage_batch(self, spec: ReadSpec, chunks: list[Any]) -> BatchStats:
        """Stage the batch's chunks; its stats (counted from the rows in hand when the driver read them)."""
        return (stage(self.spark, spec, chunks, self.names, self.cfg.batch.driver_read_max_records)
                or batch_stats(self.spark, self.names.staging, spec.batch_id, spec.ordering.columns))

    def settle_regressions(self, batch_id: int, ordering: Ordering, counts: dict[int, PartitionCounts]) -> Ordering:
        """``cdc.positions.regression.check``: the ordering with a pending epoch started where positions fell far back or a
        new server went below them, or ``PositionRegression`` when no raised epoch waits for that."""
        positions, servers = self.positions, self.servers
        if positions is None or servers is None:  # a recovered batch: read what was committed
            state = self.ledger.state(self.t.target, self.t.topic)
            positions, servers = state.positions, state.servers
        return regression.check(self.spark, self.names.staging, batch_id, self.t.target, self.t.topic, ordering,
                                counts, positions, servers, self.peers)

    def merge_and_commit(self, result: TableResult, batch_id: int, schema: BatchSchema,
                         stats: BatchStats | None = None) -> None:
        ordering = schema.ordering
        with phase(result, "merge"):
            claimed, self.claimed = self.claimed, None  # a recovered batch has no claim state: read the barrier
            previous = claimed.barrier_before(batch_id) if claimed is not None \
                else self.ledger.barrier(self.t.target, batch_id)
            if stats is None:  # recovering a staged batch
                stats = batch_stats(self.spark, self.names.staging, batch_id, ordering.columns)
            summary = batch_summary(self.cfg.pipeline, batch_id, self.t.topic, result.ranges)
            with commit_properties(self.spark, summary):  # cdc.batch-id etc. in the target's snapshot summaries
                applied = apply_batch(self.spark, self.names, batch_id, schema.columns, schema.key, ordering.columns,
                                      self.t.delete_mode, previous, stats, self.compacted(result), ordering.epochs,
                                      layout=self.t.layout, filters=self.cfg.batch,
                                      **self.write_mode(result, schema.key))
        checkpoint("before_commit")
        with phase(result, "commit"):
            counts = {"inserted": applied.inserted, "updated": applied.updated, "deleted": applied.deleted}
            held, self.held = self.held, None
            self.ledger.mark_committed(self.t.target, batch_id, self.run_id, counts, applied.snapshot_id,
                                       result.seconds, held=held)
        checkpoint("after_commit")
        result.inserted += applied.inserted
        result.updated += applied.updated
        result.deleted += applied.deleted
        result.snapshot_id = applied.snapshot_id
        result.status = "committed"
        progress.batch_committed(result)

    def commit_idle(self, result: TableResult, batch_id: int, ranges: list[OffsetRange], idle: Idle) -> None:
        """Commit a batch with nothing to apply (``BatchSchema.idle``) in one ledger write: its records read (all
        but truncates skipped) and its truncate barrier, nothing staged or merged; the cursor moves past it."""
        result.batch_id, result.ranges = batch_id, ranges
        checkpoint("before_commit")
        with phase(result, "commit"):
            counted = [LedgerRange(r.topic, r.partition, r.start, r.end, idle.records.get(r.partition, 0),
                                   idle.skipped.get(r.partition, 0), 0) for r in ranges]
            held, self.held, self.claimed = self.held, None, None
            self.ledger.mark_committed(self.t.target, batch_id, self.run_id, {}, None, result.seconds, held=held,
                                       ranges=counted, barrier=idle.barrier)
        checkpoint("after_commit")
        result.events_read, result.events_skipped = sum(idle.records.values()), sum(idle.skipped.values())
        result.status = "committed"
        progress.batch_committed(result)

    def publish_offsets(self, warnings: list[str], ranges: list[OffsetRange]) -> None:
        """A committed incremental batch's end offsets to the pipeline's consumer group
        (``batch.consumer_group_offsets``), for Kafka's lag tools (a backfill's are not the cursor: not published); a
        failure is a warning, never the batch's."""
        if not self.cfg.batch.consumer_group_offsets:
            return
        try:
            commit_group(self.cfg.kafka, group_id(self.cfg.pipeline), self.t.topic,
                         {r.partition: r.end for r in ranges}, self.cfg.batch.read_timeout_seconds)
        except Exception as exc:  # noqa: BLE001 - observability: the ledger holds the truth
            warnings.append(f"topic {self.t.topic}: offsets not committed to consumer group "
                                   f"{group_id(self.cfg.pipeline)} ({exc})")

    def write_mode(self, result: TableResult, key: tuple[str, ...]) -> dict[str, Any]:
        """``write_mode`` / ``track_columns`` for ``apply_batch``; a keyless table is append, with a warning."""

        if not key:
            result.warnings.append(keyless_warning(self.t.target, self.t.topic))
        mode = effective_mode(self.t.write_mode, key, self.t.target, self.cfg.source_path)
        return {"write_mode": mode, "track_columns": self.t.track_columns, "snapshot_deletes": self.t.snapshot_deletes}

    def compacted(self, result: TableResult) -> bool:
        """Is the topic compacted (Kafka tombstones delete keys)? ``tables[].compacted``, else the topic's
        cleanup.policy; when the broker does not say, not compacted, with a warning in the summary."""
        if self._compacted is None:
            if self.t.compacted != "auto":
                self._compacted = bool(self.t.compacted)
            else:
                found = is_compacted(self.cfg.kafka, self.t.topic, self.cfg.batch.read_timeout_seconds)
                if found is None:
                    result.warnings.append(f"topic {self.t.topic}: cleanup.policy could not be read (DescribeConfigs); "
                                           "treated as not compacted. Set tables[].compacted to decide")
                self._compacted = bool(found)
        return self._compacted

    def batch_schema(self, ranges: list[OffsetRange]) -> BatchSchema:
        """Row columns, key, ordering and decoder for a new batch (``cdc.run.schema``)."""
        schema, self.peers = plan_schema(self.spark, self.cfg, self.t, self.names, ranges, lambda: (
            self.positions if self.positions is not None  # a recovered batch: what was committed
            else self.ledger.state(self.t.target, self.t.topic).positions))
        return schema


__all__ = ["run_batch", "BatchSchema", "TableRun"]
