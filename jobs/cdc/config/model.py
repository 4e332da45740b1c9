"""The pipeline configuration's typed, frozen objects (``cdc.config`` parses a YAML file into them) and the values
each setting accepts. Pure and light: the Airflow side imports them while it parses DAG files."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from cdc.common.errors import ConfigError
from cdc.config.bootstrap import BootstrapConfig
from cdc.config.catalogs import CATALOG_TYPES  # noqa: F401  (one home: cdc.config.catalogs)
from cdc.config.table_layout import TableLayout

FORMATS = ("avro", "json")
DELETE_MODES = ("hard", "soft")
BAD_RECORD_POLICIES = ("dead_letter", "fail")
ENVELOPES = ("debezium", "flattened")  # tables[].envelope
WRITE_MODES = ("upsert", "append", "scd2")  # tables[].write_mode (cdc.merge.modes)
DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024  # key + value; larger records are bad records (0: no limit)
# tables[].column_types (schemaless JSON): type names, and decimal(p,s) with 1 <= p <= 38, 0 <= s <= p
COLUMN_TYPE_NAMES = ("int", "bigint", "float", "double", "boolean", "string", "date", "timestamp", "timestamptz",
                     "binary")
DECIMAL_COLUMN_TYPE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_SECRET_WORDS = ("password", "secret", "token", "credentials", "user.info", "key", "jaas")


@dataclass(frozen=True)
class TableConfig:
    """One source topic → one Iceberg target table."""

    topic: str
    target: str  # namespace.table
    primary_key: tuple[str, ...] = ()  # empty: the fields of the Kafka message key
    ordering: str | tuple[str, ...] = "auto"  # auto, or field paths such as ("source.lsn",)
    delete_mode: str = "hard"
    unavailable_value_placeholder: str = DEFAULT_PLACEHOLDER
    on_bad_record: str = "dead_letter"
    max_dead_letter_ratio: float = 0.01
    allow_field_addition: bool = True
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    # Schemaless JSON: column → declared type ("decimal(10,2)", "bigint", "timestamptz", ...; COLUMN_TYPE_NAMES)
    column_types: Mapping[str, str] = field(default_factory=dict)
    # Compacted topic: a Kafka tombstone (null value) deletes its key, since compaction may have removed the ``d``
    # event before it. "auto": the topic's cleanup.policy decides (DescribeConfigs at plan time).
    compacted: str | bool = "auto"
    # Raised after a database failover / RESET MASTER / move to a new cluster: changes of a newer epoch always win
    # over stored ones, whatever their source positions (cdc.positions.ordering).
    ordering_epoch: int = 0
    # A completed snapshot (Debezium's initial or blocking snapshot: the read marked ``last`` /
    # ``last_in_data_collection``) deletes the rows it did not read that are older than it: rows deleted while the
    # connector was not streaming (a lost replication slot, a new connector) go. Off for a filtered snapshot
    # (``snapshot.select.statement.overrides``, ``additional-conditions``) or several sources in one topic.
    snapshot_deletes: bool = True
    # "debezium": the Debezium envelope (before/after/source/op); "flattened": records flattened by the
    # ExtractNewRecordState SMT (row fields + add.fields "__*" fields, __deleted from delete.handling.mode=rewrite)
    envelope: str = "debezium"
    # "upsert" (mirror), "append" (changelog) or "scd2" (history), see cdc.merge.modes; None = not configured: upsert, or
    # append for a keyless table (no message key, no primary_key). ``mode`` is the configured-or-default value.
    write_mode: str | None = None
    # scd2: an update that changes none of these columns updates the current version in place (empty: every change
    # opens a version)
    track_columns: tuple[str, ...] = ()
    # Routing (cdc.config.routing): a regex (full match) over the broker's topics instead of ``topic``; ``target`` may use
    # $1.. groups. Unresolved entries have topic == ""; resolved ones keep the pattern they came from.
    topic_pattern: str = ""
    # Target layout (cdc.config.table_layout): partition_by, sort_by, properties; applied on create and on later runs
    layout: TableLayout = field(default_factory=TableLayout)
    # Initial load straight from the source database over JDBC (cdc.config.bootstrap, jobs/bootstrap.py)
    bootstrap: BootstrapConfig | None = None

    @property
    def mode(self) -> str:
        return self.write_mode or "upsert"

    @property
    def name(self) -> str:
        """The table's name in CLI flags, DAG params and the ledger: the target identifier."""
        return self.target

    @property
    def namespace(self) -> str:
        return self.target.rsplit(".", 1)[0]

    @property
    def table(self) -> str:
        return self.target.rsplit(".", 1)[1]


@dataclass(frozen=True)
class CatalogConfig:
    name: str = "lake"
    type: str = "hadoop"
    warehouse: str = "./warehouse"
    # Catalog properties (→ spark.sql.catalog.<name>.*); the YAML's ``catalog.uri`` is stored here as ``uri``.
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        """The catalog's ``uri`` (jdbc: ``jdbc:postgresql://host:port/db``; rest: ``http://…``), or ""."""
        return str(self.properties.get("uri", ""))

    def __repr__(self) -> str:  # secret-looking properties (jdbc.password, ...) never reach logs or tracebacks
        return (f"CatalogConfig(name={self.name!r}, type={self.type!r}, warehouse={self.warehouse!r}, "
                f"properties={redact(self.properties)!r})")


@dataclass(frozen=True)
class BatchConfig:
    max_records_per_partition: int = 500_000
    # A Spark task reads at most this many offsets; bigger ranges are split. Bounds executor memory.
    chunk_size: int = 100_000
    # A read that makes no progress for this long fails (retryable) instead of hanging.
    read_timeout_seconds: float = 60.0
    # The claim lease: a live run renews its claim every third of it; a claim from another host left unrenewed this
    # long is taken over (same host: as soon as its process is gone). See cdc.ledger.lease.
    claim_timeout_minutes: float = 60.0
    # Tables of one job run at once (threads of one Spark driver, cdc.run.group); 1 = one after the other.
    table_concurrency: int = 1
    # A batch of at most this many offsets is read by the driver itself, without Spark tasks (cdc.stage.driver_read);
    # 0 = always in Spark tasks.
    driver_read_max_records: int = 20_000
    # A batch of at most this many events joins a target of at least key_filter_min_target_rows rows with only its
    # own keys (a broadcast semi-join cuts the target first: the target is scanned, not shuffled; cdc.merge.sql.near);
    # bigger batches and smaller targets join the whole target. 0 = never. Each distinct key of the batch is
    # broadcast to every executor.
    key_filter_max_changes: int = 1_000_000
    # The cut's own Spark jobs cost more than shuffling a small target (a 1,000-row table: 0.35 s more per batch).
    key_filter_min_target_rows: int = 1_000_000
    # The MERGE into a target of at least this many rows puts a bloom filter of the batch's keys on the target's
    # scan (Spark's runtime filter), so that only those keys' rows are shuffled (cdc.merge.bloom). 0 = never.
    bloom_filter_min_target_rows: int = 1_000_000
    # A batch of at most driver_read_max_records events is classified in one Spark task when the target and its
    # tombstones hold at most this many rows each: no shuffle, no broadcasts (cdc.merge.sql.MergeSpec.one_task). 0 = never.
    one_task_max_target_rows: int = 100_000
    # A batch the driver read writes its changes to the target and its tombstones through Iceberg's API, one row
    # delta each, instead of MERGE statements (cdc.merge.target_write, cdc.merge.tombstone_write); false = MERGE statements.
    row_deltas: bool = True
    # After each committed batch, its end offsets are committed to the consumer group cdc-iceberg.<pipeline> too, so
    # Kafka's lag tools see the pipeline (cdc.kafka.offsets.commit_group); the ledger stays the truth. false = never.
    consumer_group_offsets: bool = True


@dataclass(frozen=True)
class PipelineConfig:
    pipeline: str
    kafka: Mapping[str, Any]
    format: str
    catalog: CatalogConfig
    tables: tuple[TableConfig, ...]
    schema_registry: Mapping[str, Any] = field(default_factory=dict)
    spark: Mapping[str, str] = field(default_factory=dict)
    metadata_namespace: str = "cdc_meta"
    batch: BatchConfig = field(default_factory=BatchConfig)
    schedule: str | None = "@hourly"
    source_path: str = "<memory>"
    # ``airflow:`` / ``metrics:`` as the file gives them, ``${ENV}``-substituted (cdc.config.load.READER_SECTIONS)
    sections: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_patterns(self) -> bool:
        """Some table entry is a ``topic_pattern`` not resolved yet (``cdc.kafka.topics.resolve_pipeline``)."""
        return any(not t.topic for t in self.tables)

    def table(self, name: str) -> TableConfig:
        for t in self.tables:
            if name in (t.target, t.topic, t.table):
                return t
        known = ", ".join(t.target for t in self.tables)
        raise ConfigError(f"{self.source_path}: no table {name!r} in pipeline {self.pipeline!r} (tables: {known})")

    def select(self, names: list[str] | None) -> tuple[TableConfig, ...]:
        if not names:
            return self.tables
        return tuple(self.table(n) for n in names)

    def with_batch(self, **changes: Any) -> "PipelineConfig":
        return replace(self, batch=replace(self.batch, **changes))

    def __repr__(self) -> str:  # Kafka/registry secrets (sasl.password, basic.auth.user.info) never reach logs
        return (f"PipelineConfig(pipeline={self.pipeline!r}, format={self.format!r}, kafka={redact(self.kafka)!r}, "
                f"schema_registry={redact(self.schema_registry)!r}, catalog={self.catalog!r}, "
                f"tables={[t.target for t in self.tables]!r}, source_path={self.source_path!r})")

    def redacted(self) -> dict[str, Any]:
        """A printable summary: secret-looking values replaced by ***."""
        return {
            "pipeline": self.pipeline,
            "format": self.format,
            "kafka": redact(self.kafka),
            "schema_registry": redact(self.schema_registry),
            "catalog": {"name": self.catalog.name, "type": self.catalog.type, "warehouse": self.catalog.warehouse},
            "tables": [t.target for t in self.tables],
        }


def redact(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ("***" if any(w in k.lower() for w in _SECRET_WORDS) else v) for k, v in props.items()}
