"""The ingestion DAG of one pipeline: plan (which tables have new data) → ingest (one mapped spark-submit per
table, or per group of ``airflow.tables_per_task`` tables: ``cdc_airflow.runs.grouping``) → publish (batch summaries
to XCom and the log). Wiring only; the logic is in ``cdc_airflow.runs`` (params, commands, grouping) and
``cdc_airflow.monitor`` (lag, freshness)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from cdc_airflow.config.options import STARTUP_MINUTES, airflow_options
from cdc_airflow.config.pipelines import load_pipeline, resolve_routes
from cdc_airflow.config.schedule import ingest_timetable
from cdc_airflow.config.settings import CdcSettings
from cdc_airflow.dags.common import START, default_args
from cdc_airflow.monitor.freshness import check_freshness
from cdc_airflow.monitor.lag import table_lags
from cdc_airflow.operators.assets import outlet_aliases
from cdc_airflow.runs.commands import plan_tables, summarize
from cdc_airflow.runs.grouping import group_plans, group_timeout_minutes
from cdc_airflow.runs.params import backfill_interval_params, param_specs, to_request

if TYPE_CHECKING:
    from cdc.config.model import PipelineConfig

log = logging.getLogger(__name__)
UNPLANNED_KEY = "unplanned"  # the plan task's XCom: failed entries of ambiguous topic_pattern topics (plan_run)


def plan_run(settings: CdcSettings, config_path: str, params: dict[str, Any]
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Validate the run's params and pick the tables to ingest; skip the run when none has new data. Also the
    summary entries (``status: failed``) of the selected ``topic_pattern`` topics that are ambiguous (two patterns,
    a shared target or helper tables): they are not planned, the publish task reports them failed; with no other
    table to run, the plan fails with their errors."""
    routes = resolve_routes(load_pipeline(settings, config_path))  # topic_pattern: the topics of this run
    cfg = routes.cfg
    known = {u.table.target: u.table.topic for u in routes.unresolved} | {t.target: t.topic for t in cfg.tables}
    try:
        req = to_request(params, known)
    except ValueError as exc:
        raise AirflowFailException(str(exc)) from None
    selected, aside = routes.select(list(req.tables) or None)
    failed = unplanned_entries(aside, "incremental" if req.mode == "dry_run" else req.mode)
    lags = None
    if req.mode != "backfill" and not req.explicit_range:
        try:
            found = table_lags(cfg, selected)
        except Exception as exc:  # broker/catalog unreachable: retry later
            raise AirflowException(f"cannot compute lag: {type(exc).__name__}: {exc}") from exc
        for t in found.values():
            log.info("lag %s (%s): %s committed=%s high=%s", t.table, t.topic, t.total, t.committed, t.watermarks)
        lags = {name: t.lag for name, t in found.items()}
    plans = plan_tables(((t.target, t.topic) for t in selected), req, config_path, lags)
    if not plans and failed:
        raise AirflowFailException("; ".join(f["error"] for f in failed))
    if not plans:
        raise AirflowSkipException("no table has new data")
    for p in plans:
        log.info("will ingest %s (%s): %s", p.table, p.reason, " ".join(p.application_args))
    return group_plans(plans, req, config_path, airflow_options(cfg).tables_per_task), failed


def unplanned_entries(aside: Any, mode: str) -> list[dict[str, Any]]:
    """The job's summary entries (``cdc.run.group.failed_entry``) of the ambiguous topics set aside, logged."""
    if not aside:
        return []
    from cdc.common.errors import ConfigError
    from cdc.run.group import failed_entry

    failed = [failed_entry(u.table, mode, ConfigError(u.error), 0.0) for u in aside]
    for f in failed:
        log.error("not planned %s (%s): %s", f["table"], f["topic"], f["error"])
    return failed


def publish_run(planned: list[dict[str, Any]] | None, summaries: list[Any],
                freshness: Any = None, unplanned: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Runs when plan did not skip (trigger rule none_skipped), also after failures, so partial results are
    published; it fails when any planned table has no summary or failed, which fails the DAG run. ``freshness()``
    returns the tables found stale (logged as warnings, reported under ``stale``). ``unplanned``: the failed
    entries of ambiguous ``topic_pattern`` topics the plan set aside (``plan_run``), reported as failed tables."""
    if not planned:
        raise AirflowFailException("planning failed: no tables to report on")
    summaries = [*summaries, {"tables": list(unplanned or [])}]
    report = summarize([s for s in summaries if isinstance(s, dict)],
                       [t for p in planned for t in str(p["table"]).split(", ")])  # a group: "a.x, b.y"
    for row in report["tables"]:
        log.info("batch %s", json.dumps(row, sort_keys=True, default=str))
    log.info("totals %s", json.dumps(report["totals"], sort_keys=True))
    report["stale"] = freshness() if freshness is not None else []
    failed = [r["table"] for r in report["tables"] if r.get("status") == "failed"]
    if report["missing"] or failed:
        raise AirflowFailException("; ".join(
            ([f"no batch summary from {', '.join(report['missing'])} (their ingest task failed or the job printed no "
              "summary)"] if report["missing"] else []) + ([f"failed: {', '.join(failed)}"] if failed else [])))
    return report


def build_ingest_dag(settings: CdcSettings, cfg: "PipelineConfig") -> DAG:
    from cdc_airflow.operators.spark_submit import CdcSparkSubmitOperator, submit_kwargs

    # topic_pattern entries resolve in the plan task at run time: the params then take any table name
    names, topics = [t.target for t in cfg.tables if t.topic], [t.topic for t in cfg.tables if t.topic]
    config_path = str(cfg.source_path)
    options = airflow_options(cfg)
    timeout = timedelta(minutes=options.ingest_timeout_minutes(cfg.batch.max_records_per_partition))
    if options.tables_per_task > 1 and options.task_timeout_minutes is None:  # a group: one start-up, n tables
        timeout = timedelta(minutes=group_timeout_minutes(timeout.total_seconds() / 60, STARTUP_MINUTES,
                                                          options.tables_per_task, cfg.batch.table_concurrency))
    dag = DAG(
        dag_id=f"cdc_{cfg.pipeline}",
        description=f"CDC {cfg.pipeline}: {len(names)} table(s) from Kafka into Iceberg",
        schedule=ingest_timetable(settings.ingest_schedule(cfg.schedule)),
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=default_args(settings, cfg.pipeline, options),
        params={k: Param(spec.pop("default"), **spec)
                for k, spec in param_specs(names, topics, cfg.has_patterns).items()},
        tags=["cdc", f"pipeline:{cfg.pipeline}"],
        doc_md=f"Ingests Debezium topics of pipeline `{cfg.pipeline}` (config `{config_path}`) into Iceberg.\n\n"
               f"Tables: {', '.join(names)}. Spark jobs run in pool `{settings.pool}`.",
    )
    with dag:
        @task(task_id="plan", retries=settings.retries)
        def plan() -> list[dict[str, Any]]:
            ctx = get_current_context()
            dag_run = ctx["dag_run"]
            params = backfill_interval_params(dict(ctx["params"]), getattr(dag_run, "run_type", None),
                                              ctx.get("data_interval_start"), ctx.get("data_interval_end"))
            groups, unplanned = plan_run(settings, config_path, params)
            ctx["ti"].xcom_push(key=UNPLANNED_KEY, value=unplanned)  # ambiguous topic_pattern topics: failed
            return groups

        planned = plan()
        ingest = CdcSparkSubmitOperator.partial(
            task_id="ingest",
            application=settings.ingest_app,
            **submit_kwargs(settings, cfg, f"cdc-{cfg.pipeline}"),
            map_index_template="{{ task.table }}",
            execution_timeout=timeout,
            outlets=outlet_aliases(cfg),
            emit_assets=(cfg.pipeline, cfg.catalog.name),
        ).expand_kwargs(planned)

        @task(task_id="publish", trigger_rule="none_skipped", retries=0)
        def publish() -> dict[str, Any]:
            ctx = get_current_context()
            ti = ctx["ti"]
            from cdc_airflow.operators.spark_submit import PARTIAL_SUMMARY_KEY

            summaries = [*(ti.xcom_pull(task_ids=["ingest"]) or []),  # + groups that failed in part (cdc.run.group)
                         *(ti.xcom_pull(task_ids=["ingest"], key=PARTIAL_SUMMARY_KEY) or [])]
            return publish_run(ti.xcom_pull(task_ids="plan"), summaries,
                               lambda: check_freshness(settings, config_path, ctx),
                               ti.xcom_pull(task_ids="plan", key=UNPLANNED_KEY))

        ingest >> publish()
    return dag
