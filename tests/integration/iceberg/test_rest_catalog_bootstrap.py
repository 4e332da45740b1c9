"""A JDBC bootstrap (``jobs/bootstrap.py``: a Spark read of a real PostgreSQL table inside one snapshot) into a table of
Apache Iceberg's REST catalog server on an S3 warehouse (moto), then Kafka micro-batches from offset 0 through the
same catalog: the table equals ``SELECT *`` of the source, and the Airflow side reads it through pyiceberg."""

from __future__ import annotations

import pytest

from tests.conftest import unique
from tests.integration import events
from tests.integration.bootstrap.test_bootstrap_postgres import Source
from tests.integration.cli import run_cli, summary_of
from tests.integration.iceberg.object_store import config_of, env_of, rest_pipeline, run_job, secrets_of, write

pytestmark = pytest.mark.integration


def test_bootstrap_then_batches_through_rest_on_s3(broker, postgres, s3, rest, tmp_path, monkeypatch):
    db = unique("db")
    postgres.create_database(db)
    src = Source(postgres, db)
    before = src.tx(("c", 1, "n1", "b1"), ("c", 2, "n2", "b2"), ("c", 3, "n3", "b3"))
    before += src.tx(("u", 2, "n2-v2", "b2"))
    raw = rest_pipeline(broker, s3, rest)
    topic = raw["tables"][0]["topic"]
    raw["tables"][0]["bootstrap"] = {"jdbc_url": postgres.jdbc_url_for(db), "user": "postgres",
                                     "source_table": "public.customers", "num_partitions": 2}
    env = env_of(s3, rest)
    path = write(raw, tmp_path / "pipelines")
    events.produce(broker.bootstrap, topic, before)  # one partition

    boot = run_job("bootstrap", path, env, "--table", raw["tables"][0]["target"])
    assert boot.returncode == 0, boot.stderr[-3000:]
    summary = summary_of(boot)["tables"][0]
    assert (summary["status"], summary["rows"]) == ("bootstrapped", 3), summary

    after = src.tx(("d", 1)) + src.tx(("c", 4, "n4", "b4"))
    events.produce(broker.bootstrap, topic, after)
    batch = run_cli(path, env=env)
    assert batch.returncode == 0, batch.stderr[-3000:]

    from cdc_airflow.monitor.ledger import load_table

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    table = load_table(config_of(path, env).catalog, raw["tables"][0]["target"])
    got = {r["id"]: (r["name"], r["bio"]) for r in table.scan(selected_fields=("id", "name", "bio")).to_arrow().to_pylist()}
    assert got == src.rows() == {2: ("n2-v2", "b2"), 3: ("n3", "b3"), 4: ("n4", "b4")}
    for res in (boot, batch):
        for secret in secrets_of(s3, rest):
            assert secret not in res.stdout + res.stderr
