"""``dag.test`` of the ingestion DAG on the REST catalog with an S3 warehouse: Apache Iceberg's REST catalog server
(``devtools.rest_catalog``) on the real moto server (``devtools.s3``, IAM-checked keys), its OAuth2 credential
checked by ``devtools.rest_gateway`` (a stand-in front: the test server grants every client). ``plan`` reads the
ledger through pyiceberg's REST catalog, ``ingest`` is the real ``SparkSubmitOperator`` running ``spark-submit
jobs/ingest.py`` with the AWS SDK bundle beside the Iceberg runtime, and the table is read back with pyiceberg and
pyarrow's S3 file system. Keys and credential reach the job only through the environment and ``${ENV}``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique
from tests.integration import events
from tests.integration.events import pg

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

DEFAULTS = {"mode": "incremental", "tables": [], "max_records_per_partition": None, "start_offsets": None,
            "end_offsets": None, "start_timestamp": None, "end_timestamp": None}


@pytest.fixture
def rest_on_s3():
    from devtools.rest_catalog import LocalRESTCatalog
    from devtools.s3 import LocalS3

    with LocalS3(auth=True) as s3:
        s3.create_bucket("lake")
        with LocalRESTCatalog(warehouse="s3://lake/rest", s3=s3, auth=True) as rest:
            yield s3, rest


def test_dag_run_on_a_rest_catalog_on_s3(broker: Any, rest_on_s3: Any, tmp_path: Any, airflow_db: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    s3, rest = rest_on_s3
    topic = unique("dbserver1.public.dagrest_")
    broker.create_topic(topic, partitions=1)
    events.produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i)
                                             for i in range(8)] + [pg("d", 3, {"id": 3, "name": "n3", "bio": None}, 50)])
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "dagrest.yaml").write_text(f"""
pipeline: dagrest
schedule: null
format: json
kafka: {{bootstrap.servers: "{broker.bootstrap}"}}
catalog:
  name: lake
  type: rest
  uri: "{rest.uri}"
  warehouse: s3://lake/rest
  properties:
    credential: "${{CDC_TEST_DAG_REST_CREDENTIAL}}"
    oauth2-server-uri: "{rest.uri}/v1/oauth/tokens"
    s3.endpoint: "{s3.endpoint}"
    s3.path-style-access: "true"
    client.region: us-east-1
metadata_namespace: cdc_meta
spark: {{spark.sql.shuffle.partitions: "2", spark.default.parallelism: "2", spark.driver.memory: 1g}}
batch: {{read_timeout_seconds: 30}}
tables:
  - {{topic: {topic}, target: shop.customers}}
""")
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path / "pipelines"))
    monkeypatch.setenv("CDC_RETRIES", "0")
    monkeypatch.setenv("CDC_SPARK_MASTER", "local[2]")
    monkeypatch.setenv("CDC_TEST_DAG_REST_CREDENTIAL", rest.credential)
    for k, v in s3.env().items():  # the Airflow worker's environment: the AWS default chain of job and reader
        monkeypatch.setenv(k, v)
    from structlog.testing import capture_logs

    from cdc.config.names import ledger_identifier
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.ingest import build_ingest_dag
    from cdc_airflow.monitor.ledger import load_table, read_rows

    settings = load_settings()
    [p] = load_pipelines(settings)
    cfg = p.config
    with capture_logs() as logs:
        dr = build_ingest_dag(settings, cfg).test(run_conf=DEFAULTS)
    states = {(ti.task_id, ti.rendered_map_index or ""): ti.state for ti in dr.get_task_instances()}
    log = "\n".join(str(e) for e in logs)
    assert dr.state == "success", (states, log[-4000:])
    assert states == {("plan", ""): "success", ("ingest", "shop.customers"): "success", ("publish", ""): "success"}
    assert "iceberg-aws-bundle" in log, "the AWS SDK bundle was not on spark-submit's --jars / --packages"
    for secret in (rest.credential, rest.credential.split(":", 1)[1], s3.secret_access_key):
        assert secret not in log

    table = load_table(cfg.catalog, "shop.customers")
    assert table is not None
    rows = {r["id"]: r["name"] for r in table.scan(selected_fields=("id", "name")).to_arrow().to_pylist()}
    assert rows == {i: f"n{i}" for i in range(8) if i != 3}
    ledger = read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)
    assert [(r["batch_id"], r["status"], r["start_offset"], r["end_offset"]) for r in ledger] == [
        (1, "committed", 0, 9)]
    assert ledger[0]["target_snapshot_id"] == table.current_snapshot().snapshot_id

    dr2 = build_ingest_dag(settings, cfg).test(run_conf=DEFAULTS)  # plan reads the ledger over REST: no lag
    states2 = {(ti.task_id, ti.rendered_map_index or ""): ti.state for ti in dr2.get_task_instances()}
    assert dr2.state == "success" and states2 == {("plan", ""): "skipped", ("ingest", ""): "skipped",
                                                  ("publish", ""): "skipped"}, states2
