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
* SQL Server: ``(commit_lsn, change_lsn, event_serial_no)`` → ``SQLSERVER_ORDERING``. An LSN is the hex text
  ``VVVVVVVV:BBBBBBBB:SSSS`` (VLF sequence number, log block offset, slot: 80 bits), compared as numbers; each LSN is
  stored as two columns ``(VLF, block << 16 | slot)``. Snapshot reads have ``commit_lsn`` = the snapshot LSN and no
  ``change_lsn``/``event_serial_no`` (→ 0): every change streamed after the snapshot commits later.
* Oracle: ``(commit_scn, scn)`` → ``ORACLE_ORDERING``; SCNs are digit strings that may exceed 63 bits, each stored as
  ``(SCN // 10**18, SCN % 10**18)``. Without ``commit_scn`` (snapshot reads; connectors that do not send it) the
  event's ``scn`` stands for its commit: ``(scn, scn)``.
* MongoDB: ``(source.ts_ms // 1000, source.ord)`` → ``MONGODB_ORDERING``: the oplog / change-stream cluster time
  (seconds, increment).
* Anything else: configure ``ordering: [source.some_field, ...]`` (integers, integer strings, or SQL Server LSN
  strings packed into one BIGINT as ``VLF << 48 | block << 16 | slot``, which needs VLF < 2**15) → ``__ord_<path>``.

All ordering columns are BIGINT and compare lexicographically as a tuple; the tuple is stored in the target table
(and tombstones) so later batches can compare against it. Ties between equal positions are broken by Kafka
partition/offset (see ``cdc.merge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from cdc.common.errors import CdcError, OrderingError
from cdc.schema.columns import EPOCH, POSTGRES_COMMIT_ORDERING, explicit_ordering_column
from cdc.schema.columns import MONGODB_ORDERING as MONGODB
from cdc.schema.columns import MYSQL_ORDERING as MYSQL
from cdc.schema.columns import ORACLE_ORDERING as ORACLE
from cdc.schema.columns import POSTGRES_ORDERING as POSTGRES
from cdc.schema.columns import SQLSERVER_ORDERING as SQLSERVER

Epochs = tuple[tuple[int, tuple[tuple[int, int], ...]], ...]  # (epoch, ((partition, first offset), ...)), oldest first


def epochs_of(raw: Any) -> Epochs | None:
    """Epoch history from its JSON form ``[[epoch, [[partition, offset], ...]], ...]`` (None stays None); the
    inverse of ``epochs_json``."""
    if raw is None:
        return None
    return tuple((int(e), tuple((int(p), int(o)) for p, o in starts)) for e, starts in raw)


def epochs_json(epochs: Epochs | None) -> list[list[Any]] | None:
    """The JSON form of an epoch history (the one codec: the staging and target tables' properties keep it)."""
    return None if epochs is None else [[e, [list(s) for s in starts]] for e, starts in epochs]


_AUTO = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql", "sqlserver": "sqlserver",
         "oracle": "oracle", "mongodb": "mongodb"}
_KIND_COLUMNS = {"postgresql": POSTGRES_COMMIT_ORDERING, "postgresql_lsn": POSTGRES, "mysql": MYSQL,
                 "sqlserver": SQLSERVER, "oracle": ORACLE, "mongodb": MONGODB}
# kinds the vectorised Avro path does not compute (cdc.decode.avro_group hands their records to the per-record path);
# SQL Server and Oracle positions are computed there row by row with Ordering.values (cdc.decode.avro_positions)
PER_RECORD_KINDS = frozenset({"mongodb"})
# kinds whose initial / blocking snapshot reads all carry one position (the snapshot's LSN, binlog coordinates, SCN),
# so a snapshot's end can stand for a truncate just before it (cdc.merge.apply.snapshot_barrier); MongoDB's reads
# carry their own times, an explicit ordering's meaning is unknown
SNAPSHOT_AT_ONE_POSITION = frozenset({"postgresql", "postgresql_lsn", "mysql", "sqlserver", "oracle"})
_SQLSERVER_LSN = re.compile(r"^\s*([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{4})\s*$")
_SCN_SPLIT = 10**18
_SEQUENCE = re.compile(r'^\s*\[\s*(?:null|"(\d+)")\s*,')
_SEQUENCE_LSN = re.compile(r',\s*"(\d+)"\s*\]\s*$')  # source.sequence's second element: the event's LSN
_FILE_SEQ = re.compile(r"(\d+)\s*$")


@dataclass(frozen=True)
class Ordering:
    """How to get the ordering tuple of an event of one table."""

    kind: str  # postgresql | postgresql_lsn | mysql | sqlserver | oracle | mongodb | explicit
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
        if self.kind in _KIND_COLUMNS:
            return _KIND_COLUMNS[self.kind]
        return tuple(explicit_ordering_column(p) for p in self.paths)

    def values(self, source: dict[str, Any], envelope_ts_ms: int | None = None, op: str | None = None
               ) -> tuple[int, ...]:
        """The source position of one event (without the epoch); ``OrderingError`` when a position is missing or
        not an integer."""
        if self.kind == "postgresql":
            lsn = _int(event_lsn(source, op), "source.lsn")
            return (last_commit_lsn(source.get("sequence"), lsn, op), lsn)
        if self.kind == "postgresql_lsn":
            return (_int(event_lsn(source, op), "source.lsn"),)
        if self.kind == "mysql":
            return (binlog_file_seq(source.get("file")), _int(source.get("pos"), "source.pos"),
                    _int(source.get("row", 0) or 0, "source.row"))
        if self.kind == "sqlserver":
            return (*sqlserver_lsn(source.get("commit_lsn"), "source.commit_lsn"),
                    *sqlserver_lsn(source.get("change_lsn"), "source.change_lsn", missing_ok=True),
                    _int(source.get("event_serial_no") or 0, "source.event_serial_no"))
        if self.kind == "oracle":
            scn = _scn(source.get("scn"), "source.scn")
            commit = source.get("commit_scn")
            return (*(scn if commit is None or commit == "" else _scn(commit, "source.commit_scn")), *scn)
        if self.kind == "mongodb":
            ts = _int(source.get("ts_ms"), "source.ts_ms")
            return (ts // 1000, _int(source.get("ord") or 0, "source.ord"))
        out = []
        for path in self.paths:
            head, _, rest = path.partition(".")
            if head == "source":
                out.append(_explicit(_dig(source, rest), path))
            elif path == "ts_ms":
                out.append(_explicit(envelope_ts_ms, path))
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
            "'ordering: [source.<field>, ...]' for this table in the pipeline YAML (integer log positions); "
            f"connectors ordered automatically: {', '.join(sorted(_AUTO))}")
    return Ordering(kind)


def sampled_ordering(setting: str | Sequence[str], table: str, decoder: Any,
                     samples: Sequence[tuple[bytes | None, bytes | None]], target_columns: Sequence[str]) -> Ordering:
    """A batch's source ordering: ``tables[].ordering`` when set, else the one the target's columns hold (an earlier
    batch chose it), else the connector's of the newest sampled change event (``decoder``: the table's)."""
    if setting != "auto":
        return resolve(setting, None, table)
    known = from_columns(target_columns)
    if known:
        return known
    connector = None
    for k, v in reversed(samples):
        try:
            ev = decoder.decode(k, v)
        except CdcError:
            continue
        if ev.kind == "change":
            connector = ev.source.get("connector")
            break
    return resolve("auto", connector, table)


def from_columns(columns: Sequence[str]) -> Ordering | None:
    """Recognise the ordering of an existing target table from its column names (epoch 0 if it has the epoch column;
    the caller sets the configured epoch)."""
    names = set(columns)
    base = _base_from_columns(names)
    if base is not None and EPOCH in names:
        return Ordering(base.kind, base.paths, ())
    return base


def _base_from_columns(names: set[str]) -> Ordering | None:
    for kind in ("sqlserver", "oracle", "mongodb"):
        if set(_KIND_COLUMNS[kind]) <= names:
            return Ordering(kind)
    if set(MYSQL) <= names:
        return Ordering("mysql")
    if set(POSTGRES_COMMIT_ORDERING) <= names:
        return Ordering("postgresql")
    if set(POSTGRES) <= names:
        return Ordering("postgresql_lsn")
    return None


def event_lsn(source: dict[str, Any], op: str | None) -> Any:
    """``source.lsn``; for a read without one (an incremental snapshot's chunk: ``lsn`` null, ``sequence`` =
    ``["X","X"]`` with X the stream position the chunk was emitted at) the LSN ``sequence`` gives. The chunk's rows are
    as of that window: changes streamed before it are older, after it newer, and a key changed inside it gets no
    read (Debezium drops it from the chunk)."""
    lsn = source.get("lsn")
    if lsn is None and op == "r" and isinstance(seq := source.get("sequence"), str) and (m := _SEQUENCE_LSN.search(seq)):
        return int(m.group(1))
    return lsn


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


def sqlserver_lsn(v: Any, what: str, missing_ok: bool = False) -> tuple[int, int]:
    """``0000002d:00000a40:0003`` → ``(0x2d, 0xa40 << 16 | 3)``: two BIGINTs that compare like the 80-bit LSN.
    ``missing_ok``: a missing value is ``(0, 0)`` (before every LSN)."""
    if v is None and missing_ok:
        return (0, 0)
    if not isinstance(v, str) or not (m := _SQLSERVER_LSN.match(v)):
        if v is None:
            raise OrderingError(f"event has no {what}: cannot order it against other changes")
        raise OrderingError(f"{what} = {v!r} is not a SQL Server LSN (hex 'VVVVVVVV:BBBBBBBB:SSSS')")
    vlf, block, slot = (int(g, 16) for g in m.groups())
    return (vlf, block << 16 | slot)


def _scn(v: Any, what: str) -> tuple[int, int]:
    """An Oracle SCN (digit string or integer, possibly wider than 63 bits) → ``(scn // 10**18, scn % 10**18)``."""
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    elif isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        pass
    else:
        _int(v, what)  # raises: missing or not an integer
        raise OrderingError(f"{what} = {v!r} is not an SCN (a non-negative integer)")
    return divmod(v, _SCN_SPLIT)


def _explicit(v: Any, what: str) -> int:
    """An explicit ordering path's value: an integer, an integer string, or a SQL Server LSN packed into one BIGINT
    (``VLF << 48 | block << 16 | slot``; exact while the VLF sequence number is below 2**15)."""
    if isinstance(v, str) and _SQLSERVER_LSN.match(v):
        vlf, pos = sqlserver_lsn(v, what)
        if vlf >= 1 << 15:
            raise OrderingError(
                f"{what} = {v!r}: the SQL Server LSN does not fit one BIGINT ordering column (VLF sequence number "
                f"{vlf} >= 32768); use 'ordering: auto' (two columns per LSN) for this table")
        return vlf << 48 | pos
    out = _int(v, what)
    if not -(1 << 63) <= out < 1 << 63:
        raise OrderingError(f"{what} = {v!r} does not fit a BIGINT ordering column")
    return out


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