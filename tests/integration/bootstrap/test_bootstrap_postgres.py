"""JDBC bootstrap end to end against a real PostgreSQL server: rows written, updated and deleted; a bootstrap (the
real CLI, a Spark JDBC read inside an exported snapshot) while more changes commit; more changes after; Debezium
events for every change, stamped with what the server reported (transaction id, WAL positions), produced to the
local broker from offset 0; micro-batches from offset 0 never show a state older than the bootstrap and end equal to
``SELECT * FROM`` the source table. Plus a crash during the bootstrap and reruns (refused without --replace)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from cdc.bootstrap.postgres_types import lsn_to_int
from tests.conftest import unique
from tests.integration import events
from tests.integration.bootstrap.history import history_before_bootstrap
from tests.integration.cli import REPO, finish, start_job, summary_of
from tests.unit.cdc.bootstrap.test_job import ENUM, EXTENSIONS

pytestmark = pytest.mark.integration

BOOTSTRAP = REPO / "jobs" / "bootstrap.py"
SOURCE_FIELDS = [("connector", "string", False), ("lsn", "int64", True), ("txId", "int64", True),
                 ("sequence", "string", True), ("ts_ms", "int64", False)]


def value_schema(cols=events.COLUMNS) -> dict:
    """The Debezium PostgreSQL envelope schema of the row ``cols``, with the connector's own source block."""
    schema = events.value_schema(cols)
    source = {"type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False,
              "fields": [{"type": t, "optional": o, "field": f} for f, t, o in SOURCE_FIELDS], "field": "source"}
    return {**schema, "fields": [source if f["field"] == "source" else f for f in schema["fields"]]}


def pg_event(op: str, row: dict, lsn: int, last_commit: int, txid: int,
             schema: dict | None = None) -> tuple[bytes, bytes]:
    """A Debezium PostgreSQL change event: ``source.sequence`` = [last commit LSN before the transaction, LSN];
    ``schema``: its value schema (default ``value_schema()``)."""
    source = {"connector": "postgresql", "lsn": lsn, "txId": txid,
              "sequence": json.dumps([str(last_commit), str(lsn)]), "ts_ms": 1700000000000}
    payload = {"before": row if op == "d" else None, "after": None if op == "d" else row, "source": source,
               "op": op, "ts_ms": source["ts_ms"] + 5}
    key = json.dumps({"schema": events.KEY_SCHEMA, "payload": {"id": row["id"]}}).encode()
    return key, json.dumps({"schema": schema or value_schema(), "payload": payload}).encode()


def position(event: tuple[bytes, bytes]) -> list[int]:
    """The (last commit LSN, LSN) ordering position of an event ``pg_event`` built."""
    source = json.loads(event[1])["payload"]["source"]
    return [int(json.loads(source["sequence"])[0]), source["lsn"]]


class Source:
    """The source table ``public.customers`` and the Debezium events of every transaction run through ``tx``."""

    def __init__(self, pg, db: str):
        self.conn = pg.connect(db)
        self.conn.execute("CREATE TABLE public.customers (id int PRIMARY KEY, name text, bio text)")
        self.last_commit = self.lsn()

    def lsn(self) -> int:
        return lsn_to_int(self.conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])

    def tx(self, *changes: tuple) -> list[tuple[bytes, bytes]]:
        """Run ``(op, id[, name, bio])`` changes in one transaction; their events, as Debezium streams them."""
        out = []
        with self.conn.transaction():
            xid = int(self.conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            for op, cid, *rest in changes:
                if op == "c":
                    self.conn.execute("INSERT INTO customers VALUES (%s, %s, %s)", (cid, *rest))
                    row = {"id": cid, "name": rest[0], "bio": rest[1]}
                elif op == "u":
                    self.conn.execute("UPDATE customers SET name = %s, bio = %s WHERE id = %s", (*rest, cid))
                    row = {"id": cid, "name": rest[0], "bio": rest[1]}
                else:
                    name, bio = self.conn.execute("DELETE FROM customers WHERE id = %s RETURNING name, bio",
                                                  (cid,)).fetchone()
                    row = {"id": cid, "name": name, "bio": bio}
                out.append((op, row, self.lsn()))
        commit = self.lsn()
        evs = [pg_event(op, row, lsn, self.last_commit, xid) for op, row, lsn in out]
        self.last_commit = commit
        return evs

    def rows(self) -> dict[int, tuple]:
        return {r[0]: (r[1], r[2]) for r in self.conn.execute("SELECT id, name, bio FROM customers").fetchall()}


def write_config(path: Path, broker, warehouse, pg, db: str, topic: str, meta: str, target: str,
                 slot: str = "") -> Path:
    path.write_text(yaml.safe_dump({
        "pipeline": "tests", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)}, "metadata_namespace": meta,
        "batch": {"read_timeout_seconds": 20}, "spark": {"spark.sql.shuffle.partitions": "2"},
        "tables": [{"topic": topic, "target": target, "bootstrap": {
            "jdbc_url": pg.jdbc_url_for(db), "user": "postgres", "password": "${CDC_TEST_PG_PASSWORD:-}",
            "source_table": "public.customers", "num_partitions": 3, "fetch_size": 2,
            **({"connector_slot": slot, "connector_wait_seconds": 300} if slot else {})}}]}))
    return path


def start_bootstrap(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return start_job(config, *args, env=env, script=BOOTSTRAP)


def wait_for_snapshot(pg, db: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until the bootstrap holds its exported snapshot open (its session idles inside the transaction)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pg.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cdc-bootstrap' "
                      "AND state = 'idle in transaction' AND datname = %s", (db,))[0][0]:
            return
        if proc.poll() is not None:
            raise AssertionError(f"bootstrap ended early: {proc.communicate()}")
        time.sleep(0.2)
    raise AssertionError("the bootstrap never opened its snapshot")


@pytest.fixture
def setup(tmp_path, postgres, broker, warehouse):
    db = unique("db")
    postgres.create_database(db)
    topic = unique("dbserver1.public.customers_")
    broker.create_topic(topic, partitions=2)
    target = f"{unique('t')}.customers"
    config = write_config(tmp_path / "p.yaml", broker, warehouse, postgres, db, topic, unique("meta"), target)
    return db, topic, target, config, Source(postgres, db)


def table_rows(spark, target: str) -> dict[int, tuple]:
    spark.catalog.refreshTable(f"lake.{target}")
    return {r["id"]: (r["name"], r["bio"]) for r in spark.table(f"lake.{target}").collect()}


def produce(broker, topic: str, records) -> None:
    """Keyed like Debezium (one key → one partition)."""
    for k, v in records:
        events.produce(broker.bootstrap, topic, [(k, v)], partition=json.loads(k)["payload"]["id"] % 2)


def wait_for_connector_check(pg, db: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until the bootstrap polls the connector's replication slot."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pg.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cdc-bootstrap' "
                      "AND query LIKE '%%confirmed_flush_lsn%%' AND datname = %s", (db,))[0][0]:
            return
        if proc.poll() is not None:
            raise AssertionError(f"bootstrap ended early: {proc.communicate()}")
        time.sleep(0.2)
    raise AssertionError("the bootstrap never waited for the connector's slot")


@pytest.fixture
def slot(postgres, setup):
    """A logical replication slot standing in for the Debezium connector's (confirmed up to where the test says)."""
    db = setup[0]
    name = unique("slot_")
    postgres.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (name,), database=db)
    yield name
    postgres.execute("SELECT pg_drop_replication_slot(%s)", (name,), database=db)


def test_bootstrap_then_kafka_from_offset_zero_loses_and_regresses_nothing(setup, slot, postgres, broker, spark,
                                                                           warehouse, tmp_path):
    db, topic, target, config, src = setup
    meta = yaml.safe_load(config.read_text())["metadata_namespace"]
    config = write_config(tmp_path / "slot.yaml", broker, warehouse, postgres, db, topic, meta, target, slot)
    before = history_before_bootstrap(src)
    produce(broker, topic, before)
    at_snapshot = src.rows()

    proc = start_bootstrap(config, env={"CDC_PAUSE_AT": "bootstrap_after_snapshot:12"})
    wait_for_snapshot(postgres, db, proc)
    during = []  # committed while the bootstrap holds its snapshot: not in it, in the topic before it is scanned
    during += src.tx(("u", 1, "n1-v2", "b1-v2"))
    during += src.tx(("d", 2))
    during += src.tx(("c", 8, "n8", "b8"), ("c", 9, "n9", "b9"))
    during += src.tx(("d", 9))
    produce(broker, topic, during)
    wait_for_connector_check(postgres, db, proc)  # the slot is behind the snapshot: the bootstrap waits
    time.sleep(1)
    assert proc.poll() is None
    postgres.execute("SELECT pg_replication_slot_advance(%s, pg_current_wal_lsn())", (slot,), database=db)
    res = finish(proc)
    assert res.returncode == 0, res.stderr
    assert "no bootstrap.connector_slot" not in res.stderr
    summary = summary_of(res)["tables"][0]
    assert summary["status"] == "bootstrapped" and summary["rows"] == len(at_snapshot)
    assert summary["source_position"]["horizon"] == position(before[-1])  # the newest change the snapshot saw
    assert summary["source_position"]["lsn_number"] >= position(before[-1])[1]
    assert summary["seconds"]["connector_wait"] >= 1
    assert table_rows(spark, target) == at_snapshot  # the snapshot, not the changes committed during the read

    after = src.tx(("u", 5, "n5-v3", "b5-v3"))
    after += src.tx(("c", 7, "n7-again", "b7-again"))  # a key deleted before the bootstrap comes back later
    after += src.tx(("d", 4))
    produce(broker, topic, after)

    from cdc.config.load import load_config
    from cdc.run.batch import run_batch

    cfg = load_config(config).with_batch(max_records_per_partition=5)
    for _ in range(20):  # small batches from offset 0: never older than the bootstrap, never a dead key
        out = run_batch(spark, cfg, list(cfg.tables))["tables"][0]
        rows = table_rows(spark, target)
        assert 3 not in rows and (7 not in rows or rows[7] == ("n7-again", "b7-again")), rows
        assert rows.get(4) in (("n4-v3", "b4-v3"), None) and rows.get(5) != ("n5", "b5"), rows
        if out["status"] == "empty":
            break
    assert table_rows(spark, target) == src.rows()
    ledger = spark.sql(f"SELECT mode, status, `partition`, truncate_barrier FROM lake.{cfg.metadata_namespace}.ledger "
                       "WHERE mode = 'bootstrap'").collect()
    assert [(r["mode"], r["status"], r["partition"]) for r in ledger] == [("bootstrap", "committed", -1)]


@pytest.fixture
def small_setup(setup, broker):
    db, topic, target, config, src = setup
    produce(broker, topic, src.tx(*[("c", i, f"n{i}", f"b{i}") for i in range(1, 5)]))
    return setup


def test_crash_leaves_target_untouched_rerun_and_replace(small_setup, spark):
    db, topic, target, config, src = small_setup
    meta = load_meta(config)
    killed = finish(start_bootstrap(config, env={"CDC_KILL_AT": "bootstrap_after_stage"}))
    assert killed.returncode == -9, killed.stderr
    assert not spark.catalog.tableExists(f"lake.{target}")  # staged only: the target was never touched

    killed = finish(start_bootstrap(config, "--table", target, env={"CDC_KILL_AT": "bootstrap_after_swap"}))
    assert killed.returncode == -9, killed.stderr
    assert table_rows(spark, target) == src.rows() and bootstrap_rows(spark, meta) == []  # swapped, not recorded

    finished = finish(start_bootstrap(config))  # finishes the swapped bootstrap: its ledger row, nothing re-read
    assert finished.returncode == 0, finished.stderr
    assert summary_of(finished)["tables"][0]["status"] == "recovered" and len(bootstrap_rows(spark, meta)) == 1

    src.tx(("u", 1, "changed", "changed"))
    refused = finish(start_bootstrap(config))
    assert refused.returncode == 2 and "--replace" in refused.stderr and "password" not in refused.stderr.lower()
    assert table_rows(spark, target)[1] == ("n1", "b1")

    replaced = finish(start_bootstrap(config, "--replace"))
    assert replaced.returncode == 0, replaced.stderr
    assert table_rows(spark, target) == src.rows() and len(bootstrap_rows(spark, meta)) == 2
    assert f"WARNING bootstrap of {target} from public.customers: no bootstrap.connector_slot" in replaced.stderr


def load_meta(config: Path) -> str:
    return yaml.safe_load(config.read_text())["metadata_namespace"]


def bootstrap_rows(spark, meta: str) -> list:
    ledger = f"lake.{meta}.ledger"
    spark.catalog.refreshTable(ledger)
    return spark.sql(f"SELECT batch_id, truncate_barrier FROM {ledger} WHERE mode = 'bootstrap' "
                     "AND status = 'committed'").collect()  # a claim in flight is not a bootstrap yet


TYPED = {  # PostgreSQL type → (a value as SQL, what the bootstrapped column holds, read through Spark)
    "smallint": ("-7", -7), "integer": ("2147483647", 2147483647), "bigint": ("-9007199254740993", -9007199254740993),
    "real": ("1.5", 1.5), "double precision": ("-2.25e100", -2.25e100), "boolean": ("true", True),
    "bit(1)": ("B'1'", True), "text": ("'ünïcode'", "ünïcode"), "character varying(20)": ("'v'", "v"),
    "character(3)": ("'ab'", "ab "), "bytea": ("'\\x00ff10'::bytea", b"\x00\xff\x10"),
    "numeric(10,2)": ("12345678.91", Decimal("12345678.91")), "numeric(38,0)": ("-1" + "0" * 37, Decimal("-1E+37")),
    "numeric": ("3.1415926535", Decimal("3.1415926535")), "date": ("'2024-02-29'", dt.date(2024, 2, 29)),
    "time(3) without time zone": ("'23:59:58.123'", 86398123000),
    "time without time zone": ("'00:00:01.000001'", 1000001),
    "timestamp(3) without time zone": ("'1969-12-31 23:59:59.999'", dt.datetime(1969, 12, 31, 23, 59, 59, 999000)),
    "timestamp without time zone": ("'2024-05-01 08:00:00.123456'", dt.datetime(2024, 5, 1, 8, 0, 0, 123456)),
    "timestamp with time zone": ("'2024-05-01 10:00:00.5+02'", "2024-05-01T08:00:00.500000Z"),
    "time with time zone": ("'10:15:30.25+02'", "08:15:30.25Z"),
    "json": ("'{\"a\": [1, 2]}'", '{"a": [1, 2]}'), "jsonb": ("'{\"b\":1, \"a\":2}'", '{"a": 2, "b": 1}'),
    "uuid": ("'123e4567-e89b-12d3-a456-426614174000'", "123e4567-e89b-12d3-a456-426614174000"),
    "xml": ("'<a>1</a>'", "<a>1</a>"), "integer[]": ("'{1,NULL,3}'", [1, None, 3]),
    "text[]": ("'{x,\"y z\"}'", ["x", "y z"]),
    "name": ("'nm'", "nm"), "inet": ("'192.168.0.1'", "192.168.0.1"),  # the output text, not inet::text's /32
    "cidr": ("'10.1.0.0/16'", "10.1.0.0/16"), "macaddr": ("'08:00:2b:01:02:03'", "08:00:2b:01:02:03"),
    "macaddr8": ("'08:00:2b:01:02:03:04:05'", "08:00:2b:01:02:03:04:05"), "citext": ("'MiXed'", "MiXed"),
    "ltree": ("'a.b.c'", "a.b.c"), ENUM: ("'happy'", "happy"), "int4range": ("'(0,5]'", "[1,6)"),
    "int8range": ("'[1,9007199254740993)'", "[1,9007199254740993)"), "numrange": ("'[1.50,2.5)'", "[1.50,2.5)"),
    "daterange": ("'[2024-01-01,2024-02-01)'", "[2024-01-01,2024-02-01)"),
    "tsrange": ("'[2024-01-01 10:00,2024-01-01 11:00:00.5)'", '["2024-01-01 10:00:00","2024-01-01 11:00:00.5")'),
    "money": ("'-1234.56'", Decimal("-1234.56")),
    "interval": ("'00:00:01.000997'", 1000996),  # Debezium's double arithmetic: 1 µs below the exact 1000997
    "interval day to second(3)": ("'-1 years -2 mons +3 days -04:05:06.789'", -36572706789000),
}
INTERVAL_SATURATES = ("'178000000 years'", 2 ** 63 - 1)  # Java's (long) of 5.6e21 µs


def create_typed_table(postgres, db: str) -> list[int]:
    """``customers`` with a column ``c<i>`` per TYPED type (the contrib types only where the server has the
    extension); the indexes of the columns created."""
    available = {r[0] for r in postgres.execute("SELECT name FROM pg_available_extensions", database=db)}
    for ext in sorted(set(EXTENSIONS.values()) & available):
        postgres.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}", database=db)
    postgres.execute(f"CREATE TYPE {ENUM} AS ENUM ('sad', 'happy')", database=db)
    made = [i for i, t in enumerate(TYPED) if EXTENSIONS.get(t, "") in available | {""}]
    postgres.execute("DROP TABLE customers", database=db)
    columns = ", ".join(f"c{i} {list(TYPED)[i]}" for i in made)
    postgres.execute(f"CREATE TABLE customers (id int PRIMARY KEY, {columns})", database=db)
    return made


def test_every_mapped_type_gets_the_debezium_paths_column(setup, postgres, spark):
    """Column by column: the bootstrapped table's schema is the one the Debezium path creates from the same
    columns' events (tests.unit.cdc.bootstrap.test_job.DEBEZIUM, decoded by the job's JSON decoder), and the values
    are the Debezium path's representations."""
    import pyarrow as pa

    from cdc.iceberg.tables import spark_type
    from tests.unit.cdc.bootstrap.test_job import DEBEZIUM, debezium_columns

    db, topic, target, config, src = setup
    cols = list(TYPED)
    assert cols == list(DEBEZIUM)
    made = create_typed_table(postgres, db)
    assert len(made) >= len(cols) - len(EXTENSIONS), made
    postgres.execute(f"INSERT INTO customers (id, {', '.join(f'c{i}' for i in made)}) "
                     f"VALUES (1, {', '.join(TYPED[cols[i]][0] for i in made)})", database=db)
    postgres.execute("INSERT INTO customers (id) VALUES (2)", database=db)
    interval = cols.index("interval")
    postgres.execute(f"INSERT INTO customers (id, c{interval}) VALUES (3, {INTERVAL_SATURATES[0]})", database=db)
    res = finish(start_bootstrap(config))
    assert res.returncode == 0, res.stderr
    table = f"lake.{target}"
    debezium = debezium_columns()
    fields = {f.name: f.dataType for f in spark.table(table).schema.fields}
    for i in made:
        assert fields[f"c{i}"] == spark_type(debezium[f"c{i}"]), cols[i]
    zoned = cols.index("timestamp with time zone")
    row = spark.sql(f"SELECT *, date_format(to_utc_timestamp(c{zoned}, current_timezone()), "
                    f"\"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'\") AS zoned FROM {table} WHERE id = 1").first().asDict()
    row[f"c{zoned}"] = row.pop("zoned")
    for i in made:
        assert row[f"c{i}"] == TYPED[cols[i]][1], cols[i]
    empty = spark.sql(f"SELECT * FROM {table} WHERE id = 2").first().asDict()
    assert all(v is None for k, v in empty.items() if k.startswith("c")), empty
    assert spark.sql(f"SELECT c{interval} FROM {table} WHERE id = 3").first()[0] == INTERVAL_SATURATES[1]
    assert pa.types.is_int64(debezium[f"c{cols.index('time without time zone')}"])
