"""Where the Spark driver JVM's busy threads are: stack samples from the Spark UI's REST API, by activity.

``bench/profile_batch.py --jvm-stacks`` samples ``/api/v1/applications/<app>/executors/driver/threads`` (a thread dump
of the driver JVM, which in local mode also runs the tasks) four times a second while the last batch runs, keeps the
threads that are running (``RUNNABLE``, not a Py4J connection waiting for its next command), and names each sample
by the innermost frame that says what it does (``ACTIVITIES``: an Iceberg commit inside a MERGE's write counts as
the commit). No agent or JDK tool is needed (the machine has only a JRE); like every thread dump, the samples are
taken at safepoints, so they show where the time goes by activity, not by hot instruction.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

# (activity, frame markers), matched from the innermost frame outwards: the first frame that holds a marker names it
ACTIVITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Iceberg commit (manifests, metadata file)", ("SnapshotProducer.commit", "BaseTransaction.commit",
                                                   "TableOperations.commit", "HadoopTableOperations.commit")),
    ("Iceberg scan planning (manifests)", ("ManifestGroup", "planFiles", "taskGroups", "ManifestReader")),
    ("Iceberg table load / refresh", ("TableMetadataParser.read", "loadTable", "refreshTable", "invalidateTable")),
    ("Spark task (read, write, shuffle)", ("Executor$TaskRunner.run",)),
    ("code generation", ("CodeGenerator", "WholeStageCodegenExec", "CodegenSupport")),
    ("listener events", ("AsyncEventQueue.post", "LiveListenerBus.post")),
    ("job and stage submission", ("DAGScheduler", "SparkContext.runJob", "ClosureCleaner", "TorrentBroadcast",
                                  "JavaSerializationStream")),
    ("SQL parsing", ("AbstractSqlParser.parse", "AbstractParser.parse")),
    ("analysis", ("Analyzer.execute", "CheckAnalysis", "checkAnalysis", "QueryExecution.$anonfun$analyzed")),
    ("optimization and physical planning", ("$anonfun$optimizedPlan", "$anonfun$sparkPlan", "$anonfun$executedPlan",
                                            "QueryPlanner.plan", "QueryExecution$.prepareForExecution")),
    ("query execution (adaptive stages)", ("AdaptiveSparkPlanExec", "SparkPlan.execute")),
)
IDLE_MARKERS = ("SocketDispatcher.read0", "Net.accept", "EPoll", "epoll", "BufferedReader.readLine")
THREADS = ("Thread-", "iceberg-worker", "Executor task launch")  # Py4J statement threads, Iceberg's pool, tasks


def activity(frames: Sequence[str]) -> str:
    """The activity of one stack (innermost frame first, as a thread dump lists it); pure."""
    for frame in frames:
        for name, markers in ACTIVITIES:
            if any(m in frame for m in markers):
                return name
    return "other"


def busy_stacks(dump: Iterable[dict[str, Any]]) -> list[list[str]]:
    """The stacks of the threads in one REST thread dump that are doing work (see module doc); pure."""
    out = []
    for t in dump:
        if t.get("threadState") != "RUNNABLE" or not t.get("threadName", "").startswith(THREADS):
            continue
        frames = [str(f).strip() for f in (t.get("stackTrace") or {}).get("elems", [])]
        if frames and not any(m in f for f in frames[:14] for m in IDLE_MARKERS):
            out.append(frames)
    return out


@dataclass
class StackSampler:
    """Samples the driver's thread dumps from ``base`` (``<ui>/api/v1/applications/<app>``) in a background thread."""

    base: str
    interval: float = 0.25  # each dump stops the JVM at a safepoint: every 50 ms doubled a batch's wall time
    stacks: list[list[str]] = field(default_factory=list)
    dumps: int = 0

    def start(self) -> "StackSampler":
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jvm-stack-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(f"{self.base}/executors/driver/threads", timeout=5) as r:
                    self.stacks.extend(busy_stacks(json.load(r)))
                self.dumps += 1
            except OSError:  # the UI is busy or going away: skip this sample
                pass
            self._stop.wait(self.interval)

    def stop(self) -> "StackSampler":
        self._stop.set()
        self._thread.join(timeout=10)
        return self


def report(stacks: Sequence[Sequence[str]], dumps: int, top: int = 12) -> str:
    """Busy samples by activity, with their share, and the ``top`` innermost frames of the "other" ones; pure."""
    if not stacks:
        return f"JVM stacks: no busy thread in {dumps} thread dumps"
    kinds = [activity(s) for s in stacks]
    lines = [f"JVM stacks: {len(stacks)} busy thread samples in {dumps} thread dumps, by activity:"]
    lines += [f"  {n / len(stacks):6.1%}  {n:6d}  {name}" for name, n in Counter(kinds).most_common()]
    other = Counter(s[0].split("(")[0] for s, kind in zip(stacks, kinds) if kind == "other")
    if other:
        lines.append("  innermost frames of 'other':")
        lines += [f"          {n:6d}  {frame}" for frame, n in other.most_common(top)]
    return "\n".join(lines)
