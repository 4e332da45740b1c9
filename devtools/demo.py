"""`make demo`: a local CDC pipeline end to end, checked against the source's true state.

    python -m devtools.demo                 # broker + schema registry + Airflow; one DAG run per wave of changes
    python -m devtools.demo --no-airflow    # the same waves, each ingested by `python jobs/ingest.py` directly
    python -m devtools.demo stop            # stop everything a demo started (pidfiles in .demo/)

What happens:

1. The local Kafka-protocol broker (tansu, 127.0.0.1:19092) and the test schema registry (127.0.0.1:18081) start as
   daemons with pidfiles in ``.demo/``; ``pipelines/demo.yaml`` reads Avro (Confluent wire format) through them.
2. A small "inventory" database (``customers`` and ``orders``, PostgreSQL connector, 3 partitions per topic) is
   simulated by ``devtools.debezium.ChangeEventGenerator``: wave 1 is the initial snapshot (op ``r``); later waves are
   live transactions: inserts, updates (unchanged TOASTed text arrives as ``__debezium_unavailable_value``), deletes
   with tombstones, primary-key changes, and an ``ALTER TABLE ... ADD COLUMN`` on both tables (new Avro schema
   version in the registry).
3. Airflow 3 (SQLite, LocalExecutor; AIRFLOW_HOME ``.demo/airflow``): ``db migrate``, scheduler and triggerer
   (``--skip-serve-logs``), dag-processor and api-server on 127.0.0.1; the simple auth manager with user ``admin``
   and a generated password; pool ``cdc_spark`` and connection ``spark_default`` (``local[*]``) created through the
   REST API. Each wave is produced, then one run of ``cdc_demo`` is triggered through the REST API and awaited.
4. After every wave the Iceberg tables (read with pyiceberg) are compared with the generator's oracle; at the end
   each table is printed next to the expected source state: MATCH or MISMATCH (exit status 1).

The broker and the registry keep everything in memory, so every demo starts from scratch (warehouse and Airflow
home are recreated under ``.demo/``). Airflow stays up after the demo for exploring the UI; ``make demo-stop``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable

from devtools.broker import pid_alive
from devtools.debezium import TOAST_PLACEHOLDER, ChangeEventGenerator, Column, GeneratorConfig, TableSchema
from devtools.debezium.model import Record, default_table, to_python

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / ".demo"
PIPELINE = REPO / "pipelines" / "demo.yaml"
PY = sys.executable
HOST = "127.0.0.1"
BROKER_PORT, REGISTRY_PORT, API_PORT = 19092, 18081, 18080
PARTITIONS = 3
DAG_ID = "cdc_demo"
TARGETS = {"customers": "inventory.customers", "orders": "inventory.orders"}
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer", "registry", "broker")  # stop order


def say(msg: str = "") -> None:
    print(msg, flush=True)


class DemoError(RuntimeError):
    pass


# ----------------------------------------------------------------------------------------------- the source database

FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret", "Dennis", "Radia", "Tim")
LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Hamilton", "Ritchie")
STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled")
TIERS = ("bronze", "silver", "gold", "platinum")


class CustomersGenerator(ChangeEventGenerator):
    """``public.customers`` with plausible values (the generator's default table, all column kinds)."""

    def _value(self, col: Column) -> Any:
        r = self.rng
        if col.name == "name":
            return f"{r.choice(FIRST)} {r.choice(LAST)}"
        if col.name == "visits":
            return r.randint(0, 500)
        if col.name == "balance":
            return Decimal(r.randint(-50_000, 900_000)).scaleb(-2)
        if col.name == "loyalty_tier":
            return r.choice(TIERS)
        return super()._value(col)


class OrdersGenerator(ChangeEventGenerator):
    """``public.orders``: customer ids point at customers; notes are sometimes TOASTed (large) text."""

    def __init__(self, seed: int, config: GeneratorConfig, customers: CustomersGenerator):
        super().__init__(seed, config, orders_table())
        self.customers = customers

    def _value(self, col: Column) -> Any:
        r = self.rng
        if col.name == "customer_id":
            ids = list(self.customers.rows) or [1]
            return r.choice(ids)
        if col.name == "status":
            return r.choice(STATUSES)
        if col.name == "quantity":
            return r.randint(1, 12)
        if col.name == "total":
            return Decimal(r.randint(100, 250_000)).scaleb(-2)
        return super()._value(col)


def orders_table() -> TableSchema:
    return TableSchema(
        name="orders", connector="postgresql", server="dbserver1",
        columns=(
            Column("id", "int32", nullable=False),
            Column("customer_id", "int32", nullable=False),
            Column("status", "string", nullable=False),
            Column("quantity", "int32", nullable=False),
            Column("total", "decimal", nullable=False, precision=12, scale=2),
            Column("ordered_at", "timestamp", nullable=False),
            Column("delivery_date", "date", nullable=True),
            Column("notes", "text", nullable=True, toastable=True),
        ),
    )


@dataclass
class Wave:
    title: str
    records: dict[str, list[Record]]  # table → records
    expected: dict[str, dict[Any, dict[str, Any]]]  # table → oracle rows after this wave
    columns: dict[str, list[str]]  # table → source columns after this wave

    def describe(self) -> str:
        parts = []
        for table, recs in self.records.items():
            ops: dict[str, int] = {}
            toast = 0
            for r in recs:
                op = "tombstone" if r.value is None else r.value["op"]
                ops[op] = ops.get(op, 0) + 1
                after = (r.value or {}).get("after") or {}
                toast += sum(1 for v in after.values() if v == TOAST_PLACEHOLDER)
            names = {"r": "read", "c": "create", "u": "update", "d": "delete", "tombstone": "tombstone"}
            detail = ", ".join(f"{n} {names.get(op, op)}" for op, n in sorted(ops.items(), key=lambda x: "rcudt".find(x[0][0])))
            parts.append(f"{table}: {len(recs)} records ({detail}{f'; {toast} TOAST placeholders' if toast else ''})")
        return "; ".join(parts)


def build_waves(seed: int = 2024, scale: int = 1) -> list[Wave]:
    """The scripted history of the source database, as waves of Debezium records plus the oracle after each."""
    cfg = dict(connector="postgresql", partitions=PARTITIONS, replica_identity="full", toast_fraction=0.3)
    customers = CustomersGenerator(seed, GeneratorConfig(table="customers", **cfg),
                                   default_table("postgresql", "customers"))
    orders = OrdersGenerator(seed + 1, GeneratorConfig(table="orders", **cfg), customers)
    gens = {"customers": customers, "orders": orders}
    waves: list[Wave] = []

    def wave(title: str, steps: dict[str, Callable[[ChangeEventGenerator], list[Record]]]) -> None:
        recs = {t: steps[t](g) if t in steps else [] for t, g in gens.items()}
        waves.append(Wave(title, recs, {t: g.expected_rows() for t, g in gens.items()},
                          {t: [c.name for c in g.table.columns] for t, g in gens.items()}))

    live = {"insert": 3, "update": 6, "delete": 1.5, "change_pk": 0.3}
    wave("initial snapshot", {"customers": lambda g: g.snapshot(25 * scale), "orders": lambda g: g.snapshot(40 * scale)})
    wave("live changes", {"customers": lambda g: g.random_ops(40 * scale, live),
                          "orders": lambda g: g.random_ops(60 * scale, live)})

    def add_then(column: Column, n: int) -> Callable[[ChangeEventGenerator], list[Record]]:
        def step(g: ChangeEventGenerator) -> list[Record]:
            g.add_column(column)
            return g.random_ops(n, live)
        return step

    wave("schema change: ADD COLUMN customers.loyalty_tier, orders.shipped_at, then more changes",
         {"customers": add_then(Column("loyalty_tier", "string"), 40 * scale),
          "orders": add_then(Column("shipped_at", "timestamp"), 60 * scale)})
    churn = {"insert": 2, "update": 5, "delete": 3}
    wave("more changes, delete-heavy", {"customers": lambda g: g.random_ops(30 * scale, churn),
                                        "orders": lambda g: g.random_ops(50 * scale, churn)})
    return waves


def topics() -> dict[str, str]:
    return {"customers": "dbserver1.public.customers", "orders": "dbserver1.public.orders"}


def produce_wave(bootstrap: str, registry_url: str | None, wave: Wave) -> None:
    from devtools.debezium import AvroSerializer, JsonSerializer, produce

    if registry_url:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        serializer: Any = AvroSerializer(SchemaRegistryClient({"url": registry_url}))
    else:
        serializer = JsonSerializer()
    for table, recs in wave.records.items():
        if recs:
            produce(bootstrap, topics()[table], recs, serializer)


# ----------------------------------------------------------------------------------------------- comparing

def _norm(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, Decimal):
        return value.normalize()
    return value


def expected_table(wave: Wave, table: str) -> dict[Any, dict[str, Any]]:
    schema = wave_schema(wave, table)
    return {pk: {k: _norm(v) for k, v in (to_python(schema, row) or {}).items()}
            for pk, row in wave.expected[table].items()}


def wave_schema(wave: Wave, table: str) -> TableSchema:
    base = default_table("postgresql", "customers") if table == "customers" else orders_table()
    for name in wave.columns[table]:
        if name not in {c.name for c in base.columns}:
            base = base.with_column(Column(name, "string" if name == "loyalty_tier" else "timestamp"))
    return base


def actual_table(catalog: Any, table: str, columns: list[str]) -> dict[Any, dict[str, Any]] | None:
    """The Iceberg target read with pyiceberg (no Spark): {id: row} restricted to the source columns."""
    if str(REPO / "plugins") not in sys.path:
        sys.path.insert(0, str(REPO / "plugins"))
    from cdc_airflow.ledger import load_table

    t = load_table(catalog, TARGETS[table])
    if t is None:
        return None
    if t.current_snapshot() is None:
        return {}
    have = {f.name for f in t.schema().fields}
    rows = t.scan(selected_fields=tuple(c for c in columns if c in have)).to_arrow().to_pylist()
    return {r["id"]: {c: _norm(r.get(c)) for c in columns} for r in rows}


def diff(expected: dict[Any, dict[str, Any]], actual: dict[Any, dict[str, Any]] | None) -> list[str]:
    if actual is None:
        return ["target table does not exist"]
    out = []
    for pk in sorted(set(expected) | set(actual)):
        e, a = expected.get(pk), actual.get(pk)
        if e == a:
            continue
        if a is None:
            out.append(f"id={pk}: missing in target")
        elif e is None:
            out.append(f"id={pk}: in target but deleted/absent in source")
        else:
            cols = [c for c in e if e[c] != a.get(c)]
            out.append(f"id={pk}: " + ", ".join(f"{c}: expected {_short(e[c])} got {_short(a.get(c))}" for c in cols))
    return out


def _short(v: Any, width: int = 24) -> str:
    if v is None:
        return "∅"
    if isinstance(v, dt.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
    elif isinstance(v, str) and len(v) > width:
        return f"{v[:width - 10]}…({len(v)} ch)"
    else:
        s = str(v)
    return s if len(s) <= width else s[: width - 1] + "…"


def side_by_side(table: str, columns: list[str], expected: dict[Any, dict[str, Any]],
                 actual: dict[Any, dict[str, Any]] | None, limit: int) -> str:
    """Target rows (left) next to the source's expected rows (right); ``=`` where identical."""
    actual = actual or {}
    keys = sorted(set(expected) | set(actual))
    shown = keys[:limit]
    cols = [c for c in columns if c != "id"]
    widths = {c: max(len(c), *(len(_short(r.get(c))) for src in (expected, actual) for k in shown
                               if (r := src.get(k)) is not None), 1) for c in cols}

    def fmt(row: dict[str, Any] | None) -> str:
        if row is None:
            return " ".join("-".ljust(widths[c]) for c in cols)
        return " ".join(_short(row.get(c)).ljust(widths[c]) for c in cols)

    header = " ".join(c.ljust(widths[c]) for c in cols)
    lines = [f"   {'id':>5} | {'ICEBERG ' + TARGETS[table]:<{len(header)}} |   | SOURCE public.{table} (oracle)",
             f"   {'':>5} | {header} |   | {header}"]
    for k in shown:
        a, e = actual.get(k), expected.get(k)
        mark = "=" if a == e else "≠"
        lines.append(f"   {k:>5} | {fmt(a)} | {mark} | {fmt(e) if a != e else '(same)'}")
    if len(keys) > limit:
        same = sum(1 for k in keys[limit:] if actual.get(k) == expected.get(k))
        lines.append(f"   … {len(keys) - limit} more ids ({same} identical)")
    return "\n".join(lines)


def compare(catalog: Any, wave: Wave, verbose: bool, limit: int = 12) -> bool:
    ok = True
    for table in TARGETS:
        cols = wave.columns[table]
        exp = expected_table(wave, table)
        act = actual_table(catalog, table, cols)
        problems = diff(exp, act)
        n = "no table" if act is None else f"{len(act)} rows"
        verdict = "MATCH" if not problems else "MISMATCH"
        say(f"  {TARGETS[table]:<22} {n:>9} vs source {len(exp):>3} rows, {len(cols)} columns: {verdict}")
        if verbose:
            say(side_by_side(table, cols, exp, act, limit))
        for p in problems[:10]:
            say(f"    {p}")
        ok &= not problems
    return ok


def ledger_summary(catalog: Any, pipeline: str = "demo") -> None:
    from cdc_airflow.ledger import batches, read_rows

    rows = read_rows(catalog, "cdc_meta.ledger", pipeline=pipeline)
    for table in TARGETS.values():
        bs = sorted(batches(rows, table, 100), key=lambda b: b["batch_id"])
        say(f"  {table}: " + "; ".join(
            f"batch {b['batch_id']} {b['status']} read {b['events_read']} (+{b['inserted']} ~{b['updated']} "
            f"-{b['deleted']})" for b in bs))


# ----------------------------------------------------------------------------------------------- daemons

def pidfile(name: str) -> Path:
    return STATE / f"{name}.pid"




def _ours(pid: int) -> bool:
    """The pid still runs something the demo started (guards against a recycled pid)."""
    with contextlib.suppress(OSError):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return any(w in cmd for w in ("airflow", "devtools.registry", "tansu"))
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
        if name == "broker":
            from devtools.broker import daemon_stop

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
    from devtools.broker import daemon_start

    return daemon_start(port, str(pidfile("broker")), str(STATE / "broker.log"))


def start_registry(port: int) -> str:
    pid = spawn("registry", [PY, "-m", "devtools.registry", "serve", "--port", str(port)], dict(os.environ))
    wait_port(port, 20, "registry", pid)
    return f"http://{HOST}:{port}"


def create_topics(bootstrap: str) -> None:
    from devtools.broker import create_topic

    for t in topics().values():
        create_topic(bootstrap, t, PARTITIONS)


# ----------------------------------------------------------------------------------------------- the job, directly

def run_ingest(env: dict[str, str]) -> dict[str, Any]:
    t0 = time.monotonic()
    proc = subprocess.run([PY, str(REPO / "jobs" / "ingest.py"), "--config", str(PIPELINE), "--master", "local[2]"],
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


# ----------------------------------------------------------------------------------------------- Airflow

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


# ----------------------------------------------------------------------------------------------- main flows

def prepare(args: argparse.Namespace) -> tuple[dict[str, str], str, str | None]:
    stop_all(quiet=True)
    for sub in ("warehouse", "airflow", "build"):
        shutil.rmtree(STATE / sub, ignore_errors=True)
    STATE.mkdir(exist_ok=True)
    for log in STATE.glob("*.log"):
        log.unlink()
    t0 = time.monotonic()
    bootstrap = start_broker(args.broker_port)
    registry = start_registry(args.registry_port) if pipeline_format() == "avro" else None
    create_topics(bootstrap)
    say(f"[{time.monotonic() - t0:5.1f}s] broker {bootstrap} (pid {pidfile('broker').read_text().strip()})"
        + (f", schema registry {registry}" if registry else "") + f"; topics with {PARTITIONS} partitions")
    env = dict(os.environ)
    env.update({"CDC_DEMO_BOOTSTRAP": bootstrap, "CDC_DEMO_WAREHOUSE": str(STATE / "warehouse"),
                "CDC_DEMO_REGISTRY": registry or "http://127.0.0.1:1",
                "PYSPARK_PYTHON": PY, "PYSPARK_DRIVER_PYTHON": PY})
    os.environ.update({k: env[k] for k in ("CDC_DEMO_BOOTSTRAP", "CDC_DEMO_WAREHOUSE", "CDC_DEMO_REGISTRY")})
    return env, bootstrap, registry


def pipeline_config() -> Any:
    if str(REPO / "jobs") not in sys.path:
        sys.path.insert(0, str(REPO / "jobs"))
    from cdc.config import load_config

    return load_config(PIPELINE)


def pipeline_format() -> str:
    """The converter is the pipeline's: avro (default) needs the schema registry, json does not."""
    return str(pipeline_config().format)


def catalog() -> Any:
    return pipeline_config().catalog


def main_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()

    def stamp() -> str:
        return f"[{time.monotonic() - started:5.1f}s]"

    waves = build_waves(args.seed, args.scale)
    env, bootstrap, registry = prepare(args)
    api: Api | None = None
    if not args.no_airflow:
        api = setup_airflow(env, args, stamp)
    ok = True
    for i, wave in enumerate(waves, 1):
        produce_wave(bootstrap, registry, wave)
        say(f"{stamp()} wave {i}/{len(waves)} produced: {wave.title}\n        {wave.describe()}")
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
        last = i == len(waves)
        if last:
            say(f"\n{stamp()} final state: each Iceberg table next to the source's expected state")
        ok &= compare(catalog(), wave, verbose=last, limit=args.rows)
    say("\nLedger (one line per table):")
    ledger_summary(catalog())
    say("")
    say(("MATCH: every table equals the source state after every wave" if ok else
         "MISMATCH: see the differences above") + f" (total {time.monotonic() - started:.0f}s)")
    if api is not None:
        login = json.loads((STATE / "airflow" / "passwords.json").read_text())
        say(f"\nAirflow UI: http://{HOST}:{args.api_port}/   login: admin / {login['admin']}")
        say(f"CDC status: http://{HOST}:{args.api_port}/cdc-status/   (also under Browse → CDC status)")
        say(f"Logs and pidfiles: {STATE}/   stop everything: make demo-stop")
    else:
        stop_all(quiet=True)
    return 0 if ok else 1


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
    say(f"{stamp()} Airflow up; DAG {DAG_ID} parsed and unpaused (schedule off: CDC_SCHEDULE=none, the demo "
        "triggers one run per wave); pool cdc_spark (2 slots), connection spark_default (local[*])")
    return api


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devtools.demo", description=__doc__.splitlines()[0])
    p.add_argument("command", nargs="?", choices=("run", "stop"), default="run")
    p.add_argument("--no-airflow", action="store_true", help="run jobs/ingest.py directly (no Airflow)")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--scale", type=int, default=1, help="multiply the number of rows and changes")
    p.add_argument("--rows", type=int, default=12, help="rows per table printed side by side at the end")
    p.add_argument("--api-port", type=int, default=API_PORT)
    p.add_argument("--broker-port", type=int, default=BROKER_PORT)
    p.add_argument("--registry-port", type=int, default=REGISTRY_PORT)
    args = p.parse_args(argv)
    if args.command == "stop":
        stop_all()
        return 0
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
