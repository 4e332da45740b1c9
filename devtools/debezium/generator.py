"""Deterministic Debezium change-event generator with an oracle of the final source state.

The generator owns an in-memory copy of one source table. Every operation
mutates that state *and* emits the records Debezium would write for it, with
realistic envelopes (Debezium 2.7 shape: ``before``, ``after``, ``source``,
``transaction``, ``op``, ``ts_ms``/``ts_us``/``ts_ns``) and realistic source
positions. The source state is the oracle: whatever a correct sink does with
the records, the resulting table must equal :meth:`expected_rows`.

Determinism: all randomness comes from ``random.Random(seed)`` and a simulated
clock, so a failing seed from the randomized harness reproduces exactly.

Realism notes (what consumers must cope with):

* PostgreSQL ``replica_identity``: ``full`` gives full ``before`` images on u/d;
  ``default`` gives ``before=None`` on updates and a key-only image on deletes
  (NOT NULL non-key columns hold type fallbacks such as 0 or ""); ``key`` gives
  key-only images on both u and d (the shape shown in Debezium's docs).
  MySQL always has a full image (binlog_row_image=FULL).
* Unchanged TOASTed text (PostgreSQL, values >= 2000 chars) appears in ``after``
  as ``__debezium_unavailable_value``; the sink must keep the previous value.
* A primary-key change is emitted as delete(old key) + tombstone + create(new key).
* Truncate (op ``t``) has a null key, null before/after and goes to partition 0,
  so it must be ordered against other partitions by source position.
* PostgreSQL positions: ``lsn`` strictly increases per change (snapshot reads
  share the snapshot LSN). MySQL positions: (binlog file number, pos, row);
  files rotate (pos resets to a small number) so ``pos`` alone is not ordered
  (:mod:`.positions`). Failovers move positions back: far (:meth:`failover`) or,
  on MySQL, slightly under a new ``server_id`` (:meth:`failover_server`).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from .model import (
    TOAST_PLACEHOLDER,
    TOAST_THRESHOLD,
    Column,
    Connector,
    Record,
    Row,
    TableSchema,
    default_table,
    partition_for,
)
from .positions import MYSQL_FIRST_POS, MYSQL_SERVER_ID, Behind, SourceLog  # noqa: F401 (re-exported)

ReplicaIdentity = Literal["full", "default", "key"]
DEFAULT_WEIGHTS: Mapping[str, float] = {"insert": 4, "update": 5, "delete": 1, "change_pk": 0.2, "truncate": 0.0}


@dataclass
class GeneratorConfig:
    """Knobs for :class:`ChangeEventGenerator`; defaults give a realistic PostgreSQL stream."""

    connector: Connector = "postgresql"
    server: str = "dbserver1"
    table: str = "customers"
    partitions: int = 3
    replica_identity: ReplicaIdentity = "full"
    tombstones: bool = True  # Debezium tombstones.on.delete
    toast_fraction: float = 0.15  # share of generated text values large enough to be TOASTed
    # PostgreSQL sends unchanged TOASTed values of a primary-key change's new row as placeholders (the records carry
    # Debezium's __debezium.oldkey / __debezium.newkey headers either way). The job resolves them across batches from
    # the headers, except a create merged before a still-unread change of the old key (docs/failure-modes.md, known
    # limits), which adversarial reordering produces; so the randomized oracle turns this on only where it can hold.
    toast_on_pk_change: bool = False
    max_tx_size: int = 3  # random_ops groups changes into transactions of 1..max_tx_size
    start_ms: int = 1_704_067_200_000  # 2024-01-01T00:00:00Z
    binlog_max_bytes: int = 20_000  # MySQL: rotate to the next binlog file after this many bytes
    binlog_first_file: int = 9
    mysql_server_id: int = MYSQL_SERVER_ID  # source.server_id of streamed changes (until failover_server)
    first_lsn: int = 24_000_000  # PostgreSQL: where the WAL starts (a failover needs >1 GiB of it to be detectable)
    keep_records: bool = True  # False for benchmarks: only return records, do not accumulate them


class ChangeEventGenerator:
    """Applies operations to a model table and emits the Debezium records for each."""

    def __init__(self, seed: int, config: GeneratorConfig | None = None, table: TableSchema | None = None) -> None:
        self.config = config or GeneratorConfig()
        self.rng = random.Random(seed)
        self.table = table or default_table(self.config.connector, self.config.table, self.config.server)
        if self.table.connector != self.config.connector:
            raise ValueError("table.connector and config.connector differ")
        self.table_versions: list[TableSchema] = [self.table]
        self.records: list[Record] = []
        self.rows: dict[Any, Row] = {}  # oracle: pk -> row (Connect representation)
        self.ever_seen: set[Any] = set()
        self._next_id = 1
        self._clock_ms = self.config.start_ms
        self._tx_depth = 0
        self._tx_ts_ms = 0
        self._tx_id = 555 + self.rng.randrange(1000)
        c = self.config
        self.log = SourceLog(c.connector, self.rng, c.first_lsn, c.binlog_first_file, c.binlog_max_bytes,
                             c.mysql_server_id)

    # ------------------------------------------------------------------ oracle

    def expected_rows(self) -> dict[Any, Row]:
        """Final source state {pk: row}; values in Connect form (see :func:`model.to_python`)."""
        return {pk: dict(row) for pk, row in self.rows.items()}

    def deleted_keys(self) -> set[Any]:
        """Keys that existed at some point and do not exist now (for soft-delete sinks)."""
        return self.ever_seen - self.rows.keys()

    # ------------------------------------------------------------------ values

    def _value(self, col: Column) -> Any:
        rng = self.rng
        if col.nullable and rng.random() < 0.1:
            return None
        kind = col.kind
        if kind == "int32":
            return rng.randint(-(2**31), 2**31 - 1)
        if kind == "int64":
            return rng.randint(-(2**62), 2**62)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "decimal":
            bound = 10 ** (col.precision - col.scale) * 10**col.scale - 1
            return Decimal(rng.randint(-bound, bound)).scaleb(-col.scale)
        if kind == "date":
            return rng.randint(-3650, 25_000)  # 1960 .. 2038
        if kind == "timestamp":
            return rng.randint(631_152_000_000_000, 2_208_988_800_000_000)  # 1990 .. 2040, micros
        word = f"{rng.choice(_WORDS)}-{rng.randrange(100_000)}"
        if kind == "text" and col.toastable and rng.random() < self.config.toast_fraction:
            return (word + " ") * (TOAST_THRESHOLD // len(word) + 1)  # > threshold chars
        return word

    def _new_row(self, pk: int) -> Row:
        row = {c.name: self._value(c) for c in self.table.value_columns}
        row[self.table.primary_key[0]] = pk
        return {c.name: row[c.name] for c in self.table.columns}

    def _allocate_pk(self) -> int:
        pk = self._next_id
        self._next_id += 1
        return pk

    # ------------------------------------------------------------------ positions and envelopes

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Group the operations inside into one source transaction (same txId / commit time)."""
        self._begin()
        try:
            yield
        finally:
            self._commit()

    def _begin(self) -> None:
        if self._tx_depth == 0:
            self._clock_ms += self.rng.randint(1, 500)
            self._tx_ts_ms = self._clock_ms
            self._tx_id += 1
            self.log.begin()
            if self.config.connector == "mysql":
                self._tx_ts_ms -= self._tx_ts_ms % 1000  # binlog timestamps have second resolution
        self._tx_depth += 1

    def _commit(self) -> None:
        self._tx_depth -= 1
        if not self._tx_depth:
            self.log.commit()

    def _emit(
        self,
        op: str,
        key: dict[str, Any] | None,
        before: Row | None,
        after: Row | None,
        position: tuple[int, ...],
        snapshot: str = "false",
        ts_ms: int | None = None,
        headers: tuple[tuple[str, dict[str, Any]], ...] = (),
    ) -> list[Record]:
        source_ts = self._tx_ts_ms if ts_ms is None else ts_ms
        emitted_ms = source_ts + self.rng.randint(2, 300)
        emitted_us = emitted_ms * 1000 + self.rng.randrange(1000)
        value = {
            "before": before,
            "after": after,
            "source": self.log.source(self.table, position, snapshot, source_ts, self._tx_id),
            "transaction": None,
            "op": op,
            "ts_ms": emitted_ms,
            "ts_us": emitted_us,
            "ts_ns": emitted_us * 1000,
        }
        partition = partition_for(key, self.config.partitions)
        out = [Record(key, value, partition, self.table, position, headers)]
        if op == "d" and self.config.tombstones:
            out.append(Record(key, None, partition, self.table, position))
        if self.config.keep_records:
            self.records.extend(out)
        return out

    def _old_image(self, row: Row, op: str) -> Row | None:
        identity = self.config.replica_identity if self.config.connector == "postgresql" else "full"
        if identity == "full":
            return dict(row)
        if identity == "default" and op == "u":
            return None
        return self.table.key_only_image(row)

    # ------------------------------------------------------------------ operations

    def snapshot(self, new_rows: int) -> list[Record]:
        """Add ``new_rows`` pre-existing rows, then emit snapshot reads (op r) of the whole table.

        All reads share the snapshot position; ``source.snapshot`` is "true"
        except "last" on the final read, as in Debezium's initial snapshot.
        """
        for _ in range(new_rows):
            row = self._new_row(self._allocate_pk())
            self.rows[self.table.pk_of(row)] = row
            self.ever_seen.add(self.table.pk_of(row))
        self._clock_ms += 1000
        self._tx_id += 1
        position = self.log.snapshot_position()
        out: list[Record] = []
        rows = list(self.rows.values())
        for i, row in enumerate(rows):
            flag = "last" if i == len(rows) - 1 else "true"
            out += self._emit("r", self.table.key_of(row), None, dict(row), position, flag, self._clock_ms)
        return out

    def insert(self, row: Row | None = None) -> list[Record]:
        with self.transaction():
            row = dict(row) if row is not None else self._new_row(self._allocate_pk())
            pk = self.table.pk_of(row)
            if pk in self.rows:
                raise ValueError(f"duplicate key {pk}")
            self.rows[pk] = row
            self.ever_seen.add(pk)
            return self._emit("c", self.table.key_of(row), None, dict(row), self.log.next_position("c", True))

    def update(self, pk: Any = None, changes: Row | None = None, position: tuple[int, ...] | None = None,
               toast: bool = True) -> list[Record]:
        """Update a (random) existing row; with ``changes`` None, 1..3 random non-key columns change. ``position``:
        report it at this source position (see :meth:`tie_update`); ``toast=False``: a full ``after`` image."""
        with self.transaction():
            pk = self._pick(pk)
            old = self.rows[pk]
            if changes is None:
                candidates = self.table.value_columns
                cols = self.rng.sample(candidates, self.rng.randint(1, min(3, len(candidates))))
                changes = {c.name: self._value(c) for c in cols}
            new = {**old, **changes}
            self.rows[pk] = new
            after = self._toasted(old, new, changes) if toast else dict(new)
            position = self.log.next_position("u", True) if position is None else position
            return self._emit("u", self.table.key_of(new), self._old_image(old, "u"), after, position)

    def tie_update(self, pk: Any = None) -> list[Record]:
        """Two updates of one key reported at one source position (a tie: only the Kafka offset orders them, and
        the second is the row's state). The second carries its full row, so what it means does not depend on
        which of the two a sink treats as its predecessor. Its records are adjacent in the key's partition."""
        with self.transaction():
            first = self.update(pk)
            return first + self.update(self.table.pk_of(first[0].key), position=first[0].position, toast=False)

    def delete(self, pk: Any = None) -> list[Record]:
        with self.transaction():
            pk = self._pick(pk)
            old = self.rows.pop(pk)
            position = self.log.next_position("d", True)
            return self._emit("d", self.table.key_of(old), self._old_image(old, "d"), None, position)

    def change_pk(self, pk: Any = None, new_pk: int | None = None) -> list[Record]:
        """``UPDATE ... SET id = new``: Debezium emits delete(old) [+ tombstone] + create(new) at one position."""
        with self.transaction():
            pk = self._pick(pk)
            new_pk = self._allocate_pk() if new_pk is None else new_pk
            if new_pk in self.rows:
                raise ValueError(f"duplicate key {new_pk}")
            old = self.rows.pop(pk)
            new = {**old, self.table.primary_key[0]: new_pk}
            self.rows[new_pk] = new
            self.ever_seen.add(new_pk)
            position = self.log.next_position("pk", False)
            old_key, new_key = self.table.key_of(old), self.table.key_of(new)
            out = self._emit("d", old_key, self._old_image(old, "d"), None, position,
                             headers=(("__debezium.newkey", new_key),))
            after = self._toasted(old, new, {}) if self.config.toast_on_pk_change else dict(new)
            out += self._emit("c", new_key, None, after, position, headers=(("__debezium.oldkey", old_key),))
            return out

    def _toasted(self, old: Row, new: Row, changes: Row) -> Row:
        """The ``after`` image PostgreSQL sends: unchanged TOASTed values replaced by the placeholder."""
        after = dict(new)
        if self.table.connector == "postgresql":
            for col in self.table.value_columns:
                value = old[col.name]
                unchanged = col.name not in changes or changes[col.name] == value
                if col.toastable and unchanged and isinstance(value, str) and len(value) >= TOAST_THRESHOLD:
                    after[col.name] = TOAST_PLACEHOLDER
        return after

    def truncate(self) -> list[Record]:
        with self.transaction():
            self.rows.clear()
            position = self.log.next_position("t", False)
            return self._emit("t", None, None, None, position)

    def failover(self) -> None:
        """The source's log starts again far lower (MySQL failover / ``RESET MASTER``, PostgreSQL moved to a new
        cluster): later changes carry positions below every earlier one. No records; the rows stay as they are."""
        self.log.failover()

    def failover_server(self, new_server_id: int, behind: Behind = "file") -> tuple[int, int]:
        """MySQL failover to a replica slightly behind: later changes carry ``source.server_id`` = ``new_server_id``
        and start just below the newest streamed change (``behind="file"``: one binlog file back; ``"pos"``: the
        same file at a lower pos), then go upward from there. No records; the rows stay as they are (the replica
        has them). Returns (binlog file number, pos) of the next change. Not inside a transaction."""
        if self._tx_depth:
            raise ValueError("failover_server inside a transaction")
        return self.log.failover_server(new_server_id, behind)

    @property
    def server_id(self) -> int:
        """The MySQL server whose binlog later streamed changes come from (``source.server_id``)."""
        return self.log.server_id

    def add_column(self, column: Column) -> TableSchema:
        """``ALTER TABLE ADD COLUMN`` (nullable): later events carry the column; existing rows get null."""
        self.table = self.table.with_column(column)
        self.table_versions.append(self.table)
        for row in self.rows.values():
            row[column.name] = None
        return self.table

    def widen_column(self, column: Column) -> TableSchema:
        """A compatible widening of a column (``int32 → int64``, a larger decimal precision at the same scale):
        a new schema version; the values stay as they are."""
        self.table = self.table.with_widened(column)
        self.table_versions.append(self.table)
        return self.table

    def _pick(self, pk: Any) -> Any:
        if pk is None:
            if not self.rows:
                raise ValueError("table is empty")
            pk = self.rng.choice(list(self.rows)) if len(self.rows) < 64 else self._sample_pk()
        if pk not in self.rows:
            raise KeyError(pk)
        return pk

    def _sample_pk(self) -> Any:
        """O(1)-ish random existing key for large tables (ids are dense-ish integers)."""
        for _ in range(64):
            candidate = self.rng.randrange(1, self._next_id)
            if candidate in self.rows:
                return candidate
        return self.rng.choice(list(self.rows))

    def iter_random_ops(self, n: int, weights: Mapping[str, float] | None = None) -> Iterator[Record]:
        """Apply ``n`` random operations (grouped in transactions) and yield their records lazily."""
        weights = dict(weights or DEFAULT_WEIGHTS)
        names = list(weights)
        odds = list(weights.values())
        done = 0
        while done < n:
            size = min(self.rng.randint(1, self.config.max_tx_size), n - done)
            with self.transaction():
                for _ in range(size):
                    op = self.rng.choices(names, odds)[0] if self.rows else "insert"
                    yield from getattr(self, op)()
            done += size

    def random_ops(self, n: int, weights: Mapping[str, float] | None = None) -> list[Record]:
        return list(self.iter_random_ops(n, weights))


_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett", "kilo")
