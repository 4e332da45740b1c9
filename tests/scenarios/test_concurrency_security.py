"""Concurrent runs of one table (real processes) and secrets that must never be printed."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.integration import events
from tests.integration.cli import REPO, finish, start_job, summary_of
from tests.integration.events import pg
from tests.scenarios.reliability import cli, ledger_rows, pipeline, table_rows, topic, write

pytestmark = pytest.mark.integration


def start(config, env=None, *args) -> subprocess.Popen:
    return start_job(config, *args, env=env)


def load(spark, raw, n=40):
    events.produce(broker_of(raw), topic(raw), [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i)
                                                for i in range(n)])


def broker_of(raw):
    return raw["kafka"]["bootstrap.servers"]


def refresh(spark, raw):
    for n in (f"lake.{raw['metadata_namespace']}.ledger", f"lake.{raw['tables'][0]['target']}"):
        try:
            spark.catalog.refreshTable(n)
        except Exception:
            pass


def test_two_processes_started_together_do_not_both_merge(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse)
    load(spark, raw)
    config = write(raw, tmp_path)
    a, b = start(config), start(config)
    ra, rb = finish(a), finish(b)
    codes = sorted((ra.returncode, rb.returncode))
    assert all(c in (0, 75) for c in codes), (ra.stderr[-3000:], rb.stderr[-3000:])
    summaries = [summary_of(r) for r in (ra, rb) if r.returncode == 0]
    committed = [s["tables"][0] for s in summaries if s["tables"][0]["status"] == "committed"]
    assert len(committed) == 1, (codes, summaries, ra.stderr[-1500:], rb.stderr[-1500:])  # exactly one merged; the other refused (75) or found nothing
    for r in (ra, rb):
        if r.returncode == 75:
            lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ERROR")]
            assert len(lines) == 1 and "[ConcurrentRunError]" in lines[0], r.stderr[-2000:]
    refresh(spark, raw)
    assert sorted(table_rows(spark, raw)) == list(range(40))
    rows = ledger_rows(spark, raw)
    assert [(r.status, r.start_offset, r.end_offset) for r in rows] == [("committed", 0, 40)], (
        codes, [r.asDict() for r in rows], ra.stderr[-1500:], rb.stderr[-1500:])


def test_two_claims_of_one_batch_that_see_each_other_still_leave_one_winner(make_pipe):
    """The race a CI run hit with two processes: A planned (its session holds the ledger as of then), B claims batch 1,
    and A's claim lands before B has read back who owns the batch. Both then see both claims; before the fix both
    withdrew and nobody ingested (two schedulers colliding every time would never ingest). Now A's claim conflicts
    with B's at commit time (A's write is validated from the ledger A planned from, which B's claim postdates), so
    B keeps the batch and A refuses.

    Two sessions in one process stand for the two processes (each has its own catalog cache); the interleaving is
    forced by running A's claim write inside B's read-back, the one point between B's write and B's check."""
    from cdc.common.errors import ConcurrentRunError
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.state import LedgerRange
    from cdc.ledger.tables import ensure_meta_tables

    p = make_pipe()
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 10))
    ensure_meta_tables(p.spark, p.cfg)  # the metadata tables (a dry run writes nothing)
    name, target, ranges = f"lake.{p.cfg.metadata_namespace}.ledger", p.table.target, [LedgerRange(p.topic, 0, 0, 1)]
    a, b = (Ledger(p.spark.newSession(), name, p.cfg.pipeline) for _ in range(2))
    a_plan = a.state(target, p.topic)  # A plans
    b_plan = b.state(target, p.topic)  # B plans
    b_reads = b.state

    def a_claims_then_b_reads(*args):
        a._append_claim(target, 1, "incremental", ranges, "run-a", a_plan.snapshot_id)
        return b_reads(*args)

    b.state = a_claims_then_b_reads  # type: ignore[method-assign]
    b.claim(target, 1, "incremental", ranges, "run-b", seen=b_plan.snapshot_id)  # B keeps its claim
    with pytest.raises(ConcurrentRunError, match="run-b"):
        a.claim(target, 1, "incremental", ranges, "run-a", seen=a_plan.snapshot_id)
    assert Ledger(p.spark, name, p.cfg.pipeline).owners(target, 1) == {"run-b"}


def test_a_run_refuses_while_a_live_run_holds_the_claim(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse)
    load(spark, raw)
    holder = start(write(raw, tmp_path), {"CDC_PAUSE_AT": "after_stage:45"})
    try:
        deadline = time.monotonic() + 240
        while True:  # wait until the holder has claimed (and staged) its batch
            refresh(spark, raw)
            if [r for r in ledger_rows(spark, raw) if r.status == "claimed"]:
                break
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "holder never claimed"
            time.sleep(1)
        res = cli(raw, tmp_path)  # a manual run meanwhile
        assert res.code == 75, res.stderr
        assert len(res.error_lines) == 1 and res.error_lines[0].startswith("ERROR [ConcurrentRunError]")
        assert "being processed by another run" in res.stderr and raw["tables"][0]["target"] in res.stderr
    finally:
        done = finish(holder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary_of(done)["tables"][0]["status"] == "committed"
    refresh(spark, raw)
    assert sorted(table_rows(spark, raw)) == list(range(40))
    assert [r.status for r in ledger_rows(spark, raw)] == ["committed"]


def test_a_long_run_on_another_host_keeps_its_lease(spark, broker, warehouse, tmp_path, monkeypatch):
    """Runs on different hosts (``CDC_OWNER_HOST``) know each other only through the ledger. The holder stays paused
    for several 15 s leases, renewing its claim; a run from another host long after the first lease expired must
    still refuse (without renewal it would take the live batch over), and the holder then commits."""
    raw = pipeline(broker, warehouse)
    raw["batch"]["claim_timeout_minutes"] = 0.25
    load(spark, raw)
    holder = start(write(raw, tmp_path), {"CDC_PAUSE_AT": "after_stage:70", "CDC_OWNER_HOST": "host-a"})
    try:
        deadline = time.monotonic() + 240
        while True:
            refresh(spark, raw)
            claimed = [r for r in ledger_rows(spark, raw) if r.status == "claimed"]
            if claimed:
                break
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "holder never claimed"
            time.sleep(1)
        first_claim = claimed[0].claimed_at
        time.sleep(25)  # well past the 15 s lease of the first claim
        monkeypatch.setenv("CDC_OWNER_HOST", "host-b")
        res = cli(raw, tmp_path)
        assert res.code == 75, res.stderr
        assert "being processed by another run" in res.stderr and "host-a:" in res.stderr
        refresh(spark, raw)
        renewed = [r.claimed_at for r in ledger_rows(spark, raw)]
        assert renewed and renewed[0] > first_claim
    finally:
        done = finish(holder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lease renewal failed" not in done.stderr
    assert summary_of(done)["tables"][0]["status"] == "committed"
    refresh(spark, raw)
    assert sorted(table_rows(spark, raw)) == list(range(40))
    assert [r.status for r in ledger_rows(spark, raw)] == ["committed"]


SECRET_REGISTRY = "Reg1stry-S3cret-pw-9f8e7d"
SECRET_KAFKA = "Kafk4-SASL-S3cret-pw-1a2b3c"


def test_secrets_never_appear_in_output(spark, broker, warehouse, tmp_path):
    """Registry basic-auth and Kafka SASL passwords come from ${ENV}; failures (401, broker down) never print them."""
    from devtools.broker import free_port
    from devtools.registry import LocalSchemaRegistry
    from tests.scenarios.test_bad_input import avro_records

    with LocalSchemaRegistry(username="cdc", password="the-right-one") as registry:
        raw = pipeline(broker, warehouse, "avro", registry)
        events.produce(broker.bootstrap, topic(raw), avro_records(registry, raw))
        raw["schema_registry"]["basic.auth.user.info"] = "cdc:${CDC_TEST_REGISTRY_PASSWORD}"
        wrong_registry = finish(start(write(raw, tmp_path), {"CDC_TEST_REGISTRY_PASSWORD": SECRET_REGISTRY}))

    raw2 = pipeline(broker, warehouse)
    raw2["kafka"] = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": "cdc", "sasl.password": "${CDC_TEST_KAFKA_PASSWORD}",
                     "socket.connection.setup.timeout.ms": 2000}
    raw2["batch"]["read_timeout_seconds"] = 3
    no_broker = finish(start(write(raw2, tmp_path), {"CDC_TEST_KAFKA_PASSWORD": SECRET_KAFKA}))

    assert wrong_registry.returncode == 2, wrong_registry.stderr[-3000:]
    assert "refused access" in wrong_registry.stderr and "credentials" in wrong_registry.stderr
    assert no_broker.returncode == 75, no_broker.stderr[-3000:]
    for res in (wrong_registry, no_broker):
        text = res.stdout + res.stderr
        for secret in (SECRET_REGISTRY, SECRET_KAFKA):
            assert secret not in text
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")]
        assert len(errors) == 1, res.stderr[-3000:]


def test_redacted_config_and_repo_hold_no_secret():
    from cdc.config.load import parse_config

    cfg = parse_config({
        "pipeline": "p", "format": "avro",
        "kafka": {"bootstrap.servers": "b:9092", "sasl.password": "${PW}", "sasl.jaas.config": "x password=${PW}",
                  "ssl.key.password": "${PW}"},
        "schema_registry": {"url": "http://r", "basic.auth.user.info": "u:${PW}"},
        "catalog": {"warehouse": "/tmp/w"}, "tables": [{"topic": "t", "target": "a.b"}]}, env={"PW": "hunter2-xyz"})
    assert cfg.kafka["sasl.password"] == "hunter2-xyz"
    assert "hunter2-xyz" not in json.dumps(cfg.redacted())
    tracked = subprocess.run(["git", "grep", "-I", "-n", "-E", r"(sasl\.password|user\.info)\s*[:=]\s*['\"]?[A-Za-z0-9]"
                              r"{6,}", "--", ":!tests", ":!docs", ":!devtools"],
                             cwd=REPO, capture_output=True, text=True)
    assert tracked.stdout.strip() == "", tracked.stdout
