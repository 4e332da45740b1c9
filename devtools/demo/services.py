"""The demo's daemons (broker, schema registry, PostgreSQL, Kafka Connect, Airflow processes): pidfiles, start,
stop; and the job, directly."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from devtools.broker_daemon import pid_alive
from devtools.demo.common import (
    CONNECT_PORT,
    HOST,
    PIPELINE,
    PY,
    REPO,
    REST_PORT,
    S3_PORT,
    SERVICES,
    STATE,
    DemoError,
    pipeline_path,
    say,
)

# ----------------------------------------------------------------------------------------------- daemons

def pidfile(name: str) -> Path:
    return STATE / f"{name}.pid"


def _ours(pid: int) -> bool:
    """The pid still runs something the demo started (guards against a recycled pid)."""
    with contextlib.suppress(OSError):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return any(w in cmd for w in ("airflow", "devtools.registry", "kafka.Kafka", "ConnectDistributed", "moto.server",
                                       "RESTCatalogServer"))
    return False


def spawn(name: str, argv: list[str], env: dict[str, str]) -> int:
    """Start a daemon in its own session (pid = process group id), log to .demo/<name>.log, write its pidfile."""
    log = open(STATE / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            cwd=REPO, start_new_session=True)
    log.close()
    pidfile(name).write_text(f"{proc.pid}\n")
    return proc.pid


def stop_one(name: str, grace: float = 15.0) -> bool:
    pf = pidfile(name)
    try:
        pid = int(pf.read_text().strip())
    except (OSError, ValueError):
        return False
    stopped = False
    if pid_alive(pid) and _ours(pid):
        # Each daemon was started in its own session, so its process group is exactly it and its children
        # (gunicorn/uvicorn workers, task supervisors, spark-submit).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        stopped = True
    with contextlib.suppress(OSError):
        pf.unlink()
    return stopped


def stop_all(quiet: bool = False) -> None:
    for name in SERVICES:
        if name == "postgres":
            done = stop_postgres()
        elif name == "broker":
            from devtools.broker_daemon import daemon_stop

            done = pidfile(name).exists() and daemon_stop(str(pidfile(name)))
        else:
            done = stop_one(name)
        if done and not quiet:
            say(f"stopped {name}")


def wait_port(port: int, timeout: float, what: str, pid: int | None = None) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((HOST, port)) == 0:
                return
        if pid is not None and not pid_alive(pid):
            raise DemoError(f"{what} exited; see {STATE}/{what}.log")
        time.sleep(0.2)
    raise DemoError(f"{what} did not listen on {HOST}:{port} within {timeout:.0f}s")


def start_broker(port: int) -> str:
    from devtools.broker_daemon import daemon_start

    return daemon_start(port, str(pidfile("broker")), str(STATE / "broker.log"))


def start_registry(port: int) -> str:
    pid = spawn("registry", [PY, "-m", "devtools.registry", "serve", "--port", str(port)], dict(os.environ))
    wait_port(port, 20, "registry", pid)
    return f"http://{HOST}:{port}"


def start_postgres(port: int) -> Any:
    """The source database's server: Debian's PostgreSQL in .demo/postgres (pg_ctl runs it detached)."""
    from devtools.postgres import LocalPostgres

    return LocalPostgres(port, base_dir=STATE / "postgres").start()


def stop_postgres() -> bool:
    from devtools.postgres import LocalPostgres

    base = STATE / "postgres"
    if not (base / "data" / "postmaster.pid").exists():
        return False
    LocalPostgres(base_dir=base).stop()  # pg_ctl stop; the folder stays (prepare() empties it)
    return True


def start_object_store(env: dict[str, str]) -> dict[str, str]:
    """``CDC_DEMO_CATALOG=rest-s3``: moto's S3 (bucket ``lake``) and Iceberg's REST catalog server on it, detached
    (pidfiles ``s3``, ``iceberg-rest``), and the demo pipeline with that catalog in .demo/pipelines/demo.yaml.
    Returns what the job, Airflow and the comparison need in their environment (the S3 server's open keys)."""
    import yaml

    from devtools.s3 import OPEN_KEY_ID, OPEN_SECRET, REGION

    endpoint = f"http://{HOST}:{S3_PORT}"
    for argv in (["devtools.s3", "start", "--port", str(S3_PORT)],
                 ["devtools.rest_catalog", "start", "--port", str(REST_PORT), "--s3-endpoint", endpoint]):
        proc = subprocess.run([PY, "-m", *argv, "--state", str(STATE)], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=180)
        if proc.returncode != 0:
            raise DemoError(f"python -m {' '.join(argv)} failed: {(proc.stderr or proc.stdout).strip()[-1500:]}")
    raw = yaml.safe_load(PIPELINE.read_text())
    raw["catalog"] = {"name": "lake", "type": "rest", "uri": f"http://{HOST}:{REST_PORT}", "warehouse": "s3://lake/rest",
                      "properties": {"s3.endpoint": endpoint, "s3.path-style-access": "true", "client.region": REGION}}
    out = pipeline_path()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# make demo with CDC_DEMO_CATALOG=rest-s3: pipelines/demo.yaml on the REST catalog and S3\n"
                   + yaml.safe_dump(raw, sort_keys=False))
    return {"AWS_ACCESS_KEY_ID": OPEN_KEY_ID, "AWS_SECRET_ACCESS_KEY": OPEN_SECRET, "AWS_REGION": REGION,
            "CDC_PIPELINES_DIR": str(out.parent)}


def start_connect(bootstrap: str) -> Any:
    """A Kafka Connect worker (Debezium's PostgreSQL connector, Confluent's AvroConverter), detached, pidfile."""
    from devtools.connect import ConnectWorker

    worker = ConnectWorker(bootstrap, log_path=STATE / "connect.log", group="demo-connect", port=CONNECT_PORT,
                           home=STATE / "connect", detach=True).start()
    pidfile("connect").write_text(f"{worker.pid}\n")
    return worker


# ----------------------------------------------------------------------------------------------- the job, directly

def run_ingest(env: dict[str, str]) -> dict[str, Any]:
    t0 = time.monotonic()
    proc = subprocess.run([PY, str(REPO / "jobs" / "ingest.py"), "--config", str(pipeline_path()), "--master",
                           "local[2]"],
                          env=env, cwd=REPO, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-15:])
        raise DemoError(f"jobs/ingest.py exited with {proc.returncode}:\n{tail}")
    summary = json.loads(lines[-1])
    summary["_seconds"] = round(time.monotonic() - t0, 1)
    return summary


def summary_line(s: dict[str, Any]) -> str:
    return "; ".join(f"{t['table']}: {t['status']} batch {t['batch_id']} read {t['events_read']} "
                     f"(+{t['inserted']} ~{t['updated']} -{t['deleted']})" for t in s["tables"])
