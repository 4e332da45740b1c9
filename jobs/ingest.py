"""Entry point: one CDC micro-batch per table of a pipeline.

    python jobs/ingest.py --config pipelines/demo.yaml [--table inventory.customers ...] [--max-records N] [--dry-run]
    spark-submit --py-files build/cdc_iceberg-<version>-py3-none-any.whl jobs/ingest.py --config ...
    cdc-ingest --config ...       # the installed package's entry point (pip install .)

The last line of stdout is a JSON summary. With several tables a failing table does not stop the others: it is
listed with ``status: failed`` and its error (also one ``ERROR`` line on stderr) and the exit code is the worst of
the tables' (``cdc.run.group``); ``batch.table_concurrency`` tables run at once. A topic a ``topic_pattern`` makes
ambiguous (``cdc.config.routing``) is such a failed table (exit 2); the others run. Exit codes
(``cdc.common.cli_contract.ExitCode``): 0 ok, 2 a person must act (config, schema, bad data), 75 transient (broker/registry
down, concurrent run: retry later), 1 anything else.
Errors are one line on stderr. Timestamps are ISO-8601 or epoch milliseconds (see ``cdc.common.cli_contract``).
"""

from __future__ import annotations

import argparse
import json
import sys

if __package__ in (None, ""):  # a script: `cdc` shipped with --py-files (wheel/zip) wins over jobs/cdc beside it
    sys.path.sort(key=lambda p: not p.endswith((".whl", ".zip", ".egg")))

from cdc.common import cli_contract as cli  # noqa: E402
from cdc.common.cli_contract import (  # noqa: E402
    ArgumentError,
    BackfillBounds,
    Bounds,  # noqa: E402
)
from cdc.common.errors import ConfigError  # noqa: E402
from cdc.config.load import load_config  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ingest", description="Run one CDC micro-batch per table.")
    p.add_argument(cli.CONFIG, required=True, help="pipeline YAML file")
    p.add_argument(cli.TABLE, action="append", default=[], help="target table (namespace.table); repeatable")
    p.add_argument(cli.MAX_RECORDS, type=int, help="override batch.max_records_per_partition")
    p.add_argument(cli.DRY_RUN, action="store_true", help="plan only: print ranges, read and write nothing")
    p.add_argument(cli.MODE, choices=cli.JOB_MODES, default="incremental")
    p.add_argument(cli.START_OFFSETS, help='backfill: JSON {"<topic>": {"<partition>": offset}}')
    p.add_argument(cli.END_OFFSETS, help='backfill: JSON {"<topic>": {"<partition>": offset}} (exclusive)')
    p.add_argument(cli.START_TIMESTAMP, help="backfill: ISO-8601 or epoch milliseconds")
    p.add_argument(cli.END_TIMESTAMP, help="backfill: ISO-8601 or epoch milliseconds (exclusive)")
    p.add_argument(cli.MASTER, help="Spark master when not under spark-submit (default local[*])")
    p.add_argument(cli.RESET_CURSOR, action="store_true",
                   help="move the cursor of partitions beyond their high watermark (topic re-created, cluster moved) "
                        "to their low watermark, or to --start-offsets; reads and merges nothing")
    return p.parse_args(argv)


def bounds_from_args(args: argparse.Namespace) -> BackfillBounds:
    """The backfill flags as one explicit value (raises ``ConfigError`` naming the flag)."""
    try:
        starts = cli.parse_offsets(args.start_offsets, cli.START_OFFSETS)
        ends = cli.parse_offsets(args.end_offsets, cli.END_OFFSETS)
        s_ts = cli.parse_timestamp(args.start_timestamp, cli.START_TIMESTAMP) if args.start_timestamp else None
        e_ts = cli.parse_timestamp(args.end_timestamp, cli.END_TIMESTAMP) if args.end_timestamp else None
    except ArgumentError as exc:
        raise ConfigError(str(exc)) from None
    topics = {t: Bounds(starts.get(t, {}), ends.get(t, {}), s_ts, e_ts) for t in sorted(set(starts) | set(ends))}
    return BackfillBounds(default=Bounds(start_ts_ms=s_ts, end_ts_ms=e_ts), topics=topics)


def check_offset_topics(bounds: BackfillBounds, pipeline: str, run_topics: list[str], topics: list[str]) -> None:
    """A topic in ``--start-offsets`` / ``--end-offsets`` that no table of this run reads is a ``ConfigError``
    (ignored, it made the backfill read the run's topics whole)."""
    for topic, b in bounds.topics.items():
        if topic not in run_topics:
            flag = cli.START_OFFSETS if b.start_offsets else cli.END_OFFSETS
            where = (f"pipeline {pipeline} has no topic {topic!r}" if topic not in topics else
                     f"topic {topic!r} is not read by the tables of this run ({cli.TABLE})")
            raise ConfigError(f"{flag}: {where} (its topics: {', '.join(sorted(topics))}); name one of them")


def has_range(bounds: BackfillBounds) -> bool:
    return bool(bounds.topics) or bounds.default != Bounds()


def main(argv: list[str] | None = None) -> int:
    """Run the job; print the summary (stdout) or one error line (stderr); report both to ``$CDC_RESULT_FILE``."""
    args = parse_args(argv)
    from cdc.spark import jvm_cache

    try:
        return run(args, own_process=argv is None)
    finally:  # the first run of a classpath: its JVM writes the class archive (a failed run's classes serve as well)
        jvm_cache.finish()


def run(args: argparse.Namespace, own_process: bool) -> int:
    """``main`` after parsing: the exit code. ``own_process``: started from the command line (``cdc.spark.jvm_cache``)."""
    try:
        cfg = load_config(args.config)
        from cdc.kafka.properties import check_properties

        check_properties(cfg.kafka, cfg.source_path)  # a librdkafka property typo: exit 2 before Spark starts
        if args.max_records is not None:
            if args.max_records < 1:
                raise ConfigError(f"{cli.MAX_RECORDS} must be >= 1")
            cfg = cfg.with_batch(max_records_per_partition=args.max_records)
        from cdc.kafka.topics import route_pipeline

        routes = route_pipeline(cfg)  # topic_pattern entries → one table per matching topic, at every run
        cfg, (selected, aside) = routes.cfg, routes.select(args.table)
        tables = list(selected)
        bounds = bounds_from_args(args)
        mode = "reset" if args.reset_cursor else args.mode
        if args.reset_cursor and (args.mode != "incremental" or args.dry_run or bounds.default != type(bounds.default)()
                                  or any(b.end_offsets for b in bounds.topics.values())):
            raise ConfigError(f"{cli.RESET_CURSOR} takes only {cli.TABLE} and {cli.START_OFFSETS}")
        if mode == "incremental" and has_range(bounds):
            raise ConfigError("--start/--end offsets and timestamps need --mode backfill")
        check_offset_topics(bounds, cfg.pipeline, [t.topic for t in tables], [t.topic for t in cfg.tables if t.topic])
        from cdc.run.group import failed_entry

        # an ambiguous topic (two patterns, a shared target or helper tables) is a failed table; the others run
        failed = [failed_entry(u.table, mode, ConfigError(u.error), 0.0) for u in aside]
        if failed and not tables:
            summary = {"pipeline": cfg.pipeline, "mode": mode, "tables": failed}
        else:
            from cdc.run.batch import run_batch
            from cdc.spark.session import build_session, preload_modules

            preload_modules()  # while the JVM starts

            # The class archive only for a process of its own (the command line): ending it stops Spark and the JVM
            spark = build_session(cfg, f"cdc-ingest-{cfg.pipeline}", args.master, class_cache=own_process)
            summary = run_batch(spark, cfg, tables, mode, args.dry_run, bounds, isolate=True, failed=failed)
    except (Exception, KeyboardInterrupt) as exc:  # one line on stderr, the exit code of its class
        from cdc.run.outcome import job_failed

        return job_failed(exc, "ingest")
    line = json.dumps(summary, default=str)
    from cdc.run.group import error_lines, exit_code_of

    errors = error_lines(summary)  # several tables: each failed one is in the summary, the exit code is the worst
    for err in errors:
        print(err, file=sys.stderr, flush=True)
    print(line, flush=True)
    return cli.finish(exit_code_of(summary), json.loads(line), "; ".join(errors) or None)


if __name__ == "__main__":
    sys.exit(main())
