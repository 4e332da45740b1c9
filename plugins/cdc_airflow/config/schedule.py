"""The ingestion DAG's schedule: the YAML's ``schedule`` (or ``CDC_SCHEDULE``) as a timetable, and its check at
DAG parse time, so an invalid cron string is a config error of its own file (naming the key), not an
``AirflowTimetableInvalid`` of the DAG file that takes every pipeline's DAG with it."""

from __future__ import annotations

from typing import Any

HOURLY = "@hourly"  # the default schedule, and the one of a broken file whose own schedule is unusable


def ingest_timetable(schedule: str | None) -> Any:
    """A cron schedule (or preset such as ``@hourly``) as a timetable with real data intervals.

    Airflow 3 turns a cron string into ``CronTriggerTimetable``, whose runs have zero-length data intervals, so every
    run of ``airflow backfill create`` would fail planning ("end_timestamp must be after start_timestamp"). With
    ``CronDataIntervalTimetable`` a backfill run re-reads exactly the records Kafka stamped inside its interval.
    Scheduled runs ignore the interval (they read from the ledger's cursor to the high watermark)."""
    if schedule is None or schedule in ("@once", "@continuous"):
        return schedule
    from airflow.sdk.definitions.timetables.interval import CronDataIntervalTimetable

    return CronDataIntervalTimetable(schedule, timezone="UTC")


def schedule_problem(schedule: Any) -> str | None:
    """Why ``schedule`` cannot be an ingestion DAG's schedule (Airflow's own check), or None when it can."""
    if schedule is None or schedule in ("@once", "@continuous"):
        return None
    if not isinstance(schedule, str):
        return f"must be a cron expression, a preset like @hourly, or null, got {schedule!r}"
    try:
        from airflow.serialization.encoders import coerce_to_core_timetable

        coerce_to_core_timetable(ingest_timetable(schedule)).validate()
    except Exception as exc:  # noqa: BLE001 - AirflowTimetableInvalid and whatever croniter raises
        return (f"{schedule!r} is not a valid schedule ({' '.join(str(exc).split())}): use a cron expression such "
                "as '0 * * * *' or '*/10 * * * *', a preset such as @hourly or @daily, or null (manual runs only)")
    return None
