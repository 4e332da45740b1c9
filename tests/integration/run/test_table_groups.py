"""Several tables in one job (``cdc.run.group``): one table's terminal error does not stop the others; the summary and
the result file report every table; the exit code is the worst."""

from __future__ import annotations

import json

import pytest

from cdc.common.cli_contract import read_result
from tests.conftest import unique
from tests.integration import events
from tests.integration.events import pg
from tests.scenarios.reliability import cli, ledger_rows, pipeline, table_rows

pytestmark = pytest.mark.integration


def good(i: int, lsn: int) -> tuple[bytes, bytes]:
    return pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, lsn)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_one_failing_table_does_not_stop_the_others(spark, broker, warehouse, tmp_path, monkeypatch, concurrency):
    raw = pipeline(broker, warehouse, on_bad_record="fail")
    raw["batch"]["table_concurrency"] = concurrency
    first = raw["tables"][0]
    for _ in range(2):  # two more tables of the same pipeline, each with its own topic
        t = unique("dbserver1.public.grp_")
        broker.create_topic(t)
        raw["tables"].append({**first, "topic": t, "target": f"{unique('grp')}.customers"})
    ok1, bad, ok2 = raw["tables"]
    events.produce(broker.bootstrap, ok1["topic"], [good(i, 10 + i) for i in range(1, 4)])
    events.produce(broker.bootstrap, bad["topic"], [good(1, 10), (None, b"{broken")])
    events.produce(broker.bootstrap, ok2["topic"], [good(i, 10 + i) for i in range(1, 3)])
    result_file = tmp_path / "result.json"
    monkeypatch.setenv("CDC_RESULT_FILE", str(result_file))

    res = cli(raw, tmp_path)

    assert res.code == 2, res.stderr
    errors = [ln for ln in res.error_lines if ln.startswith("ERROR")]  # (progress lines may share the stderr)
    assert len(errors) == 1 and errors[0].startswith("ERROR [BadRecordError]"), res.stderr
    assert bad["target"] in errors[0] and "offset 1" in errors[0]
    summary = json.loads(res.stdout.splitlines()[-1])
    by_table = {t["table"]: t for t in summary["tables"]}
    assert [t["table"] for t in summary["tables"]] == [ok1["target"], bad["target"], ok2["target"]]
    assert (by_table[ok1["target"]]["status"], by_table[ok1["target"]]["inserted"]) == ("committed", 3)
    assert (by_table[ok2["target"]]["status"], by_table[ok2["target"]]["inserted"]) == ("committed", 2)
    failed = by_table[bad["target"]]
    assert (failed["status"], failed["exit_code"], failed["error_class"]) == ("failed", 2, "BadRecordError")
    assert "offset 1" in failed["error"]

    def rows(t):
        return table_rows(spark, {**raw, "tables": [t]})

    assert set(rows(ok1)) == {1, 2, 3} and set(rows(ok2)) == {1, 2}
    assert rows(bad) == {}
    committed = {(r.table_name, r.end_offset) for r in ledger_rows(spark, raw) if r.status == "committed"}
    assert committed == {(ok1["target"], 3), (ok2["target"], 2)}

    reported = read_result(result_file)
    assert reported is not None and reported.exit_code == 2
    assert [t["status"] for t in reported.summary["tables"]] == ["committed", "failed", "committed"]
    assert reported.error == errors[0]

    res = cli(raw, tmp_path)  # the healthy tables are up to date; the bad one fails again, alone
    assert res.code == 2
    assert [t["status"] for t in json.loads(res.stdout.splitlines()[-1])["tables"]] == ["empty", "failed", "empty"]


def test_tables_running_at_once_update_the_shared_ledger_in_sessions_of_their_own(spark, broker, warehouse):
    """Tables of a group run at once in threads (``batch.table_concurrency``); their ledger writes go to one Iceberg
    table. In one shared Spark session, a row-level UPDATE fails when another thread commits to the ledger between
    its scan and its commit ("Runtime file filtering is not possible: the table has been concurrently modified");
    ``cdc.run.group.table_session`` gives each thread a session of its own, where such commits retry and succeed."""
    from concurrent.futures import ThreadPoolExecutor

    from cdc.config.load import parse_config
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.state import LedgerRange
    from cdc.ledger.tables import ensure_meta_tables
    from cdc.run.group import table_session

    raw = pipeline(broker, warehouse)
    raw["batch"]["table_concurrency"] = 4
    cfg = parse_config(raw)
    ensure_meta_tables(spark, cfg)
    name = f"{cfg.catalog.name}.{cfg.metadata_namespace}.ledger"

    def work(i: int) -> int:
        own = table_session(spark, cfg)
        assert own is not spark
        ledger, table, run = Ledger(own, name, cfg.pipeline), f"t{i}.customers", f"run{i}"
        ledger.claim(table, 1, "incremental", [LedgerRange(f"topic{i}", 0, 0, 5)], run,
                     seen=ledger.state(table, None).snapshot_id)
        for _ in range(6):  # UPDATEs of the table's rows while the other threads update theirs
            ledger.renew(table, 1, run)
        ledger.mark_committed(table, 1, run, {"inserted": i}, None, {})
        return i

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(work, range(4))) == [0, 1, 2, 3]
    spark.catalog.refreshTable(name)
    rows = spark.sql(f"SELECT table_name, status, inserted FROM {name}").collect()
    assert sorted((r.table_name, r.status, r.inserted) for r in rows) == [
        (f"t{i}.customers", "committed", i) for i in range(4)]
