"""The one definition of the columns the job adds to tables: target, staging, tombstones, ledger, dead letters.

Everything that names a metadata column imports it from here (merge SQL, table creation, the readers, the
vectorised Avro path, the Airflow side), so a column is spelled once and ``is_meta`` recognises every one of them.

Target table: the source row columns, then ``target_meta(ordering, soft)``:
  ordering columns (``__lsn`` | ``__binlog_file_seq``, ``__binlog_pos``, ``__binlog_row`` | ``SQLSERVER_ORDERING`` |
  ``ORACLE_ORDERING`` | ``MONGODB_ORDERING`` | ``__ord_<path>``...),
  ``__op``, ``__source_ts_ms``, ``__kafka_partition``, ``__kafka_offset``, ``__batch_id``, ``__ingested_at``
  and ``__deleted`` in soft-delete mode.

The *position* of a change is its ordering tuple followed by its Kafka partition and offset (``position_columns``):
a total order used everywhere (within a batch, against the table and against tombstones), so equal source positions
are broken by the Kafka offset in every case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    return pa.schema([pa.field(c.name, c.arrow_type, c.nullable) for c in columns])


@dataclass(frozen=True)
class Column:
    """One column of a row image or a key."""

    name: str
    arrow_type: pa.DataType
    nullable: bool = True
    # Debezium/Connect semantic name (e.g. "io.debezium.time.MicroTimestamp"); informative, for docs and errors.
    logical: str | None = None


# ---- ordering columns ------------------------------------------------------------------------------------------------
POSTGRES_ORDERING = ("__lsn",)  # tables created before commit ordering (still read and written that way)
POSTGRES_COMMIT_ORDERING = ("__last_commit_lsn", "__lsn")  # source.sequence: [last commit LSN, LSN]
MYSQL_ORDERING = ("__binlog_file_seq", "__binlog_pos", "__binlog_row")
# SQL Server: commit_lsn, change_lsn (each split into VLF sequence and block << 16 | slot), event_serial_no
SQLSERVER_ORDERING = ("__commit_lsn_vlf", "__commit_lsn_pos", "__change_lsn_vlf", "__change_lsn_pos",
                      "__event_serial_no")
ORACLE_ORDERING = ("__commit_scn_hi", "__commit_scn_lo", "__scn_hi", "__scn_lo")  # SCN // 10**18, SCN % 10**18
MONGODB_ORDERING = ("__oplog_ts_sec", "__oplog_ord")  # source.ts_ms // 1000, source.ord
EXPLICIT_PREFIX = "__ord_"
EPOCH = "__ordering_epoch"  # leading ordering column once tables[].ordering_epoch is used: a newer epoch always wins


def align(position: tuple[int, ...] | None, width: int) -> tuple[int, ...] | None:
    """A stored position (truncate barrier, GC horizon, ledger max_position) recorded before the table gained its
    epoch column, padded to the current ordering width: it belongs to epoch 0."""
    if position is None or len(position) >= width:
        return position
    return (0,) * (width - len(position)) + tuple(position)


def explicit_ordering_column(path: str) -> str:
    """``source.change_lsn`` → ``__ord_source_change_lsn``."""
    return EXPLICIT_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", path)


# ---- target ----------------------------------------------------------------------------------------------------------
OP = "__op"
SOURCE_TS_MS = "__source_ts_ms"
KAFKA_PARTITION = "__kafka_partition"
KAFKA_OFFSET = "__kafka_offset"
BATCH_ID = "__batch_id"
INGESTED_AT = "__ingested_at"
DELETED = "__deleted"  # soft-delete mode only (Iceberg reserves ``_deleted``)
TARGET_FIXED = (OP, SOURCE_TS_MS, KAFKA_PARTITION, KAFKA_OFFSET, BATCH_ID, INGESTED_AT)
# write_mode scd2 (cdc.merge.modes): the version's validity (source.ts_ms of the changes that start / end it)
VALID_FROM, VALID_TO, IS_CURRENT = "__valid_from", "__valid_to", "__is_current"
SCD2_FIXED = (VALID_FROM, VALID_TO, IS_CURRENT)

# ---- staging (one row per Kafka record) ------------------------------------------------------------------------------
TOPIC, PARTITION, OFFSET, KIND = "__topic", "__partition", "__offset", "__kind"
KAFKA_TS_MS, TS_MS, UNAVAILABLE = "__kafka_ts_ms", "__ts_ms", "__unavailable"
ERROR_CLASS, ERROR, RAW_KEY, RAW_VALUE = "__error_class", "__error", "__raw_key", "__raw_value"
# a change's originating server (MySQL/MariaDB ``source.server_id`` as text; NULL: none, or 0 in snapshot reads):
# a server never seen in a partition below the position it reached is a failover (cdc.positions.regression)
SERVER_ID = "__server_id"
# true on the read that ends a table's snapshot (Debezium ``source.snapshot`` "last" / "last_in_data_collection" of an
# initial or blocking snapshot): the batch deletes older rows the snapshot did not read (cdc.merge.apply)
SNAPSHOT_END = "__snapshot_end"
SNAPSHOT_END_MARKS = ("last", "last_in_data_collection")
STAGING_HEAD = (
    Column("batch_id", pa.int64(), False),
    Column(TOPIC, pa.string(), False),
    Column(PARTITION, pa.int32(), False),
    Column(OFFSET, pa.int64(), False),
    Column(KAFKA_TS_MS, pa.int64()),
    Column(KIND, pa.string(), False),  # change | tombstone | message | tx | error | image (cdc.merge.pk_moves)
    Column(OP, pa.string()),
)
STAGING_TAIL = (
    Column(SOURCE_TS_MS, pa.int64()),
    Column(TS_MS, pa.int64()),
    Column(SERVER_ID, pa.string()),
    Column(SNAPSHOT_END, pa.bool_()),
    Column(UNAVAILABLE, pa.list_(pa.string())),
    Column(ERROR_CLASS, pa.string()),
    Column(ERROR, pa.string()),
    Column(RAW_KEY, pa.binary()),
    Column(RAW_VALUE, pa.binary()),
)
# Primary-key moves (cdc.merge.pk_moves): Debezium's ``__debezium.oldkey`` header of a create / ``__debezium.newkey`` header
# of a delete, decoded like message keys into a struct of the key columns (NULL for every other record); ``__moved``
# (staging and tombstones, added when a batch first has a move): the old key's non-key columns just before the move.
# A move's delete's ``__moved`` is kept on an extra staging row of ``__kind`` IMAGE (its partition and offset).
OLD_KEY, NEW_KEY, MOVED, IMAGE = "__old_key", "__new_key", "__moved", "image"
STAGING_FIXED = (*(c.name for c in (*STAGING_HEAD, *STAGING_TAIL)), OLD_KEY, NEW_KEY, MOVED)

# ---- tombstones (hard deletes: key + position of the delete) ---------------------------------------------------------
DELETED_AT = "__deleted_at"
# Where the classification found a key's tombstone (Iceberg's _file/_pos), so a small batch's new tombstones can
# replace it by a row delta written through Iceberg's API instead of a MERGE (cdc.merge.tombstone_write).
TOMBSTONE_FILE, TOMBSTONE_POS = "__tombstone_file", "__tombstone_pos"
# Where the classification found a key's live target row, so a small batch's changes can replace it by a row delta
# instead of a MERGE (cdc.merge.target_write).
TARGET_FILE, TARGET_POS = "__target_file", "__target_pos"


def target_meta(ordering: Sequence[str], soft: bool) -> list[Column]:
    """Metadata columns of a target table, after the row columns."""
    cols = [Column(c, pa.int64()) for c in ordering] + [
        Column(OP, pa.string()), Column(SOURCE_TS_MS, pa.int64()), Column(KAFKA_PARTITION, pa.int32()),
        Column(KAFKA_OFFSET, pa.int64()), Column(BATCH_ID, pa.int64()),
        Column(INGESTED_AT, pa.timestamp("us", tz="UTC"))]
    return cols + ([Column(DELETED, pa.bool_())] if soft else [])


def staging_columns(row: Sequence[Column], ordering: Sequence[str], key: Sequence[str] = ()) -> list[Column]:
    """Staging schema: metadata, ordering, (with ``key``: the PK-move header keys), then the row image (all nullable:
    skipped and bad records have none)."""
    nullable_row = [Column(c.name, c.arrow_type, True, c.logical) for c in row]
    names = {c.name for c in row}
    moves = ([Column(OLD_KEY, key_struct(row, key)), Column(NEW_KEY, key_struct(row, key))]
             if key and all(k in names for k in key) else [])
    return [*STAGING_HEAD, *(Column(c, pa.int64()) for c in ordering), *STAGING_TAIL, *moves, *nullable_row]


def key_struct(row: Sequence[Column], key: Sequence[str]) -> pa.DataType:
    """The type of ``__old_key`` / ``__new_key``: a struct of the key columns (in key order)."""
    types = {c.name: c.arrow_type for c in row}
    return pa.struct([pa.field(k, types[k]) for k in key if k in types])


def moved_column(row: Sequence[Column], key: Sequence[str]) -> Column:
    """``__moved`` of staging and tombstones: a struct of the non-key row columns."""
    return Column(MOVED, pa.struct([pa.field(c.name, c.arrow_type) for c in row if c.name not in key]))


def tombstone_columns(key: Sequence[Column], ordering: Sequence[str]) -> list[Column]:
    return [*key, *(Column(c, pa.int64()) for c in ordering), Column(KAFKA_PARTITION, pa.int32()),
            Column(KAFKA_OFFSET, pa.int64()), Column(DELETED_AT, pa.timestamp("us", tz="UTC"))]


def position_columns(ordering: Sequence[str], staged: bool) -> tuple[str, ...]:
    """The total order of changes: ordering columns, then Kafka partition and offset (staging names them
    ``__partition``/``__offset``; target and tombstones ``__kafka_partition``/``__kafka_offset``)."""
    return (*ordering, *((PARTITION, OFFSET) if staged else (KAFKA_PARTITION, KAFKA_OFFSET)))


class Positioned:
    """Mixin of the merge specs (``cdc.merge.sql.MergeSpec``, ``cdc.merge.modes.ModeSpec``): their ``ordering`` columns as
    the total order in staging and in stored tables."""

    ordering: tuple[str, ...]

    @property
    def staged_position(self) -> tuple[str, ...]:
        return position_columns(self.ordering, staged=True)

    @property
    def stored_position(self) -> tuple[str, ...]:
        return position_columns(self.ordering, staged=False)


def is_meta(name: str) -> bool:
    """Is ``name`` a column the job adds to a target table (never a source column)?"""
    return (name in TARGET_FIXED or name in (DELETED, EPOCH) or name in SCD2_FIXED
            or name in POSTGRES_COMMIT_ORDERING
            or name in MYSQL_ORDERING or name in SQLSERVER_ORDERING or name in ORACLE_ORDERING
            or name in MONGODB_ORDERING or name.startswith(EXPLICIT_PREFIX))


def row_columns(columns: Sequence[Column]) -> list[Column]:
    """The source row columns of a target table's columns."""
    return [c for c in columns if not is_meta(c.name)]


def staged_row_columns(columns: Sequence[Column]) -> list[Column]:
    """The row-image columns of a staging table's columns."""
    return [c for c in columns if c.name not in STAGING_FIXED and not is_meta(c.name)]