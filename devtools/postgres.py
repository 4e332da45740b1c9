"""A throwaway real PostgreSQL server for tests, the JDBC catalog and the bootstrap path.

Debian's ``postgresql-15`` (``initdb``/``pg_ctl`` under ``/usr/lib/postgresql/15/bin``) runs a cluster in a temporary
data directory on a free loopback port, with ``wal_level=logical`` (as a Debezium source needs) and trust
authentication for loopback only. PostgreSQL refuses to run as root: when we are root the server runs as the
``postgres`` user (data directory chowned to it). ``.ci/run`` installs the packages; the JDBC driver Spark uses is
Debian's ``libpostgresql-jdbc-java`` (:data:`JDBC_JAR`).

    with LocalPostgres() as pg:
        pg.execute("CREATE TABLE t (id int primary key)")
        pg.jdbc_url  # jdbc:postgresql://127.0.0.1:<port>/postgres
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

HOST = "127.0.0.1"
USER = "postgres"
DATABASE = "postgres"
#: The PostgreSQL JDBC driver (Debian package libpostgresql-jdbc-java); override with CDC_POSTGRES_JDBC_JAR.
JDBC_JAR = os.environ.get("CDC_POSTGRES_JDBC_JAR", "/usr/share/java/postgresql.jar")
INSTALL_HINT = "apt-get install -y postgresql-15 libpostgresql-jdbc-java"


def pg_bin_dir() -> Path:
    """The newest installed PostgreSQL server's bin directory (``CDC_PG_BIN`` overrides)."""
    override = os.environ.get("CDC_PG_BIN")
    if override:
        return Path(override)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise RuntimeError(f"no PostgreSQL server binaries found (initdb); install them: {INSTALL_HINT}")
    return Path(found[-1]).parent


def available() -> bool:
    """True when a PostgreSQL server and the JDBC driver are installed here."""
    try:
        pg_bin_dir()
    except RuntimeError:
        return False
    return Path(JDBC_JAR).is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LocalPostgres:
    """One PostgreSQL server in a temp dir; ``start()``/``stop()`` or a context manager."""

    def __init__(self, port: int | None = None, base_dir: str | os.PathLike[str] | None = None) -> None:
        self.port = port or _free_port()
        self._owned_dir = base_dir is None
        self.base = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="cdc-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "postgres.log"
        self._as_root = os.geteuid() == 0

    # -- addresses -------------------------------------------------------------------------------------------------
    @property
    def jdbc_url(self) -> str:
        return self.jdbc_url_for(DATABASE)

    def jdbc_url_for(self, database: str) -> str:
        return f"jdbc:postgresql://{HOST}:{self.port}/{database}"

    def sqlalchemy_url(self, database: str = DATABASE) -> str:
        """For pyiceberg's SQL catalog (SQLAlchemy + psycopg 3)."""
        return f"postgresql+psycopg://{USER}@{HOST}:{self.port}/{database}"

    def dsn(self, database: str = DATABASE) -> str:
        return f"host={HOST} port={self.port} user={USER} dbname={database}"

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def _run(self, argv: list[str]) -> None:
        if self._as_root:
            argv = ["runuser", "-u", USER, "--", *argv]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout}")

    def start(self) -> "LocalPostgres":
        bin_dir = pg_bin_dir()
        self.base.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            pw = pwd.getpwnam(USER)
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            self.base.chmod(0o700)
        if not (self.data / "PG_VERSION").exists():
            self._run([str(bin_dir / "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8",
                       "--locale=C.UTF-8"])
        opts = (f"-c listen_addresses={HOST} -c port={self.port} -c unix_socket_directories={self.base} "
                "-c wal_level=logical -c max_wal_senders=4 -c max_replication_slots=4 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        self._run([str(bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "60",
                   "start"])
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not listen on {HOST}:{self.port}; see {self.log}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                self._run([str(pg_bin_dir() / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"])
            except RuntimeError:
                pass
        if self._owned_dir:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "LocalPostgres":
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- SQL -------------------------------------------------------------------------------------------------------
    def connect(self, database: str = DATABASE, autocommit: bool = True) -> Any:
        """A psycopg 3 connection (autocommit by default)."""
        import psycopg

        return psycopg.connect(self.dsn(database), autocommit=autocommit)

    def execute(self, sql: str, params: Any = None, database: str = DATABASE) -> list[tuple[Any, ...]]:
        """Run one statement in its own autocommit connection; returns the rows (empty when none)."""
        with self.connect(database) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    def create_database(self, name: str) -> str:
        """Create a database (if absent) and return its JDBC URL."""
        if not self.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)):
            self.execute(f'CREATE DATABASE "{name}"')
        return self.jdbc_url_for(name)
