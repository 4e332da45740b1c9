"""A real Kafka Connect worker (distributed mode) with Debezium's connectors, for tests and the demo: the chain users
run, PostgreSQL → Debezium → Kafka, on this machine.

The worker is Apache Kafka's own ``ConnectDistributed`` from the jar set ``kafka-connect`` (``devtools/jars/``, fetched
by ``devtools.maven``), its internal topics on the given broker, its REST API on a loopback port. Each connector
plugin is a jar set of its own on ``plugin.path`` (``debezium-postgres``). Connectors are created through the REST
API (``create``), and ``wait_running`` waits until the connector and its task run.

``Marker`` tells when the changes made so far have reached Kafka: it writes a row to a small table the connector
captures and waits until that row's change event is in its topic. Debezium sends a database's changes in commit
order, so every change committed before the marker has been sent by then.

    with ConnectWorker(broker.bootstrap) as connect:
        connect.create("inventory", postgres_connector(pg, "dbserver1", ["public.customers"]))
        connect.wait_running("inventory")
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Mapping, Sequence

from devtools import maven
from devtools.broker import HOST, end_process, free_ports

WORKER_JARS = "kafka-connect"
PLUGINS = ("debezium-postgres", "confluent-avro")
JVM_OPTIONS = ("-Xms128m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
LOG4J = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.io.debezium=INFO
log4j.logger.org.apache.kafka.connect.runtime.WorkerSourceTask=INFO
log4j.logger.org.apache.kafka.connect.runtime.Connect=INFO
"""
JSON = {"key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}


def avro_converters(registry_url: str) -> dict[str, str]:
    """A connector's settings for Confluent's AvroConverter (jar set ``confluent-avro``) with a Confluent-API schema
    registry at ``registry_url``: keys and values in the Confluent wire format, subjects ``<topic>-key``/``-value``."""
    return {"key.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "key.converter.schema.registry.url": registry_url, "value.converter.schema.registry.url": registry_url}


class ConnectError(RuntimeError):
    """The worker or a connector did not do what was asked (the message holds the REST answer or the task's trace)."""


def worker_properties(bootstrap: str, port: int, group: str, plugin_path: Sequence[Path]) -> str:
    props = {
        "bootstrap.servers": bootstrap, "group.id": group,
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status", "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
        "offset.storage.partitions": "1", "status.storage.partitions": "1",
        **JSON, "offset.flush.interval.ms": "500", "listeners": f"http://{HOST}:{port}",
        "rest.advertised.host.name": HOST, "rest.advertised.port": str(port),
        "plugin.path": ",".join(str(p) for p in plugin_path), "plugin.discovery": "only_scan",
        "scheduled.rebalance.max.delay.ms": "1000", "task.shutdown.graceful.timeout.ms": "5000",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class ConnectWorker:
    """One Kafka Connect worker process owned by this Python process."""

    def __init__(self, bootstrap: str, plugins: Sequence[str] = PLUGINS, log_path: str | Path | None = None,
                 group: str | None = None, port: int | None = None, home: Path | None = None,
                 detach: bool = False) -> None:
        """``home``/``port``: a fixed folder and REST port (default: a temp folder, a free port); ``detach``: the
        worker runs in a session of its own and outlives this process (the demo; ``pid`` for its pidfile)."""
        self.bootstrap = bootstrap
        self.plugins = tuple(plugins)
        self.group = group or f"connect-{uuid.uuid4().hex[:8]}"
        self._log_path = log_path
        self._home: Path | None = home
        self._port: int | None = port
        self._detach = detach
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("worker not started")
        return f"http://{HOST}:{self._port}"

    def start(self, timeout: float = 120.0) -> ConnectWorker:
        if self._proc is not None:
            return self
        if self._home is None:
            self._home = Path(tempfile.mkdtemp(prefix="cdc-connect-"))
        self._home.mkdir(parents=True, exist_ok=True)
        if self._port is None:
            [self._port] = free_ports(1)
        plugins = self._home / "plugins"  # plugin.path: a folder of plugins, each a folder of its jars
        plugins.mkdir(exist_ok=True)
        for name in self.plugins:
            link = plugins / name
            if not link.exists():
                link.symlink_to(maven.jars(name), target_is_directory=True)
        (self._home / "worker.properties").write_text(
            worker_properties(self.bootstrap, self._port, self.group, [plugins]))
        (self._home / "log4j.properties").write_text(LOG4J)
        argv = [shutil.which("java") or "java", *JVM_OPTIONS,
                f"-Dlog4j.configuration=file:{self._home / 'log4j.properties'}",
                "-cp", maven.classpath(WORKER_JARS), "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self._home / "worker.properties")]
        self._log = open(self._log_path, "ab") if self._log_path else None  # noqa: SIM115
        sink: IO[bytes] | int = self._log if self._log is not None else subprocess.DEVNULL
        self._proc = subprocess.Popen(argv, stdout=sink, stderr=sink, stdin=subprocess.DEVNULL,
                                      start_new_session=self._detach)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()  # never leave a half-started worker behind
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is None or self._proc.poll() is not None:
                raise ConnectError(f"the Connect worker exited; see {self._log_path}")
            try:
                # the plugins are scanned before the REST API answers; the herder joins its group after
                if "version" in self._get("/") and any(
                        p["class"].startswith("io.debezium") for p in self._get("/connector-plugins")):
                    return
            except (OSError, ConnectError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Connect worker at {self.url} not ready after {timeout}s")
            time.sleep(0.5)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self, grace: float = 30.0) -> None:
        self._end(signal.SIGTERM, grace)
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def kill(self) -> None:
        """SIGKILL the worker (a crash: no offsets flushed since the last flush); ``start`` brings it back with its
        connectors, which resume from the committed offsets (at-least-once: some changes arrive again)."""
        self._end(signal.SIGKILL, 30.0)

    def _end(self, sig: int, grace: float) -> None:
        end_process(self._proc, self._log, sig, grace)
        self._proc = self._log = None

    def __enter__(self) -> ConnectWorker:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------ REST API

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - loopback
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise ConnectError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from None
        return json.loads(raw) if raw else None

    def _get(self, path: str) -> Any:
        return self._request("GET", path)

    def create(self, name: str, config: Mapping[str, str]) -> None:
        """Create (or reconfigure) connector ``name``."""
        deadline = time.monotonic() + 60
        while True:
            try:
                self._request("PUT", f"/connectors/{name}/config", dict(config))
                return
            except ConnectError as exc:  # 409: the worker is still joining its group (a rebalance)
                if "HTTP 409" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def delete(self, name: str) -> None:
        self._request("DELETE", f"/connectors/{name}")

    def restart(self, name: str) -> None:
        """Restart the connector and its tasks (``POST /connectors/<name>/restart?includeTasks=true``)."""
        self._request("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=false")

    def status(self, name: str) -> dict[str, Any]:
        return self._get(f"/connectors/{name}/status")

    def wait_running(self, name: str, timeout: float = 120.0) -> None:
        """Until the connector and all its tasks are RUNNING; a FAILED task raises with its trace."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = self.status(name)
            except ConnectError as exc:
                last = str(exc)
            else:
                tasks = last.get("tasks") or []
                failed = [t for t in tasks if t.get("state") == "FAILED"]
                if failed:
                    raise ConnectError(f"connector {name}: task failed: {failed[0].get('trace', '')[:3000]}")
                if last["connector"]["state"] == "RUNNING" and tasks and all(t["state"] == "RUNNING" for t in tasks):
                    return
            time.sleep(0.5)
        raise TimeoutError(f"connector {name} not running after {timeout}s: {last}")


def postgres_connector(pg: Any, prefix: str, tables: Sequence[str], database: str = "postgres",
                       **settings: str) -> dict[str, str]:
    """A Debezium PostgreSQL connector's configuration for ``devtools.postgres.LocalPostgres`` (pgoutput, its own
    slot and publication; JsonConverter with schemas, unless ``settings`` say otherwise)."""
    slot = f"slot_{prefix}".replace("-", "_").replace(".", "_").lower()
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector", "tasks.max": "1",
        "plugin.name": "pgoutput", "database.hostname": HOST, "database.port": str(pg.port),
        "database.user": "postgres", "database.password": "", "database.dbname": database,
        "topic.prefix": prefix, "table.include.list": ",".join(tables), "slot.name": slot,
        "publication.name": f"pub_{slot}", "publication.autocreate.mode": "filtered",
        "snapshot.mode": "initial", "tombstones.on.delete": "true", **JSON, **settings,
    }


class Marker:
    """Tells when the source changes made so far have reached Kafka (see the module doc): ``sync()`` commits a new
    value to the marker table ``<schema>.cdc_marker`` and waits until its change event is in the marker's topic."""

    TABLE = "public.cdc_marker"

    def __init__(self, pg: Any, bootstrap: str, prefix: str, database: str = "postgres",
                 registry_url: str | None = None) -> None:
        self.pg, self.bootstrap, self.database = pg, bootstrap, database
        self.topic = f"{prefix}.{self.TABLE}"
        self._n = 0
        self._avro: Any = None
        if registry_url:  # the connector writes Confluent Avro
            from confluent_kafka.schema_registry import SchemaRegistryClient
            from confluent_kafka.schema_registry.avro import AvroDeserializer

            self._avro = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        pg.execute(f"CREATE TABLE IF NOT EXISTS {self.TABLE} (id int PRIMARY KEY, n bigint)", database=database)
        pg.execute(f"INSERT INTO {self.TABLE} VALUES (1, 0) ON CONFLICT (id) DO NOTHING", database=database)

    def sync(self, timeout: float = 60.0) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self._n += 1
        self.pg.execute(f"UPDATE {self.TABLE} SET n = {self._n} WHERE id = 1", database=self.database)
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"marker-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                md = consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
                if md is not None and md.error is None and md.partitions:
                    break
                time.sleep(0.2)
            consumer.assign([TopicPartition(self.topic, p, 0) for p in md.partitions])
            while time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=0.5):
                    if msg.error() or msg.value() is None:
                        continue
                    after = (self.decode(msg.value()) or {}).get("after") or {}
                    if after.get("n") == self._n:
                        return
        finally:
            consumer.close()
        raise TimeoutError(f"the marker change {self._n} did not reach {self.topic} within {timeout}s")

    def decode(self, value: bytes) -> dict[str, Any] | None:
        """A value the connector wrote (JsonConverter with or without schemas, or Confluent Avro) as a dict."""
        if self._avro is not None and value[:1] == b"\x00":
            from confluent_kafka.serialization import MessageField, SerializationContext

            return self._avro(value, SerializationContext(self.topic, MessageField.VALUE))
        doc = json.loads(value)
        return doc.get("payload") if isinstance(doc, dict) and "payload" in doc and "schema" in doc else doc
