"""cdc_airflow.runs.grouping: planned tables → one mapped ingest task per group (pure)."""

from __future__ import annotations

import pytest

from cdc_airflow.runs.commands import RunRequest, plan_tables
from cdc_airflow.runs.grouping import group_plans, group_timeout_minutes


def plans(n: int, req: RunRequest):
    return plan_tables(((f"ns.t{i}", f"topic{i}") for i in range(n)), req, "/p.yaml", {f"ns.t{i}": {0: 5}
                                                                                       for i in range(n)})


def test_one_table_per_task_is_todays_mapping():
    req = RunRequest()
    assert group_plans(plans(3, req), req, "/p.yaml", 1) == [p.as_kwargs() for p in plans(3, req)]


@pytest.mark.parametrize("n, size, groups", [(5, 2, [2, 2, 1]), (7, 3, [3, 2, 2]), (20, 10, [10, 10]),
                                             (3, 10, [3])])
def test_groups_are_even_and_keep_plan_order(n, size, groups):
    req = RunRequest()
    out = group_plans(plans(n, req), req, "/p.yaml", size)
    assert [len(g["table"].split(", ")) for g in out] == groups
    assert [t for g in out for t in g["table"].split(", ")] == [f"ns.t{i}" for i in range(n)]
    for g in out:
        args = g["application_args"]
        assert [args[i + 1] for i, a in enumerate(args) if a == "--table"] == g["table"].split(", ")


def test_group_args_carry_the_offsets_of_their_topics_only():
    req = RunRequest(mode="backfill", end_offsets={"topic0": {0: 3}, "topic2": {1: 9}}, max_records_per_partition=50)
    first, second = group_plans(plans(3, req), req, "/p.yaml", 2)
    args = first["application_args"]
    assert args[:8] == ["--config", "/p.yaml", "--table", "ns.t0", "--table", "ns.t1", "--mode", "backfill"]
    assert args[args.index("--end-offsets") + 1] == '{"topic0": {"0": 3}}'
    assert args[args.index("--max-records") + 1] == "50"
    assert second["application_args"][second["application_args"].index("--end-offsets") + 1] == '{"topic2": {"1": 9}}'


def test_group_timeout_one_startup_and_each_tables_share():
    assert group_timeout_minutes(37, 20, 1, 1) == 37
    assert group_timeout_minutes(37, 20, 10, 1) == 20 + 10 * 17
    assert group_timeout_minutes(37, 20, 10, 4) == 20 + 3 * 17


def test_tables_per_task_is_validated():
    from cdc.common.errors import ConfigError
    from cdc_airflow.config.options import parse_airflow

    assert parse_airflow({"tables_per_task": 8}, "p.yaml", []).tables_per_task == 8
    assert parse_airflow(None, "p.yaml", []).tables_per_task == 1
    for bad in (0, "3", True):
        with pytest.raises(ConfigError, match="airflow.tables_per_task"):
            parse_airflow({"tables_per_task": bad}, "p.yaml", [])
