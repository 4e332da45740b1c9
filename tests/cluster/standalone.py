"""A real Spark standalone cluster for tests, from the installed pyspark: one master and N workers on loopback.

Workers run with a clean environment (no PYTHONPATH, no CDC_*) and a working directory outside the repository, and
executors use ``executor_python``: a virtualenv whose site-packages sees the third-party dependencies (a ``.pth``
line naming the project venv's site-packages, whose own ``.pth`` files, such as the editable install of this
project, are not processed) but not ``cdc``. So executors can import ``cdc`` only from the wheel shipped with
``--py-files``. Logs and work directories go to ``test-output/spark-cluster/session-<pid>/``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(__import__("pyspark").__file__).parent
VENV_BIN = Path(sys.executable).parent
# What every executor needs besides the cdc wheel (checked in the executor interpreter; see README).
EXECUTOR_MODULES = ("pyspark", "pyarrow", "pandas", "confluent_kafka", "fastavro", "polars_avro", "yaml")


def free_port() -> int:
    from devtools.broker import free_port as fp

    return fp()


def build_wheel(out: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the project (the repository's build/ stays untouched)."""
    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    src.mkdir(parents=True)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / f, src / f)
    (src / "jobs").mkdir()
    for script in (REPO / "jobs").glob("*.py"):  # the job scripts jobs/cdc/apps/ links to
        shutil.copy2(script, src / "jobs" / script.name)
    shutil.copytree(REPO / "jobs" / "cdc", src / "jobs" / "cdc", symlinks=True, ignore=ignore)
    shutil.copytree(REPO / "plugins" / "cdc_airflow", src / "plugins" / "cdc_airflow", ignore=ignore)
    dist = out / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(src)],
                   check=True, capture_output=True, text=True, timeout=300)
    [wheel] = dist.glob("cdc_iceberg-*.whl")
    return wheel


def bare_venv(path: Path) -> Path:
    """A virtualenv without this project: third-party packages from the project venv, nothing else. Its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    py = path / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_project_venv_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of cluster processes: no PYTHONPATH, no CDC_* settings, Spark from the installed pyspark."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
           and not k.startswith(("CDC_", "SPARK_", "PYSPARK_"))}
    env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_DAEMON_MEMORY": "256m",
                "PATH": os.pathsep.join([str(VENV_BIN), env.get("PATH", "/usr/bin:/bin")])})
    env.update(extra)
    return env


@dataclass
class Cluster:
    master_url: str
    ui_port: int
    log_dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.loads(r.read())

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
                         for p in sorted(self.log_dir.glob("*.log")))


def _spawn(args: list[str], log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("w") as fh:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=fh, stderr=subprocess.STDOUT,
                                cwd=str(cwd), env=env, start_new_session=True)


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each daemon's process group (the JVM and nothing else we did not start), then SIGKILL."""
    for p in reversed(procs):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in reversed(procs):
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)


def session_dir(root: Path) -> Path:
    """``root/session-<pid>``: concurrent test sessions never share (or delete) each other's logs and work dirs.
    Directories of sessions whose process is gone are removed."""
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("session-*"):
        try:
            os.kill(int(old.name.split("-", 1)[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(old, ignore_errors=True)
        except (ValueError, PermissionError):
            pass
    return root / f"session-{os.getpid()}"


def start_cluster(base: Path, workers: int = 2, timeout: float = 120) -> Iterator[Cluster]:
    """Master + ``workers`` workers (1 core, 1 GiB each); yields once every worker is ALIVE; stops them after and
    removes the applications' work directories (jar copies), keeping the logs."""
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    run_dir = base / "cwd"  # not the repository: nothing of the source tree is reachable from here
    run_dir.mkdir()
    env = clean_env(SPARK_LOCAL_IP="127.0.0.1")  # the daemons' web UIs (and their executors) on loopback only
    port, ui = free_port(), free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", ui, base)
    try:
        cluster.procs.append(_spawn(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                     str(port), "--webui-port", str(ui)], base / "master.log", run_dir, env))
        for i in range(workers):
            work = base / f"worker-{i}"
            work.mkdir()
            cluster.procs.append(_spawn(
                ["org.apache.spark.deploy.worker.Worker", cluster.master_url, "--host", "127.0.0.1",
                 "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                 "--work-dir", str(work)], base / f"worker-{i}.log", run_dir, env))
        deadline = time.monotonic() + timeout
        while True:
            if any(p.poll() is not None for p in cluster.procs):
                raise RuntimeError(f"a Spark daemon exited early:\n{cluster.logs()}")
            try:
                if cluster.state().get("aliveworkers") == workers:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster not ready after {timeout}s:\n{cluster.logs()}")
            time.sleep(1)
        yield cluster
    finally:
        stop(cluster.procs)
        for app in base.glob("worker-*/app-*"):
            shutil.rmtree(app, ignore_errors=True)


def app_properties(event_log_dir: Path) -> list[dict[str, Any]]:
    """Per application in the event log directory: its Spark properties, the executors/hosts that ran tasks and the
    descriptions of its SQL executions (e.g. ``collect at .../cdc/stage.py:140``)."""
    apps = []
    for f in sorted(event_log_dir.iterdir()):
        props: dict[str, str] = {}
        task_executors: set[str] = set()
        executor_hosts: dict[str, str] = {}
        executions: list[str] = []
        for line in f.read_text().splitlines():
            ev = json.loads(line)
            kind = ev.get("Event")
            if kind == "SparkListenerEnvironmentUpdate":
                raw = ev.get("Spark Properties") or {}
                props = dict(raw.items() if isinstance(raw, dict) else raw)
            elif kind == "SparkListenerExecutorAdded":
                executor_hosts[ev["Executor ID"]] = ev["Executor Info"]["Host"]
            elif kind == "SparkListenerTaskEnd":
                task_executors.add(ev["Task Info"]["Executor ID"])
            elif kind and kind.endswith("SparkListenerSQLExecutionStart"):
                executions.append(ev.get("description", ""))
        apps.append({"file": f.name, "properties": props, "task_executors": task_executors,
                     "executor_hosts": executor_hosts, "executions": executions})
    return apps
