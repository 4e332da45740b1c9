"""bench.jvm_stacks: the driver JVM's busy threads by activity, from the Spark UI's REST thread dumps.

The frames are abridged from real dumps of a profiled 20-table batch. The sampler test serves dumps from a local HTTP server
instead of a Spark UI: the test process's shared SparkSession runs without a UI (local sessions disable it)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from bench.jvm_stacks import StackSampler, activity, busy_stacks, report

PY4J_IDLE = ["java.base@17.0.15/sun.nio.ch.SocketDispatcher.read0(Native Method)",
             "java.base@17.0.15/java.io.BufferedReader.readLine(BufferedReader.java:392)",
             "app//py4j.ClientServerConnection.waitForCommands(ClientServerConnection.java:181)"]
COMMIT = ["app//org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileOutputStream.<init>(RawLocalFileSystem.java:320)",
          "org.apache.iceberg.SnapshotProducer.commit(SnapshotProducer.java:410)",
          "app//org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec.doExecute(AdaptiveSparkPlanExec.scala:370)",
          "app//py4j.ClientServerConnection.waitForCommands(ClientServerConnection.java:181)"]
ANALYSIS = ["app//org.apache.spark.sql.catalyst.expressions.AttributeSet$.apply(AttributeSet.scala:40)",
            "app//org.apache.spark.sql.catalyst.rules.RuleExecutor.execute(RuleExecutor.scala:222)",
            "app//org.apache.spark.sql.catalyst.analysis.Analyzer.execute(Analyzer.scala:226)",
            "app//org.apache.spark.sql.execution.QueryExecution.$anonfun$analyzed$1(QueryExecution.scala:77)"]
TASK = ["java.base@17.0.15/java.io.FileOutputStream.open0(Native Method)",
        "app//org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:620)"]


def thread(name: str, state: str, frames: list[str]) -> dict:
    return {"threadId": 1, "threadName": name, "threadState": state, "stackTrace": {"elems": frames}}


DUMP = [thread("Thread-12", "RUNNABLE", COMMIT), thread("Thread-13", "RUNNABLE", PY4J_IDLE),
        thread("Thread-14", "RUNNABLE", ANALYSIS), thread("Thread-15", "WAITING", ANALYSIS),
        thread("Executor task launch worker for task 3.0 in stage 7.0 (TID 9)", "RUNNABLE", TASK),
        thread("dispatcher-event-loop-1", "RUNNABLE", ANALYSIS)]


def test_only_working_statement_task_and_iceberg_threads_are_kept() -> None:
    assert busy_stacks(DUMP) == [COMMIT, ANALYSIS, TASK]


def test_the_innermost_telling_frame_names_the_activity() -> None:
    assert activity(COMMIT) == "Iceberg commit (manifests, metadata file)"  # not the MERGE's execution around it
    assert activity(ANALYSIS) == "analysis"
    assert activity(TASK) == "Spark task (read, write, shuffle)"
    assert activity(["java.base@17.0.15/java.lang.Object.clone(Native Method)"]) == "other"


def test_the_report_gives_each_activity_its_share() -> None:
    text = report([COMMIT, ANALYSIS, ANALYSIS, TASK], dumps=3)
    assert "4 busy thread samples in 3 thread dumps" in text
    assert " 50.0%       2  analysis" in text
    assert " 25.0%       1  Iceberg commit" in text
    assert report([], dumps=5) == "JVM stacks: no busy thread in 5 thread dumps"


def test_the_sampler_collects_the_busy_stacks_of_each_dump() -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            assert self.path == "/api/v1/applications/app-1/executors/driver/threads"
            body = json.dumps(DUMP).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sampler = StackSampler(f"http://127.0.0.1:{server.server_port}/api/v1/applications/app-1", interval=0.01)
        sampler.start()
        deadline = time.monotonic() + 30
        while sampler.dumps < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        sampler.stop()
    finally:
        server.shutdown()
    assert sampler.dumps >= 3
    assert len(sampler.stacks) == 3 * sampler.dumps
    assert sampler.stacks[:3] == [COMMIT, ANALYSIS, TASK]
