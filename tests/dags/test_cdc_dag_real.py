"""``dag.test`` of the ingestion DAG against the REAL job: the local broker, the real ``SparkSubmitOperator`` running
the pyspark install's ``spark-submit jobs/ingest.py``, and Iceberg tables read back with pyiceberg.

One pipeline with two tables (customers, orders) from the Debezium generator, driven step by step:
incremental run → backfill over the already-ingested range (table unchanged, incremental cursor unchanged) →
incremental run with nothing new (planning skips, no Spark) → new changes for one table (only it runs, batch 2).
Each spark-submit costs ~15-25 s, so the flow is one module-scoped sequence (4 submits in total).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Iterator

import pytest

from tests.airflow_env import asset_events
from tests.conftest import unique

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

PARTITIONS = 2


def _norm(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v.normalize() if isinstance(v, Decimal) else v


class Source:
    """Two generated source tables, their topics and the oracle."""

    def __init__(self, bootstrap: str) -> None:
        from devtools.broker import create_topic
        from devtools.debezium import ChangeEventGenerator, GeneratorConfig

        self.bootstrap = bootstrap
        self.gens = {name: ChangeEventGenerator(seed, GeneratorConfig(table=name, partitions=PARTITIONS,
                                                                      toast_fraction=0.3))
                     for name, seed in (("customers", 11), ("orders", 12))}
        self.topics = {name: unique(f"dbserver1.public.{name}_") for name in self.gens}
        self.produced: dict[str, dict[int, int]] = {name: {p: 0 for p in range(PARTITIONS)} for name in self.gens}
        for t in self.topics.values():
            create_topic(bootstrap, t, PARTITIONS)

    def send(self, name: str, records: list[Any]) -> None:
        from devtools.debezium import JsonSerializer, produce

        produce(self.bootstrap, self.topics[name], records, JsonSerializer())
        for r in records:
            self.produced[name][r.partition] += 1

    def expected(self, name: str) -> dict[Any, dict[str, Any]]:
        from devtools.debezium import to_python

        g = self.gens[name]
        return {pk: {k: _norm(v) for k, v in to_python(g.table, row).items()} for pk, row in g.expected_rows().items()}

    def columns(self, name: str) -> list[str]:
        return [c.name for c in self.gens[name].table.columns]


@pytest.fixture(scope="module")
def pipeline(broker: Any, tmp_path_factory: pytest.TempPathFactory, airflow_db: str) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("dagreal")
    src = Source(broker.bootstrap)
    (tmp / "pipelines").mkdir()
    (tmp / "pipelines" / "dagreal.yaml").write_text(f"""
pipeline: dagreal
schedule: null
format: json
kafka: {{bootstrap.servers: "{broker.bootstrap}"}}
catalog: {{name: lake, type: hadoop, warehouse: "{tmp / 'warehouse'}"}}
metadata_namespace: cdc_meta
spark: {{spark.sql.shuffle.partitions: "2", spark.default.parallelism: "2", spark.driver.memory: 1g}}
batch: {{read_timeout_seconds: 30}}
tables:
  - {{topic: {src.topics['customers']}, target: shop.customers, primary_key: [id]}}
  - {{topic: {src.topics['orders']}, target: shop.orders, primary_key: [id]}}
""")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CDC_PIPELINES_DIR", str(tmp / "pipelines"))
        mp.setenv("CDC_RETRIES", "0")
        mp.setenv("CDC_SPARK_MASTER", "local[2]")
        from cdc_airflow.config.pipelines import load_pipelines
        from cdc_airflow.config.settings import load_settings
        from cdc_airflow.dags.ingest import build_ingest_dag

        settings = load_settings()
        [p] = load_pipelines(settings)
        # A fresh DAG object per run: dag.test(run_conf=...) leaves the conf in the DAG's params, so a reused
        # object would run the next "incremental" test with the previous backfill's parameters.
        yield {"dag": lambda: build_ingest_dag(settings, p.config), "cfg": p.config, "src": src}


# Every run states all parameters: a later dag.test run was seen planning with the previous run's backfill conf.
DEFAULTS = {"mode": "incremental", "tables": [], "max_records_per_partition": None, "start_offsets": None,
            "end_offsets": None, "start_timestamp": None, "end_timestamp": None}


def run(dag: Any, conf: dict[str, Any]) -> tuple[Any, dict[tuple[str, str], Any]]:
    dr = dag().test(run_conf={**DEFAULTS, **conf})
    tis = {(ti.task_id, ti.rendered_map_index or ""): ti for ti in dr.get_task_instances()}
    return dr, tis


def table_rows(cfg: Any, target: str, columns: list[str]) -> dict[Any, dict[str, Any]]:
    from cdc_airflow.monitor.ledger import load_table

    t = load_table(cfg.catalog, target)
    assert t is not None, f"{target} was not created"
    rows = t.scan(selected_fields=tuple(columns)).to_arrow().to_pylist()
    return {r["id"]: {c: _norm(r[c]) for c in columns} for r in rows}


def ledger(cfg: Any) -> list[dict[str, Any]]:
    from cdc.config.names import ledger_identifier
    from cdc_airflow.monitor.ledger import read_rows

    return read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)


def batch_rows(rows: list[dict[str, Any]], table: str, batch_id: int) -> dict[int, dict[str, Any]]:
    return {r["partition"]: r for r in rows if r["table_name"] == table and r["batch_id"] == batch_id}


@pytest.fixture(scope="module")
def first_run(pipeline: dict[str, Any]) -> dict[str, Any]:
    """Snapshot + live changes for both tables, then one incremental DAG run (2 spark-submits)."""
    src: Source = pipeline["src"]
    for name, g in src.gens.items():
        src.send(name, g.snapshot(15) + g.random_ops(40))
    from structlog.testing import capture_logs

    with capture_logs() as logs:  # the task logs, spark-submit's output (the job's stderr) included
        dr, tis = run(pipeline["dag"], {})
    return {**pipeline, "dr": dr, "tis": tis, "log": [str(e.get("event")) for e in logs]}


def test_incremental_run_ingests_every_table_and_commits_the_ledger(first_run: dict[str, Any]) -> None:
    dr, tis, cfg, src = first_run["dr"], first_run["tis"], first_run["cfg"], first_run["src"]
    assert dr.state == "success", {k: ti.state for k, ti in tis.items()}
    assert {k: ti.state for k, ti in tis.items()} == {
        ("plan", ""): "success", ("ingest", "shop.customers"): "success", ("ingest", "shop.orders"): "success",
        ("publish", ""): "success"}
    for name in ("customers", "orders"):
        assert table_rows(cfg, f"shop.{name}", src.columns(name)) == src.expected(name)
    rows = ledger(cfg)
    for name in ("customers", "orders"):
        batch = batch_rows(rows, f"shop.{name}", 1)
        assert {p: (r["status"], r["mode"], r["start_offset"], r["end_offset"]) for p, r in batch.items()} == {
            p: ("committed", "incremental", 0, n) for p, n in src.produced[name].items()}
        assert sum(r["events_read"] for r in batch.values()) == sum(src.produced[name].values())
        assert {r["target_snapshot_id"] for r in batch.values()} != {None}
    assert {r["batch_id"] for r in rows} == {1}


def test_committed_batches_emit_asset_events_and_log_progress(first_run: dict[str, Any]) -> None:
    """One asset event per table with the batch's snapshot, counts and high-water offsets; the job's phase lines
    (counts, rates) reach the task log; the downstream DAG's changed-rows read finds every row of batch 1."""
    from cdc_airflow.dags.downstream import report

    dr, cfg, src = first_run["dr"], first_run["cfg"], first_run["src"]
    assert dr.state == "success"
    events = {name: (uri, extra) for name, uri, extra in asset_events(dr.run_id)}
    assert set(events) == {"shop.customers", "shop.orders"}
    rows = ledger(cfg)
    for name in ("customers", "orders"):
        uri, extra = events[f"shop.{name}"]
        batch = batch_rows(rows, f"shop.{name}", 1)
        assert uri == f"iceberg://lake/shop/{name}"
        assert extra["batch_id"] == 1 and extra["mode"] == "incremental"
        assert extra["snapshot_id"] == next(iter(batch.values()))["target_snapshot_id"]
        assert extra["offsets"] == {src.topics[name]: {str(p): n for p, n in src.produced[name].items()}}
        assert (extra["inserted"], extra["updated"], extra["deleted"]) == tuple(
            next(iter(batch.values()))[k] for k in ("inserted", "updated", "deleted"))
    changed = report(cfg, [e for _, e in events.values()])
    for name in ("customers", "orders"):
        assert changed[f"shop.{name}"]["changed_rows"] == len(src.expected(name)) > 0
    log = "\n".join(first_run["log"])
    assert "shop.orders batch 1: read_stage started" in log and " ev/s" in log
    assert "shop.orders batch 1 committed:" in log


def test_openlineage_events_name_the_topics_read_and_the_tables_written(first_run: dict[str, Any]) -> None:
    """The OpenLineage provider's listener (file transport, tests/airflow_env.py) reports each ingest task's topic as
    input (``kafka://<bootstrap>``) and its Iceberg table as output (the hadoop catalog's table location), with the
    catalog and table-identifier facets."""
    from tests.airflow_env import openlineage_events

    src, cfg = first_run["src"], first_run["cfg"]
    done = [e for e in openlineage_events(".ingest") if e["eventType"] == "COMPLETE"
            and e["run"]["facets"].get("parent", {}).get("run", {}).get("runId")
            and e.get("outputs")]
    seen = {(tuple((d["namespace"], d["name"]) for d in e["inputs"]),
             tuple((d["namespace"], d["name"]) for d in e["outputs"])) for e in done}
    warehouse = cfg.catalog.warehouse
    for name in ("customers", "orders"):
        assert ((( f"kafka://{src.bootstrap}", src.topics[name]),),
                (("file", f"{warehouse}/shop/{name}"),)) in seen, seen
    out = next(d for e in done for d in e["outputs"] if d["name"].endswith("/shop/orders"))
    assert out["facets"]["catalog"]["framework"] == "iceberg" and out["facets"]["catalog"]["name"] == "lake"
    assert out["facets"]["symlinks"]["identifiers"][0]["name"] == "shop.orders"


def test_backfill_of_ingested_range_leaves_table_and_cursor_unchanged(first_run: dict[str, Any]) -> None:
    dag, cfg, src = first_run["dag"], first_run["cfg"], first_run["src"]
    from cdc_airflow.monitor.ledger import committed_offsets

    assert first_run["dr"].state == "success"
    topic = src.topics["orders"]
    before_rows = table_rows(cfg, "shop.orders", src.columns("orders"))
    before_cursor = committed_offsets(ledger(cfg), "shop.orders")
    ends = {str(p): n for p, n in src.produced["orders"].items()}

    dr, tis = run(dag, {"mode": "backfill", "tables": ["shop.orders"],
                        "start_offsets": {topic: {str(p): 0 for p in range(PARTITIONS)}}, "end_offsets": {topic: ends}})
    assert dr.state == "success", {k: ti.state for k, ti in tis.items()}
    assert ("ingest", "shop.customers") not in tis and tis[("ingest", "shop.orders")].state == "success"
    assert table_rows(cfg, "shop.orders", src.columns("orders")) == before_rows == src.expected("orders")
    rows = ledger(cfg)
    batch = batch_rows(rows, "shop.orders", 2)
    assert {p: (r["status"], r["mode"], r["start_offset"], r["end_offset"]) for p, r in batch.items()} == {
        p: ("committed", "backfill", 0, n) for p, n in src.produced["orders"].items()}
    first = next(iter(batch.values()))
    assert (first["inserted"], first["updated"], first["deleted"]) == (0, 0, 0)  # replayed events are no-ops
    assert asset_events(dr.run_id) == []  # a batch that changed nothing emits no asset event
    assert committed_offsets(rows, "shop.orders") == before_cursor  # backfills never move the incremental cursor

    # Nothing new on either topic: planning skips the run, no Spark job starts.
    dr, tis = run(dag, {})
    assert dr.state == "success"
    assert tis[("plan", "")].state == "skipped"
    assert [(k, ti.state) for k, ti in tis.items() if k[0] == "ingest"] == [(("ingest", ""), "skipped")]  # unexpanded


def test_new_changes_run_only_the_lagging_table_as_a_second_batch(first_run: dict[str, Any]) -> None:
    dag, cfg, src = first_run["dag"], first_run["cfg"], first_run["src"]
    assert first_run["dr"].state == "success"
    previous = dict(src.produced["customers"])
    src.send("customers", src.gens["customers"].random_ops(30))

    dr, tis = run(dag, {})
    assert dr.state == "success", {k: ti.state for k, ti in tis.items()}
    assert [k for k in tis if k[0] == "ingest"] == [("ingest", "shop.customers")]
    assert table_rows(cfg, "shop.customers", src.columns("customers")) == src.expected("customers")
    batch = batch_rows(ledger(cfg), "shop.customers", 2)
    assert {p: (r["status"], r["start_offset"], r["end_offset"]) for p, r in batch.items()} == {
        p: ("committed", previous[p], n) for p, n in src.produced["customers"].items()}
    from cdc_airflow.dags.downstream import report

    [(name, _, extra)] = asset_events(dr.run_id)
    assert name == "shop.customers" and extra["batch_id"] == 2
    first = next(iter(batch.values()))
    # the downstream read between the snapshots: rows live at batch 2's snapshot that batch 2 wrote
    assert report(cfg, [extra])["shop.customers"]["changed_rows"] == first["inserted"] + first["updated"]


def test_timestamp_backfill_rereads_only_records_from_its_start(first_run: dict[str, Any]) -> None:
    """Regression: a backfill given only ``start_timestamp`` re-read every partition from offset 0 (the job dropped
    timestamps that came without offsets). Params → spark-submit args (epoch ms) → the job's plan → the ledger."""
    import time

    from cdc_airflow.monitor.ledger import committed_offsets

    dag, cfg, src = first_run["dag"], first_run["cfg"], first_run["src"]
    assert first_run["dr"].state == "success"
    before = dict(src.produced["orders"])
    cursor = committed_offsets(ledger(cfg), "shop.orders")
    time.sleep(1.2)
    start = int(time.time() * 1000)  # after every record so far, before the next wave (broker write time)
    time.sleep(1.2)
    src.send("orders", src.gens["orders"].random_ops(30))
    assert all(src.produced["orders"][p] > before[p] for p in before)  # the wave reaches every partition

    dr, tis = run(dag, {"mode": "backfill", "tables": ["shop.orders"], "start_timestamp": str(start)})
    assert dr.state == "success", {k: ti.state for k, ti in tis.items()}
    rows = ledger(cfg)
    batch_id = max(r["batch_id"] for r in rows if r["table_name"] == "shop.orders")
    assert {p: (r["status"], r["mode"], r["start_offset"], r["end_offset"])
            for p, r in batch_rows(rows, "shop.orders", batch_id).items()} == {
        p: ("committed", "backfill", before[p], n) for p, n in src.produced["orders"].items()}
    assert table_rows(cfg, "shop.orders", src.columns("orders")) == src.expected("orders")
    assert committed_offsets(rows, "shop.orders") == cursor  # backfills never move the incremental cursor


@pytest.mark.parametrize("conf", [{"mode": "turbo"}, {"tables": ["shop.nope"]},
                                  {"max_records_per_partition": 0}])
def test_invalid_params_are_rejected_before_any_task_runs(pipeline: dict[str, Any], conf: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        pipeline["dag"]().test(run_conf=conf)
