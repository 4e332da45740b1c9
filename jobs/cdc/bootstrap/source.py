"""The source database of a bootstrap, by JDBC URL: PostgreSQL (``cdc.bootstrap.postgres``) or MySQL/MariaDB
(``cdc.bootstrap.mysql``)."""

from __future__ import annotations

from typing import Any

from cdc.bootstrap.mysql import MySQLTableLock
from cdc.bootstrap.postgres import PostgresSnapshot
from cdc.config.bootstrap import BootstrapConfig


def open_source(spark: Any, cfg: BootstrapConfig, target: str) -> Any:
    """The source of a bootstrap, by ``jdbc_url`` (a context manager holding the consistent read open)."""
    if cfg.is_mysql:
        return MySQLTableLock(spark, cfg, target)
    return PostgresSnapshot(cfg, target)


def probe_source(cfg: BootstrapConfig, target: str) -> None:
    """Fail before Spark starts when the source database cannot be reached or refuses the login (PostgreSQL; a
    MySQL/MariaDB source is first reached through the JDBC driver, in the Spark driver's JVM)."""
    if not cfg.is_mysql:
        PostgresSnapshot(cfg, target).connect().close()
