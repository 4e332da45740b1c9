"""How a PostgreSQL bootstrap fails, against the real server: who must act (exit 2) and what is retried (exit 75).

The source unreachable (75) or refusing the login (2) is found before Spark starts (the real CLI, no JVM); the
connector's slot not catching up in time (75) and an unknown slot (2) while the snapshot is open; an ingest batch of
the table pending (75) before anything is read. The target is untouched each time."""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest
import yaml

from cdc.common.errors import ConcurrentRunError, ConfigError, RetryableError
from tests.integration.bootstrap.test_bootstrap_postgres import setup, slot, start_bootstrap  # noqa: F401  (fixtures)
from tests.integration.cli import finish

pytestmark = pytest.mark.integration


def closed_port() -> int:
    with socket.socket() as s:  # a loopback port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_an_unreachable_source_is_retried_a_refused_login_is_not_both_before_spark(setup, postgres, warehouse,
                                                                                        tmp_path):
    db, topic, target, config, src = setup
    raw = yaml.safe_load(config.read_text())
    meta = raw["metadata_namespace"]
    boot = raw["tables"][0]["bootstrap"]
    port = closed_port()
    boot["jdbc_url"] = f"jdbc:postgresql://127.0.0.1:{port}/{db}"
    (tmp_path / "down.yaml").write_text(yaml.safe_dump(raw))
    secret = {"CDC_TEST_PG_PASSWORD": "Boot-S3cret-pw"}
    down = finish(start_bootstrap(tmp_path / "down.yaml", env=secret), timeout=120)
    assert down.returncode == 75, down.stderr
    assert f"bootstrap of {target} from public.customers: cannot connect to the source database" in down.stderr
    assert f"port {port} failed: Connection refused" in down.stderr

    boot.update(jdbc_url=postgres.jdbc_url_for(db), user="no_such_role")
    (tmp_path / "role.yaml").write_text(yaml.safe_dump(raw))
    refused = finish(start_bootstrap(tmp_path / "role.yaml", env=secret), timeout=120)
    assert refused.returncode == 2, refused.stderr
    assert 'refused the connection' in refused.stderr and 'role "no_such_role" does not exist' in refused.stderr
    for res in (down, refused):
        assert "Boot-S3cret-pw" not in res.stdout + res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (warehouse / meta).exists()  # no Spark session, no ledger, no target: nothing was touched


def test_the_connector_slot_not_caught_up_in_time_is_retried_an_unknown_slot_is_a_config_error(setup, slot,
                                                                                               postgres):
    from cdc.bootstrap.postgres import PostgresSnapshot
    from cdc.config.load import load_config

    db, topic, target, config, src = setup
    src.tx(("c", 1, "n1", "b1"))  # WAL beyond what the slot (created before) has confirmed
    deadline = time.monotonic() + 30  # written out (synchronous_commit is off): pg_current_wal_lsn() passes the slot
    while not postgres.execute("SELECT pg_current_wal_lsn() > confirmed_flush_lsn FROM pg_replication_slots "
                               "WHERE slot_name = %s", (slot,), database=db)[0][0]:
        assert time.monotonic() < deadline, "the WAL write position never passed the slot"
        time.sleep(0.1)
    b = dataclasses.replace(load_config(config).tables[0].bootstrap, connector_slot=slot, connector_wait_seconds=0)
    with PostgresSnapshot(b, target) as snap:
        with pytest.raises(RetryableError, match=f"the connector's slot {slot} has confirmed .*Retry later") as err:
            snap.wait_for_connector(sleep=0.05)
    assert err.value.exit_code == 75
    with PostgresSnapshot(dataclasses.replace(b, connector_slot="no_such_slot"), target) as snap:
        with pytest.raises(ConfigError, match="'no_such_slot' is not a replication slot") as err:
            snap.wait_for_connector()
    assert err.value.exit_code == 2


def test_a_pending_ingest_batch_of_the_table_is_retried_before_the_source_is_read(setup, spark):
    from cdc.bootstrap.job import run_bootstrap
    from cdc.config.load import load_config
    from cdc.config.names import names
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.state import LedgerRange
    from cdc.ledger.tables import ensure_meta_tables

    db, topic, target, config, src = setup
    cfg = load_config(config)
    t = cfg.tables[0]
    ensure_meta_tables(spark, cfg)
    ledger = Ledger(spark, names(cfg, t).ledger, cfg.pipeline)
    ledger.claim(t.target, 1, "incremental", [LedgerRange(topic, 0, 0, 5)], "an-ingest-run",
                 seen=ledger.state(t.target, None).snapshot_id)
    cfg = dataclasses.replace(cfg, tables=(dataclasses.replace(t, bootstrap=dataclasses.replace(
        t.bootstrap, jdbc_url=f"jdbc:postgresql://127.0.0.1:{closed_port()}/{db}")),))  # never contacted
    with pytest.raises(ConcurrentRunError, match=f"table {target} .*batch 1 is claimed .*rerun ingest") as err:
        run_bootstrap(spark, cfg, cfg.tables[0])
    assert err.value.exit_code == 75
    assert not spark.catalog.tableExists(f"lake.{target}")
