"""JDBC bootstrap: load a table's initial state straight from the source database, then let the normal Kafka
micro-batches continue from any earlier offset without gaps or regressions. The front door is ``run_bootstrap``.

1. **Check and claim.** The table has a ``bootstrap`` section; no batch of it is pending; the target is empty or
   absent (else ``--replace`` is needed). Then the bootstrap claims the table's next batch id in the ledger
   (``cdc.bootstrap.claim``): from here until its ledger row commits, ingest runs of the table wait (exit 75), and
   the claim's lease is renewed. A bootstrap that finds another one's claim whose process died settles it first
   (finished if its swap committed, else withdrawn).
2. **Snapshot.** ``cdc.bootstrap.source.open_source`` by URL. PostgreSQL (``PostgresSnapshot``): one exported
   REPEATABLE READ snapshot, its WAL position (``pg_current_wal_lsn()``, reported) and the transactions it sees
   (``pg_current_snapshot()``), kept open until the read is done. MySQL/MariaDB (``cdc.bootstrap.mysql``):
   ``LOCK TABLES <t> READ`` on a driver connection and ``SHOW MASTER STATUS`` under it, held until the read is done.
3. **Horizon.** PostgreSQL: ``cdc.bootstrap.horizon``, the newest Debezium position among the topic's changes
   whose transaction the snapshot sees (None when the topic has none). MySQL: the binlog position itself.
4. **Read & stage.** Spark's JDBC source reads the table in ``num_partitions`` ranges of the split column (min/max
   from the same snapshot), every reader inside the snapshot (``sessionInitStatement``), column types converted as
   ``cdc.bootstrap.postgres_types`` says (the same schema the Debezium path produces). Rows get the horizon as their
   position (``(0, 0)`` without one), op ``r``, Kafka partition/offset -1, and are written to
   ``<meta>.bootstrap__<ns>__<table>`` (created exactly like the target).
5. **Swap.** One Iceberg commit replaces the target's rows with the staged ones (created first when absent; its
   snapshot summary records the bootstrap), validated as serializable from the target's snapshot at the claim: a
   commit by another writer since (maintenance) fails it (exit 75, target untouched). A crash before it leaves the
   target untouched; rerun.
6. **Ledger.** The claim becomes the committed ``bootstrap`` row with the horizon (``cdc.ledger.model``): every
   later batch ignores changes at or below it, for every key; later ones apply. The cursor is not moved. Killed
   between 5 and 6, the next ingest or bootstrap run of the table finishes the row before it does anything else.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from cdc.bootstrap import claim
from cdc.bootstrap.claim import SUMMARY_KEY, staging_name
from cdc.bootstrap.postgres import format_lsn
from cdc.bootstrap.postgres_types import quote_spark
from cdc.bootstrap.source import open_source
from cdc.common.errors import ConcurrentRunError, ConfigError, TerminalError
from cdc.common.faults import checkpoint
from cdc.common.sql import lit
from cdc.config.bootstrap import BootstrapConfig
from cdc.config.model import PipelineConfig, TableConfig
from cdc.config.names import TableNames, names
from cdc.iceberg import snapshot_summary
from cdc.iceberg.failures import is_commit_conflict
from cdc.iceberg.tables import TargetState, ensure_target, exists, fresh_snapshot_id, target_state
from cdc.kafka.topics import resolve_pipeline
from cdc.ledger.lease import LeaseKeeper, process_owner, renewal_interval
from cdc.ledger.ledger import Ledger
from cdc.ledger.model import BOOTSTRAP_MODE, bootstrap_row
from cdc.ledger.tables import ensure_meta_tables
from cdc.positions.ordering import Ordering
from cdc.schema.columns import BATCH_ID, DELETED, INGESTED_AT, KAFKA_OFFSET, KAFKA_PARTITION, OP, SOURCE_TS_MS, Column


def bootstrap_tables(cfg: PipelineConfig, names: list[str],
                     topics: list[str] | None = None) -> tuple[PipelineConfig, list[TableConfig]]:
    """The tables to bootstrap: the ``--table`` names (targets or topics; a target resolved from a ``topic_pattern``
    entry is found as ``jobs/ingest.py`` finds it, ``cdc.kafka.topics.resolve_pipeline``, asking the broker for its
    topics, or ``topics``), else every table with a bootstrap section. A table of a ``topic_pattern`` entry is
    refused, naming the entry: its one ``source_table`` cannot stand for every matching topic."""
    explicit = [t for t in cfg.tables if t.topic]
    entries = {id(t): i for i, t in enumerate(cfg.tables)}
    known = {n for t in explicit for n in (t.target, t.topic, t.table)}
    if names and any(n not in known for n in names) and cfg.has_patterns:
        patterns = {t.topic_pattern: entries[id(t)] for t in cfg.tables if not t.topic}
        cfg = resolve_pipeline(cfg, topics)
        entries = {id(t): patterns[t.topic_pattern] if t.topic_pattern else i for i, t in enumerate(cfg.tables)}
    if names:
        tables = list(cfg.select(names))
    else:
        tables = [t for t in cfg.tables if t.bootstrap is not None]
    for t in tables:
        if t.topic_pattern:
            raise ConfigError(pattern_refusal(cfg, entries[id(t)], t))
    if not tables:
        raise ConfigError(f"{cfg.source_path}: no table has a bootstrap section")
    return cfg, tables


def pattern_refusal(cfg: PipelineConfig, index: int, t: TableConfig) -> str:
    what = f"table {t.target} (topic {t.topic})" if t.topic else f"target {t.target!r}"
    where = f"{cfg.source_path}: {what} comes from tables[{index}] (topic_pattern '{t.topic_pattern}')"
    if t.bootstrap is not None:
        return (f"{where}, whose bootstrap section loads one source table ({t.bootstrap.source_table}) but the entry "
                "stands for every matching topic; give each topic to bootstrap its own entry (topic, target, "
                "bootstrap: explicit entries win over the pattern) and remove bootstrap from the pattern entry")
    return (f"{where}, which has no bootstrap section (a topic_pattern entry cannot have one); give the topic its own "
            "entry (topic, target, bootstrap with its source_table: explicit entries win over the pattern)")


@dataclass(frozen=True)
class Plan:
    row_columns: list[Column]
    key: tuple[str, ...]
    selects: list[str]  # the source database's select list
    converts: list[str]  # Spark expressions over the JDBC result
    split: str  # "" = one unpartitioned read


NO_HORIZON = (0, 0)  # PostgreSQL rows' position when the topic holds no change the snapshot saw: before every change


def ordering_columns(b: BootstrapConfig) -> tuple[str, ...]:
    """The target's ordering columns for this source (what the Debezium path creates for its connector)."""

    return Ordering("mysql" if b.is_mysql else "postgresql").columns


def check_table(cfg: PipelineConfig, t: TableConfig) -> BootstrapConfig:
    """The table's bootstrap settings, or ``ConfigError`` when it cannot be bootstrapped."""
    where = f"{cfg.source_path}: table {t.target}"
    if t.bootstrap is None:
        raise ConfigError(f"{where}: has no bootstrap section (tables[].bootstrap: jdbc_url, source_table, ...)")
    if t.ordering != "auto":
        raise ConfigError(f"{where}: a JDBC bootstrap needs ordering: auto (the connector's own log positions)")
    if t.ordering_epoch:
        raise ConfigError(f"{where}: a JDBC bootstrap of a table with ordering_epoch > 0 is not supported")
    if getattr(t, "mode", "upsert") != "upsert":
        raise ConfigError(f"{where}: a JDBC bootstrap needs write_mode upsert (got {t.mode})")
    return t.bootstrap


def plan_columns(snap: Any, t: TableConfig, b: BootstrapConfig, where: str) -> Plan:
    reads = snap.column_reads()
    key = tuple(t.primary_key) or tuple(snap.primary_key())
    names_ = {r.name for r in reads}
    if not key or any(k not in names_ for k in key):
        raise ConfigError(f"{where}: primary key {list(key)} {'is unknown' if not key else 'is not in the table'}: "
                          "set primary_key for this table (the source table has no usable primary key)")
    split = b.split_column or (key[0] if len(key) == 1 else "")
    types = snap.column_types()
    if split and split not in types:
        raise ConfigError(f"{where}: bootstrap.split_column {split!r} is not a column of the source table")
    if split and split not in snap.integer_columns():
        if b.split_column:
            raise ConfigError(f"{where}: bootstrap.split_column {split!r} has type {types[split]}: the parallel "
                              "read needs an integer column (or num_partitions: 1)")
        split = ""  # a non-integer key: one reader
    if b.num_partitions == 1:
        split = ""
    row_cols = [Column(r.name, r.arrow_type, r.name not in key) for r in reads]
    return Plan(row_cols, key, [r.select for r in reads], [r.convert for r in reads], split)


def read_source(spark: Any, snap: Any, b: BootstrapConfig, plan: Plan) -> Any:
    """The JDBC DataFrame of the table inside the snapshot (lazy: read when written)."""
    options = {**snap.jdbc_options(plan.selects), "fetchsize": str(b.fetch_size)}
    if b.user:
        options["user"] = b.user
    if b.password:
        options["password"] = b.password
    if plan.split:
        lo, hi = snap.bounds(plan.split)
        if lo is not None and hi is not None and hi > lo:
            options.update(partitionColumn=plan.split, lowerBound=str(lo), upperBound=str(hi + 1),
                           numPartitions=str(b.num_partitions))
    return spark.read.format("jdbc").options(**options).load().selectExpr(*plan.converts)


def with_meta(df: Any, ordering: tuple[str, ...], position: tuple[int, ...], batch_id: int, snapshot_ms: int,
              soft: bool) -> Any:
    """Add the target's metadata columns: the ``ordering`` columns = ``position`` (the horizon), op ``r``, no Kafka
    offsets."""
    from pyspark.sql import functions as F

    if len(position) != len(ordering):
        raise ValueError(f"position {position} does not fit the ordering columns {ordering}")
    cols = [*(F.lit(int(v)).cast("bigint").alias(c) for c, v in zip(ordering, position)),
            F.lit("r").alias(OP), F.lit(snapshot_ms).cast("bigint").alias(SOURCE_TS_MS),
            F.lit(-1).cast("int").alias(KAFKA_PARTITION), F.lit(-1).cast("bigint").alias(KAFKA_OFFSET),
            F.lit(batch_id).cast("bigint").alias(BATCH_ID), F.current_timestamp().alias(INGESTED_AT)]
    if soft:
        cols.append(F.lit(False).alias(DELETED))
    return df.select("*", *cols)


def is_empty(spark: Any, table: str) -> bool:
    spark.catalog.refreshTable(table)
    return spark.table(table).limit(1).count() == 0


def write_ledger_row(spark: Any, ledger: str, row: dict[str, Any]) -> None:
    """``row`` into every column of the ledger as it is (the times: now; columns the row lacks: NULL)."""
    values = []
    spark.catalog.refreshTable(ledger)
    columns = spark.table(ledger).columns
    for k in columns:
        v = row.get(k)
        values.append("current_timestamp()" if k in ("staged_at", "committed_at", "claimed_at") else
                      "NULL" if v is None else str(int(v)) if isinstance(v, int) else lit(str(v)))
    spark.sql(f"INSERT INTO {ledger} ({', '.join(f'`{k}`' for k in columns)}) VALUES ({', '.join(values)})")


def run_bootstrap(spark: Any, cfg: PipelineConfig, t: TableConfig, replace: bool = False) -> dict[str, Any]:
    """Bootstrap one table (see the module docstring); its summary entry."""
    started = time.monotonic()
    seconds: dict[str, float] = {}
    b = check_table(cfg, t)
    where = f"table {t.target} (bootstrap from {b.source_table})"
    ensure_meta_tables(spark, cfg)
    n: TableNames = names(cfg, t)
    ledger = Ledger(spark, n.ledger, cfg.pipeline)
    run_id = uuid.uuid4().hex
    state = ledger.state(t.target, None)
    pending = state.pending
    if pending is not None and pending.mode == BOOTSTRAP_MODE:  # another bootstrap: running, or died
        claim.refuse_while_running(t, pending, cfg.batch.claim_timeout_minutes * 60, "bootstrap")
        info = claim.settle(spark, cfg, t, ledger, pending, run_id)
        if info is not None:
            return recovered_summary(t, info, pending.batch_id, started)
        state = ledger.state(t.target, None)
        pending = state.pending
    if pending is not None:
        raise ConcurrentRunError(f"{where}: batch {pending.batch_id} is {pending.status} (an ingest run is working "
                                 "on the table or died); let it finish (rerun ingest), then bootstrap")
    recovered = finish_unclaimed_swap(spark, cfg, t, ledger, state, started)
    if recovered is not None:
        return recovered
    if exists(spark, n.target) and not replace and not is_empty(spark, n.target):
        raise TerminalError(f"{where}: the target is not empty; rerun with --replace to replace its rows with the "
                            "source table's (the Kafka cursor is kept)")
    batch_id = claim.claim(ledger, t, state, run_id)  # from here on, ingest runs of the table wait for this one
    swapped = False
    try:
        with LeaseKeeper(lambda: ledger.renew(t.target, batch_id, run_id),
                         renewal_interval(cfg.batch.claim_timeout_minutes * 60), f"bootstrap of {t.target}"):
            info, snapshot, at = read_and_swap(spark, cfg, t, b, ledger, batch_id, run_id, seconds, where)
            swapped = True
            checkpoint("bootstrap_after_swap")
            claim.commit(ledger, t, batch_id, run_id, info, snapshot, seconds)
    except BaseException:
        if not swapped:  # the target is untouched: withdraw the claim (best effort; a dead one is settled later)
            with contextlib.suppress(Exception):
                ledger.release(t.target, batch_id, run_id)
        raise
    spark.sql(f"DROP TABLE IF EXISTS {staging_name(cfg, t)} PURGE")
    seconds["total"] = time.monotonic() - started
    return _summary(t, "bootstrapped", info["rows"], at, info["horizon"], batch_id, seconds, info["scanned"])


def read_and_swap(spark: Any, cfg: PipelineConfig, t: TableConfig, b: BootstrapConfig, ledger: Ledger, batch_id: int,
                  run_id: str, seconds: dict[str, float], where: str) -> tuple[dict[str, Any], int | None, Any]:
    """Under the claim of ``batch_id``: snapshot, horizon, read and stage, then the swap, validated from the target
    as the claim found it; the swap's summary info, its snapshot id and the source position."""
    n = names(cfg, t)
    base = claim.target_snapshot(spark, n.target)  # after the claim: no ingest commit can land after this one
    soft = t.delete_mode == "soft"
    stage = staging_name(cfg, t)
    t0 = time.monotonic()
    ordering = ordering_columns(b)
    with open_source(spark, b, t.target) as snap:
        seconds["snapshot"] = time.monotonic() - t0
        checkpoint("bootstrap_after_snapshot")
        plan = plan_columns(snap, t, b, f"{cfg.source_path}: table {t.target}")
        seconds["connector_wait"] = snap.wait_for_connector()
        t0 = time.monotonic()
        horizon, scanned = snap.horizon(cfg, t, plan.row_columns, cfg.batch.read_timeout_seconds)
        seconds["horizon"] = time.monotonic() - t0
        t0 = time.monotonic()
        spark.sql(f"DROP TABLE IF EXISTS {stage} PURGE")  # a crashed run's leftovers
        ensure_target(spark, TargetState(stage, exists=False), plan.row_columns, plan.key, ordering, soft)
        df = with_meta(read_source(spark, snap, b, plan), ordering, horizon or NO_HORIZON, batch_id,
                       int(time.time() * 1000), soft)
        df.writeTo(stage).append()  # the JDBC read happens here, inside the snapshot (MySQL: under the lock)
        at = snap.position_info()
        seconds["read_stage"] = time.monotonic() - t0
    checkpoint("bootstrap_after_stage")
    rows = int(spark.table(stage).count())
    ledger.still_owner(t.target, batch_id, run_id)  # the lease held (a run that judged it dead took it over?)
    checkpoint("bootstrap_before_swap")
    t0 = time.monotonic()
    ensure_target(spark, target_state(spark, n.target), plan.row_columns, plan.key, ordering, soft,
                  getattr(t, "layout", None))
    info = {"run_id": run_id, "batch_id": batch_id, "horizon": list(horizon) if horizon else None, "rows": rows,
            "source_position": at, "scanned": scanned, **({"lsn": at["lsn_number"]} if "lsn_number" in at else {})}
    try:
        swap(spark, stage, n.target, json.dumps(info), cfg.pipeline, batch_id, base)
    except Exception as exc:
        if not is_commit_conflict(exc):
            raise
        raise ConcurrentRunError(f"{where}: the target changed while the table was being read (a commit by another "
                                 "writer, e.g. maintenance); the target was not replaced. Rerun the bootstrap") from None
    seconds["swap"] = time.monotonic() - t0
    return info, fresh_snapshot_id(spark, n.target), at


def finish_unclaimed_swap(spark: Any, cfg: PipelineConfig, t: TableConfig, ledger: Ledger, state: Any,
                          started: float) -> dict[str, Any] | None:
    """A swap that committed without a claim and without its ledger row (a bootstrap of a version that did not
    claim, killed between the two): its row under the next batch id, and the summary; None when there is none."""
    n = names(cfg, t)
    found = claim.swapped(spark, n.target)
    if found is None or claim.recorded(spark, n.ledger, cfg.pipeline, t.target, found[0]["run_id"]):
        return None
    info, snapshot = found
    batch = state.next_batch_id
    write_ledger_row(spark, n.ledger, bootstrap_row(cfg.pipeline, t.target, t.topic, batch, info["horizon"],
                                                    info["rows"], snapshot, info["run_id"], process_owner(), {}))
    spark.sql(f"DROP TABLE IF EXISTS {staging_name(cfg, t)} PURGE")
    return recovered_summary(t, info, batch, started)


def recovered_summary(t: TableConfig, info: dict[str, Any], batch_id: int, started: float) -> dict[str, Any]:
    """The summary entry of a bootstrap finished from its swap's summary ``info`` (its ledger row: ``batch_id``)."""
    at = info.get("source_position") or {"lsn": format_lsn(int(info["lsn"])), "lsn_number": int(info["lsn"])}
    return _summary(t, "recovered", info["rows"], at, info["horizon"], batch_id, {"total": time.monotonic() - started})


def swap(spark: Any, stage: str, target: str, info: str, pipeline: str, batch_id: int, base: int | None) -> None:
    """Replace every row of ``target`` with ``stage``'s in one Iceberg commit (its summary records ``info``),
    validated as serializable from snapshot ``base`` (None: from the table's start): data another writer committed
    since fails it (a commit conflict), so nothing merged meanwhile is wiped out unseen."""
    from pyspark.sql import functions as F

    spark.catalog.refreshTable(target)
    have = {f.name for f in spark.table(stage).schema.fields}
    wanted = [f for f in spark.table(target).schema.fields]
    cols = [F.col(quote_spark(f.name)) if f.name in have else F.lit(None).cast(f.dataType).alias(f.name)
            for f in wanted]
    props = {SUMMARY_KEY: info, snapshot_summary.PIPELINE: pipeline, snapshot_summary.BATCH_ID: str(int(batch_id))}
    writer = spark.table(stage).select(*cols).writeTo(target)
    for k, v in props.items():
        writer = writer.option(f"snapshot-property.{k}", v)
    writer = writer.option("isolation-level", "serializable")
    if base is not None:
        writer = writer.option("validate-from-snapshot-id", str(int(base)))
    writer.overwrite(F.lit(True))


def _summary(t: TableConfig, status: str, rows: int, at: dict[str, Any], horizon: Any, batch_id: int,
             seconds: dict[str, float], scanned: int = 0) -> dict[str, Any]:
    """``at``: the source's own position (PostgreSQL ``lsn``/``lsn_number``; MySQL ``binlog_file``/``binlog_pos``)."""
    return {"table": t.target, "topic": t.topic, "status": status, "rows": int(rows), "batch_id": int(batch_id),
            "source_position": {**at, "horizon": list(horizon) if horizon else None,
                                "topic_events_scanned": int(scanned)},
            "seconds": {k: round(v, 3) for k, v in seconds.items()}}