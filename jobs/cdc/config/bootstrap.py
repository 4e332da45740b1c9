"""``tables[].bootstrap``: load a table's initial state straight from the source database over JDBC (pure).

    tables:
      - topic: dbserver1.public.customers
        target: inventory.customers
        bootstrap:
          jdbc_url: jdbc:postgresql://db:5432/inventory
          user: ${PGUSER}
          password: ${PGPASSWORD}          # secrets via ${ENV}; never logged or put into messages
          source_table: public.customers   # schema.table (default schema: public)
          split_column: id                 # default: the single-column primary key
          num_partitions: 8                # parallel JDBC reads over the split column's [min, max]
          fetch_size: 10000                # rows per round trip (>= 1: the read runs in a transaction)
          connector_slot: debezium         # optional: wait until the connector's replication slot has confirmed
          connector_wait_seconds: 600      #   the snapshot's WAL position (its changes are in Kafka), at most this long
          decimal_handling_mode: precise   # the connector's decimal.handling.mode: precise | double | string

      - topic: dbserver1.shop.orders       # MySQL / MariaDB (cdc.bootstrap.mysql): jdbc:mysql:// or jdbc:mariadb://
        target: shop.orders
        bootstrap:
          jdbc_url: jdbc:mysql://db:3306/shop
          source_table: shop.orders        # database.table (default database: the URL's)
          lock_wait_seconds: 60            # LOCK TABLES ... READ waits at most this long for writing transactions

Used by ``cdc.config`` (one hook) and the bootstrap job (``cdc.bootstrap``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

ALLOWED = ("jdbc_url", "user", "password", "source_table", "split_column", "num_partitions", "fetch_size",
           "connector_slot", "connector_wait_seconds", "lock_wait_seconds", "decimal_handling_mode")
DECIMAL_MODES = ("precise", "double", "string")  # Debezium's decimal.handling.mode (cdc.bootstrap.postgres_types)
DIALECTS = ("postgresql", "mysql", "mariadb")  # jdbc:<dialect>: URLs that can be bootstrapped
POSTGRES_ONLY = ("connector_slot",)
_IDENT = r'(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"]+"|`[^`]+`)'
_TABLE = re.compile(rf"^(?:{_IDENT}\.)?{_IDENT}$")


@dataclass(frozen=True)
class BootstrapConfig:
    jdbc_url: str
    source_table: str  # [schema.]table as written in SQL
    user: str = ""
    password: str = ""
    split_column: str = ""  # "": the single-column primary key
    num_partitions: int = 4
    fetch_size: int = 10_000
    connector_slot: str = ""  # the Debezium connector's replication slot ("": do not wait for it)
    connector_wait_seconds: int = 600
    lock_wait_seconds: int = 60  # MySQL/MariaDB: how long LOCK TABLES ... READ may wait (lock_wait_timeout)
    decimal_handling_mode: str = "precise"  # the connector's decimal.handling.mode: how numeric/decimal/money arrive

    @property
    def dialect(self) -> str:
        """``postgresql``, ``mysql`` or ``mariadb``, from the URL."""
        return self.jdbc_url.split(":", 2)[1] if self.jdbc_url.count(":") >= 2 else ""

    @property
    def is_mysql(self) -> bool:
        """A MySQL or MariaDB source (``cdc.bootstrap.mysql``)."""
        return self.dialect in ("mysql", "mariadb")

    def __repr__(self) -> str:  # never the password (nor the user) in logs or tracebacks
        return f"BootstrapConfig(source_table={self.source_table!r}, num_partitions={self.num_partitions})"


def parse_bootstrap(raw: Any, key: str, fail: Callable[[str, str], Exception]) -> BootstrapConfig | None:
    """``tables[i].bootstrap`` (already ``${ENV}``-substituted) → ``BootstrapConfig``; ``fail(key, message)`` builds
    the ``ConfigError`` naming the file and key."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise fail(key, "must be a mapping with jdbc_url and source_table")
    extra = sorted(set(raw) - set(ALLOWED), key=str)
    if extra:
        raise fail(f"{key}.{extra[0]}", f"unknown key (allowed: {', '.join(ALLOWED)})")
    url = raw.get("jdbc_url")
    if not isinstance(url, str) or not url.startswith("jdbc:"):
        raise fail(f"{key}.jdbc_url", "is required: a JDBC URL such as jdbc:postgresql://host:5432/db")
    if not url.startswith(tuple(f"jdbc:{d}:" for d in DIALECTS)):
        raise fail(f"{key}.jdbc_url", "only PostgreSQL (jdbc:postgresql:...) and MySQL/MariaDB (jdbc:mysql:..., "
                                      "jdbc:mariadb:...) sources can be bootstrapped")
    if not url.startswith("jdbc:postgresql:"):
        for name in POSTGRES_ONLY:
            if raw.get(name):
                raise fail(f"{key}.{name}", "applies to PostgreSQL sources only (a MySQL/MariaDB bootstrap takes "
                                            "its position from the binlog, not from the topic)")
    table = raw.get("source_table")
    if not isinstance(table, str) or not _TABLE.match(table.strip()):
        raise fail(f"{key}.source_table", f"is required: [schema.]table, got {table!r}")
    out: dict[str, Any] = {}
    for name in ("user", "password", "split_column", "connector_slot"):
        v = raw.get(name, "")
        if v is None:
            v = ""
        if not isinstance(v, (str, int)) or isinstance(v, bool):
            raise fail(f"{key}.{name}", "must be a string")
        out[name] = str(v)
    for name, default, low in (("num_partitions", 4, 1), ("fetch_size", 10_000, 1), ("connector_wait_seconds", 600, 0),
                              ("lock_wait_seconds", 60, 1)):
        v = raw.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise fail(f"{key}.{name}", f"must be a whole number >= {low}, got {v!r}")
        out[name] = v
    mode = raw.get("decimal_handling_mode", "precise")
    if mode not in DECIMAL_MODES:
        raise fail(f"{key}.decimal_handling_mode", f"must be one of {', '.join(DECIMAL_MODES)} (the Debezium "
                                                   f"connector's decimal.handling.mode), got {mode!r}")
    out["decimal_handling_mode"] = mode
    return BootstrapConfig(jdbc_url=url, source_table=table.strip(), **out)
