"""Lag in time and freshness, after each ingest run (``publish``) and in the status view.

Time lag of a table = now − its newest committed ``__source_ts_ms`` (the Iceberg target's manifest bounds, read
with pyiceberg). A table with ``freshness_minutes`` (YAML ``airflow.freshness_minutes``) is **stale** when its
time lag exceeds that while its topic has newer data (offset lag > 0): the run logs a warning, reports the table
under ``stale`` in the publish XCom, and the ``airflow.on_failure`` target gets an alert of kind ``stale``; the status
view shows a badge. With ``metrics.statsd_host`` set, ``lag_events`` and ``lag_seconds`` gauges are sent per table.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from cdc_airflow.config.options import airflow_options
from cdc_airflow.config.pipelines import load_pipeline
from cdc_airflow.monitor.alerts import dispatch, human_duration, is_stale, stale_alert, time_lag_seconds
from cdc_airflow.monitor.lag import table_lags
from cdc_airflow.monitor.ledger import newest_source_ts_ms

log = logging.getLogger(__name__)


def table_times(cfg: Any, targets: list[str]) -> dict[str, int | None]:
    """target → newest committed source timestamp (epoch ms) or None (no table, or unreadable)."""
    out: dict[str, int | None] = {}
    for t in targets:
        try:
            out[t] = newest_source_ts_ms(cfg.catalog, t)
        except Exception as exc:  # noqa: BLE001 - one unreadable table does not hide the others
            log.warning("cannot read the newest source timestamp of %s: %s", t, exc)
            out[t] = None
    return out


def check_freshness(settings: Any, config_path: str, context: Mapping[str, Any],
                    watermarks: Any = None) -> list[dict[str, Any]]:
    """Stale tables of the pipeline (alerts dispatched), plus statsd lag gauges. Never raises."""
    from cdc.observe.metrics import gauge_lines, metrics_config, send

    try:
        from cdc.kafka.topics import resolve_pipeline

        cfg = resolve_pipeline(load_pipeline(settings, config_path))  # topic_pattern tables of this run too
        options, metrics = airflow_options(cfg), metrics_config(cfg)
        tables = [t for t in cfg.tables if metrics.enabled or t.target in options.freshness_minutes]
        if not tables:
            return []
        lags = table_lags(cfg, tables, watermarks=watermarks, raise_errors=False)
        times = table_times(cfg, [t.target for t in tables])
    except Exception as exc:  # noqa: BLE001 - freshness is advisory: never fails the run
        log.warning("freshness check skipped: %s", exc)
        return []
    stale, gauges = [], {}
    for t in tables:
        lag = lags[t.target]
        offset_lag = None if lag.error else lag.total
        time_lag = time_lag_seconds(times[t.target])
        gauges[(t.target, "lag_events")], gauges[(t.target, "lag_seconds")] = offset_lag, time_lag
        fresh = options.freshness_minutes.get(t.target)
        if is_stale(fresh, time_lag, offset_lag):
            alert = stale_alert(context, cfg.pipeline, t.target, float(fresh or 0), time_lag, int(offset_lag or 0))
            log.warning("STALE %s", alert["message"])
            dispatch(options.on_failure, alert, context)
            stale.append({"table": t.target, "time_lag_seconds": time_lag, "lag": offset_lag,
                          "freshness_minutes": fresh})
        elif fresh:
            log.info("fresh %s: %s behind, offset lag %s (freshness_minutes %g)", t.target,
                     human_duration(time_lag), offset_lag, fresh)
    if metrics.enabled:
        send(metrics, gauge_lines(metrics.prefix, cfg.pipeline, gauges))
    return stale
