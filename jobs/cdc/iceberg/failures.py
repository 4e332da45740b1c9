"""Errors of a ``jdbc`` catalog's database, named (pure): unreachable → retry later, refused → a person must act.

Iceberg's ``JdbcCatalog`` reaches PostgreSQL on every catalog operation (table load, commit, namespace), so a database
that is down, restarting or out of connections fails any phase. Those are transient like an unreachable broker
(``CatalogUnavailable``, exit 75); wrong credentials, a missing database, missing grants or no JDBC driver are not
(``CatalogError``, exit 2). Called from ``cdc.run.outcome.unwrap_task_error`` on the text of a Spark/Py4J error.
"""

from __future__ import annotations

import re

from cdc.common.errors import CatalogError, CatalogUnavailable, CdcError
from cdc.iceberg.sql_catalog import redact_url

_CONFLICT_MARKERS = ("ValidationException", "CommitFailedException", "CommitStateUnknownException",
                     "Found conflicting files", "AlreadyExistsException")


def is_commit_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return any(m in text for m in _CONFLICT_MARKERS)


_JDBC = ("org.apache.iceberg.jdbc", "org.postgresql", "PSQLException", "JdbcCatalog", "No suitable driver")
_TERMINAL = re.compile(r"password authentication failed|no pg_hba\.conf entry|permission denied for|"
                       r"role \"[^\"]*\" does not exist|database \"[^\"]*\" does not exist|No suitable driver|"
                       r"ClassNotFoundException: org\.postgresql")
_TRANSIENT = ("Connection refused", "refused. Check that the hostname", "The connection attempt failed",
              "Connection reset", "SocketTimeoutException", "timed out", "the database system is starting up",
              "the database system is shutting down", "the database system is in recovery mode", "too many clients",
              "remaining connection slots", "terminating connection", "An I/O error occurred",
              "This connection has been closed", "Connection failed", "UnknownHostException",
              "could not serialize access", "deadlock detected")
# Two runs creating / upgrading the catalog's own tables at once (a fresh database): the loser's DDL fails; a rerun
# finds them in place.
_CATALOG_TABLES = re.compile(r"iceberg_tables|iceberg_namespace_properties|update SQL schema|initialize JDBC catalog")
_DDL_RACE = ("already exists", "tuple concurrently updated", "duplicate key value violates unique constraint")
_PSQL_LINE = re.compile(r"(PSQLException|UncheckedSQLException|SQLException|SQLNonTransientConnectionException|"
                        r"SQLTransientConnectionException): (.+)$")


def classify(text: str, context: str) -> CdcError | None:
    """Our error for a JDBC catalog failure in ``text`` (a Java error's full text), or None when it is not one."""
    if not any(m in text for m in _JDBC):
        return None
    detail = _detail(text)
    if _TERMINAL.search(text):
        return CatalogError(f"{context}: the jdbc catalog's database refused the job: {detail}. Check catalog.uri, "
                            "catalog.properties jdbc.user / jdbc.password (from ${ENV}), the database's grants and "
                            "the PostgreSQL JDBC driver jar (cdc.spark.jars)")
    if _CATALOG_TABLES.search(text) and any(m in text for m in _DDL_RACE):
        return CatalogUnavailable(f"{context}: another run created or upgraded the jdbc catalog's own tables at the "
                                  f"same time: {detail}. Nothing was committed by this step; retry")
    if any(m in text for m in _TRANSIENT):
        return CatalogUnavailable(f"{context}: the jdbc catalog's database is unreachable: {detail}. Nothing was "
                                  "committed by this step; check that the database is up and catalog.uri is right, "
                                  "then retry")
    return None


def _detail(text: str) -> str:
    """The innermost SQL error line (PostgreSQL's message), with any credentials in a URL masked."""
    found = [m.group(0) for line in text.splitlines() if (m := _PSQL_LINE.search(line.strip()))]
    line = found[-1] if found else next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return redact_url(line)[:400].rstrip(".")