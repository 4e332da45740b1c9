"""What a new batch is read and merged with (``plan_schema``): its row columns (the table's, widened or extended by the
newest source schema the samples show), its key, its source ordering (with ``ordering_epoch``) and the topic's
decoder. Everything here is decided before the batch is claimed, so a schema error leaves no ledger rows."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from cdc.common.errors import ConfigError
from cdc.config.model import PipelineConfig, TableConfig
from cdc.config.names import TableNames
from cdc.config.table_layout import check_columns
from cdc.decode.factory import make_decoder
from cdc.iceberg.tables import TargetState, target_state
from cdc.kafka.plan import OffsetRange, find_first, read_samples
from cdc.merge.modes.runner import effective_mode
from cdc.positions import regression
from cdc.positions.ordering import Ordering, sampled_ordering
from cdc.run.evidence import Evidence, Idle, scan
from cdc.schema import evolution
from cdc.schema.columns import EPOCH, Column, row_columns, target_meta
from cdc.stage.stage import staged_key_and_ordering


@dataclass(frozen=True)
class BatchSchema:
    """What a batch is read and merged with: its row columns, key, source ordering and (for a batch still to read)
    the topic's decoder. ``idle``: a batch of records that decide nothing (tombstones, truncates, messages:
    ``cdc.run.evidence``) into a table that does not exist yet (or, of only tombstones, has no known key): it is
    committed without a read or a write, with its truncates' barrier (``TableRun.commit_idle``)."""

    columns: list[Column]
    key: tuple[str, ...]
    ordering: Ordering
    decoder: Any = None  # cdc.decode.base.Decoder; None for a staged batch that is only merged
    idle: Idle | None = None


def plan_schema(spark: Any, cfg: PipelineConfig, t: TableConfig, names: TableNames, ranges: list[OffsetRange],
                positions: Callable[[], dict[int, tuple[int, ...]]]) -> tuple[BatchSchema, bool]:
    """The batch's schema (from samples, the registry and the table) and whether a raised ``ordering_epoch`` meets a
    table that committed nothing (``cdc.positions.regression``'s peers). ``positions()``: the newest committed source
    position per partition (read only when an epoch is in use)."""
    decoder, probe = make_decoder(cfg, t), make_decoder(cfg, t)
    probe.ignore_unknown_fields = True  # only tells what a record is (cdc.run.evidence)
    # a change without a Kafka key decides too when the key is configured or the table may be keyless (append)
    evidence = Evidence(decoder, probe, unkeyed=bool(t.primary_key) or t.write_mode in (None, "append"))
    samples = read_samples(cfg.kafka, ranges, timeout=cfg.batch.read_timeout_seconds, usable=evidence.decides)
    target = target_state(spark, names.target)  # read once for the plan
    # Only a change with a row decides the key, mode and ordering: never a tombstone or a truncate (null key), which
    # read_samples returns for a partition holding nothing else. None sampled: look between the samples.
    deciding = [s for s in samples if evidence.decides(*s)]
    if not deciding:
        found = scan(cfg.kafka, ranges, evidence, t.ordering, t.target, cfg.batch.read_timeout_seconds)
        if isinstance(found, Idle):
            if not target.exists or not (found.truncates or t.primary_key or target.key or known_key(spark, names)):
                return BatchSchema([], (), Ordering("explicit"), decoder, idle=found), False  # nothing to apply
        else:
            samples, deciding = [found, *samples], [found]  # newest last: the samples are newer
    existing = row_columns(target.columns)

    try:  # table columns vs newest source schema: widen / add / keep dropped (cdc.schema.evolution), or fail now
        cols = evolution.plan(existing, decoder.source_columns(samples, existing), t.allow_field_addition).columns
    except evolution.Incompatible as exc:  # nothing written yet; name the first record with the new type
        change = exc
        old = next(c.arrow_type for c in existing if c.name == change.top)
        where = find_first(cfg.kafka, ranges,
                           lambda k, v: evolution.offends(change, old, decoder.record_columns(k, v, existing)),
                           timeout=max(30.0, cfg.batch.read_timeout_seconds))
        raise evolution.evolution_error(t.target, t.topic, exc, where,
                                        bootstrap_mode=evolution.bootstrap_mode(t)) from None
    key = (t.primary_key or tuple(c.name for c in decoder.key_columns(deciding)) or target.key
           or known_key(spark, names))
    missing = [k for k in key if k not in {c.name for c in cols}]
    if not key:  # keyless: append mode (cdc.merge.modes), refused for upsert / scd2
        effective_mode(t.write_mode, key, t.target, cfg.source_path)
    if missing:
        raise ConfigError(
            f"{cfg.source_path}: table {t.target}: primary key {list(key)} "
            f"{'is empty' if not key else f'has columns {missing} that are not in the row'}; set primary_key "
            "for this table in the pipeline YAML")
    ordering, peers = batch_ordering(cfg, t, decoder.bind(cols), deciding, target, ranges, positions)
    check_columns(t.layout, [*cols, *target_meta(ordering.columns, t.delete_mode == "soft")],
                  t.target, cfg.source_path)  # partition_by / sort_by columns: before the claim
    return BatchSchema(cols, tuple(key), ordering, decoder), peers


def known_key(spark: Any, names: TableNames) -> tuple[str, ...]:
    """The key earlier batches used (a range may hold only keyless records, e.g. a truncate)."""
    try:
        return staged_key_and_ordering(spark, names.staging)[0]
    except Exception:  # no earlier batch
        return ()


def batch_ordering(cfg: PipelineConfig, t: TableConfig, decoder: Any, samples: list[tuple[bytes | None, bytes | None]],
                   target: TargetState, ranges: list[OffsetRange],
                   positions: Callable[[], dict[int, tuple[int, ...]]]) -> tuple[Ordering, bool]:
    """The source ordering (configured, the table's, or by connector), with ``tables[].ordering_epoch`` in front
    once it is used (never below the epoch the table already holds); and the peers flag (``plan_schema``)."""
    target_names = [c.name for c in target.columns]
    base = sampled_ordering(t.ordering, t.target, decoder, samples, target_names)
    if not t.ordering_epoch and EPOCH not in target_names:
        return base, False
    held = replace(base, epochs=target.epochs)
    if t.ordering_epoch < (held.epoch or 0):
        raise ConfigError(
            f"{cfg.source_path}: table {t.target}: ordering_epoch {t.ordering_epoch} is below the "
            f"epoch {held.epoch} the table already holds; changes would be ignored as older. Set ordering_epoch "
            f"to {held.epoch} or higher")
    # A new epoch starts, in each partition, where positions fall far back (cdc.positions.regression.settle): every
    # partition waits for that (PENDING). One that committed nothing is judged against the table, and, in a table
    # that committed nothing, against the batch's other partitions (cdc.positions.regression.judged_by_table).
    history = set(positions())
    out = held.with_epoch(t.ordering_epoch, dict.fromkeys({r.partition for r in ranges} | history, regression.PENDING))
    return out, out.epochs != held.epochs and not history
