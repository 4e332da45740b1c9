"""Airflow 3 for the demo: environment, daemons, and the REST API client (pool, connection, DAG runs, logs)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from devtools.broker_daemon import pid_alive
from devtools.demo.common import DAG_ID, HOST, PY, REPO, STATE, DemoError, say
from devtools.demo.services import pidfile, spawn, wait_port


@dataclass
class Api:
    base: str
    user: str
    password: str
    token: str = ""
    calls: list[str] = field(default_factory=list)

    def request(self, method: str, path: str, body: Any = None, auth: bool = True,
                timeout: float = 30) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if auth and self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def login(self) -> None:
        status, body = self.request("POST", "/auth/token", {"username": self.user, "password": self.password},
                                    auth=False)
        if status not in (200, 201):
            raise DemoError(f"login failed: {status} {body}")
        self.token = body["access_token"]

    def ok(self, method: str, path: str, body: Any = None, expect: Iterable[int] = (200, 201)) -> Any:
        status, out = self.request(method, path, body)
        if status == 401:
            self.login()
            status, out = self.request(method, path, body)
        if status not in tuple(expect):
            raise DemoError(f"{method} {path}: HTTP {status}: {out}")
        return out


def airflow_env(home: Path, api_port: int, password_file: Path, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    jwt_secret = (STATE / "jwt_secret").read_text().strip()
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__AUTH_MANAGER":
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(password_file),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{HOST}:{api_port}/execution/",
        "AIRFLOW__API__HOST": HOST,
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__BASE_URL": f"http://{HOST}:{api_port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "60",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "CDC_RETRIES": "1",
        # One run per wave, triggered by the demo: no */10 scheduled run racing it for the first wave.
        "CDC_SCHEDULE": "none",
        "PATH": os.pathsep.join([str(Path(PY).parent), base.get("PATH", "")]),
    })
    return env


def airflow_cli(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    proc = subprocess.run([str(Path(PY).parent / "airflow"), *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise DemoError(f"airflow {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def start_airflow(env: dict[str, str], api_port: int) -> None:
    home = Path(env["AIRFLOW_HOME"])
    af = str(Path(PY).parent / "airflow")
    spawn("api-server", [af, "api-server", "--host", HOST, "--port", str(api_port), "--workers", "1"], env)
    spawn("scheduler", [af, "scheduler", "--skip-serve-logs"], env)
    spawn("dag-processor", [af, "dag-processor"], env)
    spawn("triggerer", [af, "triggerer", "--skip-serve-logs"], env)
    pid = int(pidfile("api-server").read_text())
    wait_port(api_port, 180, "api-server", pid)
    del home


def wait_for_dag(api: Api, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = api.request("GET", f"/api/v2/dags/{DAG_ID}")
        if status == 200:
            return
        if status == 401:
            api.login()
        for name in ("scheduler", "dag-processor", "api-server"):
            pid = int(pidfile(name).read_text())
            if not pid_alive(pid):
                raise DemoError(f"airflow {name} exited; see {STATE}/{name}.log")
        time.sleep(2)
    _, errs = api.request("GET", "/api/v2/importErrors")
    raise DemoError(f"DAG {DAG_ID} not parsed within {timeout:.0f}s; import errors: {errs}")


def ensure_pool_and_connection(api: Api) -> None:
    pool = {"name": "cdc_spark", "slots": 2, "description": "Concurrent CDC Spark jobs (demo: 2 on 2 cores)"}
    status, _ = api.request("POST", "/api/v2/pools", pool)
    if status == 409:
        api.ok("PATCH", "/api/v2/pools/cdc_spark", pool)
    elif status not in (200, 201):
        raise DemoError(f"cannot create pool cdc_spark: HTTP {status}")
    conn = {"connection_id": "spark_default", "conn_type": "spark", "host": "local[*]",
            "description": "Local Spark (the venv's spark-submit)"}
    status, _ = api.request("POST", "/api/v2/connections", conn)
    if status == 409:
        api.ok("PATCH", "/api/v2/connections/spark_default", conn)
    elif status not in (200, 201):
        raise DemoError(f"cannot create connection spark_default: HTTP {status}")


def trigger_and_wait(api: Api, conf: dict[str, Any], note: str, timeout: float = 600) -> dict[str, Any]:
    run = api.ok("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": conf, "note": note})
    run_id = run["dag_run_id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api.ok("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}")
        if run["state"] in ("success", "failed"):
            break
        time.sleep(2)
    else:
        raise DemoError(f"run {run_id} still {run['state']} after {timeout:.0f}s")
    tis = api.ok("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
    run["_tis"] = tis
    if run["state"] != "success":
        for ti in tis:
            if ti["state"] not in ("success", "skipped"):
                say(f"  task {ti['task_id']}[{ti.get('rendered_map_index') or ti['map_index']}]: {ti['state']}")
                say(task_log_tail(api, run_id, ti))
        raise DemoError(f"DAG run {run_id} failed (logs: {STATE}/airflow/logs)")
    return run


def task_log_tail(api: Api, run_id: str, ti: dict[str, Any], lines: int = 25) -> str:
    try_no = max(1, ti.get("try_number") or 1)
    path = (f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/logs/{try_no}"
            f"?map_index={ti['map_index']}")
    status, body = api.request("GET", path)
    if status != 200 or not isinstance(body, dict):
        return f"    (no log: HTTP {status})"
    content = body.get("content") or []
    text = [c.get("event", "") if isinstance(c, dict) else str(c) for c in content]
    return "\n".join("    " + t for t in text[-lines:])


def run_publish_report(api: Api, run_id: str) -> dict[str, Any] | None:
    status, body = api.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/publish/xcomEntries/"
                                      "return_value?deserialize=true")
    if status != 200:
        return None
    value = body.get("value")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    return value if isinstance(value, dict) else None


DOWNSTREAM_ID = f"{DAG_ID}_downstream"  # dags/cdc_demo_downstream.py: scheduled on the demo's table assets


def unpause_downstream(api: Api, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _ = api.request("PATCH", f"/api/v2/dags/{DOWNSTREAM_ID}", {"is_paused": False})
        if status == 200:
            return True
        time.sleep(2)
    return False


def downstream_runs(api: Api) -> list[dict[str, Any]]:
    status, body = api.request("GET", f"/api/v2/dags/{DOWNSTREAM_ID}/dagRuns?order_by=-run_after&limit=50")
    return body.get("dag_runs", []) if status == 200 and isinstance(body, dict) else []


def wait_downstream(api: Api, known: set[str], timeout: float = 180) -> list[tuple[dict[str, Any], Any]]:
    """Every finished run of the downstream DAG not in ``known`` (asset-triggered by the wave's batches), oldest
    first, each with its ``changed_rows`` result. The DAG runs on *any* table's asset (AssetAny), so one wave may
    trigger one run per table when their events arrive apart: wait until none is queued or running any more.
    Empty when none finished in time (the wave changed nothing, or slow)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [r for r in downstream_runs(api) if r["dag_run_id"] not in known]
        done = [r for r in new if r["state"] in ("success", "failed")]
        if done and len(done) == len(new):
            return [(run, _changed_rows(api, run)) for run in reversed(done)]
        time.sleep(3)
    return []


def _changed_rows(api: Api, run: dict[str, Any]) -> Any:
    status, body = api.request("GET", f"/api/v2/dags/{DOWNSTREAM_ID}/dagRuns/{run['dag_run_id']}/"
                                      "taskInstances/changed_rows/xcomEntries/return_value?deserialize=true")
    value = body.get("value") if status == 200 and isinstance(body, dict) else None
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    return value
