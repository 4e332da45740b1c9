"""Source-table model shared by the generator and the serializers.

A :class:`TableSchema` is immutable: a schema change (``ADD COLUMN``) produces a
new object, and every emitted :class:`Record` keeps a reference to the version
it was captured with. That mirrors Debezium, where each event carries (or
references, via the registry) the schema in force when the row was read, and
lets serializers embed/register the right schema per event.

Row values are held in their Kafka Connect representation, i.e. exactly what
appears in ``before``/``after`` (except Decimal, kept as ``decimal.Decimal``
and encoded per converter): int32/int64/str/bool as is, ``io.debezium.time.Date``
as int days since epoch, ``io.debezium.time.MicroTimestamp`` as int
microseconds since epoch. :func:`to_python` converts to date/datetime.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import cached_property
from typing import Any, Literal

Connector = Literal["postgresql", "mysql"]
#: Logical column kinds supported by the generator.
ColumnKind = Literal["int32", "int64", "string", "boolean", "decimal", "date", "timestamp", "text"]

#: Debezium's default ``unavailable.value.placeholder`` for unchanged TOASTed columns.
TOAST_PLACEHOLDER = "__debezium_unavailable_value"
#: Values at least this long are treated as TOASTed (PostgreSQL's TOAST_TUPLE_THRESHOLD is ~2 kB).
TOAST_THRESHOLD = 2000
DEBEZIUM_VERSION = "2.7.3.Final"
#: Debezium 2.7-3.0 keep this list in the schema although they also emit "first", "last_in_data_collection"...
SNAPSHOT_ALLOWED = "true,last,false,incremental"
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_DATE = dt.date(1970, 1, 1)

Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """One source column. ``toastable`` marks a PostgreSQL text column whose large values live in TOAST."""

    name: str
    kind: ColumnKind
    nullable: bool = True
    toastable: bool = False
    precision: int = 10
    scale: int = 2

    def fallback(self) -> Any:
        """Value Debezium puts in a NOT NULL column it has no data for (key-only old images).

        JdbcValueConverters returns the type's "fallback" (0, "", false, ...)
        rather than null for non-optional fields, so key-only ``before`` images
        of NOT NULL columns look like real values. Consumers must not trust them.
        """
        if self.nullable:
            return None
        return {
            "int32": 0,
            "int64": 0,
            "string": "",
            "text": "",
            "boolean": False,
            "decimal": Decimal(0).scaleb(-self.scale),
            "date": 0,
            "timestamp": 0,
        }[self.kind]


@dataclass(frozen=True)
class TableSchema:
    """A captured table at one schema version. ``namespace`` is the PG schema or the MySQL database."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ("id",)
    connector: Connector = "postgresql"
    server: str = "dbserver1"
    database: str = "inventory"
    schema: str = "public"
    version: int = 1
    _index: dict[str, Column] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update({c.name: c for c in self.columns})
        missing = [k for k in self.primary_key if k not in self._index]
        if missing:
            raise ValueError(f"primary key columns {missing} not in table {self.name}")

    @property
    def topic(self) -> str:
        """Debezium topic name: ``server.schema.table`` (PostgreSQL) or ``server.database.table`` (MySQL)."""
        middle = self.schema if self.connector == "postgresql" else self.database
        return f"{self.server}.{middle}.{self.name}"

    def column(self, name: str) -> Column:
        return self._index[name]

    @cached_property
    def value_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.name not in self.primary_key)

    def key_of(self, row: Row) -> dict[str, Any]:
        return {k: row[k] for k in self.primary_key}

    def pk_of(self, row: Row) -> Any:
        """Oracle key: the scalar PK value for single-column keys, else a tuple."""
        if len(self.primary_key) == 1:
            return row[self.primary_key[0]]
        return tuple(row[k] for k in self.primary_key)

    def key_only_image(self, row: Row) -> Row:
        """The ``before`` image Debezium builds from an old *key* tuple (REPLICA IDENTITY DEFAULT)."""
        return {c.name: (row[c.name] if c.name in self.primary_key else c.fallback()) for c in self.columns}

    def with_column(self, column: Column) -> TableSchema:
        if column.name in self._index:
            raise ValueError(f"column {column.name} already exists")
        if not column.nullable:
            raise ValueError("only nullable columns can be added mid-stream (existing rows get null)")
        return replace(self, columns=self.columns + (column,), version=self.version + 1, _index={})

    def with_widened(self, column: Column) -> TableSchema:
        """The same column with a wider type (int32 → int64, decimal precision up at the same scale)."""
        old = self.column(column.name)
        widenings = {("int32", "int64")}
        same = old.kind == column.kind == "decimal" and old.scale == column.scale and old.precision < column.precision
        if not (same or (old.kind, column.kind) in widenings) or old.nullable != column.nullable:
            raise ValueError(f"{old} → {column} is not a widening")
        columns = tuple(column if c.name == column.name else c for c in self.columns)
        return replace(self, columns=columns, version=self.version + 1, _index={})


def default_table(
    connector: Connector = "postgresql", name: str = "customers", server: str = "dbserver1"
) -> TableSchema:
    """The standard test table: one column of every supported kind."""
    return TableSchema(
        name=name,
        connector=connector,
        server=server,
        columns=(
            Column("id", "int32", nullable=False),
            Column("name", "string", nullable=False),
            Column("visits", "int64", nullable=True),
            Column("active", "boolean", nullable=False),
            Column("balance", "decimal", nullable=True, precision=10, scale=2),
            Column("birth_date", "date", nullable=True),
            Column("updated_at", "timestamp", nullable=False),
            Column("notes", "text", nullable=True, toastable=(connector == "postgresql")),
        ),
    )


def partition_for(key: dict[str, Any] | None, partitions: int) -> int:
    """Stable partition: crc32 of the canonical JSON key mod N (truncate/null key -> 0).

    Kafka's murmur2 hashes the *serialized* key, which differs per converter;
    hashing the logical key keeps partitions identical across JSON and Avro runs.
    """
    if key is None or partitions <= 1:
        return 0
    return zlib.crc32(json.dumps(key, sort_keys=True, default=str).encode()) % partitions


def encode_decimal(value: Decimal, scale: int) -> bytes:
    """Connect Decimal bytes: big-endian two's complement of the unscaled value (Java BigInteger.toByteArray)."""
    unscaled = int(value.scaleb(scale))
    magnitude = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(magnitude // 8 + 1, "big", signed=True)


def decode_decimal(data: bytes, scale: int) -> Decimal:
    return Decimal(int.from_bytes(data, "big", signed=True)).scaleb(-scale)


def to_python(table: TableSchema, row: Row | None) -> Row | None:
    """Connect representation -> Python logical values (date, naive UTC datetime)."""
    if row is None:
        return None
    out = dict(row)
    for col in table.columns:
        value = out.get(col.name)
        if value is None:
            continue
        if col.kind == "date":
            out[col.name] = EPOCH_DATE + dt.timedelta(days=value)
        elif col.kind == "timestamp":
            out[col.name] = EPOCH + dt.timedelta(microseconds=value)
    return out


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record as Debezium would write it, before serialisation.

    ``key``/``value`` hold the Connect payloads (``value`` is the envelope, or
    None for a tombstone). ``position`` is the source-log position used for
    ordering: ``(lsn,)`` for PostgreSQL, ``(binlog file number, pos, row)`` for
    MySQL; tombstones carry the position of their delete. ``table`` is the
    table-schema version the event was captured with.
    """

    key: dict[str, Any] | None
    value: dict[str, Any] | None
    partition: int
    table: TableSchema
    position: tuple[int, ...] = ()
    # Kafka headers whose value is a key payload serialised like the message key: Debezium's
    # ``__debezium.newkey`` on the delete and ``__debezium.oldkey`` on the create of a primary-key change.
    headers: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def op(self) -> str | None:
        """Debezium op code, or None for a tombstone."""
        return None if self.value is None else self.value["op"]

    @property
    def is_tombstone(self) -> bool:
        return self.value is None
