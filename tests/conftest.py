"""Session fixtures shared by all tests: the local Kafka-protocol broker and one SparkSession.

The broker is a real Apache Kafka broker (``devtools.broker``: KRaft, jars from the Maven jar cache) on free loopback
ports, stopped at the end of the session. Spark runs locally with a Hadoop Iceberg catalog in a temporary warehouse.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures" / "debezium"
_ids = itertools.count(1)


def unique(prefix: str) -> str:
    """A fresh identifier per call (topics and namespaces are never shared between tests)."""
    return f"{prefix}{os.getpid()}_{next(_ids)}"


@pytest.fixture(scope="session")
def broker():
    from devtools.broker import LocalBroker

    out = REPO / "test-output"
    out.mkdir(exist_ok=True)
    b = LocalBroker(log_path=out / "kafka.log").start()
    yield b
    b.stop()


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory):
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(warehouse):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from cdc.config.load import parse_config
    from cdc.spark.session import build_session

    cfg = parse_config({
        "pipeline": "tests", "kafka": {"bootstrap.servers": "127.0.0.1:1"}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
        "spark": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        "tables": [{"topic": "x", "target": "a.b"}],
    })
    session = build_session(cfg, "cdc-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's postgresql-15, installed by .ci/run) on a free loopback port.

    Tests that need their own database call ``postgres.create_database(unique("db"))``.
    """
    from devtools.postgres import INSTALL_HINT, LocalPostgres, available

    if not available():
        pytest.fail(f"PostgreSQL server or JDBC driver missing: {INSTALL_HINT}")
    pg = LocalPostgres().start()  # its own temp dir: pytest's are root-only, and the server may run as postgres
    yield pg
    pg.stop()


@pytest.fixture(scope="session")
def mariadb():
    """A real MariaDB server (Debian's mariadb-server, binlog on, installed by .ci/run) on a free loopback port.

    Tests that need their own database call ``mariadb.create_database(unique("db"))``.
    """
    from devtools.mariadb import INSTALL_HINT, LocalMariaDB, available

    if not available():
        pytest.skip(f"MariaDB server, client or JDBC driver missing: {INSTALL_HINT}")
    db = LocalMariaDB().start()
    yield db
    db.stop()
