"""Progress you can watch: every phase of a batch logs its start and end, with counts and rates, to stderr at INFO
(spark-submit's output is the Airflow task log, line by line, so it shows up live there). While a batch reads and
stages, a background thread logs the share of reader tasks done every ``CDC_PROGRESS_SECONDS`` (default 10)::

    cdc: inventory.orders batch 7: read_stage started: 1,000,000 events from 2 partitions
    cdc: inventory.orders batch 7: read ~420,000/1,000,000 events (5/12 tasks) … 61k ev/s
    cdc: inventory.orders batch 7: read_stage done in 16.4 s: 1,000,000 events, 61k ev/s
    cdc: inventory.orders batch 7 committed: 1,000,000 read (3 skipped, 0 dead letters), +420 ~10 -3, snapshot ...

A backfill logs every batch it runs. Committed batches also go to statsd when configured (``cdc.observe.metrics``).
stdout is left alone: the job's JSON summary stays its last line.

``cdc.run`` calls ``start_run`` once, ``phase_started`` / ``phase_ended`` around every phase and ``batch_committed``
after a commit; every hook swallows its own errors (observability never fails a batch).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from cdc.common.log import setup_logging
from cdc.observe import metrics

log = logging.getLogger("cdc.progress")
_state: dict[str, Any] = {"metrics": metrics.MetricsConfig(), "pipeline": "", "ticker": None}


def count(n: float) -> str:
    return f"{int(n):,}"


def rate(events: float, seconds: float) -> str:
    """``61k ev/s``, ``850 ev/s``, ``1.2M ev/s``."""
    if seconds <= 0:
        return "– ev/s"
    r = events / seconds
    if r >= 1e6:
        return f"{r / 1e6:.1f}M ev/s"
    if r >= 1e4:
        return f"{r / 1e3:.0f}k ev/s"
    if r >= 1e3:
        return f"{r / 1e3:.1f}k ev/s"
    return f"{r:.0f} ev/s"


def planned(result: Any) -> int:
    return sum(r.size for r in (result.ranges or []))


def label(result: Any) -> str:
    return f"{result.table} batch {result.batch_id}" if result.batch_id is not None else str(result.table)


def phase_line(result: Any, name: str, seconds: float | None) -> str:
    """The start (``seconds`` None) or end line of a phase."""
    events, parts = planned(result), len(result.ranges or [])
    if seconds is None:
        detail = f": {count(events)} events from {parts} partition(s)" if name == "read_stage" and events else ""
        return f"{label(result)}: {name} started{detail}"
    detail = f": {count(events)} events, {rate(events, seconds)}" if name == "read_stage" and events else ""
    return f"{label(result)}: {name} done in {seconds:.1f} s{detail}"


def batch_line(result: Any) -> str:
    seconds = sum((result.seconds or {}).values())
    return (f"{label(result)} committed: {count(result.events_read)} read ({count(result.events_skipped)} skipped, "
            f"{count(result.dead_letters)} dead letters), +{count(result.inserted)} ~{count(result.updated)} "
            f"-{count(result.deleted)}, snapshot {result.snapshot_id}, {seconds:.1f} s "
            f"({rate(result.events_read, seconds)})")


def read_progress_line(result: Any, done_tasks: int, total_tasks: int, seconds: float) -> str:
    total = planned(result)
    est = total * done_tasks // total_tasks if total_tasks else 0
    return (f"{label(result)}: read ~{count(est)}/{count(total)} events ({done_tasks}/{total_tasks} tasks) … "
            f"{rate(est, seconds)}")


# ---- hooks called by cdc.run ---------------------------------------------------------------------------------------

def start_run(cfg: Any) -> None:
    try:
        setup_logging()
        _state["pipeline"] = cfg.pipeline
        _state["metrics"] = metrics.metrics_config(cfg)
    except Exception as exc:  # noqa: BLE001 - a bad metrics: section shows up in Airflow's parse; here: warn
        log.warning("metrics disabled: %s", exc)
        _state["metrics"] = metrics.MetricsConfig()


def phase_started(result: Any, name: str) -> None:
    try:
        log.info(phase_line(result, name, None))
        if name == "read_stage":
            _state["ticker"] = _Ticker(result)
    except Exception:  # noqa: BLE001
        pass


def phase_ended(result: Any, name: str, seconds: float) -> None:
    try:
        ticker = _state.pop("ticker", None) if name == "read_stage" else None
        if ticker is not None:
            ticker.stop()
        log.info(phase_line(result, name, seconds))
    except Exception:  # noqa: BLE001
        pass


def batch_committed(result: Any) -> None:
    try:
        log.info(batch_line(result))
        m = _state["metrics"]
        if m.enabled:
            metrics.send(m, metrics.batch_lines(m.prefix, _state["pipeline"], result.summary()))
    except Exception as exc:  # noqa: BLE001
        log.warning("progress/metrics of %s: %s", getattr(result, "table", "?"), exc)


class _Ticker:
    """Logs the read progress from Spark's status tracker (tasks of the active stages) until stopped."""

    def __init__(self, result: Any) -> None:
        self.result, self.t0 = result, time.monotonic()
        self.interval = float(os.environ.get("CDC_PROGRESS_SECONDS") or 10)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, name="cdc-progress", daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            try:
                tasks = self.tasks()
                if tasks and tasks[1]:
                    log.info(read_progress_line(self.result, tasks[0], tasks[1], time.monotonic() - self.t0))
            except Exception:  # noqa: BLE001 - no session, tracker gone: stay quiet
                return

    @staticmethod
    def tasks() -> tuple[int, int] | None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            return None
        tracker = spark.sparkContext.statusTracker()
        infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        infos = [i for i in infos if i is not None]
        return sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos)

    def stop(self) -> None:
        self.done.set()
