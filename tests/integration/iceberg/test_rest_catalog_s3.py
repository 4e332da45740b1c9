"""The job on Apache Iceberg's own REST catalog server (``devtools.rest_catalog``: RESTCatalogServer from Iceberg's
Maven artifacts, a real JVM) with its warehouse on S3 (the real moto server, ``devtools.s3``, checking IAM
credentials): ingest CLI runs commit through the REST catalog with ``S3FileIO``, the Airflow side (pyiceberg's REST
catalog, pyarrow's S3 file system) reads the same tables and the status view shows them, two runs at once commit
exactly one batch, maintenance rewrites, expires and removes orphan files on S3. The OAuth2 credential is checked
by ``devtools.rest_gateway`` in front of the server (the stand-in for a catalog service's OAuth2 deployment: the
test server grants every client). Secrets come from the environment only and are printed nowhere."""

from __future__ import annotations

import pytest

from tests.integration import events
from tests.integration.cli import finish, run_cli, start_job, summary_of
from tests.integration.events import pg
from tests.integration.iceberg.object_store import (
    config_of,
    env_of,
    error_line,
    ledger,
    rest_pipeline,
    run_job,
    secrets_of,
    target_rows,
    write,
)

pytestmark = pytest.mark.integration


def rows(n: int, start: int = 0) -> list:
    return [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i) for i in range(start, start + n)]


def test_ingest_maintenance_and_status_view_through_rest_on_s3(broker, s3, rest, tmp_path, monkeypatch):
    env = env_of(s3, rest)
    raw = rest_pipeline(broker, s3, rest)
    topic, target = raw["tables"][0]["topic"], raw["tables"][0]["target"]
    path = write(raw, tmp_path / "pipelines")
    cfg = config_of(path, env)
    assert ledger(cfg) == []  # the Airflow side before the first run: no table yet, no error

    events.produce(broker.bootstrap, topic, rows(6))
    first = run_cli(path, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    s1 = summary_of(first)["tables"][0]
    assert (s1["status"], s1["inserted"]) == ("committed", 6), s1
    events.produce(broker.bootstrap, topic, [pg("u", 1, {"id": 1, "name": "one", "bio": None}, 100),
                                             pg("d", 2, {"id": 2, "name": "n2", "bio": None}, 101),
                                             pg("c", 7, {"id": 7, "name": "n7", "bio": None}, 102)])
    second = run_cli(path, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    s2 = summary_of(second)["tables"][0]
    assert (s2["status"], s2["inserted"], s2["updated"], s2["deleted"]) == ("committed", 1, 1, 1), s2

    expected = {0: "n0", 1: "one", 3: "n3", 4: "n4", 5: "n5", 7: "n7"}
    assert target_rows(cfg, env, monkeypatch) == expected
    assert [(r["batch_id"], r["status"], r["start_offset"], r["end_offset"]) for r in ledger(cfg)] == [
        (1, "committed", 0, 6), (2, "committed", 6, 9)]
    # the data and metadata files are objects in the bucket, under the REST catalog's warehouse
    namespace = target.split(".")[0]
    keys = s3.keys("lake", f"rest/{namespace}/customers/")
    assert any(k.endswith(".parquet") for k in keys) and any(k.endswith(".metadata.json") for k in keys), keys

    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.status.view import collect_status

    status = collect_status(load_settings({"CDC_PIPELINES_DIR": str(path.parent)}),
                            watermarks=lambda _conf, _topic: {0: 9})
    [entry] = status
    assert entry["error"] is None, entry
    table = entry["tables"][0]
    assert table["snapshot_id"] == s2["snapshot_id"], table
    assert [b["batch_id"] for b in table["batches"]][:2] == [2, 1], table["batches"]
    assert table["lag_total"] == 0, table

    orphan = f"rest/{namespace}/customers/data/orphan-left-by-a-dead-writer.parquet"
    s3.client("s3").put_object(Bucket="lake", Key=orphan, Body=b"not referenced by any snapshot")
    maint = run_job("maintenance", path, env, "--snapshot-retention-hours", "0", "--retain-last", "1",
                    "--staging-retention-hours", "0", "--orphan-retention-hours", "24")
    assert maint.returncode == 0, maint.stderr[-3000:]
    steps = next(v for v in summary_of(maint).values() if isinstance(v, list))
    assert [s for s in steps if s["error"]] == [], steps
    done = {(s["table"].split(".")[-1], s["action"]): s["result"] for s in steps}
    assert done[("customers", "remove_orphan_files")] == {"files": 0}  # listed on S3; the fresh orphan is kept
    assert done[(f"staging__{namespace}__customers", "expire_snapshots")]["deleted_data_files_count"] >= 1
    from cdc_airflow.monitor.ledger import load_table

    assert target_rows(cfg, env, monkeypatch) == expected
    assert s1["snapshot_id"] not in {s.snapshot_id for s in load_table(cfg.catalog, target).snapshots()}
    # Iceberg refuses an orphan retention under 24 hours and moto cannot backdate an object, so the orphan here
    # is younger than the retention: kept
    assert orphan in s3.keys("lake", f"rest/{namespace}/customers/")

    for res in (first, second, maint):
        for secret in secrets_of(s3, rest):
            assert secret not in res.stdout + res.stderr


def test_two_runs_of_one_table_commit_once_through_rest(broker, s3, rest, tmp_path, monkeypatch):
    """Two ingest runs of one table at once, both committing through the REST catalog: one commits, the other
    refuses (75, ConcurrentRunError) or finds nothing; the table equals the source and the ledger holds one batch."""
    env = env_of(s3, rest)
    raw = rest_pipeline(broker, s3, rest)
    events.produce(broker.bootstrap, raw["tables"][0]["topic"], rows(40))
    path = write(raw, tmp_path / "pipelines")
    a, b = start_job(path, env=env), start_job(path, env=env)
    ra, rb = finish(a), finish(b)
    codes = sorted((ra.returncode, rb.returncode))
    assert all(c in (0, 75) for c in codes), (ra.stderr[-3000:], rb.stderr[-3000:])
    committed = [s["tables"][0] for s in (summary_of(r) for r in (ra, rb) if r.returncode == 0)
                 if s["tables"][0]["status"] == "committed"]
    assert len(committed) == 1, (codes, ra.stderr[-1500:], rb.stderr[-1500:])
    for r in (ra, rb):
        if r.returncode == 75:
            assert "[ConcurrentRunError]" in error_line(r), r.stderr[-2000:]
    cfg = config_of(path, env)
    assert sorted(target_rows(cfg, env, monkeypatch)) == list(range(40))
    assert [(r["status"], r["start_offset"], r["end_offset"]) for r in ledger(cfg)] == [("committed", 0, 40)]
    again = run_cli(path, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert summary_of(again)["tables"][0]["status"] == "empty"


def test_two_pipelines_commit_at_once_to_one_ledger_through_rest(broker, s3, rest, tmp_path, monkeypatch):
    """Two jobs of two pipelines sharing one metadata namespace run at once: both commit through the REST server
    into their own targets and into the same ledger table (concurrent Iceberg commits to one table, which the REST
    catalog serializes); a run that lost such a race exits 75 and its rerun commits. Both tables end equal to their
    sources, the ledger holds each pipeline's batch."""
    env = env_of(s3, rest)
    one, two = rest_pipeline(broker, s3, rest), rest_pipeline(broker, s3, rest)
    two["metadata_namespace"] = one["metadata_namespace"]
    for raw, n in ((one, 30), (two, 20)):
        events.produce(broker.bootstrap, raw["tables"][0]["topic"], rows(n))
    paths = [write(raw, tmp_path / raw["pipeline"]) for raw in (one, two)]
    results = [finish(p) for p in [start_job(path, env=env) for path in paths]]
    for path, res in zip(paths, results):
        assert res.returncode in (0, 75), res.stderr[-3000:]
        if res.returncode == 75:
            assert "[ConcurrentRunError]" in error_line(res) or "[CatalogUnavailable]" in error_line(res)
            again = run_cli(path, env=env)
            assert again.returncode == 0, again.stderr[-3000:]
    for path, n in zip(paths, (30, 20)):
        cfg = config_of(path, env)
        assert sorted(target_rows(cfg, env, monkeypatch)) == list(range(n))
        assert [(r["status"], r["end_offset"]) for r in ledger(cfg)] == [("committed", n)]
    print("exit codes of the concurrent runs:", [r.returncode for r in results])
