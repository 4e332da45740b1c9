"""The ``glue`` catalog against a local Glue-compatible endpoint: the real moto server (``devtools.s3``), which serves
the Glue API and S3 in one process and checks IAM keys. Spark writes through Iceberg's ``GlueCatalog``
(``glue.endpoint``) onto the S3 warehouse; the Airflow side reads the same tables through pyiceberg's Glue catalog
(boto3) and pyarrow's S3 file system. Keys only in the environment, printed nowhere."""

from __future__ import annotations

import pytest

from tests.conftest import unique
from tests.integration import events
from tests.integration.cli import run_cli, summary_of
from tests.integration.events import pg
from tests.integration.iceberg.object_store import config_of, ledger, s3_properties, target_rows, write

pytestmark = pytest.mark.integration


def glue_pipeline(broker, s3) -> dict:
    topic = unique("dbserver1.public.glue_")
    broker.create_topic(topic, partitions=1)
    return {
        "pipeline": unique("glue"), "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
        "catalog": {"name": "lake", "type": "glue", "warehouse": "s3://lake/glue",
                    "properties": {**s3_properties(s3), "glue.endpoint": s3.endpoint}},
        "metadata_namespace": unique("gluemeta"),
        "spark": {"spark.sql.shuffle.partitions": "2"},
        "batch": {"read_timeout_seconds": 15},
        "tables": [{"topic": topic, "target": f"{unique('glue')}.customers"}],
    }


def test_ingest_through_glue_on_moto_read_by_the_airflow_side(broker, s3, tmp_path, monkeypatch):
    env = s3.env()
    raw = glue_pipeline(broker, s3)
    topic, target = raw["tables"][0]["topic"], raw["tables"][0]["target"]
    path = write(raw, tmp_path / "pipelines")
    events.produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i)
                                             for i in range(5)])
    first = run_cli(path, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert summary_of(first)["tables"][0]["inserted"] == 5
    events.produce(broker.bootstrap, topic, [pg("u", 1, {"id": 1, "name": "one", "bio": None}, 100),
                                             pg("d", 2, {"id": 2, "name": "n2", "bio": None}, 101)])
    second = run_cli(path, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    s2 = summary_of(second)["tables"][0]
    assert (s2["updated"], s2["deleted"]) == (1, 1), s2

    # the tables are Glue tables (moto's Glue API), their files objects in the bucket
    glue = s3.client("glue")
    namespace = target.split(".")[0]
    table = glue.get_table(DatabaseName=namespace, Name="customers")["Table"]
    assert table["Parameters"]["table_type"].upper() == "ICEBERG"
    assert table["Parameters"]["metadata_location"].startswith("s3://lake/glue/"), table["Parameters"]
    assert {t["Name"] for t in glue.get_tables(DatabaseName=raw["metadata_namespace"])["TableList"]} >= {"ledger"}

    cfg = config_of(path, env)
    assert target_rows(cfg, env, monkeypatch) == {0: "n0", 1: "one", 3: "n3", 4: "n4"}
    assert [(r["batch_id"], r["status"], r["end_offset"]) for r in ledger(cfg, env, monkeypatch)] == [
        (1, "committed", 5), (2, "committed", 7)]
    for res in (first, second):
        assert s3.secret_access_key not in res.stdout + res.stderr


def test_glue_endpoint_down_exits_75_and_bad_keys_exit_2(broker, tmp_path):
    """Keys moto's IAM does not know: 2 (the Glue / S3 refusal, naming the credentials to check); the Glue endpoint
    refusing connections (its server stopped): 75. A moto server of this test alone."""
    from devtools.s3 import LocalS3
    from tests.integration.iceberg.object_store import error_line

    with LocalS3(auth=True) as own:
        own.create_bucket("lake")
        raw = glue_pipeline(broker, own)
        path = write(raw, tmp_path / "pipelines")
        events.produce(broker.bootstrap, raw["tables"][0]["topic"],
                       [pg("c", 1, {"id": 1, "name": "a", "bio": None}, 11)])
        bad = run_cli(path, env={**own.env(), "AWS_ACCESS_KEY_ID": "AKIAWRONGKEY0001",
                                 "AWS_SECRET_ACCESS_KEY": "wrong-glue-secret-9z"})
        assert bad.returncode == 2, bad.stderr[-3000:]
        assert error_line(bad).startswith("ERROR [CatalogError]") and "credentials" in error_line(bad)
        assert "wrong-glue-secret-9z" not in bad.stdout + bad.stderr
        env = own.env()
        own.stop()
        down = run_cli(path, env=env)
        assert down.returncode == 75, down.stderr[-3000:]
        assert error_line(down).startswith("ERROR [CatalogUnavailable]"), down.stderr[-3000:]
        assert env["AWS_SECRET_ACCESS_KEY"] not in down.stdout + down.stderr
