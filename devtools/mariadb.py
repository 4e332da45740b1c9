"""A throwaway real MariaDB server for tests of the MySQL/MariaDB JDBC bootstrap.

Debian's ``mariadb-server`` (``mariadb-install-db`` / ``mariadbd``) runs in a temporary data directory on a free
loopback port with the binary log on (``log_bin``, ``binlog_format=ROW``, ``server_id``: what a Debezium MySQL
source needs). As root the server runs as the ``mysql`` user (``--user=mysql``, data directory chowned to it).
``.ci/run`` installs the packages; the JDBC driver Spark uses is Debian's ``libmariadb-java`` (:data:`JDBC_JAR`).

SQL goes through the ``mariadb`` command-line client (installed with the server) over the server's socket as
``root``; the JDBC user is ``cdc`` / ``cdc-secret`` with every privilege (:attr:`LocalMariaDB.jdbc_url`).

    with LocalMariaDB() as db:
        db.execute("CREATE TABLE test.t (id int primary key)")
        db.master_status()  # ("mysql-bin.000001", 328)
        db.jdbc_url         # jdbc:mariadb://127.0.0.1:<port>/test
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

HOST = "127.0.0.1"
DATABASE = "test"
USER = "cdc"
PASSWORD = "cdc-secret"
OS_USER = "mysql"
#: MariaDB Connector/J (Debian package libmariadb-java); override with CDC_MARIADB_JDBC_JAR.
JDBC_JAR = os.environ.get("CDC_MARIADB_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")
INSTALL_HINT = "apt-get install -y mariadb-server libmariadb-java"
SERVER = os.environ.get("CDC_MARIADBD", "/usr/sbin/mariadbd")


def _tool(*names: str) -> str | None:
    for n in names:
        found = shutil.which(n)
        if found:
            return found
    return None


def available() -> bool:
    """True when a MariaDB server, its client and the JDBC driver are installed here."""
    return (Path(SERVER).is_file() and _tool("mariadb-install-db", "mysql_install_db") is not None
            and _tool("mariadb", "mysql") is not None and Path(JDBC_JAR).is_file())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LocalMariaDB:
    """One MariaDB server in a temp dir; ``start()``/``stop()`` or a context manager."""

    def __init__(self, port: int | None = None, server_id: int = 1) -> None:
        self.port = port or _free_port()
        self.server_id = server_id
        self.base = Path(tempfile.mkdtemp(prefix="cdc-mariadb-"))
        self.data = self.base / "data"
        self.socket = self.base / "mysqld.sock"
        self.log = self.base / "mariadb.err"
        self._as_root = os.geteuid() == 0
        self._proc: subprocess.Popen[bytes] | None = None

    # -- addresses -------------------------------------------------------------------------------------------------
    @property
    def jdbc_url(self) -> str:
        return self.jdbc_url_for(DATABASE)

    def jdbc_url_for(self, database: str, scheme: str = "mariadb") -> str:
        return f"jdbc:{scheme}://{HOST}:{self.port}/{database}"

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def _server_args(self) -> list[str]:
        return ["--no-defaults", f"--datadir={self.data}", f"--socket={self.socket}", f"--port={self.port}",
                f"--bind-address={HOST}", f"--pid-file={self.base / 'mysqld.pid'}", f"--log-error={self.log}",
                *([f"--user={OS_USER}"] if self._as_root else [])]

    def start(self) -> "LocalMariaDB":
        if not available():
            raise RuntimeError(f"MariaDB server, client or JDBC driver missing; install them: {INSTALL_HINT}")
        if self._as_root:
            pw = pwd.getpwnam(OS_USER)
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            self.base.chmod(0o700)
        install = _tool("mariadb-install-db", "mysql_install_db")
        proc = subprocess.run([install, "--no-defaults", f"--datadir={self.data}", "--skip-test-db",
                               "--auth-root-authentication-method=socket",
                               *([f"--user={OS_USER}"] if self._as_root else [])],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        args = [SERVER, *self._server_args(), "--log-bin=mysql-bin", "--binlog-format=ROW",
                f"--server-id={self.server_id}", "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0",
                "--innodb-buffer-pool-size=64M", "--skip-name-resolve", "--max-connections=200",
                "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        self._wait_ready()
        self.admin(f"CREATE DATABASE IF NOT EXISTS {DATABASE}; "
                   f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; "
                   f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%'; FLUSH PRIVILEGES")
        return self

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited ({self._proc.returncode}): {self._log_tail()}")
            try:
                self.admin("SELECT 1")
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"MariaDB did not start on {HOST}:{self.port}: {self._log_tail()}") from None
                time.sleep(0.3)

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()  # SIGTERM: a clean shutdown
                try:
                    self._proc.wait(60)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(10)
            self._proc = None
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "LocalMariaDB":
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- SQL -------------------------------------------------------------------------------------------------------
    def admin(self, sql: str, database: str = "") -> list[tuple[str | None, ...]]:
        """Run a script (``;``-separated statements, one session) as root over the socket; every result row, as text
        (``None`` for NULL), in order."""
        client = _tool("mariadb", "mysql")
        argv = [client, "--no-defaults", f"--socket={self.socket}", "-uroot", "--batch", "--raw",
                "--skip-column-names", "--default-character-set=utf8mb4", *([database] if database else [])]
        proc = subprocess.run(argv, input=sql, capture_output=True, text=True, check=False, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"mariadb: {proc.stderr.strip()}")
        return [tuple(None if v == "NULL" else v for v in line.split("\t"))
                for line in proc.stdout.splitlines() if line]

    def execute(self, sql: str, database: str = DATABASE) -> list[tuple[str | None, ...]]:
        """Run a script in ``database`` (default ``test``): one session, so ``BEGIN; ...; COMMIT`` is one
        transaction; every result row as text."""
        return self.admin(sql, database)

    def master_status(self) -> tuple[str, int]:
        """``SHOW MASTER STATUS``: (binlog file, position) where the next transaction's events start."""
        rows = self.admin("SHOW MASTER STATUS")
        if not rows:
            raise RuntimeError("SHOW MASTER STATUS returned nothing: the binary log is off")
        return str(rows[0][0]), int(rows[0][1] or 0)

    def create_database(self, name: str) -> str:
        """Create a database (if absent) and return its JDBC URL."""
        self.admin(f"CREATE DATABASE IF NOT EXISTS `{name}`")
        return self.jdbc_url_for(name)
