"""JDBC bootstrap end to end against a real MariaDB server (binlog on): rows written, updated and deleted (one key
inserted and deleted); a bootstrap (the real CLI: ``LOCK TABLES ... READ``, ``SHOW MASTER STATUS`` under it, a
parallel Spark JDBC read) while a writer waits for the lock; more changes after; Debezium MySQL events for every
change, stamped with the binlog file/position the server reported before each transaction, produced to the local
broker from offset 0; micro-batches from offset 0 never show a state older than the bootstrap and end equal to
``SELECT * FROM`` the source table. Plus a crash during the bootstrap and reruns, and the types column by column."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from cdc.positions.ordering import binlog_file_seq
from devtools.mariadb import PASSWORD, USER
from tests.conftest import unique
from tests.integration import events
from tests.integration.bootstrap.history import history_before_bootstrap
from tests.integration.cli import REPO, finish, start_job, summary_of

pytestmark = pytest.mark.integration

BOOTSTRAP = REPO / "jobs" / "bootstrap.py"


def sql_value(v) -> str:
    return "NULL" if v is None else "'" + str(v).replace("\\", "\\\\").replace("'", "''") + "'"


class Source:
    """The source table ``customers`` and the Debezium MySQL events of every transaction run through ``tx``."""

    def __init__(self, db, database: str):
        self.db, self.database = db, database
        db.execute("CREATE TABLE customers (id int PRIMARY KEY, name varchar(50), bio text)", database)
        self.model: dict[int, tuple] = {}
        self.lock = threading.Lock()

    def tx(self, *changes: tuple) -> list[tuple[bytes, bytes]]:
        """Run ``(op, id[, name, bio])`` changes in one transaction; their events, stamped with the binlog position
        ``SHOW MASTER STATUS`` reported in the same session just before the transaction (where its events start)."""
        with self.lock:
            stmts, rows = [], []
            for op, cid, *rest in changes:
                if op == "c":
                    stmts.append(f"INSERT INTO customers VALUES ({cid}, {sql_value(rest[0])}, {sql_value(rest[1])})")
                elif op == "u":
                    stmts.append(f"UPDATE customers SET name = {sql_value(rest[0])}, bio = {sql_value(rest[1])} "
                                 f"WHERE id = {cid}")
                else:
                    stmts.append(f"DELETE FROM customers WHERE id = {cid}")
                    rest = list(self.model[cid])
                rows.append((op, {"id": cid, "name": rest[0], "bio": rest[1]}))
            out = self.db.execute("SHOW MASTER STATUS; START TRANSACTION; " + "; ".join(stmts) + "; COMMIT",
                                  self.database)
            file, pos = str(out[0][0]), int(out[0][1])
            for op, row in rows:
                if op == "d":
                    self.model.pop(row["id"])
                else:
                    self.model[row["id"]] = (row["name"], row["bio"])
            return [events.mysql(op, row["id"], row, file, pos, r) for r, (op, row) in enumerate(rows)]

    def rows(self) -> dict[int, tuple]:
        return {int(r[0]): (r[1], r[2]) for r in self.db.execute("SELECT id, name, bio FROM customers",
                                                                   self.database)}


def write_config(path: Path, broker, warehouse, mariadb, database: str, topic: str, meta: str, target: str,
                 scheme: str = "mariadb") -> Path:
    path.write_text(yaml.safe_dump({
        "pipeline": "tests", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)}, "metadata_namespace": meta,
        "batch": {"read_timeout_seconds": 20}, "spark": {"spark.sql.shuffle.partitions": "2"},
        "tables": [{"topic": topic, "target": target, "bootstrap": {
            "jdbc_url": mariadb.jdbc_url_for(database, scheme), "user": USER, "password": PASSWORD,
            "source_table": f"{database}.customers", "num_partitions": 3, "fetch_size": 2,
            "lock_wait_seconds": 30}}]}))
    return path


@pytest.fixture
def setup(tmp_path, mariadb, broker, warehouse):
    database = unique("db")
    mariadb.create_database(database)
    topic = unique("dbserver1.shop.customers_")
    broker.create_topic(topic, partitions=2)
    target = f"{unique('t')}.customers"
    config = write_config(tmp_path / "p.yaml", broker, warehouse, mariadb, database, topic, unique("meta"), target)
    return database, topic, target, config, Source(mariadb, database)


def start_bootstrap(config: Path, *args: str, env: dict[str, str] | None = None):
    return start_job(config, *args, env=env, script=BOOTSTRAP)


def table_rows(spark, target: str) -> dict[int, tuple]:
    spark.catalog.refreshTable(f"lake.{target}")
    return {r["id"]: (r["name"], r["bio"]) for r in spark.table(f"lake.{target}").collect()}


def produce(broker, topic: str, records) -> None:
    """Keyed like Debezium (one key → one partition)."""
    for k, v in records:
        events.produce(broker.bootstrap, topic, [(k, v)], partition=json.loads(k)["payload"]["id"] % 2)


def wait_for_lock(mariadb, database: str, proc, timeout: float = 300) -> None:
    """Until the bootstrap holds its READ lock on the source table."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if mariadb.admin(f"SHOW OPEN TABLES FROM `{database}` WHERE `Table` = 'customers' AND In_use > 0"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"bootstrap ended early: {proc.communicate()}")
        time.sleep(0.2)
    raise AssertionError("the bootstrap never locked the table")


def test_bootstrap_then_kafka_from_offset_zero_loses_and_regresses_nothing(setup, mariadb, broker, spark):
    database, topic, target, config, src = setup
    before = history_before_bootstrap(src)
    produce(broker, topic, before)
    at_snapshot = src.rows()

    proc = start_bootstrap(config, env={"CDC_PAUSE_AT": "bootstrap_after_snapshot:6"})
    wait_for_lock(mariadb, database, proc)
    during: list = []  # a writer that starts while the lock is held: it waits, and commits after the read
    writer = threading.Thread(target=lambda: during.extend(
        src.tx(("u", 1, "n1-v2", "b1-v2"), ("d", 2), ("c", 8, "n8", "b8"))))
    writer.start()
    time.sleep(2)
    assert writer.is_alive() and proc.poll() is None  # the writer waits for the bootstrap's lock
    res = finish(proc)
    writer.join(60)
    assert not writer.is_alive() and during
    assert res.returncode == 0, res.stderr
    summary = summary_of(res)["tables"][0]
    assert summary["status"] == "bootstrapped" and summary["rows"] == len(at_snapshot)
    at = summary["source_position"]
    assert at["horizon"] == [binlog_file_seq(at["binlog_file"]), at["binlog_pos"], -1]
    last_before = json.loads(before[-1][1])["payload"]["source"]
    first_during = json.loads(during[0][1])["payload"]["source"]
    assert (binlog_file_seq(last_before["file"]), last_before["pos"]) < tuple(at["horizon"][:2])
    assert (binlog_file_seq(first_during["file"]), first_during["pos"]) >= tuple(at["horizon"][:2])
    assert table_rows(spark, target) == at_snapshot  # the locked table, not the writer's changes

    after = src.tx(("u", 5, "n5-v3", "b5-v3"))
    after += src.tx(("c", 7, "n7-again", "b7-again"))  # a key deleted before the bootstrap comes back later
    after += src.tx(("d", 4))
    produce(broker, topic, during + after)

    from cdc.config.load import load_config
    from cdc.run.batch import run_batch

    cfg = load_config(config).with_batch(max_records_per_partition=5)
    for _ in range(20):  # small batches from offset 0: never older than the bootstrap, never a dead key
        out = run_batch(spark, cfg, list(cfg.tables))["tables"][0]
        rows = table_rows(spark, target)
        assert 3 not in rows and (7 not in rows or rows[7] == ("n7-again", "b7-again")), rows
        assert rows.get(4) in (("n4-v3", "b4-v3"), None) and rows.get(5) != ("n5", "b5"), rows
        assert rows.get(2) in (("n2-v2", "b2-v2"), None), rows
        if out["status"] == "empty":
            break
    assert table_rows(spark, target) == src.rows()
    ledger = spark.sql(f"SELECT mode, status, `partition`, truncate_barrier FROM lake.{cfg.metadata_namespace}.ledger "
                       "WHERE mode = 'bootstrap'").collect()
    assert [(r["mode"], r["status"], r["partition"], json.loads(r["truncate_barrier"])) for r in ledger] == [
        ("bootstrap", "committed", -1, at["horizon"])]


def bootstrap_rows(spark, meta: str) -> list:
    ledger = f"lake.{meta}.ledger"
    spark.catalog.refreshTable(ledger)
    return spark.sql(f"SELECT batch_id, truncate_barrier FROM {ledger} WHERE mode = 'bootstrap' "
                     "AND status = 'committed'").collect()  # a claim in flight is not a bootstrap yet


def test_crash_leaves_target_untouched_rerun_and_replace(setup, mariadb, broker, warehouse, spark, tmp_path):
    """Through a ``jdbc:mysql://`` URL (MariaDB Connector/J serves both schemes)."""
    database, topic, target, config, src = setup
    meta = yaml.safe_load(config.read_text())["metadata_namespace"]
    config = write_config(tmp_path / "mysql.yaml", broker, warehouse, mariadb, database, topic, meta, target,
                          scheme="mysql")
    produce(broker, topic, src.tx(*[("c", i, f"n{i}", f"b{i}") for i in range(1, 5)]))
    killed = finish(start_bootstrap(config, env={"CDC_KILL_AT": "bootstrap_after_stage"}))
    assert killed.returncode == -9, killed.stderr
    assert not spark.catalog.tableExists(f"lake.{target}")  # staged only: the target was never touched
    src.tx(("u", 1, "n1-v2", "b1-v2"))  # the killed run's lock went with its connection: writers go on

    killed = finish(start_bootstrap(config, "--table", target, env={"CDC_KILL_AT": "bootstrap_after_swap"}))
    assert killed.returncode == -9, killed.stderr
    assert table_rows(spark, target) == src.rows() and bootstrap_rows(spark, meta) == []  # swapped, not recorded

    finished = finish(start_bootstrap(config))  # finishes the swapped bootstrap: its ledger row, nothing re-read
    assert finished.returncode == 0, finished.stderr
    recovered = summary_of(finished)["tables"][0]
    assert recovered["status"] == "recovered" and len(bootstrap_rows(spark, meta)) == 1
    assert set(recovered["source_position"]) >= {"binlog_file", "binlog_pos", "horizon"}

    src.tx(("u", 2, "changed", "changed"))
    wrong = yaml.safe_load(config.read_text())
    wrong["tables"][0]["bootstrap"]["password"] = "not-the-password"
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(wrong))
    refused = finish(start_bootstrap(tmp_path / "wrong.yaml", "--replace"))  # a person must fix the login
    assert refused.returncode == 2 and "refused the login" in refused.stderr, refused.stderr
    assert "not-the-password" not in refused.stderr + refused.stdout
    assert table_rows(spark, target)[2] == ("n2", "b2")

    replaced = finish(start_bootstrap(config, "--replace"))
    assert replaced.returncode == 0, replaced.stderr
    assert table_rows(spark, target) == src.rows() and len(bootstrap_rows(spark, meta)) == 2


TYPED = {  # MySQL COLUMN_TYPE → (a value as SQL, what the bootstrapped column holds, read through Spark)
    "tinyint(4)": ("-7", -7), "tinyint(1)": ("1", 1), "smallint(6)": ("-300", -300),
    "smallint(5) unsigned": ("65535", 65535), "mediumint(9)": ("-8388608", -8388608),
    "int(11)": ("2147483647", 2147483647), "int(10) unsigned": ("4294967295", 4294967295),
    "bigint(20)": ("-9007199254740993", -9007199254740993),
    "bigint(20) unsigned": ("18446744073709551615", -1),  # bigint.unsigned.handling.mode=long wraps the same way
    "bit(1)": ("b'1'", True), "float": ("1.5", 1.5), "float(7,2)": ("2.25", 2.25), "double": ("-2.25e100", -2.25e100),
    "decimal(10,2)": ("12345678.91", Decimal("12345678.91")), "decimal(38,0)": ("-1" + "0" * 37, Decimal("-1E+37")),
    "char(3)": ("'ab'", "ab"), "varchar(20)": ("'v'", "v"), "text": ("'ünïcode'", "ünïcode"),
    "longtext": ("'long'", "long"), "enum('a','b')": ("'b'", "b"), "set('x','y')": ("'x,y'", "x,y"),
    "json": ("'{\"a\": [1, 2]}'", '{"a": [1, 2]}'), "varbinary(8)": ("x'00ff10'", b"\x00\xff\x10"),
    "blob": ("x'0102'", b"\x01\x02"), "date": ("'2024-02-29'", dt.date(2024, 2, 29)),
    "time(6)": ("'-01:02:03.5'", -3723500000), "datetime": ("'1969-12-31 23:59:59'", dt.datetime(1969, 12, 31, 23, 59, 59)),
    "datetime(6)": ("'2024-05-01 08:00:00.123456'", dt.datetime(2024, 5, 1, 8, 0, 0, 123456)),
    "timestamp(3)": ("'2024-05-01 10:00:00.5'", "2024-05-01T08:00:00.500000Z"),  # written at time_zone +02:00
    "year(4)": ("2024", 2024),
}


def test_every_mapped_type_gets_the_debezium_paths_column(setup, mariadb, spark):
    """Column by column: the bootstrapped table's schema is the one the Debezium MySQL path creates from the same
    columns' events (tests.unit.cdc.bootstrap.test_mysql.DEBEZIUM, decoded by the job's JSON decoder), and the
    values are the Debezium path's representations."""
    from cdc.iceberg.tables import spark_type
    from tests.unit.cdc.bootstrap.test_mysql import DEBEZIUM, debezium_columns

    database, topic, target, config, src = setup
    cols = list(TYPED)
    assert cols == list(DEBEZIUM)
    columns = ", ".join(f"c{i} {t}{' NULL' if t.startswith('timestamp') else ''}" for i, t in enumerate(cols))
    mariadb.execute(f"DROP TABLE customers; CREATE TABLE customers (id int PRIMARY KEY, {columns}); "
                    f"SET time_zone = '+02:00'; INSERT INTO customers VALUES (1, {', '.join(TYPED[t][0] for t in cols)});"
                    " INSERT INTO customers (id) VALUES (2)", database)
    res = finish(start_bootstrap(config))
    assert res.returncode == 0, res.stderr
    table = f"lake.{target}"
    spark.catalog.refreshTable(table)
    debezium = debezium_columns()
    fields = {f.name: f.dataType for f in spark.table(table).schema.fields}
    for i, column_type in enumerate(cols):
        assert fields[f"c{i}"] == spark_type(debezium[f"c{i}"]), column_type
    zoned = cols.index("timestamp(3)")
    row = spark.sql(f"SELECT *, date_format(to_utc_timestamp(c{zoned}, current_timezone()), "
                    f"\"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'\") AS zoned FROM {table} WHERE id = 1").first().asDict()
    row[f"c{zoned}"] = row.pop("zoned")
    for i, column_type in enumerate(cols):
        value = row[f"c{i}"]
        assert (bytes(value) if isinstance(value, (bytearray, memoryview)) else value) == TYPED[column_type][1], \
            column_type
    empty = spark.sql(f"SELECT * FROM {table} WHERE id = 2").first().asDict()
    assert all(v is None for k, v in empty.items() if k.startswith("c")), empty
