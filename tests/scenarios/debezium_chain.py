"""The real chain's test side, shared by the ``test_debezium_postgres*`` scenarios: a PostgreSQL database captured
by Debezium's PostgreSQL connector in a module's Kafka Connect worker (``devtools.pgsource``), and the job's pipeline
over its topics (JsonConverter with schemas, or Confluent Avro through the schema registry). The oracle is the
database itself: after ``ingest()`` the Iceberg table equals ``SELECT *`` of the source table."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Callable, Mapping

from devtools.pgsource import PostgresSource
from tests.conftest import REPO, unique

CONVERTERS = ("json", "avro")


def connect_worker(broker: Any):
    """A Kafka Connect worker for a module (a generator for a module-scoped fixture)."""
    from devtools.connect import ConnectWorker

    out = REPO / "test-output"
    out.mkdir(exist_ok=True)
    with ConnectWorker(broker.bootstrap, log_path=out / "connect.log") as worker:
        yield worker


def converter_registry(request: Any, converter: str) -> Any:
    """The schema registry fixture for ``avro`` (None for ``json``)."""
    return request.getfixturevalue("registry") if converter == "avro" else None


class Source(PostgresSource):
    """One database with a Debezium connector (``devtools.pgsource``) and the job's pipeline over its topics.

    ``registry``: the connector writes Confluent Avro (``devtools.connect.avro_converters``) and the pipeline reads
    ``format: avro``; without it both sides use Kafka's JsonConverter with schemas. ``table_settings``: extra
    ``tables[]`` entries of the pipeline per source table."""

    def __init__(self, pg: Any, broker: Any, connect: Any, spark: Any, warehouse: Any, tables: Mapping[str, str],
                 registry: Any = None, table_settings: Mapping[str, Mapping[str, Any]] | None = None,
                 **connector: str) -> None:
        from cdc.config.load import parse_config

        super().__init__(pg, connect, broker.bootstrap, unique("db"), unique("pg"), tables, name=unique("dbz"),
                         registry_url=registry.url if registry is not None else None,
                         **{"incremental.snapshot.chunk.size": "4", **connector})
        self.create()
        self.spark = spark
        self.ns = unique("dbz")
        extra = table_settings or {}
        self.cfg = parse_config({
            "pipeline": "dbz", "kafka": {"bootstrap.servers": broker.bootstrap},
            "format": "avro" if registry is not None else "json",
            **({"schema_registry": {"url": registry.url}} if registry is not None else {}),
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
            "metadata_namespace": unique("meta"), "batch": {"read_timeout_seconds": 30},
            "tables": [{"topic": self.topic(t), "target": f"{self.ns}.{t}", **extra.get(t, {})} for t in tables]})

    def ingest(self, sync: bool = True) -> dict[str, Any]:
        """Every change made so far reaches Kafka (unless ``sync`` is false: what the topics hold now), then one
        batch per table."""
        from cdc.run.batch import run_batch

        if sync:
            self.sync()
        return run_batch(self.spark, self.cfg, list(self.cfg.tables))

    def ingest_clean(self, sync: bool = True) -> dict[str, Any]:
        """``ingest()``, asserting every table committed (or had nothing to do) without a dead letter."""
        summary = self.ingest(sync)
        for table in summary["tables"]:
            assert table["status"] != "failed", table
            assert not table.get("dead_letters"), table
        assert self.dead_letters() == 0, self.dead_letter_errors()
        return summary

    def source_rows(self, table: str, expect: Mapping[str, Callable[[Any], Any]] | None = None,
                    text_types: tuple[str, ...] = ()) -> dict[Any, tuple]:
        """``SELECT *`` keyed by the first column. ``text_types``: PostgreSQL types read as their output text
        (``json``, ``interval``, ``date`` ...: what the server prints, infinities included, not psycopg's Python
        objects); ``expect``: column → the documented Iceberg value of a source value where it is not the identity."""
        from psycopg.types.string import TextLoader

        expect = expect or {}
        with self.pg.connect(self.database) as conn, conn.cursor() as cur:
            for name in text_types:
                cur.adapters.register_loader(name, TextLoader)
            cur.execute("SET TIME ZONE 'UTC'")
            cur.execute(f"SELECT * FROM {table} ORDER BY 1")
            names = [d.name for d in cur.description]
            rows = cur.fetchall()
        out = {}
        for r in rows:
            vals = [v if v is None or n not in expect else expect[n](v) for n, v in zip(names, r)]
            out[vals[0]] = tuple(same(v) for v in vals[1:])
        return out

    def lake_columns(self, table: str) -> list[str]:
        return [c for c in self.spark.table(f"lake.{self.ns}.{table}").columns if not c.startswith("__")]

    def lake_rows(self, table: str, exprs: Mapping[str, str] | None = None) -> dict[Any, tuple]:
        """The target's row columns keyed by the first; ``exprs``: column → a Spark SQL expression read instead
        (``unix_date(d)`` for dates Python cannot hold)."""
        exprs = exprs or {}
        cols = self.lake_columns(table)
        select = ", ".join(f"{exprs[c]} AS `{c}`" if c in exprs else f"`{c}`" for c in cols)
        rows = self.spark.sql(f"SELECT {select} FROM lake.{self.ns}.{table}").collect()
        return {r[cols[0]]: tuple(same(r[c]) for c in cols[1:]) for r in rows}

    def lake_types(self, table: str) -> dict[str, str]:
        return {f.name: f.dataType.simpleString() for f in self.spark.table(f"lake.{self.ns}.{table}").schema.fields}

    def dead_letters(self) -> int:
        return self.spark.sql(f"SELECT count(*) FROM lake.{self.cfg.metadata_namespace}.dead_letters").first()[0]

    def dead_letter_errors(self) -> list[str]:
        rows = self.spark.sql(f"SELECT * FROM lake.{self.cfg.metadata_namespace}.dead_letters").collect()
        return [str({k: v for k, v in r.asDict().items() if k not in ("key", "value")})[:600] for r in rows]


def same(v: Any) -> Any:
    """A value as both sides compare it (NaN equals NaN here)."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, Decimal):
        return "NaN" if v.is_nan() else v.normalize()
    if isinstance(v, (list, tuple)):  # arrays; a struct (Spark's Row) as the tuple of its fields
        return tuple(same(x) for x in v)
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return v

