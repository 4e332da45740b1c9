"""A fake ``spark-submit`` for operator/DAG tests: records its argv, prints Spark-like chatter and a job summary.

Behaviour per table (``--table``) from env FAKE_SPARK_EXITS='{"<table>": <exit code>}' (default 0) and
FAKE_SPARK_EMPTY='["<table>"]' (a committed batch that changed nothing: 0 inserted/updated/deleted); every call
appends its argv and selected env as one JSON line to $FAKE_SPARK_LOG. Like the real job it reports its exit code,
summary or error line to $CDC_RESULT_FILE (``cdc.common.cli_contract``), unless FAKE_SPARK_NO_RESULT is set (spark-submit
failing before the job ran).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

SCRIPT = r'''#!{python}
import json, os, sys
argv = sys.argv[1:]
log = os.environ.get("FAKE_SPARK_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({{"argv": argv, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON"),
                            "RESULT_FILE": os.environ.get("{result_env}")}}) + "\n")
tables = [argv[i + 1] for i, a in enumerate(argv) if a == "--table"] or [None]
table = tables[0]
exits = json.loads(os.environ.get("FAKE_SPARK_EXITS") or "{{}}")
codes = {{t: exits.get(t or "*", 0) for t in tables}}
print("24/01/01 10:00:00 INFO SparkContext: Running Spark version 3.5.8", flush=True)
summary = error = None
mode = argv[argv.index("--mode") + 1] if "--mode" in argv else "incremental"
rows, errors = [], []
for t in tables:  # several tables (a group): failures isolated per table, the exit code is the worst
    n = 0 if t in json.loads(os.environ.get("FAKE_SPARK_EMPTY") or "[]") else 3  # committed, nothing changed
    if codes[t]:
        cls = "ConfigError" if codes[t] == 2 else "KafkaUnavailable"
        errors.append(f"ERROR [{{cls}}] {{t}}: simulated failure with exit {{codes[t]}}")
        rows.append({{"table": t, "topic": "t", "mode": mode, "status": "failed", "error_class": cls,
                      "error": errors[-1], "exit_code": codes[t], "seconds": {{"total": 0.1}}}})
        continue
    rows.append({{"table": t, "topic": "t", "mode": mode,
        "status": "committed", "batch_id": 1, "ranges": [{{"partition": 0, "start": 0, "end": 5}}], "events_read": 5,
        "events_skipped": 0, "dead_letters": 0, "inserted": n, "updated": min(n, 1), "deleted": min(n, 1),
        "snapshot_id": 42,
        "seconds": {{"plan": 0.1, "merge": 0.2}}}})
failed = {{c for c in codes.values() if c}}
code = next((c for c in (2, 1, 75) if c in failed), min(failed) if failed else 0)
for line in errors:
    print(line, file=sys.stderr, flush=True)
error = "; ".join(errors) or None
if not code or len(tables) > 1:
    summary = {{"pipeline": "fake", "mode": mode, "tables": rows}}
    print(json.dumps(summary), flush=True)
print("24/01/01 10:00:01 INFO ShutdownHookManager: Shutdown hook called", file=sys.stderr, flush=True)
if os.environ.get("{result_env}") and not os.environ.get("FAKE_SPARK_NO_RESULT"):
    with open(os.environ["{result_env}"], "w") as f:
        json.dump({{"exit_code": code, "summary": summary, "error": error}}, f)
sys.exit(code)
'''


def install(directory: Path) -> Path:
    """Write ``spark-submit`` into ``directory`` (put it first on PATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "spark-submit"
    from cdc.common.cli_contract import RESULT_FILE_ENV

    path.write_text(SCRIPT.format(python=sys.executable, result_env=RESULT_FILE_ENV))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def prepend_path(directory: Path) -> str:
    return f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"
