"""cdc.group: one table's failure is isolated; the group's exit code is the worst of its tables'."""

from __future__ import annotations

import threading

import pytest

from cdc.common.errors import BadRecordError, ConcurrentRunError, ConfigError
from cdc.config.load import parse_config
from cdc.run.group import error_lines, exit_code_of, run_isolated, worst_exit_code


def cfg(concurrency: int = 1, n: int = 4):
    return parse_config({"pipeline": "g", "kafka": {"bootstrap.servers": "x:1"}, "format": "json",
                         "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"},
                         "batch": {"table_concurrency": concurrency},
                         "tables": [{"topic": f"t{i}", "target": f"ns.t{i}"} for i in range(n)]})


@pytest.mark.parametrize("codes, worst", [([], 0), ([0, 0], 0), ([0, 75], 75), ([75, 1], 1), ([75, 2, 1], 2),
                                          ([130, 0], 130)])
def test_worst_exit_code_terminal_over_other_over_retryable(codes, worst):
    assert worst_exit_code(codes) == worst


@pytest.mark.parametrize("concurrency", [1, 3])
def test_failures_are_isolated_and_reported_in_order(concurrency):
    c = cfg(concurrency)
    seen, threads = [], set()
    failures = {"ns.t1": BadRecordError("table ns.t1: topic t1 partition 0 offset 7: bad"),
                "ns.t2": ConcurrentRunError("table ns.t2: another run"), "ns.t3": RuntimeError("boom\nsecond")}

    def run_one(t):
        seen.append(t.target)
        threads.add(threading.current_thread().name)
        if t.target in failures:
            raise failures[t.target]
        return {"table": t.target, "topic": t.topic, "status": "committed"}

    summary = run_isolated(c, list(c.tables), "incremental", run_one)
    assert sorted(seen) == ["ns.t0", "ns.t1", "ns.t2", "ns.t3"]
    assert [t["table"] for t in summary["tables"]] == ["ns.t0", "ns.t1", "ns.t2", "ns.t3"]
    assert [t["status"] for t in summary["tables"]] == ["committed", "failed", "failed", "failed"]
    bad, conc, other = summary["tables"][1:]
    assert (bad["error_class"], bad["exit_code"]) == ("BadRecordError", 2) and "offset 7" in bad["error"]
    assert (conc["error_class"], conc["exit_code"]) == ("ConcurrentRunError", 75)
    assert (other["error_class"], other["exit_code"]) == ("CdcError", 1) and "\n" not in other["error"]
    assert exit_code_of(summary) == 2
    assert error_lines(summary)[0] == "ERROR [BadRecordError] table ns.t1: topic t1 partition 0 offset 7: bad"
    if concurrency == 1:
        assert threads == {"MainThread"}
    else:
        assert threads and all(name.startswith("cdc-table") for name in threads)


def test_batch_table_concurrency_is_validated():
    assert cfg(4).batch.table_concurrency == 4
    assert cfg().batch.table_concurrency == 1
    with pytest.raises(ConfigError, match="batch.table_concurrency"):
        cfg(0)
