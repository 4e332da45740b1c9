"""A batch staged by a run that died, recovered by a process whose SparkSession has read the staging table before
(a long-lived driver, an earlier batch): the recovery reads the batch as staged, not the session's cached copy of the
staging table, in which the batch is absent (it committed nothing and the cursor moved past the batch's changes).
Found by the bootstrap soak (tests/scenarios/test_bootstrap_soak.py, seed 11)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import unique
from tests.integration.cli import run_cli
from tests.integration.events import pg, produce

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("change", ["insert", "truncate"])
def test_a_batch_staged_by_a_killed_cli_is_merged_by_a_session_that_cached_the_staging_table(
        spark, broker, warehouse, tmp_path, change):
    from cdc.config.load import load_config
    from cdc.run.batch import run_batch

    topic = unique("dbserver1.public.customers_")
    broker.create_topic(topic, partitions=2)
    target = f"{unique('t')}.customers"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": "tests", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)}, "metadata_namespace": unique("meta"),
        "batch": {"read_timeout_seconds": 20}, "spark": {"spark.sql.shuffle.partitions": "2"},
        "tables": [{"topic": topic, "target": target}]}))
    cfg = load_config(path)
    produce(broker.bootstrap, topic, [pg("c", 1, {"id": 1, "name": "a", "bio": "x"}, 10)], partition=1)
    produce(broker.bootstrap, topic, [pg("c", 2, {"id": 2, "name": "b", "bio": "y"}, 20)], partition=0)
    assert run_batch(spark, cfg, list(cfg.tables))["tables"][0]["status"] == "committed"  # this session stages

    produce(broker.bootstrap, topic, [pg("t", None, None, 30) if change == "truncate"
                                      else pg("c", 3, {"id": 3, "name": "c", "bio": "z"}, 30)], partition=0)
    killed = run_cli(path, env={"CDC_KILL_AT": "after_staged"})  # batch 2 staged, not merged
    assert killed.returncode == -9, killed.stderr
    out = run_batch(spark, cfg, list(cfg.tables))["tables"][0]
    assert out["recovered_batch_id"] == 2
    spark.catalog.refreshTable(f"lake.{target}")
    rows = {r["id"]: r["name"] for r in spark.table(f"lake.{target}").collect()}
    assert rows == ({} if change == "truncate" else {1: "a", 2: "b", 3: "c"})
