"""The source side of a JDBC bootstrap for MySQL / MariaDB (``jdbc:mysql://`` and ``jdbc:mariadb://`` URLs): one
consistent read of the table whose binlog position is known, and the column types (pure parts + one class).

**The read.** Spark's JDBC partitions each open their own connection, and MySQL cannot share a snapshot between
connections, so ``MySQLTableLock`` holds ``LOCK TABLES <db>.<table> READ`` on one driver-side connection for the
whole read: it waits for open transactions that wrote to the table to commit (at most ``lock_wait_seconds``, then a
retryable error), reads ``SHOW MASTER STATUS`` (file ``F``, position ``P``) under the lock, and keeps the lock while
Spark's parallel readers (their own connections: a READ lock lets other sessions read) load the table; the lock is
released when the staged copy is written. **Writers to that one table wait during the read** (other tables are not
affected; readers never wait). Budget for it: the read takes about as long as a ``SELECT *`` of the table at
``num_partitions`` parallel streams. The connection is the JVM's (MariaDB Connector/J through the Spark driver,
the same driver and URL the readers use), so no Python MySQL client is needed.

**The position.** Every change to the table committed before the lock has all its binlog events before ``P``
(MySQL writes a transaction's events at commit, and the lock waited for those commits); every later change starts
at or after ``P``. In the job's MySQL ordering ``(binlog file number, pos, row)`` (``cdc.positions.ordering``) the horizon is
``(file number of F, P, -1)``: Debezium's ``row`` is never negative, so a change is at or below the horizon exactly
when its ``(file, pos)`` is before ``(F, P)``. Bootstrapped rows carry the horizon as their position. A binlog
rotation after the lock starts a higher file number: still above. No Kafka scan is needed (unlike PostgreSQL,
``cdc.bootstrap.horizon``): the position is the server's own.

**Not built:** ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` (no lock; MariaDB's ``binlog_snapshot_file`` /
``binlog_snapshot_position``) only works when one connection reads everything, which Spark's JDBC source cannot do.

Types: ``column_read`` (the table below; Debezium MySQL connector defaults: ``decimal.handling.mode=precise``,
``time.precision.mode=adaptive_time_microseconds``, ``bigint.unsigned.handling.mode=long``,
``binary.handling.mode=bytes``; no ``TinyIntOneToBooleanConverter``). ``bootstrap.decimal_handling_mode`` double or
string: ``DECIMAL``/``NUMERIC`` as ``double`` (the decimal text parsed by Java, as ``BigDecimal.doubleValue``
rounds) or as ``BigDecimal.toPlainString`` of the value at the column's scale (``cdc.bootstrap.postgres_types``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

from cdc.bootstrap.postgres_types import DECIMAL_AS, ColumnRead, java_decimal_text, quote_spark, spark_sql, unsupported
from cdc.common.errors import ConfigError, RetryableError, TerminalError
from cdc.config.bootstrap import BootstrapConfig
from cdc.positions.ordering import binlog_file_seq

DRIVER = "org.mariadb.jdbc.Driver"  # MariaDB Connector/J 2.x: accepts jdbc:mariadb: and jdbc:mysql: URLs
DIALECTS = ("mysql", "mariadb")
NO_ROW = -1  # the horizon's row: below every change at the same (file, pos)
_URL = re.compile(r"^jdbc:(?:mysql|mariadb):(?:[a-z]+:)?//[^/?]*(?:/([^?;]*))?")
_INTS = {"tinyint": pa.int32(), "smallint": pa.int32(), "mediumint": pa.int32(), "int": pa.int32(),
         "integer": pa.int32(), "bigint": pa.int64(), "year": pa.int32()}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_MAX_PRECISION = 38


# ---- URL and names (pure) ----------------------------------------------------------------------------------------
def is_mysql(jdbc_url: str) -> bool:
    return jdbc_url.startswith(("jdbc:mysql:", "jdbc:mariadb:"))


def url_database(jdbc_url: str) -> str:
    """``jdbc:mysql://h:3306/shop?x=y`` → ``shop`` ("" without one)."""
    m = _URL.match(jdbc_url)
    if not m:
        raise ConfigError("bootstrap.jdbc_url: expected jdbc:mysql://host[:port]/database or "
                          "jdbc:mariadb://host[:port]/database")
    return (m.group(1) or "").strip()


def spark_url(jdbc_url: str) -> str:
    """The URL Spark's readers get: ``jdbc:mariadb:`` becomes ``jdbc:mysql:`` so Spark picks its MySQL dialect
    (backtick quoting of the split column); MariaDB Connector/J 2.x serves both schemes."""
    return "jdbc:mysql:" + jdbc_url[len("jdbc:mariadb:"):] if jdbc_url.startswith("jdbc:mariadb:") else jdbc_url


def quote_my(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def split_table(name: str, default_db: str) -> tuple[str, str]:
    """``db.table`` / ``table`` (parts optionally in backticks or double quotes) → (db, table)."""
    parts = re.findall(r'`((?:[^`]|``)+)`|"((?:[^"]|"")+)"|([^.]+)', name.strip())
    names = [b.replace("``", "`") if b else q.replace('""', '"') if q else p for b, q, p in parts]
    return (names[0], names[1]) if len(names) == 2 else (default_db, names[0])


def horizon_of(file: str, pos: int) -> tuple[int, int, int]:
    """``SHOW MASTER STATUS`` (``mysql-bin.000003``, 1234) → the horizon ``(3, 1234, -1)`` (module docstring)."""

    return (binlog_file_seq(file), int(pos), NO_ROW)


# ---- types (pure) ------------------------------------------------------------------------------------------------
def _mods(column_type: str) -> list[int]:
    m = re.search(r"\(([\d,\s]+)\)", column_type)
    return [int(x) for x in m.group(1).split(",")] if m else []


def arrow_type_of(data_type: str, column_type: str, table: str = "", column: str = "",
                  decimal_mode: str = "precise") -> pa.DataType:
    """The Arrow type the Debezium MySQL path gives a column (``information_schema.COLUMNS``: ``DATA_TYPE``,
    ``COLUMN_TYPE``) under the connector's ``decimal.handling.mode``."""
    dt, ct = data_type.lower(), column_type.lower()
    if dt in _INTS:
        return pa.int64() if dt == "int" and "unsigned" in ct else _INTS[dt]  # int unsigned: Connect int64
    if dt == "bit":
        if _mods(ct) in ([], [1]):
            return pa.bool_()
        raise unsupported(table, column, column_type, "BIT(n > 1) arrives as io.debezium.data.Bits (little-endian "
                                                      "bytes), which the JDBC read does not reproduce")
    if dt == "float":
        return pa.float64() if len(_mods(ct)) == 2 else pa.float32()  # FLOAT(M,D): Debezium FLOAT64
    if dt in ("double", "real", "double precision"):
        return pa.float64()
    if dt in ("decimal", "numeric") and decimal_mode in DECIMAL_AS:
        return DECIMAL_AS[decimal_mode]
    if dt in ("decimal", "numeric"):
        p, s = (_mods(ct) + [10, 0])[:2] if _mods(ct) else (10, 0)
        if p > _MAX_PRECISION:
            raise unsupported(table, column, column_type, f"precision above {_MAX_PRECISION} does not fit Iceberg")
        return pa.decimal128(p, s)
    if dt in _TEXT:
        return pa.string()
    if dt in _BYTES:
        return pa.binary()
    if dt == "date":
        return pa.date32()
    if dt == "time":
        return pa.int64()
    if dt == "datetime":
        return pa.timestamp("us")
    if dt == "timestamp":
        return pa.timestamp("us", tz="UTC")
    raise unsupported(table, column, column_type)


def column_read(name: str, data_type: str, column_type: str, table: str = "", decimal_mode: str = "precise"
                ) -> ColumnRead:
    """How one MySQL column is read: a MySQL select expression whose JDBC type Spark maps exactly, and a Spark
    conversion to the Debezium path's type; no value passes through a time zone."""
    target = arrow_type_of(data_type, column_type, table, name, decimal_mode)
    col, out, dt = quote_my(name), quote_spark(name), data_type.lower()
    cast = f"CAST({out} AS {spark_sql(target)}) AS {out}"
    if dt in _INTS or dt == "bit":  # tinyint(1)/boolean included: Debezium sends INT16 (no converter), BIT(1) bool
        return ColumnRead(name, target, f"CAST({col} AS SIGNED) AS {col}", cast)
    if dt in ("decimal", "numeric") and decimal_mode in DECIMAL_AS:  # the exact text, then as Debezium's mode
        convert = cast if decimal_mode == "double" else f"{java_decimal_text(out)} AS {out}"
        return ColumnRead(name, target, f"CAST({col} AS CHAR) AS {col}", convert)
    if dt in ("json", "char"):  # char: as VARCHAR, or Spark pads CHAR(n) values (MySQL strips, so does Debezium)
        return ColumnRead(name, target, f"CAST({col} AS CHAR) AS {col}", cast)
    if dt == "date":
        return ColumnRead(name, target, f"DATEDIFF({col}, '1970-01-01') AS {col}",
                          f"date_from_unix_date({out}) AS {out}")
    if dt == "time":
        micros = (f"IF({col} < TIME'00:00:00', -1, 1) * ((HOUR({col}) * 3600 + MINUTE({col}) * 60 + SECOND({col}))"
                  f" * 1000000 + MICROSECOND({col}))")
        return ColumnRead(name, target, f"CAST({micros} AS SIGNED) AS {col}", cast)
    if dt == "datetime":
        return ColumnRead(name, target, f"DATE_FORMAT({col}, '%Y-%m-%d %H:%i:%s.%f') AS {col}",
                          f"CAST({out} AS TIMESTAMP_NTZ) AS {out}")
    if dt == "timestamp":  # UNIX_TIMESTAMP of a TIMESTAMP column is its stored UTC instant (no session zone)
        return ColumnRead(name, target, f"CAST(UNIX_TIMESTAMP({col}) * 1000000 AS SIGNED) AS {col}",
                          f"timestamp_micros({out}) AS {out}")
    return ColumnRead(name, target, f"{col} AS {col}", cast)


# ---- the lock ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceColumn:
    name: str
    data_type: str
    column_type: str


class MySQLTableLock:
    """``LOCK TABLES <table> READ`` held on a driver-side JDBC connection, and the binlog position read under it
    (a context manager; see the module docstring). Credentials go to the driver as properties, never into
    messages."""

    ordering_kind = "mysql"

    def __init__(self, spark: Any, cfg: BootstrapConfig, target: str):
        self.spark, self.cfg, self.target = spark, cfg, target
        self.conn: Any = None
        self.database, self.table = split_table(cfg.source_table, url_database(cfg.jdbc_url))
        self.file, self.pos = "", 0

    def where(self) -> str:
        return f"bootstrap of {self.target} from {self.cfg.source_table}"

    @property
    def qualified(self) -> str:
        return f"{quote_my(self.database)}.{quote_my(self.table)}"

    def __enter__(self) -> "MySQLTableLock":
        self._connect()
        try:
            if not self.database:
                self.database = str(self.query("SELECT DATABASE()")[0][0] or "")
                if not self.database:
                    raise ConfigError(f"{self.where()}: no database: name it in bootstrap.source_table "
                                      "(database.table) or in the jdbc_url path")
            self.execute(f"SET SESSION lock_wait_timeout = {int(self.cfg.lock_wait_seconds)}")
            try:
                self.execute(f"LOCK TABLES {self.qualified} READ")
            except _SqlError as exc:
                if exc.code == 1146:
                    raise TerminalError(f"{self.where()}: the source table does not exist; fix "
                                        "bootstrap.source_table (database.table)") from None
                if exc.code in (1205, 1213):
                    raise RetryableError(f"{self.where()}: could not lock the table within "
                                         f"{self.cfg.lock_wait_seconds}s (a long transaction is writing to it: "
                                         "bootstrap.lock_wait_seconds); retry later") from None
                raise TerminalError(f"{self.where()}: LOCK TABLES ... READ failed ({exc}); the user needs the "
                                    "LOCK TABLES and SELECT privileges") from None
            self.file, self.pos = self._master_status()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.conn is not None:
            try:
                try:
                    self.execute("UNLOCK TABLES")
                finally:
                    self.conn.close()  # closing the session releases the lock in any case
            except Exception:  # noqa: BLE001 - the session is gone: so is its lock
                pass
            finally:
                self.conn = None

    def _connect(self) -> None:
        jvm = self.spark._jvm
        props = jvm.java.util.Properties()
        if self.cfg.user:
            props.setProperty("user", self.cfg.user)
        if self.cfg.password:
            props.setProperty("password", self.cfg.password)
        try:
            driver = jvm.org.mariadb.jdbc.Driver()
        except Exception:  # noqa: BLE001 - py4j: the class is not on the JVM's classpath
            raise TerminalError(f"{self.where()}: the MariaDB JDBC driver ({DRIVER}) is not on Spark's classpath; "
                                "add org.mariadb.jdbc:mariadb-java-client (python -m cdc.spark.jars --config ...)") from None
        try:
            self.conn = driver.connect(self.cfg.jdbc_url, props)
        except Exception as exc:  # noqa: BLE001 - py4j wraps java.sql.SQLException
            err = _SqlError.of(exc)
            if err.code in (1044, 1045, 1698) or "access denied" in str(err).lower():
                raise TerminalError(f"{self.where()}: the source database refused the login ({err}); fix "
                                    "bootstrap.user / bootstrap.password") from None
            raise RetryableError(f"{self.where()}: cannot connect to the source database ({err}); retry later") \
                from None
        if self.conn is None:
            raise ConfigError(f"{self.where()}: the driver does not accept the URL in bootstrap.jdbc_url")

    def execute(self, sql: str) -> None:
        try:
            st = self.conn.createStatement()
            try:
                st.execute(sql)
            finally:
                st.close()
        except Exception as exc:  # noqa: BLE001
            raise _SqlError.of(exc) from None

    def query(self, sql: str, params: Sequence[str] = ()) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (``?`` parameters are strings), each value as the driver's ``getObject`` text or None."""
        try:
            st = self.conn.prepareStatement(sql)
            try:
                for i, p in enumerate(params, 1):
                    st.setString(i, p)
                rs = st.executeQuery()
                n = rs.getMetaData().getColumnCount()
                out = []
                while rs.next():
                    out.append(tuple(rs.getString(i) for i in range(1, n + 1)))
                return out
            finally:
                st.close()
        except Exception as exc:  # noqa: BLE001
            raise _SqlError.of(exc) from None

    def _master_status(self) -> tuple[str, int]:
        for sql in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):  # MySQL 8.4 renamed it
            try:
                rows = self.query(sql)
            except _SqlError as exc:
                if exc.code == 1064:
                    continue
                raise TerminalError(f"{self.where()}: {sql} failed ({exc}); the user needs the REPLICATION CLIENT "
                                    "(MariaDB: BINLOG MONITOR) privilege") from None
            if not rows or not rows[0][0]:
                raise TerminalError(f"{self.where()}: the source server's binary log is off (log_bin); a Debezium "
                                    "source needs it, and the bootstrap takes its position from it")
            return str(rows[0][0]), int(rows[0][1])
        raise TerminalError(f"{self.where()}: the server knows neither SHOW MASTER STATUS nor SHOW BINARY LOG STATUS")

    # -- what cdc.bootstrap asks every source ----------------------------------------------------------------------
    def columns(self) -> list[SourceColumn]:
        rows = self.query("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS "
                          "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                          (self.database, self.table))
        if not rows:
            raise TerminalError(f"{self.where()}: the source table does not exist or has no columns; fix "
                                "bootstrap.source_table (database.table)")
        return [SourceColumn(str(n), str(d), str(c)) for n, d, c in rows]

    def column_reads(self) -> list[ColumnRead]:
        return [column_read(c.name, c.data_type, c.column_type, self.cfg.source_table, self.cfg.decimal_handling_mode)
                for c in self.columns()]

    def column_types(self) -> dict[str, str]:
        return {c.name: c.column_type for c in self.columns()}

    def integer_columns(self) -> set[str]:
        return {c.name for c in self.columns() if c.data_type.lower() in _INTS and c.data_type.lower() != "year"}

    def primary_key(self) -> list[str]:
        rows = self.query("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND "
                          "TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
                          (self.database, self.table))
        return [str(r[0]) for r in rows]

    def bounds(self, column: str) -> tuple[int | None, int | None]:
        lo, hi = self.query(f"SELECT CAST(MIN({quote_my(column)}) AS SIGNED), CAST(MAX({quote_my(column)}) AS SIGNED) "
                            f"FROM {self.qualified}")[0]
        return (None if lo is None else int(lo)), (None if hi is None else int(hi))

    def jdbc_options(self, selects: Sequence[str]) -> dict[str, str]:
        return {"url": spark_url(self.cfg.jdbc_url), "driver": DRIVER,
                "dbtable": f"(SELECT {', '.join(selects)} FROM {self.qualified}) AS cdc_bootstrap"}

    def wait_for_connector(self) -> float:
        return 0.0  # the horizon is the server's binlog position, not what the topic holds

    def horizon(self, *_: Any, **__: Any) -> tuple[tuple[int, ...], int]:
        return horizon_of(self.file, self.pos), 0

    def position_info(self) -> dict[str, Any]:
        return {"binlog_file": self.file, "binlog_pos": int(self.pos)}


class _SqlError(Exception):
    """A java.sql.SQLException seen through py4j: its vendor code and first message line."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code

    @classmethod
    def of(cls, exc: BaseException) -> "_SqlError":
        if isinstance(exc, _SqlError):
            return exc
        java = getattr(exc, "java_exception", None)
        code, text = 0, ""
        if java is not None:
            try:
                text = str(java.getMessage() or "")
                code = int(java.getErrorCode()) if hasattr(java, "getErrorCode") else 0
            except Exception:  # noqa: BLE001 - not an SQLException
                pass
        text = (text or str(exc)).strip()
        return cls(text.splitlines()[0] if text else type(exc).__name__, code)
