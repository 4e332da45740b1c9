"""The source's log as the generator advances it: positions and Debezium's ``source`` block.

* PostgreSQL: the WAL. ``lsn`` strictly increases per change (snapshot reads share the snapshot LSN); a commit
  moves ``last_commit_lsn`` (``source.sequence`` = [last commit LSN, LSN]).
* MySQL: the binlog of one server (``server_id``). Positions are (binlog file number, pos, row); a transaction is
  GTID + BEGIN, row events (a multi-row statement shares ``pos`` with increasing ``row``), XID; files rotate after
  ``binlog_max_bytes`` (pos resets to a small number), so ``pos`` alone is not ordered. Snapshot reads carry
  ``server_id`` 0 and no thread.

Failovers move the log back: :meth:`SourceLog.failover` far back (``RESET MASTER``, a new PostgreSQL cluster),
:meth:`SourceLog.failover_server` a little (MySQL: a replica's own binlog, slightly behind, under its server id).
"""

from __future__ import annotations

import random
from typing import Any, Literal

from .model import DEBEZIUM_VERSION, Connector, TableSchema

MYSQL_SERVER_ID = 223344
MYSQL_FIRST_POS = 157  # first event after the format-description + previous-gtids events of a fresh binlog
MYSQL_TX_HEAD = 80  # GTID/anonymous + BEGIN query events before a transaction's first row event
Behind = Literal["file", "pos"]


class SourceLog:
    """Position state of one source (PostgreSQL WAL or one MySQL server's binlog). Draws from ``rng`` in the order
    the generator always did (LSN start, then the MySQL thread id), so seeds reproduce the same streams."""

    def __init__(self, connector: Connector, rng: random.Random, first_lsn: int, binlog_first_file: int,
                 binlog_max_bytes: int, server_id: int = MYSQL_SERVER_ID) -> None:
        self.connector, self.rng, self.binlog_max_bytes = connector, rng, binlog_max_bytes
        # PostgreSQL
        self.lsn = first_lsn + rng.randrange(1_000_000)
        self.last_commit_lsn: int | None = None
        # MySQL
        self.server_id = server_id
        self.file_no = binlog_first_file
        self.pos = MYSQL_FIRST_POS
        self.row_event: tuple[int, int, str] | None = None  # (pos, rows so far, op) of the open row event
        self.last: tuple[int, int, int] | None = None  # the newest streamed (file, pos, row)
        self.thread = 10 + rng.randrange(50)

    def begin(self) -> None:
        """A transaction starts."""
        if self.connector == "mysql":
            self.pos += MYSQL_TX_HEAD

    def commit(self) -> None:
        """A transaction ends (PostgreSQL: commit record; MySQL: XID event, then maybe rotate)."""
        if self.connector == "postgresql":
            self.lsn += 48
            self.last_commit_lsn = self.lsn
            return
        self.close_row_event()
        self.pos += 31  # XID event
        if self.pos > self.binlog_max_bytes:
            self.file_no += 1
            self.pos = MYSQL_FIRST_POS

    def close_row_event(self) -> None:
        if self.row_event is not None:
            self.pos += 60 + 40 * self.row_event[1]
            self.row_event = None

    def next_position(self, op: str, shared_row_event: bool) -> tuple[int, ...]:
        """The position of the next streamed change (``shared_row_event``: it may be another row of the open
        statement when that has the same op)."""
        if self.connector == "postgresql":
            self.lsn += self.rng.randint(40, 400)
            return (self.lsn,)
        ev = self.row_event
        if ev is not None and ev[2] == op and shared_row_event and self.rng.random() < 0.5:
            self.row_event = (ev[0], ev[1] + 1, op)  # another row of the same multi-row statement
        else:
            self.close_row_event()
            self.row_event = (self.pos, 1, op)
        pos, rows, _ = self.row_event
        self.last = (self.file_no, pos, rows - 1)
        return self.last

    def snapshot_position(self) -> tuple[int, ...]:
        """The position every read of a snapshot shares."""
        if self.connector == "postgresql":
            self.lsn += 8
            return (self.lsn,)
        self.close_row_event()
        return (self.file_no, self.pos, 0)

    def source(self, t: TableSchema, position: tuple[int, ...], snapshot: str, ts_ms: int,
               tx_id: int) -> dict[str, Any]:
        """Debezium 2.7's ``source`` block of a change at ``position``."""
        common = {
            "version": DEBEZIUM_VERSION,
            "connector": t.connector,
            "name": t.server,
            "ts_ms": ts_ms,
            "snapshot": snapshot,
            "db": t.database,
        }
        if t.connector == "postgresql":
            last = "null" if self.last_commit_lsn is None else f'"{self.last_commit_lsn}"'
            return {
                **common,
                "sequence": f'[{last},"{position[0]}"]',
                "ts_us": ts_ms * 1000,
                "ts_ns": ts_ms * 1_000_000,
                "schema": t.schema,
                "table": t.name,
                "txId": tx_id,
                "lsn": position[0],
                "xmin": None,
            }
        file_no, pos, row = position
        streaming = snapshot == "false"
        return {
            **common,
            "sequence": None,
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "table": t.name,
            "server_id": self.server_id if streaming else 0,
            "gtid": None,
            "file": f"mysql-bin.{file_no:06d}",
            "pos": pos,
            "row": row,
            "thread": self.thread if streaming else None,
            "query": None,
        }

    def failover(self) -> None:
        """The log starts again far lower (MySQL ``RESET MASTER`` / a failover, PostgreSQL moved to a new cluster)."""
        self.close_row_event()
        self.file_no, self.pos = 1, MYSQL_FIRST_POS
        self.lsn, self.last_commit_lsn = 30_000_000 + self.rng.randrange(1_000_000), None

    def failover_server(self, new_server_id: int, behind: Behind) -> tuple[int, int]:
        """MySQL: the connector now reads another server's binlog, slightly behind the newest streamed change:
        ``"file"`` one binlog file back (any pos in it), ``"pos"`` the same file at a lower pos (at least half of
        it). Later changes carry ``new_server_id`` and go upward from there. Call it between transactions. Returns
        (file, pos) of the next change."""
        if self.connector != "mysql":
            raise ValueError("failover_server: MySQL only (PostgreSQL events carry no server id)")
        if behind not in ("file", "pos"):
            raise ValueError(f"behind must be 'file' or 'pos', not {behind!r}")
        if new_server_id in (0, self.server_id):
            raise ValueError(f"server_id {new_server_id}: need a server other than {self.server_id} (0 = snapshot)")
        self.close_row_event()
        file_no, pos = self.last[:2] if self.last else (self.file_no, self.pos)
        lowest = MYSQL_FIRST_POS + MYSQL_TX_HEAD  # a transaction's first row event in a fresh binlog
        if behind == "file":
            if file_no <= 1:
                raise ValueError("failover_server(behind='file'): no binlog file before .000001")
            file_no, target = file_no - 1, self.rng.randint(lowest, max(lowest, self.binlog_max_bytes))
        else:
            if pos <= lowest:
                raise ValueError(f"failover_server(behind='pos'): no position below {pos} in this binlog file")
            target = self.rng.randint(max(lowest, pos // 2), pos - 1)
        self.server_id, self.file_no, self.pos = new_server_id, file_no, target - MYSQL_TX_HEAD
        self.last = None
        return file_no, target
