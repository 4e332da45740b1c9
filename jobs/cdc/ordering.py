"""Source log positions: which of two changes to the same row happened later (pure functions).

Kafka offsets order events only within one partition and only as delivered; replays, redeliveries and connector
restarts break that. The source database's own log position does not lie:

* PostgreSQL: ``(last commit LSN, LSN)`` from ``source.sequence`` → ``__last_commit_lsn``, ``__lsn``. Debezium
  streams whole transactions in commit order; ``sequence[0]`` is the LSN of the last commit before the event's
  transaction, so it orders transactions by commit, and ``source.lsn`` orders the changes inside one. (The LSN alone
  does not: a transaction that began before a snapshot and committed after it has changes with LSNs below the
  snapshot's.) Snapshot reads carry ``[null, S]``: they get ``(S - 1, S)``, before every transaction streamed after
  the snapshot. Events without ``sequence`` (Debezium before 1.4) use ``(LSN, LSN)``, i.e. LSN order.
  Tables created before this ordering keep ``__lsn`` alone (kind ``postgresql_lsn``).
* MySQL/MariaDB: ``(binlog file number, source.pos, source.row)`` → ``__binlog_file_seq``, ``__binlog_pos``,
  ``__binlog_row``. The file number is parsed from the name (``mysql-bin.000010`` → 10), so a rotation
  (``.000009`` → ``.000010`` with ``pos`` reset) still orders correctly.
* Anything else: configure ``ordering: [source.some_field, ...]`` (integers or integer strings) → ``__ord_<path>``.

All ordering columns are BIGINT and compare lexicographically as a tuple; the tuple is stored in the target table
(and tombstones) so later batches can compare against it. Ties between equal positions are broken by Kafka
partition/offset (see ``cdc.merge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from cdc.errors import OrderingError

from cdc.layout import EPOCH, MYSQL_ORDERING as MYSQL, POSTGRES_COMMIT_ORDERING, POSTGRES_ORDERING as POSTGRES, \
    explicit_ordering_column

_AUTO = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql"}
_SEQUENCE = re.compile(r'^\s*\[\s*(?:null|"(\d+)")\s*,')
_FILE_SEQ = re.compile(r"(\d+)\s*$")


@dataclass(frozen=True)
class Ordering:
    """How to get the ordering tuple of an event of one table."""

    kind: str  # postgresql | postgresql_lsn | mysql | explicit
    paths: tuple[str, ...] = ()  # explicit only: field paths like "source.lsn"
    # tables[].ordering_epoch history once used (None: no epoch column): (epoch, ((partition, first offset), ...)),
    # ascending. A record's epoch is the newest one whose first offset in its partition it has reached.
    epochs: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        return ((EPOCH,) if self.epochs is not None else ()) + self.source_columns

    @property
    def epoch(self) -> int | None:
        """The newest epoch (None: no epoch column)."""
        return None if self.epochs is None else max((e for e, _ in self.epochs), default=0)

    def epoch_of(self, partition: int, offset: int) -> int:
        """The epoch of the record at ``offset`` of ``partition`` (a partition created later: its first epoch)."""
        out = 0
        for epoch, starts in self.epochs or ():
            start = dict(starts).get(partition, 0)
            if offset >= start:
                out = epoch
        return out

    def with_epoch(self, epoch: int, starts: dict[int, int]) -> "Ordering":
        """This ordering with ``epoch`` starting at ``starts`` (partition → first offset), unless already known."""
        known = self.epochs or ()
        if epoch <= (self.epoch or 0) and (epoch == 0 or any(e == epoch for e, _ in known)):
            return replace(self, epochs=known)
        return replace(self, epochs=(*known, (epoch, tuple(sorted(starts.items())))))

    def position(self, source: dict[str, Any], envelope_ts_ms: int | None, op: str | None, partition: int,
                 offset: int) -> tuple[int, ...]:
        """The ordering tuple of the record at ``partition``/``offset`` (epoch first, when used)."""
        base = self.values(source, envelope_ts_ms, op)
        return base if self.epochs is None else (self.epoch_of(partition, offset), *base)

    @property
    def source_columns(self) -> tuple[str, ...]:
        if self.kind == "postgresql":
            return POSTGRES_COMMIT_ORDERING
        if self.kind == "postgresql_lsn":
            return POSTGRES
        if self.kind == "mysql":
            return MYSQL
        return tuple(explicit_ordering_column(p) for p in self.paths)

    def values(self, source: dict[str, Any], envelope_ts_ms: int | None = None, op: str | None = None
               ) -> tuple[int, ...]:
        """The source position of one event (without the epoch); ``OrderingError`` when a position is missing or
        not an integer."""
        if self.kind == "postgresql":
            lsn = _int(source.get("lsn"), "source.lsn")
            return (last_commit_lsn(source.get("sequence"), lsn, op), lsn)
        if self.kind == "postgresql_lsn":
            return (_int(source.get("lsn"), "source.lsn"),)
        if self.kind == "mysql":
            return (binlog_file_seq(source.get("file")), _int(source.get("pos"), "source.pos"),
                    _int(source.get("row", 0) or 0, "source.row"))
        out = []
        for path in self.paths:
            head, _, rest = path.partition(".")
            if head == "source":
                out.append(_int(_dig(source, rest), path))
            elif path == "ts_ms":
                out.append(_int(envelope_ts_ms, path))
            else:
                raise OrderingError(f"ordering path {path!r}: only source.* fields and ts_ms are supported")
        return tuple(out)


def resolve(setting: str | Sequence[str], connector: str | None, table: str) -> Ordering:
    """``ordering: auto`` → by ``source.connector``; a list of paths → explicit."""
    if setting != "auto":
        return Ordering("explicit", tuple(setting))
    kind = _AUTO.get((connector or "").lower())
    if kind is None:
        raise OrderingError(
            f"table {table}: cannot order events of connector {connector!r} automatically; set "
            "'ordering: [source.<field>, ...]' for this table in the pipeline YAML (integer log positions)")
    return Ordering(kind)


def from_columns(columns: Sequence[str]) -> Ordering | None:
    """Recognise the ordering of an existing target table from its column names (epoch 0 if it has the epoch column;
    the caller sets the configured epoch)."""
    names = set(columns)
    base = _base_from_columns(names)
    if base is not None and EPOCH in names:
        return Ordering(base.kind, base.paths, ())
    return base


def _base_from_columns(names: set[str]) -> Ordering | None:
    if set(MYSQL) <= names:
        return Ordering("mysql")
    if set(POSTGRES_COMMIT_ORDERING) <= names:
        return Ordering("postgresql")
    if set(POSTGRES) <= names:
        return Ordering("postgresql_lsn")
    return None


def last_commit_lsn(sequence: Any, lsn: int, op: str | None) -> int:
    """``source.sequence`` (a JSON text ``["<last commit LSN>", "<LSN>"]``) → the commit part of the position.

    No commit LSN (snapshot reads: ``[null, S]``; Debezium before 1.4: no field): ``lsn - 1`` for a snapshot read
    (before anything streamed after the snapshot), else ``lsn``."""
    if isinstance(sequence, str) and (m := _SEQUENCE.match(sequence)) and m.group(1) is not None:
        return int(m.group(1))
    return lsn - 1 if op == "r" else lsn


def binlog_file_seq(name: Any) -> int:
    """``mysql-bin.000010`` → 10."""
    if not isinstance(name, str) or not (m := _FILE_SEQ.search(name)):
        raise OrderingError(f"source.file {name!r} is not a binlog file name ending in a number")
    return int(m.group(1))


def _dig(d: dict[str, Any], path: str) -> Any:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or v is None:
        raise OrderingError(f"event has no {what}: cannot order it against other changes")
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    raise OrderingError(f"{what} = {v!r} is not an integer log position")
