"""The throwaway PostgreSQL server (devtools.postgres) really runs and keeps data across connections."""

from __future__ import annotations

from pathlib import Path

from devtools.postgres import JDBC_JAR


def test_server_stores_rows_and_reports_a_wal_position(postgres):
    postgres.execute("CREATE TABLE devtools_pg (id int PRIMARY KEY, body text)")
    postgres.execute("INSERT INTO devtools_pg VALUES (1, 'a'), (2, 'b')")
    rows = postgres.execute("SELECT id, body FROM devtools_pg ORDER BY id")
    assert rows == [(1, "a"), (2, "b")]
    (lsn,) = postgres.execute("SELECT pg_current_wal_lsn()::text")[0]
    assert "/" in lsn
    assert postgres.execute("SHOW wal_level") == [("logical",)]


def test_databases_are_separate_and_the_jdbc_driver_is_installed(postgres):
    url = postgres.create_database("devtools_other")
    assert url.endswith("/devtools_other") and url.startswith("jdbc:postgresql://127.0.0.1:")
    postgres.execute("CREATE TABLE only_here (x int)", database="devtools_other")
    assert postgres.execute("SELECT to_regclass('only_here') IS NULL") == [(True,)]
    assert Path(JDBC_JAR).is_file()
