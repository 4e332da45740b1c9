"""JDBC bootstrap of a table whose Debezium connector runs with ``decimal.handling.mode`` double or string, against a
real PostgreSQL server, broker, Spark and Iceberg: ``numeric(10,2)``, ``numeric`` and ``money`` columns are
bootstrapped as the connector sends them (``bootstrap.decimal_handling_mode``), the topic's float64 / string events
apply on top, and the table ends equal to ``SELECT *`` of the source in the connector's representation. A bootstrap
left at ``precise`` for a ``double`` connector fails the first ingest batch with an error naming the table, the
column, the record and the setting."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest
import yaml

from cdc.bootstrap.postgres_types import lsn_to_int
from tests.conftest import unique
from tests.integration.bootstrap.test_bootstrap_postgres import pg_event, produce, start_bootstrap, write_config
from tests.integration.bootstrap.test_bootstrap_postgres import value_schema as pg_value_schema
from tests.integration.cli import finish, summary_of

pytestmark = pytest.mark.integration

NUMERIC = ("amount", "ratio", "balance")  # numeric(10,2), numeric, money
CONNECT = {"double": "float64", "string": "string"}


def as_connector(mode: str, v: Decimal | None):
    """A numeric value as the connector sends it in ``mode``: double = BigDecimal.doubleValue, string =
    BigDecimal.toPlainString (Debezium 3.6.1's SpecialValueDecimal, as the real chain shows:
    tests/scenarios/test_debezium_postgres_types.py), which is Python's format(v, "f")."""
    if v is None:
        return None
    if v.is_nan():
        return float("nan") if mode == "double" else "NAN"
    if v.is_zero():
        v = v.copy_abs()  # a BigDecimal has no negative zero
    return float(v) if mode == "double" else format(v, "f")


def value_schema(mode: str) -> dict:
    return pg_value_schema([("id", "int32", False), *((c, CONNECT[mode], True) for c in NUMERIC)])


class Source:
    """``public.customers (id, amount numeric(10,2), ratio numeric, balance money)``; ``tx`` runs changes in one
    transaction and returns their Debezium events in ``mode``."""

    def __init__(self, pg, db: str, mode: str):
        self.conn, self.mode = pg.connect(db), mode
        self.conn.execute("CREATE TABLE public.customers (id int PRIMARY KEY, amount numeric(10,2), ratio numeric, "
                          "balance money)")
        self.last_commit = self.lsn()

    def lsn(self) -> int:
        return lsn_to_int(self.conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])

    def tx(self, *changes: tuple) -> list[tuple[bytes, bytes]]:
        out = []
        with self.conn.transaction():
            xid = int(self.conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            for op, cid, *vals in changes:
                if op == "c":
                    self.conn.execute("INSERT INTO customers VALUES (%s, %s::numeric, %s::numeric, %s::numeric::money)",
                                      (cid, *vals))
                elif op == "u":
                    self.conn.execute("UPDATE customers SET amount = %s::numeric, ratio = %s::numeric, "
                                      "balance = %s::numeric::money WHERE id = %s", (*vals, cid))
                row = self.row(cid)  # a delete's before image: the row before it goes
                if op == "d":
                    self.conn.execute("DELETE FROM customers WHERE id = %s", (cid,))
                out.append((op, row, self.lsn()))
        commit = self.lsn()
        evs = [self.event(op, row, lsn, xid) for op, row, lsn in out]
        self.last_commit = commit
        return evs

    def row(self, cid: int) -> dict:
        r = self.conn.execute("SELECT id, amount, ratio, balance::numeric FROM customers WHERE id = %s",
                              (cid,)).fetchone()
        return {"id": r[0], **{c: as_connector(self.mode, v) for c, v in zip(NUMERIC, r[1:])}}

    def event(self, op: str, row: dict, lsn: int, xid: int) -> tuple[bytes, bytes]:
        return pg_event(op, row, lsn, self.last_commit, xid, value_schema(self.mode))

    def rows(self) -> dict[int, tuple]:
        rs = self.conn.execute("SELECT id, amount, ratio, balance::numeric FROM customers").fetchall()
        return {r[0]: tuple(as_connector(self.mode, v) for v in r[1:]) for r in rs}


def setup(tmp_path, postgres, broker, warehouse, connector: str, bootstrap: str | None):
    db = unique("db")
    postgres.create_database(db)
    topic = unique("dbserver1.public.customers_")
    broker.create_topic(topic, partitions=2)
    target = f"{unique('t')}.customers"
    config = write_config(tmp_path / "p.yaml", broker, warehouse, postgres, db, topic, unique("meta"), target)
    if bootstrap is not None:
        raw = yaml.safe_load(config.read_text())
        raw["tables"][0]["bootstrap"]["decimal_handling_mode"] = bootstrap
        config.write_text(yaml.safe_dump(raw))
    return topic, target, config, Source(postgres, db, connector)


def table_rows(spark, target: str) -> dict[int, tuple]:
    spark.catalog.refreshTable(f"lake.{target}")
    return {r["id"]: tuple(r[c] for c in NUMERIC) for r in spark.table(f"lake.{target}").collect()}


def ingest(spark, config):
    from cdc.config.load import load_config
    from cdc.run.batch import run_batch

    cfg = load_config(config).with_batch(max_records_per_partition=3)
    for _ in range(20):
        if run_batch(spark, cfg, list(cfg.tables))["tables"][0]["status"] == "empty":
            return


@pytest.mark.parametrize("mode", ["double", "string"])
def test_bootstrap_in_the_connectors_decimal_mode_then_ingest(mode, tmp_path, postgres, broker, warehouse, spark):
    topic, target, config, src = setup(tmp_path, postgres, broker, warehouse, mode, mode)
    produce(broker, topic, src.tx(("c", 1, "12345678.91", "3.1415926535", "-1234.56"),
                                  ("c", 2, "0.10", "0.00000012", "1000"),
                                  ("c", 3, None, None, None),
                                  ("c", 5, "0.01", "-0.00000012", "0.01")))  # bootstrapped as is: below 1E-6
    produce(broker, topic, src.tx(("u", 2, "-0.01", "1.50", "0.5")))
    res = finish(start_bootstrap(config))
    assert res.returncode == 0, res.stderr
    assert summary_of(res)["tables"][0]["rows"] == 4
    spark.catalog.refreshTable(f"lake.{target}")
    types = {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{target}").schema.fields}
    assert [types[c] for c in NUMERIC] == [{"double": "double", "string": "string"}[mode]] * 3
    assert table_rows(spark, target) == src.rows()  # the bootstrap wrote what the connector would have sent
    if mode == "string":
        assert table_rows(spark, target)[2] == ("-0.01", "1.50", "0.50")
        assert table_rows(spark, target)[5][1] == "-0.00000012"  # toPlainString, no exponent

    after = src.tx(("u", 1, "99999999.99", "0.0000000", "12345678.9"))
    after += src.tx(("c", 4, "7", "-2.5E-7", "-0.01"))
    after += src.tx(("d", 3))
    produce(broker, topic, after)
    ingest(spark, config)
    assert table_rows(spark, target) == src.rows()
    if mode == "string":
        assert table_rows(spark, target)[1][1] == "0.0000000" and table_rows(spark, target)[4][1] == "-0.00000025"


def test_precise_bootstrap_of_a_double_topic_names_the_setting_and_the_way_out(tmp_path, postgres, broker, warehouse,
                                                                               spark):
    from cdc.common.errors import SchemaEvolutionError

    topic, target, config, src = setup(tmp_path, postgres, broker, warehouse, "double", None)
    src.tx(("c", 1, "12.34", "5", "6"))
    res = finish(start_bootstrap(config))
    assert res.returncode == 0, res.stderr
    produce(broker, topic, src.tx(("u", 1, "56.78", "5", "6")))  # key 1: partition 1, offset 0
    with pytest.raises(SchemaEvolutionError) as err:
        ingest(spark, config)
    text = str(err.value)
    assert f"table {target}" in text and "'amount'" in text and "decimal(10,2) → double" in text, text
    assert f"topic {topic} partition 1 offset 0" in text, text
    assert "decimal.handling.mode" in text and "bootstrap.decimal_handling_mode: double" in text, text
    assert f"DROP TABLE {target}" in text, text
    assert table_rows(spark, target) == {1: (Decimal("12.34"), Decimal("5.0000000000"), Decimal("6.00"))}

    raw = yaml.safe_load(config.read_text())  # what the message says: the connector's mode, drop, bootstrap again
    raw["tables"][0]["bootstrap"]["decimal_handling_mode"] = "double"
    config.write_text(yaml.safe_dump(raw))
    spark.sql(f"DROP TABLE lake.{target}")
    res = finish(start_bootstrap(config))
    assert res.returncode == 0, res.stderr
    ingest(spark, config)
    assert table_rows(spark, target) == src.rows() == {1: (56.78, 5.0, 6.0)}


MYSQL_VALUES = {  # column type → values as SQL (None: NULL)
    "decimal(10,2)": ("12345678.91", "-0.01", "0.00"),
    "decimal(20,10)": ("0.0000001200", "-0.0000000000", "1234567890.0123456789"),
    "decimal(38,0)": ("-1" + "0" * 37, "0", None),
}


@pytest.mark.parametrize("mode", ["double", "string"])
def test_mysql_bootstrap_in_the_connectors_decimal_mode(mode, tmp_path, mariadb, broker, warehouse, spark):
    from tests.integration.bootstrap import test_bootstrap_mysql as my

    database = unique("db")
    mariadb.create_database(database)
    target = f"{unique('t')}.customers"
    config = my.write_config(tmp_path / "m.yaml", broker, warehouse, mariadb, database, unique("dbserver1.shop.c_"),
                             unique("meta"), target)
    raw = yaml.safe_load(config.read_text())
    raw["tables"][0]["bootstrap"]["decimal_handling_mode"] = mode
    config.write_text(yaml.safe_dump(raw))
    types = list(MYSQL_VALUES)
    rows = list(zip(*MYSQL_VALUES.values()))
    mariadb.execute(f"CREATE TABLE customers (id int PRIMARY KEY, {', '.join(f'c{i} {t}' for i, t in enumerate(types))});"
                    + "".join(f" INSERT INTO customers VALUES ({n}, {', '.join(v or 'NULL' for v in r)});"
                              for n, r in enumerate(rows)), database)
    res = finish(my.start_bootstrap(config))
    assert res.returncode == 0, res.stderr
    spark.catalog.refreshTable(f"lake.{target}")
    got = {r["id"]: tuple(r[f"c{i}"] for i in range(len(types))) for r in spark.table(f"lake.{target}").collect()}
    # the connector's BigDecimal carries the column's scale: the value quantized to it, then doubleValue /
    # toPlainString
    scales = [int(t.rstrip(")").split(",")[1]) for t in types]
    with localcontext() as ctx:
        ctx.prec = 60
        want = {n: tuple(None if v is None else as_connector(mode, Decimal(v).quantize(Decimal(1).scaleb(-s)))
                         for v, s in zip(r, scales)) for n, r in enumerate(rows)}
    assert got == want
    if mode == "string":
        assert got[0][1] == "0.0000001200" and got[1] == ("-0.01", "0.0000000000", "0")
