"""Timed child processes with peak memory and CPU time: the job as users run it (``python jobs/ingest.py``) and the
floors.

RSS is sampled from /proc every ``interval`` seconds over the whole process tree and split into the Python driver
(the started process), the JVM (``java``) and the PySpark Python workers (``pyspark.daemon`` and its forks): peak
of each, plus the peak single worker and the peak sum of workers. CPU time (user + system) is summed over the tree
from the same samples (each process's last reading; a process living less than one interval is missed): on a shared
machine it moves far less with other load than wall time does, so the benchmark reports both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


TICKS = os.sysconf("SC_CLK_TCK")


def _stat(path: str, children: bool = False) -> tuple[str, float]:
    """A process's or thread's ``stat`` file (``/proc/<pid>[/task/<tid>]/stat``): its name and user + system CPU
    seconds, with its waited-for children's when ``children``. Raises OSError when it is gone."""
    with open(path) as f:
        head, rest = f.read().rsplit(")", 1)  # the name, in parentheses, may hold spaces and parentheses
    fields = rest.split()
    return head.split("(", 1)[1], sum(int(x) for x in fields[11:15 if children else 13]) / TICKS


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone); ``children``: with those of its children it
    has waited for (a JVM's forked commands)."""
    try:
        return _stat(f"/proc/{pid}/stat", children)[1]
    except (OSError, IndexError, ValueError):
        return 0.0


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Thread id → (name, CPU seconds so far) of ``pid``'s live threads; the name with digits dropped
    (``C# CompilerThre``, ``GC Thread##``, ``Executor task l``: the JVM names its native threads, GC and JIT ones
    too)."""
    import re

    out: dict[int, tuple[str, float]] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            name, used = _stat(f"/proc/{pid}/task/{tid}/stat")
        except OSError:  # ended meanwhile
            continue
        out[int(tid)] = (re.sub(r"\d+", "#", name).strip(), used)
    return out


class ThreadCpu:
    """CPU seconds of a process's threads by name between ``start`` and ``stop``, threads that ended meanwhile
    included (sampled every ``every`` seconds: a thread's CPU after its last sample is missed)."""

    def __init__(self, pid: int, every: float = 0.2):
        import threading

        self.pid, self.every = pid, every
        self.first: dict[int, tuple[str, float]] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.last.update(thread_cpu(self.pid))

    def start(self) -> "ThreadCpu":
        self.first = thread_cpu(self.pid)
        self.last = dict(self.first)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self.last.update(thread_cpu(self.pid))
        out: dict[str, float] = {}
        for tid, (name, used) in self.last.items():
            out[name] = out.get(name, 0.0) + used - self.first.get(tid, (name, 0.0))[1]
        return out


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class Peaks:
    driver: int = 0
    jvm: int = 0
    worker_max: int = 0
    workers_sum: int = 0
    samples: int = 0
    cpu: dict[int, float] = field(default_factory=dict)  # pid -> CPU seconds at its last sample
    kinds: dict[int, str] = field(default_factory=dict)  # pid -> "driver" | "jvm" | "workers" | "other"

    @property
    def cpu_seconds(self) -> float:
        return round(sum(self.cpu.values()), 2)

    def cpu_by_kind(self) -> dict[str, float]:
        """CPU seconds of the Python driver, the JVM and the PySpark workers (which side a gap is on)."""
        out: dict[str, float] = {}
        for pid, used in self.cpu.items():
            kind = self.kinds.get(pid, "other")
            out[kind] = round(out.get(kind, 0.0) + used, 2)
        return out

    def as_mb(self) -> dict[str, int]:
        return {"driver_python_mb": self.driver >> 20, "jvm_mb": self.jvm >> 20,
                "worker_max_mb": self.worker_max >> 20, "workers_sum_mb": self.workers_sum >> 20}


def sample(root: int, peaks: Peaks) -> None:
    kids = _children()
    stack, tree = [root], []
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(kids.get(pid, []))
    workers = 0
    for pid in tree:
        rss = _rss(pid)
        used = cpu_seconds(pid)
        if used:
            peaks.cpu[pid] = max(peaks.cpu.get(pid, 0.0), used)
        exe = _cmd(pid).split(" ", 1)[0]
        if pid == root:
            peaks.driver = max(peaks.driver, rss)
            peaks.kinds[pid] = "driver"
        elif "java" in exe:
            peaks.jvm = max(peaks.jvm, rss)
            peaks.kinds[pid] = "jvm"
        elif "python" in exe:
            peaks.kinds[pid] = "workers"
            workers += rss
            peaks.worker_max = max(peaks.worker_max, rss)
    peaks.workers_sum = max(peaks.workers_sum, workers)
    peaks.samples += 1


@dataclass
class Run:
    seconds: float
    code: int
    stdout: str
    stderr: str
    peaks: Peaks = field(default_factory=Peaks)

    def summary(self) -> dict[str, Any] | None:
        lines = [ln for ln in self.stdout.splitlines() if ln.strip()]
        try:
            return json.loads(lines[-1]) if lines else None
        except ValueError:
            return None

    def check(self, what: str) -> "Run":
        if self.code != 0:
            import tempfile

            with tempfile.NamedTemporaryFile("w", prefix="cdc-bench-stderr-", suffix=".txt", delete=False) as f:
                f.write(self.stderr)
            raise SystemExit(f"{what} failed (exit {self.code}; whole stderr in {f.name}):\n{self.stderr[-3000:]}")
        return self


# Settings every measured process gets (the caller's own CDC_* variables do not reach them), e.g. the jobs' JVM
# class archive directory (cdc.spark.jvm_cache)
JOB_ENV: dict[str, str] = {}


def run(cmd: list[str], env: dict[str, str] | None = None, interval: float = 0.25, timeout: float = 7200) -> Run:
    """Run ``cmd`` (own process group), timing it and sampling the RSS of its tree."""
    full_env = {**{k: v for k, v in os.environ.items() if not k.startswith("CDC_")},
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **JOB_ENV, **(env or {})}
    peaks, done = Peaks(), threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            cwd=str(REPO), start_new_session=True)

    def watch() -> None:
        while not done.wait(interval):
            try:
                sample(proc.pid, peaks)
            except Exception:  # noqa: BLE001 - a process ended between listing and reading
                pass

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        th.join()
    return Run(time.perf_counter() - t0, proc.returncode, out, err, peaks)


def ingest(config: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    """``python jobs/ingest.py --config CONFIG ...`` as a user runs it (local[*] master, Spark start-up included)."""
    return run([sys.executable, str(REPO / "jobs" / "ingest.py"), "--config", str(config), *args], env)


def python_c(code: str, *args: str) -> Run:
    return run([sys.executable, "-c", code, *args])
