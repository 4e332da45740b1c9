"""Entry point: one CDC micro-batch per table of a pipeline.

    python jobs/ingest.py --config pipelines/demo.yaml [--table inventory.customers ...] [--max-records N] [--dry-run]
    spark-submit --py-files build/cdc.zip jobs/ingest.py --config ...

The last line of stdout is a JSON summary. Exit codes: 0 ok, 2 a person must act (config, schema, bad data),
75 transient (broker/registry down, concurrent run: retry later), 1 anything else. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone

if __package__ in (None, "") and not any(p.endswith(".zip") for p in sys.path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `cdc` next to this file (no --py-files)

from cdc.config import load_config  # noqa: E402
from cdc.errors import CdcError, ConfigError  # noqa: E402
from cdc.kafka.plan import Bounds  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ingest", description="Run one CDC micro-batch per table.")
    p.add_argument("--config", required=True, help="pipeline YAML file")
    p.add_argument("--table", action="append", default=[], help="target table (namespace.table); repeatable")
    p.add_argument("--max-records", type=int, help="override batch.max_records_per_partition")
    p.add_argument("--dry-run", action="store_true", help="plan only: print ranges, read and write nothing")
    p.add_argument("--mode", choices=("incremental", "backfill"), default="incremental")
    p.add_argument("--start-offsets", help='backfill: JSON {"<topic>": {"<partition>": offset}}')
    p.add_argument("--end-offsets", help='backfill: JSON {"<topic>": {"<partition>": offset}} (exclusive)')
    p.add_argument("--start-timestamp", help="backfill: ISO-8601 or epoch milliseconds")
    p.add_argument("--end-timestamp", help="backfill: ISO-8601 or epoch milliseconds (exclusive)")
    p.add_argument("--master", help="Spark master when not under spark-submit (default local[*])")
    return p.parse_args(argv)


def to_ms(value: str | None, flag: str) -> int | None:
    if value is None or value == "":
        return None
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{flag}: {value!r} is neither ISO-8601 nor epoch milliseconds") from None
    return int((dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp() * 1000)


def offsets_arg(value: str | None, flag: str) -> dict[str, dict[int, int]]:
    if not value:
        return {}
    try:
        raw = json.loads(value)
        return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(f'{flag}: expected JSON like {{"topic": {{"0": 123}}}}, got {value!r}') from None


def bounds_from_args(args: argparse.Namespace) -> dict[str, Bounds]:
    starts, ends = offsets_arg(args.start_offsets, "--start-offsets"), offsets_arg(args.end_offsets, "--end-offsets")
    s_ts, e_ts = to_ms(args.start_timestamp, "--start-timestamp"), to_ms(args.end_timestamp, "--end-timestamp")
    topics = set(starts) | set(ends)
    out = {t: Bounds(starts.get(t, {}), ends.get(t, {}), s_ts, e_ts) for t in topics}
    return _Default(out, Bounds(start_ts_ms=s_ts, end_ts_ms=e_ts))


class _Default(dict):  # type: ignore[type-arg]
    def __init__(self, data: dict[str, Bounds], default: Bounds):
        super().__init__(data)
        self.default = default

    def get(self, key, default=None):  # type: ignore[no-untyped-def]
        return super().get(key, self.default)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cfg = load_config(args.config)
        if args.max_records is not None:
            if args.max_records < 1:
                raise ConfigError("--max-records must be >= 1")
            cfg = cfg.with_batch(max_records_per_partition=args.max_records)
        tables = list(cfg.select(args.table))
        bounds = bounds_from_args(args)
        if args.mode != "backfill" and (bounds or bounds.default != Bounds()):
            raise ConfigError("--start/--end offsets and timestamps need --mode backfill")
        from cdc.run import run_batch
        from cdc.session import build_session

        spark = build_session(cfg, f"cdc-ingest-{cfg.pipeline}", args.master)
        summary = run_batch(spark, cfg, tables, args.mode, args.dry_run, bounds)
    except CdcError as exc:
        print(f"ERROR [{type(exc).__name__}] {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ERROR interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # unclassified (Spark/JVM, a bug): still one line; CDC_TRACEBACK=1 for the traceback
        if os.environ.get("CDC_TRACEBACK"):
            import traceback

            traceback.print_exc()
        from cdc.run import unwrap_task_error

        err = unwrap_task_error(exc, "ingest")
        print(f"ERROR [{type(err).__name__}] {err}", file=sys.stderr, flush=True)
        return err.exit_code
    print(json.dumps(summary, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
