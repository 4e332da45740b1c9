"""Entry point: bootstrap tables straight from their source database over JDBC (``tables[].bootstrap``).

    python jobs/bootstrap.py --config pipelines/inventory.yaml --table inventory.customers [--replace]
    spark-submit --py-files build/cdc_iceberg-<version>-py3-none-any.whl --jars <postgresql driver> \
        jobs/bootstrap.py --config ... --table ...
    cdc-bootstrap --config ... --table ...      # the installed package's entry point (pip install .)

Without ``--table``: every table of the pipeline that has a ``bootstrap`` section. A non-empty target is refused
unless ``--replace``. The last line of stdout is a JSON summary (per table: rows, source position, seconds). Exit
codes as ``jobs/ingest.py`` (``cdc.common.cli_contract.ExitCode``): 0 ok, 2 a person must act (config, non-empty target,
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

from cdc.bootstrap.job import bootstrap_tables  # noqa: E402
from cdc.common import cli_contract as cli  # noqa: E402
from cdc.common.cli_contract import REPLACE, ExitCode  # noqa: E402
from cdc.config.load import load_config  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bootstrap", description="Load tables from their source database over JDBC.")
    p.add_argument(cli.CONFIG, required=True, help="pipeline YAML file")
    p.add_argument(cli.TABLE, action="append", default=[],
                   help="target table (namespace.table); repeatable; default: every table with a bootstrap section")
    p.add_argument(REPLACE, action="store_true", help="replace the rows of a non-empty target")
    p.add_argument(cli.MASTER, help="Spark master when not under spark-submit (default local[*])")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the bootstrap; print the summary (stdout) or one error line (stderr); report both to the result file."""
    args = parse_args(argv)
    try:
        cfg, tables = bootstrap_tables(load_config(args.config), args.table)
        from cdc.bootstrap.job import check_table, run_bootstrap
        from cdc.bootstrap.source import probe_source
        from cdc.spark.session import build_session

        for t in tables:
            probe_source(check_table(cfg, t), t.target)  # config and source login checked before Spark starts
        spark = build_session(cfg, f"cdc-bootstrap-{cfg.pipeline}", args.master)
        out = [run_bootstrap(spark, cfg, t, args.replace) for t in tables]
        summary = {"pipeline": cfg.pipeline, "mode": "bootstrap", "tables": out}
    except (Exception, KeyboardInterrupt) as exc:  # one line on stderr, the exit code of its class
        from cdc.run.outcome import job_failed

        return job_failed(exc, "bootstrap")
    print(json.dumps(summary, default=str), flush=True)
    return cli.finish(ExitCode.OK, summary)


if __name__ == "__main__":
    sys.exit(main())
