"""Entry point: bootstrap tables straight from their source database over JDBC (``tables[].bootstrap``).

    python jobs/bootstrap.py --config pipelines/inventory.yaml --table inventory.customers [--replace]
    spark-submit --py-files build/cdc_iceberg-<version>-py3-none-any.whl --jars <postgresql driver> \
        jobs/bootstrap.py --config ... --table ...
    cdc-bootstrap --config ... --table ...      # the installed package's entry point (pip install .)

Without ``--table``: every table of the pipeline that has a ``bootstrap`` section. A non-empty target is refused
unless ``--replace``. The last line of stdout is a JSON summary (per table: rows, source position, seconds). Exit
codes as ``jobs/ingest.py`` (``cdc.cli_contract.ExitCode``): 0 ok, 2 a person must act (config, non-empty target,
unsupported column type, the source database refuses the login), 75 transient (source database unreachable,
connector slot not caught up in time, an ingest batch of the table pending), 1 anything else.
Errors are one line on stderr; passwords never appear in them.
"""

from __future__ import annotations

import argparse
import json
import sys

if __package__ in (None, ""):  # a script: `cdc` shipped with --py-files (wheel/zip) wins over jobs/cdc beside it
    sys.path.sort(key=lambda p: not p.endswith((".whl", ".zip", ".egg")))

from cdc import cli_contract as cli  # noqa: E402
from cdc.cli_contract import ExitCode  # noqa: E402
from cdc.config import PipelineConfig, TableConfig, load_config  # noqa: E402
from cdc.errors import ConfigError  # noqa: E402

REPLACE = "--replace"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bootstrap", description="Load tables from their source database over JDBC.")
    p.add_argument(cli.CONFIG, required=True, help="pipeline YAML file")
    p.add_argument(cli.TABLE, action="append", default=[],
                   help="target table (namespace.table); repeatable; default: every table with a bootstrap section")
    p.add_argument(REPLACE, action="store_true", help="replace the rows of a non-empty target")
    p.add_argument(cli.MASTER, help="Spark master when not under spark-submit (default local[*])")
    return p.parse_args(argv)


def bootstrap_tables(cfg: PipelineConfig, names: list[str],
                     topics: list[str] | None = None) -> tuple[PipelineConfig, list[TableConfig]]:
    """The tables to bootstrap: the ``--table`` names (targets or topics; a target resolved from a ``topic_pattern``
    entry is found as ``jobs/ingest.py`` finds it, ``cdc.routing.resolve_pipeline``, asking the broker for its
    topics, or ``topics``), else every table with a bootstrap section. A table of a ``topic_pattern`` entry is
    refused, naming the entry: its one ``source_table`` cannot stand for every matching topic."""
    explicit = [t for t in cfg.tables if t.topic]
    entries = {id(t): i for i, t in enumerate(cfg.tables)}
    known = {n for t in explicit for n in (t.target, t.topic, t.table)}
    if names and any(n not in known for n in names) and cfg.has_patterns:
        from cdc.routing import resolve_pipeline

        patterns = {t.topic_pattern: entries[id(t)] for t in cfg.tables if not t.topic}
        cfg = resolve_pipeline(cfg, topics)
        entries = {id(t): patterns[t.topic_pattern] if t.topic_pattern else i for i, t in enumerate(cfg.tables)}
    if names:
        tables = list(cfg.select(names))
    else:
        tables = [t for t in cfg.tables if t.bootstrap is not None]
    for t in tables:
        if t.topic_pattern:
            raise ConfigError(pattern_refusal(cfg, entries[id(t)], t))
    if not tables:
        raise ConfigError(f"{cfg.source_path}: no table has a bootstrap section")
    return cfg, tables


def pattern_refusal(cfg: PipelineConfig, index: int, t: TableConfig) -> str:
    what = f"table {t.target} (topic {t.topic})" if t.topic else f"target {t.target!r}"
    where = f"{cfg.source_path}: {what} comes from tables[{index}] (topic_pattern '{t.topic_pattern}')"
    if t.bootstrap is not None:
        return (f"{where}, whose bootstrap section loads one source table ({t.bootstrap.source_table}) but the entry "
                "stands for every matching topic; give each topic to bootstrap its own entry (topic, target, "
                "bootstrap: explicit entries win over the pattern) and remove bootstrap from the pattern entry")
    return (f"{where}, which has no bootstrap section (a topic_pattern entry cannot have one); give the topic its own "
            "entry (topic, target, bootstrap with its source_table: explicit entries win over the pattern)")


def main(argv: list[str] | None = None) -> int:
    """Run the bootstrap; print the summary (stdout) or one error line (stderr); report both to the result file."""
    args = parse_args(argv)
    try:
        cfg, tables = bootstrap_tables(load_config(args.config), args.table)
        from cdc.bootstrap import check_table, run_bootstrap
        from cdc.bootstrap_source import probe_source
        from cdc.session import build_session

        for t in tables:
            probe_source(check_table(cfg, t), t.target)  # config and source login checked before Spark starts
        spark = build_session(cfg, f"cdc-bootstrap-{cfg.pipeline}", args.master)
        out = [run_bootstrap(spark, cfg, t, args.replace) for t in tables]
        summary = {"pipeline": cfg.pipeline, "mode": "bootstrap", "tables": out}
    except (Exception, KeyboardInterrupt) as exc:  # one line on stderr, the exit code of its class
        from cdc.outcome import job_failed

        return job_failed(exc, "bootstrap")
    print(json.dumps(summary, default=str), flush=True)
    return cli.finish(ExitCode.OK, summary)


if __name__ == "__main__":
    sys.exit(main())
