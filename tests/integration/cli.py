"""Run the job as a user does: ``python jobs/ingest.py --config ...`` in a real subprocess (its own process group).

Used by the crash scenarios of the oracle harness and by the concurrency/security tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
INGEST = REPO / "jobs" / "ingest.py"


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")}
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    env.update(extra or {})
    return env


def run_cli(config: Path, max_records: int | None = None, env: dict[str, str] | None = None,
            kill_after: float | None = None, timeout: float = 300, args: tuple[str, ...] = ()
            ) -> subprocess.CompletedProcess:
    """``python jobs/ingest.py --config ...`` in its own process group (killed as a whole at the end)."""
    cmd = [sys.executable, str(INGEST), "--config", str(config), "--master", "local[2]", *args]
    if max_records is not None:
        cmd += ["--max-records", str(max_records)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(env),
                            cwd=str(REPO), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=kill_after if kill_after is not None else timeout)
    except subprocess.TimeoutExpired:
        if kill_after is None:
            kill_group(proc)
            raise
        kill_group(proc)
        out, err = proc.communicate()
    finally:
        kill_group(proc)  # the JVM is a child: a dead driver must not leave it running
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def start_job(config: Path, *args: str, env: dict[str, str] | None = None, script: Path = INGEST,
              master: str | None = "local[2]") -> subprocess.Popen:
    """A job process (``jobs/ingest.py`` unless ``script``) in its own process group, on ``master`` (None: no
    ``--master`` flag, for jobs without one such as ``jobs/maintenance.py``: the YAML's ``spark.master``); see finish."""
    cmd = [sys.executable, str(script), "--config", str(config), *(("--master", master) if master else ()), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(env),
                            cwd=str(REPO), start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 400) -> subprocess.CompletedProcess:
    """Wait for a started job; its whole process group (the JVM included) is gone afterwards."""
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    if proc.returncode is None:
        proc.wait(5)


def summary_of(res: subprocess.CompletedProcess) -> dict[str, Any] | None:
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
