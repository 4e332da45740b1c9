"""Iceberg's JdbcCatalog on a real PostgreSQL server: the job writes through it (CLI subprocesses, the PostgreSQL
JDBC driver from Debian's libpostgresql-jdbc-java), the Airflow side reads the same tables through pyiceberg's SQL
catalog on the same database, and two runs of one table at once still commit exactly one batch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unique
from tests.integration import events
from tests.integration.cli import INGEST, REPO, cli_env, finish, run_cli, start_job, summary_of
from tests.integration.events import pg

pytestmark = pytest.mark.integration

PASSWORD = "Pg-Catal0g-S3cret-4e5f6a"  # trust auth on loopback ignores it; it must still never be printed
ENV = {"CDC_TEST_PG_PASSWORD": PASSWORD}


def jdbc_pipeline(broker: Any, postgres: Any, tmp_path: Path, catalog: str = "lake") -> dict[str, Any]:
    topic = unique("dbserver1.public.jdbc_")
    broker.create_topic(topic, partitions=1)
    database = unique("iceberg_")
    return {
        "pipeline": "jdbc", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
        "catalog": {"name": catalog, "type": "jdbc", "warehouse": str(tmp_path / "warehouse"),
                    "uri": postgres.create_database(database),
                    "properties": {"jdbc.user": "postgres", "jdbc.password": "${CDC_TEST_PG_PASSWORD}"}},
        "metadata_namespace": unique("jdbcmeta"),
        "spark": {"spark.sql.shuffle.partitions": "2"},
        "batch": {"read_timeout_seconds": 15},
        "tables": [{"topic": topic, "target": f"{unique('jdbc')}.customers"}],
    }


def write(raw: dict[str, Any], tmp_path: Path) -> Path:
    import yaml

    path = tmp_path / f"{raw['pipeline']}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def config_of(path: Path):
    from cdc.config.load import load_config

    return load_config(path, env=ENV)


def database_of(raw: dict[str, Any]) -> str:
    return raw["catalog"]["uri"].rsplit("/", 1)[1]


def target_rows(cfg: Any) -> dict[int, tuple[str | None, bool]]:
    """The target table through pyiceberg's SQL catalog (the Airflow side's reader), with Spark's deletes applied."""
    from cdc_airflow.monitor.ledger import load_table

    table = load_table(cfg.catalog, cfg.tables[0].target)
    assert table is not None
    return {r["id"]: r["name"] for r in table.scan(selected_fields=("id", "name")).to_arrow().to_pylist()}


def ledger(cfg: Any) -> list[dict[str, Any]]:
    from cdc.config.names import ledger_identifier
    from cdc_airflow.monitor.ledger import read_rows

    rows = read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)
    return sorted(rows, key=lambda r: (r["batch_id"], r["partition"]))


def test_ingest_through_jdbc_catalog_read_by_the_airflow_side(broker, postgres, tmp_path, monkeypatch):
    raw = jdbc_pipeline(broker, postgres, tmp_path)
    topic, target = raw["tables"][0]["topic"], raw["tables"][0]["target"]
    path = write(raw, tmp_path)
    cfg = config_of(path)

    from cdc.config.names import ledger_identifier
    from cdc_airflow.monitor.ledger import read_rows

    assert read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace)) == []  # before the job: no table yet
    assert postgres.execute("SELECT to_regclass('iceberg_tables')", database=database_of(raw)) == [(None,)], \
        "the reader must not create the catalog's tables"

    events.produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i)
                                             for i in range(6)])
    first = run_cli(path, env=ENV)
    assert first.returncode == 0, first.stderr[-3000:]
    s1 = summary_of(first)["tables"][0]
    assert (s1["status"], s1["inserted"], s1["ranges"]) == ("committed", 6, [{"partition": 0,
                                                                                "start": 0, "end": 6}]), s1

    events.produce(broker.bootstrap, topic, [pg("u", 1, {"id": 1, "name": "one", "bio": None}, 100),
                                             pg("d", 2, {"id": 2, "name": "n2", "bio": None}, 101),
                                             pg("c", 7, {"id": 7, "name": "n7", "bio": None}, 102)])
    second = run_cli(path, env=ENV)
    assert second.returncode == 0, second.stderr[-3000:]
    s2 = summary_of(second)["tables"][0]
    assert (s2["status"], s2["inserted"], s2["updated"], s2["deleted"]) == ("committed", 1, 1, 1), s2

    # the tables live in PostgreSQL (JdbcCatalog V1 schema: iceberg_type), metadata files in the warehouse
    db = database_of(raw)
    listed = postgres.execute("SELECT catalog_name, table_namespace, table_name, iceberg_type, metadata_location "
                              "FROM iceberg_tables ORDER BY table_namespace, table_name", database=db)
    names = {(c, ns, t) for c, ns, t, _, _ in listed}
    assert ("lake", target.split(".")[0], "customers") in names
    assert ("lake", raw["metadata_namespace"], "ledger") in names
    assert {kind for *_, kind, _ in listed} == {"TABLE"}
    assert all(loc.startswith(("file:" + raw["catalog"]["warehouse"], raw["catalog"]["warehouse"]))
               for *_, loc in listed), listed
    namespaces = {r[0] for r in postgres.execute("SELECT namespace FROM iceberg_namespace_properties",
                                                 database=db)}
    assert {target.split(".")[0], raw["metadata_namespace"]} <= namespaces

    # pyiceberg's SqlCatalog lists the namespaces and tables Spark's JdbcCatalog created
    from pyiceberg.catalog import load_catalog

    from cdc_airflow.monitor.ledger import catalog_properties, load_table

    sql = load_catalog(cfg.catalog.name, **catalog_properties(cfg.catalog))
    assert {(target.split(".")[0],), (raw["metadata_namespace"],)} <= set(sql.list_namespaces())
    assert (target.split(".")[0], "customers") in sql.list_tables(target.split(".")[0])

    # the Airflow side: pyiceberg's SqlCatalog on the same database sees both committed batches
    assert target_rows(cfg) == {0: "n0", 1: "one", 3: "n3", 4: "n4", 5: "n5", 7: "n7"}
    rows = ledger(cfg)
    assert [(r["batch_id"], r["status"], r["start_offset"], r["end_offset"]) for r in rows] == [
        (1, "committed", 0, 6), (2, "committed", 6, 9)]
    assert rows[-1]["target_snapshot_id"] == s2["snapshot_id"]

    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.status.view import collect_status

    monkeypatch.setenv("CDC_TEST_PG_PASSWORD", PASSWORD)  # the status view loads pipelines with ${ENV}
    status = collect_status(load_settings({"CDC_PIPELINES_DIR": str(tmp_path)}),
                            watermarks=lambda _conf, _topic: {0: 9})
    [entry] = status
    assert entry["error"] is None, entry
    table = entry["tables"][0]
    assert table["snapshot_id"] == s2["snapshot_id"], table
    assert [b["batch_id"] for b in table["batches"]][:2] == [2, 1], table["batches"]
    assert table["lag_total"] == 0 and table["newest_source_ts"] is not None, table

    # maintenance (compaction, snapshot expiry, staging drop, orphan files) through the same catalog
    maint = subprocess.run([sys.executable, str(REPO / "jobs" / "maintenance.py"), "--config", str(path),
                            "--snapshot-retention-hours", "0", "--retain-last", "1", "--staging-retention-hours", "0"],
                           capture_output=True, text=True, cwd=str(REPO), timeout=600,
                           env=cli_env({**ENV, "PYSPARK_SUBMIT_ARGS": "--master local[2] pyspark-shell"}))
    assert maint.returncode == 0, maint.stderr[-3000:]
    assert target_rows(cfg) == {0: "n0", 1: "one", 3: "n3", 4: "n4", 5: "n5", 7: "n7"}
    assert s1["snapshot_id"] not in {snap.snapshot_id for snap in load_table(cfg.catalog, target).snapshots()}

    for res in (first, second, maint):
        assert PASSWORD not in res.stdout + res.stderr


def start(config: Path) -> subprocess.Popen:
    return start_job(config, env=ENV)


def test_two_runs_of_one_table_on_the_jdbc_catalog(broker, postgres, tmp_path):
    """test_concurrency_security's scenario on the multi-writer catalog, from an empty catalog database (both runs
    also race to create the catalog's own tables): one run commits, the other refuses (75) or finds nothing; the
    table equals the source and the ledger holds the one batch."""
    raw = jdbc_pipeline(broker, postgres, tmp_path)
    events.produce(broker.bootstrap, raw["tables"][0]["topic"],
                   [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i) for i in range(40)])
    path = write(raw, tmp_path)
    a, b = start(path), start(path)
    ra, rb = finish(a), finish(b)
    codes = sorted((ra.returncode, rb.returncode))
    assert all(c in (0, 75) for c in codes), (ra.stderr[-3000:], rb.stderr[-3000:])
    summaries = [summary_of(r) for r in (ra, rb) if r.returncode == 0]
    committed = [s["tables"][0] for s in summaries if s["tables"][0]["status"] == "committed"]
    assert len(committed) == 1, (codes, summaries, ra.stderr[-1500:], rb.stderr[-1500:])
    for r in (ra, rb):
        if r.returncode == 75:
            lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ERROR")]
            assert len(lines) == 1 and "[ConcurrentRunError]" in lines[0], r.stderr[-2000:]
        assert PASSWORD not in r.stdout + r.stderr
    cfg = config_of(path)
    assert sorted(target_rows(cfg)) == list(range(40))
    assert [(r["status"], r["start_offset"], r["end_offset"]) for r in ledger(cfg)] == [("committed", 0, 40)]

    again = run_cli(path, env=ENV)  # the loser's retry: nothing left, nothing lost
    assert again.returncode == 0, again.stderr[-3000:]
    assert summary_of(again)["tables"][0]["status"] == "empty"
    assert [r["status"] for r in ledger(cfg)] == ["committed"]


def test_catalog_database_down_is_retryable_and_missing_database_is_terminal(broker, postgres, tmp_path):
    """The catalog's database unreachable (nothing listens): exit 75, one line; a database that does not exist on
    the real server: exit 2 naming what to check. The password is printed in neither."""
    from devtools.broker import free_port

    raw = jdbc_pipeline(broker, postgres, tmp_path)
    events.produce(broker.bootstrap, raw["tables"][0]["topic"], [pg("c", 1, {"id": 1, "name": "a", "bio": None}, 1)])
    down = dict(raw, catalog={**raw["catalog"], "uri": f"jdbc:postgresql://127.0.0.1:{free_port()}/iceberg"})
    missing = dict(raw, catalog={**raw["catalog"], "uri": postgres.jdbc_url_for(unique("nodb_"))})
    (tmp_path / "down").mkdir()
    (tmp_path / "missing").mkdir()
    res_down = run_cli(write(down, tmp_path / "down"), env=ENV)
    res_missing = run_cli(write(missing, tmp_path / "missing"), env=ENV)
    assert res_down.returncode == 75, res_down.stderr[-3000:]
    assert res_missing.returncode == 2, res_missing.stderr[-3000:]
    [line] = [ln for ln in res_down.stderr.splitlines() if ln.startswith("ERROR")]
    assert line.startswith("ERROR [CatalogUnavailable]") and "database is unreachable" in line, line
    [line] = [ln for ln in res_missing.stderr.splitlines() if ln.startswith("ERROR")]
    assert line.startswith("ERROR [CatalogError]") and "does not exist" in line and "jdbc.user" in line, line
    for res in (res_down, res_missing):
        assert PASSWORD not in res.stdout + res.stderr


def test_a_run_refuses_while_a_live_run_holds_the_claim_on_the_jdbc_catalog(broker, postgres, tmp_path):
    """A run paused after staging holds its claim; the Airflow side (pyiceberg) sees the claimed batch, a second run
    exits 75 naming the table, and the holder then commits."""
    import time

    raw = jdbc_pipeline(broker, postgres, tmp_path)
    events.produce(broker.bootstrap, raw["tables"][0]["topic"],
                   [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i) for i in range(20)])
    path = write(raw, tmp_path)
    cfg = config_of(path)
    cmd = [sys.executable, str(INGEST), "--config", str(path), "--master", "local[2]"]
    holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
                              env=cli_env({**ENV, "CDC_PAUSE_AT": "after_stage:30"}), start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not [r for r in ledger(cfg) if r["status"] == "claimed"]:
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "holder never claimed"
            time.sleep(1)
        res = run_cli(path, env=ENV)
        assert res.returncode == 75, res.stderr[-3000:]
        [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")]
        assert line.startswith("ERROR [ConcurrentRunError]") and raw["tables"][0]["target"] in line, line
    finally:
        done = finish(holder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary_of(done)["tables"][0]["status"] == "committed"
    assert sorted(target_rows(cfg)) == list(range(20))
    assert [(r["status"], r["start_offset"], r["end_offset"]) for r in ledger(cfg)] == [("committed", 0, 20)]


def test_two_runs_upgrading_the_catalog_schema_at_once_retry(broker, postgres, tmp_path):
    """Deterministic form of the first-run race on a fresh catalog database: the job finds a V0 catalog schema and
    adds ``iceberg_type`` (jdbc.schema-version V1) while another session does the same. The job's first catalog use
    (``cdc.ledger.tables.meta_tables_current``) loses that race; its statements then initialise the catalog again, now on
    the V1 schema, and the run commits. (Before that check existed the loser exited 75 with ``CatalogUnavailable``,
    for Airflow to retry; either way it must never exit 1 or leave the table wrong.)"""
    import time

    raw = jdbc_pipeline(broker, postgres, tmp_path)
    db = database_of(raw)
    events.produce(broker.bootstrap, raw["tables"][0]["topic"], [pg("c", 1, {"id": 1, "name": "a", "bio": None}, 1)])
    postgres.execute("CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) "
                     "NOT NULL, table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), "
                     "previous_metadata_location VARCHAR(1000), PRIMARY KEY (catalog_name, table_namespace, "
                     "table_name))", database=db)
    postgres.execute("CREATE TABLE iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL, namespace "
                     "VARCHAR(255) NOT NULL, property_key VARCHAR(255), property_value VARCHAR(1000), PRIMARY KEY "
                     "(catalog_name, namespace, property_key))", database=db)
    path = write(raw, tmp_path)
    other = postgres.connect(db, autocommit=False)  # the other run's upgrade, not committed yet
    try:
        other.execute("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)")
        job = start(path)
        deadline = time.monotonic() + 240
        while not postgres.execute("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE "
                                   "'%ALTER TABLE iceberg_tables%'", database=db):
            assert job.poll() is None, job.communicate()
            assert time.monotonic() < deadline, "the job never tried to upgrade the catalog schema"
            time.sleep(0.5)
        other.commit()
    finally:
        other.close()
    lost = finish(job)
    assert lost.returncode == 0, lost.stderr[-3000:]
    assert summary_of(lost)["tables"][0]["status"] == "committed"
    assert target_rows(config_of(path)) == {1: "a"}
    again = run_cli(path, env=ENV)
    assert again.returncode == 0, again.stderr[-3000:]
    assert summary_of(again)["tables"][0]["status"] == "empty"
