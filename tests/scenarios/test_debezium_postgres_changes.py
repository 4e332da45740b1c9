"""Changes on the real chain (PostgreSQL 15 → Debezium 3.6.1's PostgreSQL connector in a Kafka Connect worker → Kafka →
the job → Iceberg) that a mirror must survive: unchanged TOAST values under REPLICA IDENTITY DEFAULT and FULL,
primary-key updates, multi-statement transactions, TRUNCATE, ADD/DROP COLUMN and column type changes while
streaming, heartbeats and the transaction-metadata topic, a partitioned table published via its root, and a Connect
worker crash (at-least-once redelivery). The oracle is ``SELECT *`` of the source table after every ingest."""

from __future__ import annotations

import random
import string
import threading
import time
from decimal import Decimal

import pytest

from devtools.broker import read_topic
from tests.scenarios.debezium_chain import CONVERTERS, Source, connect_worker, converter_registry

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def connect(broker):
    yield from connect_worker(broker)


def big_text(rng: random.Random) -> str:
    """Incompressible enough to be stored out of line (TOAST: > 2 kB after compression)."""
    return "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(4000, 8000)))


@pytest.mark.parametrize("converter", CONVERTERS)
def test_unchanged_toast_values_with_replica_identity_default_and_full(request, postgres, broker, connect, spark,
                                                                       warehouse, converter):
    """An update that leaves a TOASTed text (and a TOASTed bytea) unchanged: under REPLICA IDENTITY DEFAULT
    Debezium sends ``__debezium_unavailable_value`` for it (its bytes for the bytea), under FULL the old tuple
    carries it; both converters; in the same batch
    as the row's insert, in a later batch, twice in one batch, and after a delete and re-insert, the table keeps
    the stored value and equals ``SELECT *``."""
    ddl = "id int PRIMARY KEY, n int, note text, blob bytea"
    src = Source(postgres, broker, connect, spark, warehouse, {"toast_default": ddl, "toast_full": ddl},
                 registry=converter_registry(request, converter))
    src.sql("ALTER TABLE toast_full REPLICA IDENTITY FULL")
    rng = random.Random(55)
    tables = ("toast_default", "toast_full")
    for t in tables:
        for i in range(1, 4):
            src.sql(f"INSERT INTO {t} VALUES (%s, 0, %s, %s)", (i, big_text(rng), big_text(rng).encode()))
    src.start()
    try:
        for t in tables:
            src.sql(f"INSERT INTO {t} VALUES (%s, 0, %s, %s)", (4, big_text(rng), big_text(rng).encode()))
            src.sql(f"UPDATE {t} SET n = n + 1 WHERE id IN (1, 4)")  # 4: in the batch of its insert
        src.ingest_clean()
        for t in tables:
            assert src.lake_rows(t) == src.source_rows(t), t
        for t in tables:
            src.sql(f"UPDATE {t} SET n = n + 1 WHERE id IN (1, 2, 4)")
            src.sql(f"UPDATE {t} SET n = n + 10 WHERE id = 2")  # twice in one batch
            src.sql(f"UPDATE {t} SET note = %s WHERE id = 3", (big_text(rng),))  # the TOASTed value changes
            src.sql(f"UPDATE {t} SET n = n + 1 WHERE id = 3")
            src.sql(f"DELETE FROM {t} WHERE id = 4")
            src.sql(f"INSERT INTO {t} VALUES (4, 7, %s, NULL)", (big_text(rng),))
            src.sql(f"UPDATE {t} SET n = 8 WHERE id = 4")
        src.ingest_clean()
        for t in tables:
            assert src.lake_rows(t) == src.source_rows(t), t
            lake = src.lake_rows(t)
            assert all(len(row[1]) >= 4000 for row in lake.values()), t  # no placeholder reached the table
        sent = read_topic(broker.bootstrap, src.topic("toast_default"), 1, idle_timeout=0.5)
        assert any(b"__debezium_unavailable_value" in (m.value() or b"") for m in sent)  # the case was there
    finally:
        src.stop()


@pytest.mark.parametrize("converter", CONVERTERS)
def test_primary_key_updates_transactions_and_truncate_with_heartbeats_and_transaction_metadata(
        request, postgres, broker, connect, spark, warehouse, converter):
    """Primary-key updates (a key moving onto a key freed in the same transaction, a swap through a free key),
    multi-statement transactions mixing inserts, updates, deletes and key moves, and TRUNCATE
    (``skipped.operations=none``) followed by new rows in the same batch and in a later one; the connector sends
    heartbeats (``heartbeat.interval.ms``) and transaction metadata (``provide.transaction.metadata=true``: the
    ``<prefix>.transaction`` topic and a ``transaction`` block in every event). Both extra topics exist and are
    not tables of the pipeline; the table equals ``SELECT *`` after each ingest."""
    src = Source(postgres, broker, connect, spark, warehouse, {"accounts": "id int PRIMARY KEY, owner text, amount int"},
                 registry=converter_registry(request, converter),
                 **{"skipped.operations": "none", "heartbeat.interval.ms": "200",
                    "provide.transaction.metadata": "true"})
    src.sql("INSERT INTO accounts SELECT g, 'o' || g, g * 10 FROM generate_series(1, 20) g")
    src.start()
    try:
        src.sql("UPDATE accounts SET id = id + 100 WHERE id <= 3")  # 1..3 → 101..103
        src.transaction(["INSERT INTO accounts VALUES (1, 'new1', 1)",  # a key freed above is taken again
                         "UPDATE accounts SET amount = amount + 1 WHERE id = 4",
                         "DELETE FROM accounts WHERE id = 5",
                         "UPDATE accounts SET id = 5 WHERE id = 6",  # onto the key deleted in this transaction
                         "UPDATE accounts SET owner = 'moved' WHERE id = 5"])
        src.transaction(["UPDATE accounts SET id = 0 WHERE id = 7",  # swap 7 and 8 through the free key 0
                         "UPDATE accounts SET id = 7 WHERE id = 8",
                         "UPDATE accounts SET id = 8 WHERE id = 0"])
        summary = src.ingest_clean()
        assert [t["table"] for t in summary["tables"]] == [f"{src.ns}.accounts"]
        assert src.lake_rows("accounts") == src.source_rows("accounts")

        src.sql("UPDATE accounts SET amount = -1 WHERE id = 9")
        src.sql("TRUNCATE accounts")
        src.transaction(["INSERT INTO accounts VALUES (9, 'after', 9), (30, 'after', 30)",
                         "UPDATE accounts SET id = 31 WHERE id = 30"])
        src.ingest_clean()
        assert src.lake_rows("accounts") == src.source_rows("accounts") == {9: ("after", 9), 31: ("after", 30)}

        src.transaction(["TRUNCATE accounts", "INSERT INTO accounts VALUES (40, 'x', 1)"])
        src.sql("UPDATE accounts SET id = 41 WHERE id = 40")
        src.ingest_clean()
        assert src.lake_rows("accounts") == src.source_rows("accounts") == {41: ("x", 1)}

        heartbeats = read_topic(broker.bootstrap, f"__debezium-heartbeat.{src.prefix}", 1, idle_timeout=0.5)
        transactions = read_topic(broker.bootstrap, f"{src.prefix}.transaction", 1, idle_timeout=0.5)
        assert heartbeats and transactions
        assert any((src.marker.decode(m.value()) or {}).get("status") == "END" for m in transactions if m.value())
    finally:
        src.stop()


@pytest.mark.parametrize("converter", CONVERTERS)
def test_add_drop_and_retype_columns_while_streaming(request, postgres, broker, connect, spark, warehouse,
                                                     converter):
    """ADD COLUMN, DROP COLUMN and type changes (int → bigint, varchar(10) → text, numeric(5,2) → numeric(10,2))
    while the connector streams, with old- and new-schema events in one batch: the table gains the column, widens
    the types in place, and equals ``SELECT *`` on the source's columns; a dropped column stays in the table
    (documented), holding its old value in rows not written since and NULL in rows written after the drop."""
    src = Source(postgres, broker, connect, spark, warehouse,
                 {"items": "id int PRIMARY KEY, qty int, label varchar(10), price numeric(5,2), gone text"},
                 registry=converter_registry(request, converter))
    src.sql("INSERT INTO items SELECT g, g, 'l' || g, g + 0.25, 'g' || g FROM generate_series(1, 6) g")
    src.start()
    try:
        src.sql("UPDATE items SET qty = 100 WHERE id = 1")
        src.sql("ALTER TABLE items ADD COLUMN color text")
        src.sql("INSERT INTO items VALUES (7, 7, 'l7', 7.25, 'g7', 'red')")
        src.sql("UPDATE items SET color = 'blue' WHERE id = 2")
        src.ingest_clean()
        cols = src.columns("items")
        assert src.lake_rows("items") == src.source_rows("items")
        assert src.lake_columns("items") == cols

        src.sql("ALTER TABLE items DROP COLUMN gone")
        src.sql("UPDATE items SET qty = qty + 1 WHERE id IN (2, 3)")
        src.sql("INSERT INTO items VALUES (8, 8, 'l8', 8.25, 'green')")
        src.sql("ALTER TABLE items ALTER COLUMN qty TYPE bigint, ALTER COLUMN label TYPE text, "
                "ALTER COLUMN price TYPE numeric(10,2)")
        src.sql("INSERT INTO items VALUES (9, 5000000000, 'a label longer than ten', 12345678.90, NULL)")
        src.sql("UPDATE items SET qty = -5000000000, price = 99999999.99 WHERE id = 4")
        src.sql("DELETE FROM items WHERE id = 5")
        src.ingest_clean()
        types = src.lake_types("items")
        assert (types["qty"], types["label"], types["price"], types["gone"]) == (
            "bigint", "string", "decimal(10,2)", "string")
        assert src.lake_columns("items") == ["id", "qty", "label", "price", "gone", "color"]
        source_cols = src.columns("items")
        lake = src.lake_rows("items")
        gone = {k: row[3] for k, row in lake.items()}
        assert {k: row[:3] + row[4:] for k, row in lake.items()} == src.source_rows("items")
        assert gone == {1: "g1", 6: "g6", 7: "g7", 2: None, 3: None, 4: None, 8: None, 9: None}
        assert source_cols == ["id", "qty", "label", "price", "color"]
        assert lake[9][:3] == (5000000000, "a label longer than ten", Decimal("12345678.9"))
    finally:
        src.stop()


def test_partitioned_table_published_via_its_root(postgres, broker, connect, spark, warehouse):
    """A declaratively partitioned table (LIST partitions and a DEFAULT one) captured through its root
    (``publish.via.partition.root=true``: the publication's ``publish_via_partition_root``): the snapshot and the
    changes of every partition, a row moving between partitions by an update of its partition key, land in one
    Iceberg table that equals ``SELECT *`` of the root."""
    # PostgresSource creates "CREATE TABLE <name> (<ddl>)": the DDL closes the column list itself to add PARTITION BY
    src = Source(postgres, broker, connect, spark, warehouse,
                 {"events": "id int, region text, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region"},
                 **{"publish.via.partition.root": "true"})
    src.sql("CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu')")
    src.sql("CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us')")
    src.sql("CREATE TABLE events_other PARTITION OF events DEFAULT")
    src.sql("INSERT INTO events SELECT g, (ARRAY['eu', 'us', 'apac'])[g % 3 + 1], g FROM generate_series(1, 12) g")
    src.start()
    try:
        assert src.sql("SELECT pubviaroot FROM pg_publication") == [(True,)]
        src.sql("INSERT INTO events VALUES (13, 'eu', 13), (14, 'us', 14), (15, 'latam', 15)")
        src.sql("UPDATE events SET v = v * 100 WHERE id IN (1, 2, 3)")
        src.sql("UPDATE events SET region = 'eu' WHERE id = 14")  # moves from events_us to events_eu
        src.sql("DELETE FROM events WHERE id = 4")
        src.ingest_clean()
        expected = {(r[0], r[1]): r[2] for r in src.sql("SELECT id, region, v FROM events")}
        lake = {(r["id"], r["region"]): r["v"] for r in spark.table(f"lake.{src.ns}.events").collect()}
        assert lake == expected and len(expected) == 14
        assert {r[0] for r in src.sql("SELECT DISTINCT tableoid::regclass::text FROM events")} == {
            "events_eu", "events_us", "events_other"}
    finally:
        src.stop()


def test_connect_worker_crash_and_restart_redelivers_and_the_table_still_equals_the_source(
        postgres, broker, connect, spark, warehouse):
    """The Connect worker is SIGKILLed while rows change: the events it sent since its last offset flush are in
    Kafka, but its committed offsets do not cover them. While it is down, changes go on (the slot keeps them) and a
    batch commits what Kafka holds, those events included. Then the worker starts again and its connector resumes
    from the committed offsets, so those events reach Kafka a second time (at-least-once) after the table already
    has them and newer ones follow: the next batch leaves the table equal to ``SELECT *``."""
    src = Source(postgres, broker, connect, spark, warehouse, {"counters": "id int PRIMARY KEY, n int, tag text"})
    src.sql("INSERT INTO counters SELECT g, 0, 'start' FROM generate_series(1, 20) g")
    src.start()
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                src.sql(f"UPDATE counters SET n = {n}, tag = 'c{n}' WHERE id = {1 + n % 20}")
                if n % 9 == 0:
                    src.sql(f"DELETE FROM counters WHERE id = {1 + (n * 7) % 20}")
                    src.sql(f"INSERT INTO counters VALUES ({1 + (n * 7) % 20}, {n}, 'again') ON CONFLICT DO NOTHING")
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
                return
            time.sleep(0.01)

    worker = threading.Thread(target=churn)
    try:
        src.sql("UPDATE counters SET tag = 'streamed' WHERE id <= 5")
        src.ingest_clean()
        worker.start()
        time.sleep(2)
        connect.kill()  # the worker flushes offsets every 500 ms: the events it sent since then come again
        time.sleep(1)
        down = src.ingest_clean(sync=False)  # the worker is down: what Kafka holds, the events to come again too
        [held] = [r["end"] for r in down["tables"][0]["ranges"]]
        connect.start()
        connect.wait_running(src.name)
        time.sleep(2)
        stop.set()
        worker.join()
        assert not errors, errors
        src.ingest_clean()
        assert src.lake_rows("counters") == src.source_rows("counters")
        messages = read_topic(broker.bootstrap, src.topic("counters"), 1, idle_timeout=0.5)
        first: dict[tuple, int] = {}
        twice = []  # offsets of the first copies of changes delivered twice
        for m in messages:
            event = src.marker.decode(m.value()) if m.value() else None
            if event and event["op"] != "r":
                change = (event["source"]["lsn"], event["op"])
                if change in first:
                    twice.append(first[change])
                first.setdefault(change, m.offset())
        assert twice, "no change was delivered twice: the crash did not test redelivery"
        assert min(twice) < held  # the batch while the worker was down committed changes that came again
        src.sql("UPDATE counters SET tag = 'after' WHERE id IN (1, 2)")
        src.ingest_clean()
        assert src.lake_rows("counters") == src.source_rows("counters")
    finally:
        stop.set()
        if worker.is_alive():
            worker.join()
        src.stop()
