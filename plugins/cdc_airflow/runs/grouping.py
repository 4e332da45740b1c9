"""Tables per ingest task (``airflow.tables_per_task``): the planned tables of a DAG run in groups, one spark-submit
(one Spark application, one JVM start) per group instead of per table. Pure: plain values in, mapped-task kwargs out.

A group's task is labelled with its tables (``map_index`` "inventory.customers, inventory.orders"); the job runs
them in one process with failures isolated per table (``cdc.run.group``): its summary has one entry per table (asset
events are emitted per committed table as for single-table tasks), its exit code is the worst of its tables'.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from cdc.common import cli_contract as cli
from cdc_airflow.runs.commands import RunRequest, TablePlan, ingest_args


def group_args(config_path: str, members: Sequence[tuple[str, str]], req: RunRequest) -> list[str]:
    """Job arguments for several (table, topic) pairs: ``--table`` per table, offsets of all their topics."""
    from dataclasses import replace

    first, topic = members[0]
    args = ingest_args(config_path, first, topic, replace(req, start_offsets={}, end_offsets={}))
    at = args.index(cli.TABLE) + 2
    args[at:at] = [x for name, _ in members[1:] for x in (cli.TABLE, name)]
    topics = [t for _, t in members]
    for flag, offsets in ((cli.START_OFFSETS, req.start_offsets), (cli.END_OFFSETS, req.end_offsets)):
        mine = {t: offsets[t] for t in topics if t in offsets}
        if mine:
            args += [flag, cli.offsets_arg(mine)]
    return args


def group_plans(plans: Sequence[TablePlan], req: RunRequest, config_path: str, tables_per_task: int) -> list[dict[str, Any]]:
    """The mapped ingest tasks' kwargs: one per table (``tables_per_task`` 1) or one per group of up to
    ``tables_per_task`` tables, in plan order, as evenly sized as the count allows."""
    if tables_per_task <= 1 or len(plans) <= 1:
        return [p.as_kwargs() for p in plans]
    n_groups = math.ceil(len(plans) / tables_per_task)
    base, extra = divmod(len(plans), n_groups)
    out, i = [], 0
    for g in range(n_groups):
        chunk = plans[i:i + base + (g < extra)]
        i += len(chunk)
        if len(chunk) == 1:
            out.append(chunk[0].as_kwargs())
            continue
        members = [(p.table, p.topic) for p in chunk]
        out.append({"table": ", ".join(p.table for p in chunk),
                    "application_args": group_args(config_path, members, req)})
    return out


def group_timeout_minutes(per_table_minutes: float, startup_minutes: float, tables_per_task: int,
                          table_concurrency: int) -> float:
    """The execution timeout of a group's task: one start-up allowance plus each table's share, tables running
    ``table_concurrency`` at a time (pure)."""
    if tables_per_task <= 1:
        return per_table_minutes
    waves = math.ceil(tables_per_task / max(1, table_concurrency))
    return startup_minutes + waves * max(0.0, per_table_minutes - startup_minutes)
