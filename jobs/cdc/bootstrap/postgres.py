"""The source side of a JDBC bootstrap (PostgreSQL): one consistent snapshot, its log position, the table's columns,
primary key and split range, all read inside that snapshot.

``PostgresSnapshot`` opens a ``REPEATABLE READ`` transaction with psycopg, exports its snapshot
(``pg_export_snapshot()``) and reads ``pg_current_wal_lsn()`` and ``pg_current_snapshot()`` (which transactions it
sees: ``cdc.bootstrap.horizon``) in the same statement. Spark's JDBC readers join that
snapshot (``session_init``: ``SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '<id>'`` as
each reader's first statement; Spark's PostgreSQL dialect turns autocommit off when ``fetchsize`` > 0, so the
statements and the read run in one transaction). The exporting transaction must stay open until every reader has
started: use the object as a context manager around the whole read.

Credentials are passed to psycopg as separate arguments and never appear in messages.

Every source (this one; MySQL/MariaDB: ``cdc.bootstrap.mysql.MySQLTableLock``) answers what ``cdc.bootstrap`` asks:
``column_reads``, ``column_types``, ``integer_columns``, ``primary_key``, ``bounds``, ``jdbc_options``,
``wait_for_connector``, ``horizon``, ``position_info`` and ``ordering_kind``; ``open_source`` picks one by URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from cdc.bootstrap.horizon import Visibility, horizon_from_topic
from cdc.bootstrap.postgres_types import ColumnRead, column_read, lsn_to_int, quote_pg
from cdc.common.errors import CdcError, ConfigError, RetryableError, TerminalError
from cdc.config.bootstrap import BootstrapConfig

APPLICATION_NAME = "cdc-bootstrap"
DRIVER = "org.postgresql.Driver"
INTEGER_TYPES = ("smallint", "integer", "bigint")
CONNECT_TIMEOUT = "10"  # seconds (libpq connect_timeout; the JDBC driver's connectTimeout default), unless the URL says


def conninfo(jdbc_url: str, user: str = "", password: str = "") -> dict[str, Any]:
    """``jdbc:postgresql://host:port/db?k=v`` → psycopg connect keywords (pure)."""
    if not jdbc_url.startswith("jdbc:postgresql:"):
        raise ConfigError("bootstrap.jdbc_url: only jdbc:postgresql:// URLs are supported")
    parts = urlsplit(jdbc_url[len("jdbc:"):])
    out: dict[str, Any] = {"host": parts.hostname or "localhost", "port": parts.port or 5432,
                           "dbname": unquote(parts.path.lstrip("/")) or "postgres",
                           "application_name": APPLICATION_NAME}
    query = dict(parse_qsl(parts.query))
    for k in ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout"):
        if k in query:
            out[k] = query[k]
    out.setdefault("connect_timeout", CONNECT_TIMEOUT)
    user = user or query.get("user", "")
    password = password or query.get("password", "")
    if user:
        out["user"] = user
    if password:
        out["password"] = password
    return out


def split_table(name: str) -> tuple[str, str]:
    """``schema.table`` / ``table`` (optionally double-quoted parts) → (schema, table) with quotes removed."""
    parts = re.findall(r'"((?:[^"]|"")+)"|([^.]+)', name)
    names = [q.replace('""', '"') if q else p for q, p in parts]
    return (names[0], names[1]) if len(names) == 2 else ("public", names[0])


def qualified(name: str) -> str:
    schema, table = split_table(name)
    return f"{quote_pg(schema)}.{quote_pg(table)}"


def session_init(snapshot_id: str) -> str:
    """The first statements of every Spark JDBC reader: join the exported snapshot."""
    if not re.fullmatch(r"[0-9A-Fa-f-]+", snapshot_id):
        raise ValueError(f"not a snapshot id: {snapshot_id!r}")
    return f"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '{snapshot_id}'"


@dataclass(frozen=True)
class SourceColumn:
    name: str
    pg_type: str  # format_type(atttypid, atttypmod)
    kind: str  # pg_type.typtype (b: base, e: enum, d: domain, ...)
    not_null: bool


class PostgresSnapshot:
    """An open, exported REPEATABLE READ snapshot of the source database (a context manager)."""

    ordering_kind = "postgresql"

    def __init__(self, cfg: BootstrapConfig, target: str):
        self.cfg, self.target = cfg, target
        self.conn: Any = None
        self.snapshot_id = ""
        self.lsn = 0  # pg_current_wal_lsn() in the snapshot, as Debezium's source.lsn number
        self.visibility = ""  # pg_current_snapshot(): xmin:xmax:xip (cdc.bootstrap.horizon.Visibility)

    def where(self) -> str:
        return f"bootstrap of {self.target} from {self.cfg.source_table}"

    def connect(self, **kwargs: Any) -> Any:
        """A psycopg connection to the source, or the error a failed one means (``connect_error``)."""
        import psycopg

        try:
            return psycopg.connect(**conninfo(self.cfg.jdbc_url, self.cfg.user, self.cfg.password), **kwargs)
        except psycopg.OperationalError as exc:
            raise connect_error(self.where(), exc) from None

    def __enter__(self) -> "PostgresSnapshot":
        self.conn = self.connect(autocommit=True)
        try:
            self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = self.conn.execute("SELECT pg_export_snapshot(), pg_current_wal_lsn()::text, "
                                    "pg_current_snapshot()::text").fetchone()
        except Exception as exc:
            self.close()
            raise TerminalError(f"{self.where()}: cannot export a snapshot ({_first_line(exc)}); the source must be "
                                "a PostgreSQL primary (not a standby)") from None
        self.snapshot_id, self.lsn, self.visibility = str(row[0]), lsn_to_int(str(row[1])), str(row[2])
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()  # ends the exporting transaction (read only: nothing to commit)
            finally:
                self.conn = None

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(sql, params).fetchall())

    def columns(self) -> list[SourceColumn]:
        rows = self.query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typtype, a.attnotnull "
            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (qualified(self.cfg.source_table),)) if self.exists() else []
        if not rows:
            raise TerminalError(f"{self.where()}: the source table does not exist or has no columns; fix "
                                "bootstrap.source_table (schema.table)")
        return [SourceColumn(str(n), str(t), str(k), bool(nn)) for n, t, k, nn in rows]

    def exists(self) -> bool:
        return bool(self.query("SELECT to_regclass(%s) IS NOT NULL", (qualified(self.cfg.source_table),))[0][0])

    def primary_key(self) -> list[str]:
        rows = self.query(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary "
            "ORDER BY array_position(i.indkey::int2[], a.attnum)", (qualified(self.cfg.source_table),))
        return [str(r[0]) for r in rows]

    def wait_for_connector(self, sleep: float = 1.0) -> float:
        """Until the connector's replication slot (``connector_slot``) has confirmed the snapshot's WAL position,
        i.e. every change the snapshot holds is in Kafka; the seconds waited (0 without a slot configured: a WARNING
        line on stderr says what that risks)."""
        import sys
        import time

        slot = self.cfg.connector_slot
        if not slot:
            print(f"WARNING {self.where()}: no bootstrap.connector_slot; if the Debezium connector lags behind the "
                  "snapshot, readers may see older versions of some rows until ingest catches up (set it to the "
                  "connector's slot.name)", file=sys.stderr, flush=True)
            return 0.0
        started = time.monotonic()
        with self.connect(autocommit=True) as conn:
            while True:
                row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                                   (slot,)).fetchone()
                if row is None:
                    raise ConfigError(f"{self.where()}: bootstrap.connector_slot {slot!r} is not a replication slot of "
                                      "the source database; set it to the Debezium connector's slot.name")
                if row[0] is not None and lsn_to_int(str(row[0])) >= self.lsn:
                    return time.monotonic() - started
                if time.monotonic() - started > self.cfg.connector_wait_seconds:
                    raise RetryableError(
                        f"{self.where()}: the connector's slot {slot} has confirmed {row[0]}, not yet the snapshot's "
                        f"WAL position; is the connector running (heartbeat.interval.ms lets an idle one confirm)? "
                        "Retry later")
                time.sleep(sleep)

    def column_reads(self) -> list[ColumnRead]:
        return [column_read(c.name, c.pg_type, c.kind, self.cfg.source_table, self.cfg.decimal_handling_mode)
                for c in self.columns()]

    def column_types(self) -> dict[str, str]:
        return {c.name: c.pg_type for c in self.columns()}

    def integer_columns(self) -> set[str]:
        return {c.name for c in self.columns() if c.pg_type in INTEGER_TYPES}

    def jdbc_options(self, selects: list[str]) -> dict[str, str]:
        return {"url": self.cfg.jdbc_url, "driver": DRIVER,
                "dbtable": f"(SELECT {', '.join(selects)} FROM {qualified(self.cfg.source_table)}) AS cdc_bootstrap",
                "sessionInitStatement": session_init(self.snapshot_id)}

    def horizon(self, pipeline: Any, table: Any, columns: Any, timeout: float) -> tuple[tuple[int, ...] | None, int]:
        """The newest position among the topic's changes this snapshot saw (``cdc.bootstrap.horizon``)."""

        return horizon_from_topic(pipeline, table, columns, Visibility.parse(self.visibility), timeout)

    def position_info(self) -> dict[str, Any]:
        return {"lsn": format_lsn(self.lsn), "lsn_number": int(self.lsn)}

    def bounds(self, column: str) -> tuple[int | None, int | None]:
        row = self.query(f"SELECT min({quote_pg(column)})::bigint, max({quote_pg(column)})::bigint "
                         f"FROM {qualified(self.cfg.source_table)}")[0]
        return row[0], row[1]


# Connection failures that say "later", though the server answered (FATAL); every other FATAL is a refusal
_TRANSIENT = ("starting up", "shutting down", "in recovery mode", "too many clients", "connection slots",
              "terminating connection")


def connect_error(where: str, exc: BaseException) -> CdcError:
    """What a failed connection to the source means: the server refused it (a FATAL answer: wrong password or role,
    no such database, no pg_hba.conf entry, no CONNECT privilege; libpq's "no password supplied"): a person must act,
    ``TerminalError`` (exit 2). Unreachable (refused, timed out, unknown host), starting up, shutting down or out of
    connection slots: ``RetryableError`` (exit 75). The message is libpq's first line (never the password)."""
    text = _first_line(exc)
    low = text.lower()
    refused = ("fatal:" in low and not any(m in low for m in _TRANSIENT)) or "password" in low \
        or "authentication" in low
    if refused:
        return TerminalError(f"{where}: the source database refused the connection ({text}); fix bootstrap.jdbc_url "
                             "(database), bootstrap.user / bootstrap.password or the server's pg_hba.conf")
    return RetryableError(f"{where}: cannot connect to the source database ({text}); retry later")


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
