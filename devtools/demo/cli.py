"""The demo's main flows and command line (``python -m devtools.demo``; see the package docstring)."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import time
from typing import Any, Callable

import devtools.demo
from devtools.demo.airflow_api import (
    Api,
    airflow_cli,
    airflow_env,
    ensure_pool_and_connection,
    run_publish_report,
    start_airflow,
    trigger_and_wait,
    wait_for_dag,
)
from devtools.demo.common import (
    API_PORT,
    BROKER_PORT,
    CATALOG,
    CATALOGS,
    DAG_ID,
    HOST,
    PARTITIONS,
    POSTGRES_PORT,
    PY,
    REGISTRY_PORT,
    STATE,
    DemoError,
    pipeline_path,
    say,
)
from devtools.demo.compare import compare, ledger_summary
from devtools.demo.services import (
    pidfile,
    run_ingest,
    start_broker,
    start_connect,
    start_object_store,
    start_postgres,
    start_registry,
    stop_all,
    summary_line,
)
from devtools.demo.source import Script, build_waves, source
from devtools.pgsource import PostgresSource

# ----------------------------------------------------------------------------------------------- main flows

def prepare(args: argparse.Namespace) -> tuple[dict[str, str], PostgresSource]:
    stop_all(quiet=True)
    for sub in ("warehouse", "airflow", "build", "postgres", "connect", "pipelines", "iceberg-rest"):
        shutil.rmtree(STATE / sub, ignore_errors=True)
    STATE.mkdir(exist_ok=True)
    for log in STATE.glob("*.log"):
        log.unlink()
    t0 = time.monotonic()
    store: dict[str, str] = {}
    if CATALOG == "rest-s3":
        store = start_object_store(dict(os.environ))
        os.environ.update(store)
        say(f"[{time.monotonic() - t0:5.1f}s] S3 (moto) and Apache Iceberg's REST catalog server: "
            f"{pipeline_path().relative_to(STATE.parent)}")
    bootstrap = start_broker(args.broker_port)
    registry = start_registry(args.registry_port) if pipeline_format() == "avro" else None
    pg = start_postgres(args.postgres_port)
    say(f"[{time.monotonic() - t0:5.1f}s] Apache Kafka {bootstrap} (pid {pidfile('broker').read_text().strip()})"
        + (f", schema registry {registry}" if registry else "") + f", PostgreSQL {HOST}:{pg.port}")
    connect = start_connect(bootstrap)
    say(f"[{time.monotonic() - t0:5.1f}s] Kafka Connect {connect.url}: Debezium's PostgreSQL connector, "
        + ("Confluent's AvroConverter" if registry else "Kafka's JsonConverter")
        + f"; topics with {PARTITIONS} partitions")
    env = {**os.environ, **store}
    env.update({"CDC_DEMO_BOOTSTRAP": bootstrap, "CDC_DEMO_WAREHOUSE": str(STATE / "warehouse"),
                "CDC_DEMO_REGISTRY": registry or "http://127.0.0.1:1",
                "PYSPARK_PYTHON": PY, "PYSPARK_DRIVER_PYTHON": PY})
    os.environ.update({k: env[k] for k in ("CDC_DEMO_BOOTSTRAP", "CDC_DEMO_WAREHOUSE", "CDC_DEMO_REGISTRY")})
    return env, source(pg, connect, bootstrap, registry)


def pipeline_config() -> Any:
    from cdc.config.load import load_config  # the installed package (make venv: pip install -e .)

    return load_config(pipeline_path())


def pipeline_format() -> str:
    """The converter is the pipeline's: avro (default) needs the schema registry, json does not."""
    return str(pipeline_config().format)


def catalog() -> Any:
    return pipeline_config().catalog


def main_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()

    def stamp() -> str:
        return f"[{time.monotonic() - started:5.1f}s]"

    waves, script = build_waves(), Script(args.seed, args.scale)
    env, src = prepare(args)
    api: Api | None = None
    if not args.no_airflow:
        api = setup_airflow(env, args, stamp)
    ok = True
    seen_downstream: set[str] = set()
    for i, wave in enumerate(waves, 1):
        wave.run(src, script)
        wave.done = script.take()
        src.sync()  # every change of the wave is in Kafka
        say(f"{stamp()} wave {i}/{len(waves)} committed in PostgreSQL and in Kafka: {wave.title}\n"
            f"        {wave.describe()}")
        if api is None:
            s = run_ingest(env)
            say(f"{stamp()} jobs/ingest.py ({s['_seconds']}s): {summary_line(s)}")
        else:
            run = trigger_and_wait(api, {}, f"demo wave {i}: {wave.title}")
            report = run_publish_report(api, run["dag_run_id"])
            states = ", ".join(f"{t['task_id']}{'[' + t['rendered_map_index'] + ']' if t.get('rendered_map_index') else ''}"
                               f"={t['state']}" for t in sorted(run["_tis"], key=lambda t: (t['task_id'], t['map_index'])))
            say(f"{stamp()} DAG run {run['dag_run_id']}: {run['state']} ({states})")
            if report:
                say("        " + "; ".join(f"{t['table']}: batch {t['batch_id']} read {t['events_read']} "
                                          f"(+{t['inserted']} ~{t['updated']} -{t['deleted']})"
                                          for t in report.get("tables", [])))
            show_downstream(api, seen_downstream, stamp)
        last = i == len(waves)
        if last:
            say(f"\n{stamp()} final state: each Iceberg table next to the PostgreSQL table")
        ok &= compare(catalog(), src, verbose=last, limit=args.rows)
    say("\nLedger (one line per table):")
    ledger_summary(catalog())
    say("")
    say(("MATCH: every Iceberg table equals SELECT * of its PostgreSQL table after every wave" if ok else
         "MISMATCH: see the differences above") + f" (total {time.monotonic() - started:.0f}s)")
    if api is not None:
        login = json.loads((STATE / "airflow" / "passwords.json").read_text())
        say(f"\nAirflow UI: http://{HOST}:{args.api_port}/   login: admin / {login['admin']}")
        say(f"CDC status: http://{HOST}:{args.api_port}/cdc-status/   (also under Browse → CDC status)")
        say(f"Logs and pidfiles: {STATE}/   stop everything: make demo-stop")
    else:
        stop_all(quiet=True)
    return 0 if ok else 1


def show_downstream(api: Api, seen: set[str], stamp: Callable[[], str]) -> None:
    """The asset-triggered runs of cdc_demo_downstream that the wave's committed batches caused."""
    from devtools.demo.airflow_api import DOWNSTREAM_ID, wait_downstream

    runs = wait_downstream(api, seen)
    if not runs:
        say(f"{stamp()} {DOWNSTREAM_ID}: no asset-triggered run finished (yet)")
    for run, value in runs:
        seen.add(run["dag_run_id"])
        tables = "; ".join(f"{t}: {v.get('changed_rows')} changed row(s) in batch(es) {v.get('batches')}"
                           for t, v in (value or {}).items())
        say(f"{stamp()} {DOWNSTREAM_ID} (asset-triggered) {run['state']}: {tables or 'no result'}")


def setup_airflow(env: dict[str, str], args: argparse.Namespace, stamp: Callable[[], str]) -> Api:
    home = STATE / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    (STATE / "jwt_secret").write_text(secrets.token_urlsafe(32) + "\n")
    password = secrets.token_urlsafe(9)
    password_file = home / "passwords.json"
    password_file.write_text(json.dumps({"admin": password}) + "\n")
    aenv = airflow_env(home, args.api_port, password_file, env)
    say(f"{stamp()} airflow db migrate (AIRFLOW_HOME={home}) …")
    airflow_cli(aenv, "db", "migrate")
    say(f"{stamp()} starting api-server (127.0.0.1:{args.api_port}), scheduler, dag-processor, triggerer …")
    start_airflow(aenv, args.api_port)
    api = Api(f"http://{HOST}:{args.api_port}", "admin", password)
    api.login()
    ensure_pool_and_connection(api)
    wait_for_dag(api)
    api.ok("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    from devtools.demo.airflow_api import DOWNSTREAM_ID, unpause_downstream

    if unpause_downstream(api):
        say(f"{stamp()} DAG {DOWNSTREAM_ID} unpaused: it runs when a wave's batches change the tables (assets)")
    say(f"{stamp()} Airflow up; DAG {DAG_ID} parsed and unpaused (schedule off: CDC_SCHEDULE=none, the demo "
        "triggers one run per wave); pool cdc_spark (2 slots), connection spark_default (local[*])")
    return api


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devtools.demo", description=devtools.demo.__doc__.splitlines()[0])
    p.add_argument("command", nargs="?", choices=("run", "stop"), default="run")
    p.add_argument("--no-airflow", action="store_true", help="run jobs/ingest.py directly (no Airflow)")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--scale", type=int, default=1, help="multiply the number of rows and changes")
    p.add_argument("--rows", type=int, default=12, help="rows per table printed side by side at the end")
    p.add_argument("--api-port", type=int, default=API_PORT)
    p.add_argument("--broker-port", type=int, default=BROKER_PORT)
    p.add_argument("--registry-port", type=int, default=REGISTRY_PORT)
    p.add_argument("--postgres-port", type=int, default=POSTGRES_PORT)
    args = p.parse_args(argv)
    if args.command == "stop":
        stop_all()
        return 0
    if CATALOG not in CATALOGS:
        say(f"CDC_DEMO_CATALOG={CATALOG!r}: expected one of {', '.join(CATALOGS)}")
        return 2
    try:
        return main_demo(args)
    except (DemoError, RuntimeError, TimeoutError) as exc:
        say(f"\nDEMO FAILED: {exc}\n(logs in {STATE}/; `make demo-stop` stops what was started)")
        if args.no_airflow:
            stop_all(quiet=True)
        return 2
    except KeyboardInterrupt:
        say("\ninterrupted; stopping")
        stop_all()
        return 130


if __name__ == "__main__":
    sys.exit(main())
