"""The real chain's source side in one object, for tests and the demo: a PostgreSQL database whose tables a Debezium
connector captures in a Kafka Connect worker (``devtools.connect``), with Debezium's signal table (incremental
snapshots), its notification topic (when a snapshot is done) and the marker (when every change made so far has
reached Kafka). The database itself is the oracle: ``rows(table)`` is ``SELECT *``.

    src = PostgresSource(pg, connect, broker.bootstrap, "inventory", "dbserver1",
                         {"customers": "id int PRIMARY KEY, name text"}, registry_url=registry.url)
    src.create(); src.sql("INSERT INTO customers VALUES (1, 'a')"); src.start()
    src.sync()            # the insert (the snapshot's read) is in Kafka now
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Mapping

from devtools.connect import Marker, avro_converters, postgres_connector

SIGNAL_TABLE = "debezium_signal"


class PostgresSource:
    """One database with one Debezium PostgreSQL connector; topics ``<prefix>.public.<table>``."""

    def __init__(self, pg: Any, connect: Any, bootstrap: str, database: str, prefix: str, tables: Mapping[str, str],
                 name: str | None = None, registry_url: str | None = None, partitions: int = 1,
                 **settings: str) -> None:
        self.pg, self.connect, self.bootstrap = pg, connect, bootstrap
        self.database, self.prefix, self.tables = database, prefix, dict(tables)
        self.name = name or f"{prefix}-connector"
        self.registry_url = registry_url
        self.notifications = f"{prefix}.notifications"
        self.settings = {
            "signal.data.collection": f"public.{SIGNAL_TABLE}", "incremental.snapshot.chunk.size": "8",
            "notification.enabled.channels": "sink", "notification.sink.topic.name": self.notifications,
            "topic.creation.default.partitions": str(partitions), "topic.creation.default.replication.factor": "1",
            **(avro_converters(registry_url) if registry_url else {}), **settings}
        self.marker: Marker | None = None

    def topic(self, table: str) -> str:
        return f"{self.prefix}.public.{table}"

    def create(self) -> PostgresSource:
        """The database, its tables (``tables``: name → column DDL), the signal table and the marker."""
        self.pg.create_database(self.database)
        for table, ddl in self.tables.items():
            self.sql(f"CREATE TABLE IF NOT EXISTS {table} ({ddl})")
        self.sql(f"CREATE TABLE IF NOT EXISTS {SIGNAL_TABLE} (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                 "data varchar(2048))")
        self.marker = Marker(self.pg, self.bootstrap, self.prefix, self.database, self.registry_url)
        return self

    def connector_config(self) -> dict[str, str]:
        captured = [f"public.{t}" for t in self.tables] + [f"public.{SIGNAL_TABLE}", Marker.TABLE]
        return postgres_connector(self.pg, self.prefix, captured, self.database, **self.settings)

    def start(self, timeout: float = 120.0) -> None:
        """Create the connector (its initial snapshot reads what the tables hold) and wait until it runs."""
        self.connect.create(self.name, self.connector_config())
        self.connect.wait_running(self.name, timeout)

    def stop(self, drop_slot: bool = True, timeout: float = 60.0) -> None:
        """Delete the connector; with ``drop_slot`` also its replication slot, once its walsender has let go of it
        (a server has only a few slots: ``max_replication_slots``; a slot dropped while the connector is away is a
        lost slot: the connector snapshots again when it comes back, by ``snapshot.mode``)."""
        self.connect.delete(self.name)
        if not drop_slot:
            return
        slot = self.connector_config()["slot.name"]
        deadline = time.monotonic() + timeout
        while True:
            rows = self.sql("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
            if not rows:
                return
            if not rows[0][0]:
                try:
                    self.sql("SELECT pg_drop_replication_slot(%s)", (slot,))
                    return
                except Exception:  # noqa: BLE001 - taken again by a walsender that was just ending: retry
                    pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"replication slot {slot} still active {timeout}s after its connector was deleted")
            time.sleep(0.3)

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.pg.execute(statement, params, database=self.database)

    def transaction(self, statements: list[str]) -> None:
        """Several statements in one source transaction (one commit, one LSN order)."""
        with self.pg.connect(self.database, autocommit=False) as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
            conn.commit()

    def sync(self, timeout: float = 90.0) -> None:
        """Until every change committed so far is in Kafka (see ``devtools.connect.Marker``)."""
        if self.marker is None:
            raise RuntimeError("create() first")
        self.marker.sync(timeout)

    def rows(self, table: str) -> list[dict[str, Any]]:
        """``SELECT *`` of ``table``: the oracle."""
        with self.pg.connect(self.database) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table} ORDER BY 1")
            names = [d.name for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    def columns(self, table: str) -> list[str]:
        return [r[0] for r in self.sql("SELECT column_name FROM information_schema.columns WHERE table_schema = "
                                       "'public' AND table_name = %s ORDER BY ordinal_position", (table,))]

    def incremental_snapshot(self, *tables: str) -> str:
        """Ask Debezium for an incremental snapshot of ``tables`` (a row in the signal table); returns its id."""
        sid = f"snap-{uuid.uuid4().hex[:8]}"
        collections = json.dumps([f"public.{t}" for t in tables])
        self.sql(f"INSERT INTO {SIGNAL_TABLE} VALUES (%s, 'execute-snapshot', %s)",
                 (sid, f'{{"data-collections": {collections}, "type": "incremental"}}'))
        return sid

    def wait_snapshot_completed(self, timeout: float = 180.0) -> None:
        """Until Debezium's notification topic says an incremental snapshot is completed."""
        from devtools.broker import read_topic

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                notes = read_topic(self.bootstrap, self.notifications, 1, idle_timeout=0.5)
            except Exception:  # noqa: BLE001 - the topic is created with the first notification
                notes = []
            decode = self.marker.decode if self.marker else json.loads
            if any((decode(m.value()) or {}).get("type") == "COMPLETED" for m in notes if m.value()):
                return
            time.sleep(1)
        raise TimeoutError(f"incremental snapshot not completed within {timeout}s ({self.notifications})")
