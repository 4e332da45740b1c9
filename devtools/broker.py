"""The local Apache Kafka broker of tests, the demo and benchmarks: a real KRaft broker (broker + controller in one
JVM, single node), from the ``kafka_2.13`` jars that ``devtools.maven`` fetches from Maven Central once into the
shared jar cache.

Each broker keeps its log in a folder of its own (a temporary one unless given): the real log cleaner, retention and
segment settings apply, topic by topic (``create_topic(..., config={"cleanup.policy": "compact", ...})``); the
cleaner and the retention check run every second so that tests see them act. ``restart()`` stops the JVM and starts
it again on the same ports and log (a broker restart in the middle of a batch). It starts in about 4 seconds.

A broker detached from its starter, tracked by a pidfile (``make demo``): ``devtools.broker_daemon``.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Mapping

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devtools import broker_security as security_mod
from devtools import maven

HOST = "127.0.0.1"
JAR_SET = "kafka-broker"  # devtools/jars/kafka-broker.pom.xml
JVM_OPTIONS = ("-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
# What a one-node test broker needs beyond Kafka's defaults: internal topics of one replica, no rebalance delay, and a
# cleaner / retention check that act within seconds (topics opt in with their own segment.ms / retention.ms).
SETTINGS = {
    "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0", "num.partitions": "1", "auto.create.topics.enable": "true",
    "log.retention.check.interval.ms": "1000", "log.cleaner.backoff.ms": "500",
    "log.segment.delete.delay.ms": "100", "file.delete.delay.ms": "100", "log.initial.task.delay.ms": "0",
}
LOG4J = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.log.LogCleaner=INFO
"""


def free_port() -> int:
    """Ask the kernel for an unused loopback TCP port (racy, so callers retry on bind failure)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, besides: tuple[int, ...] = ()) -> list[int]:
    """``count`` distinct unused loopback ports, none of ``besides`` (each held open while the next is picked)."""
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            if sock.getsockname()[1] in besides:
                sock.close()
                continue
            held.append(sock)
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for sock in held:
            sock.close()


def end_process(proc: subprocess.Popen[bytes] | None, log: IO[bytes] | None, sig: int = signal.SIGTERM,
                grace: float = 30.0) -> None:
    """Send ``sig`` to a child JVM (SIGKILL after ``grace`` seconds) and close its log."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)
    if log is not None:
        log.close()


def port_in_use(port: int) -> bool:
    """True if something already listens on the loopback port (a broker started there would not be ours)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR: TIME_WAIT leftovers of a previous broker must not count as "in use".
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return _port_open(port)


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((HOST, port)) == 0


def server_properties(log_dir: Path, port: int, controller_port: int, extra: Mapping[str, str] | None = None) -> str:
    """The broker's ``server.properties``: KRaft, one node that is its own controller, on loopback only."""
    props = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT", "log.dirs": str(log_dir / "log"), **SETTINGS, **(extra or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def prepare(home: Path, port: int, controller_port: int, extra: Mapping[str, str] | None = None) -> list[str]:
    """Write the broker's configuration under ``home`` and format its log (KRaft storage) once; the command line
    that runs it."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "server.properties").write_text(server_properties(home, port, controller_port, extra))
    (home / "log4j.properties").write_text(LOG4J)
    java = shutil.which("java") or "java"
    base = [java, *JVM_OPTIONS, f"-Dlog4j.configuration=file:{home / 'log4j.properties'}", "-cp",
            maven.classpath(JAR_SET)]
    if not (home / "log" / "meta.properties").exists():
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        proc = subprocess.run([*base, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster}", "-c",
                               str(home / "server.properties")], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka storage format failed: {proc.stdout}{proc.stderr}")
    return [*base, "kafka.Kafka", str(home / "server.properties")]


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def wait_until_ready(bootstrap: str, timeout: float = 60.0, alive: Any = None) -> None:
    """Block until ``bootstrap`` accepts TCP connections and answers a Metadata request.

    ``alive`` is an optional callable returning False once the process died, so
    that a broker that failed to bind fails fast instead of timing out.
    """
    port = int(bootstrap.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout
    while not _port_open(port):
        if alive is not None and not alive():
            raise RuntimeError(f"the broker exited before listening on {bootstrap}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker at {bootstrap} did not open its port within {timeout}s")
        time.sleep(0.01)
    remaining = max(deadline - time.monotonic(), 1.0)
    metadata = admin_client(bootstrap).list_topics(timeout=remaining)
    if not metadata.brokers:
        raise RuntimeError(f"broker at {bootstrap} returned metadata without brokers")


def create_topic(bootstrap: str, name: str, partitions: int = 1, timeout: float = 10.0,
                 config: Mapping[str, str] | None = None) -> None:
    """Create ``name`` (replication factor 1, topic ``config`` such as ``cleanup.policy``) and wait until metadata
    shows every partition."""
    admin = admin_client(bootstrap)
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=dict(config or {}))])
    futures[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        topic = admin.list_topics(topic=name, timeout=timeout).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} not visible with {partitions} partitions after {timeout}s")
        time.sleep(0.02)


def read_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int | None = None,
    idle_timeout: float = 1.0,
    timeout: float = 30.0,
) -> list[Message]:
    """Read a topic from offset 0 of every partition with ``assign()`` (no group join).

    Stops when ``expected`` messages were read, or (if ``expected`` is None) when
    nothing arrived for ``idle_timeout`` seconds. Messages are returned in arrival order;
    per-partition order is preserved.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"devtools-reader-{os.getpid()}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        last_data = time.monotonic()
        while expected is None or len(out) < expected:
            now = time.monotonic()
            if now > deadline:
                if expected is not None:
                    raise TimeoutError(f"read {len(out)} of {expected} messages from {topic} in {timeout}s")
                break
            if expected is None and now - last_data > idle_timeout:
                break
            batch = consumer.consume(num_messages=10000, timeout=0.1)
            for msg in batch:
                if msg.error():
                    raise KafkaException(msg.error())
                out.append(msg)
            if batch:
                last_data = time.monotonic()
        return out
    finally:
        consumer.close()


class LocalBroker:
    """An Apache Kafka broker owned by this Python process (one per test session is typical).

    Usage::

        with LocalBroker() as broker:
            broker.create_topic("t", partitions=3)
            Producer({"bootstrap.servers": broker.bootstrap})

    ``home``: the folder of its configuration and log (default: a temporary folder, removed by ``stop``).
    ``settings``: broker properties over ``SETTINGS``. ``security="sasl_ssl"``: a SASL_SSL listener besides the
    plaintext one (SCRAM-SHA-512 user ``sasl_user``, a random password unless given, over TLS with a CA made at start:
    ``devtools.broker_security``); ``client_conf()`` reaches the broker through it.
    """

    def __init__(self, port: int | None = None, log_path: str | os.PathLike[str] | None = None,
                 home: str | os.PathLike[str] | None = None, settings: Mapping[str, str] | None = None,
                 security: str | None = None, sasl_user: str = "cdc", sasl_password: str | None = None) -> None:
        if security not in (None, "sasl_ssl"):
            raise ValueError(f"security {security!r}: only None or 'sasl_ssl'")
        self.security, self.sasl_user = security, sasl_user
        self.sasl_password = sasl_password or (security_mod.new_password() if security else None)
        self._sasl_port: int | None = None
        self._tls: security_mod.Tls | None = None
        self._requested_port = port
        self._port: int | None = port
        self._controller_port: int | None = None
        self._log_path = log_path
        self._home = Path(home) if home else None
        self._own_home = home is None
        self._settings = dict(settings or {})
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("broker not started")
        return self._port

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def home(self) -> Path:
        if self._home is None:
            raise RuntimeError("broker not started")
        return self._home

    def start(self, timeout: float = 60.0) -> LocalBroker:
        """Start the JVM and wait until it serves metadata. Retries on a port race when the ports were auto-picked."""
        if self._proc is not None:
            return self
        if self._home is None:
            self._home = Path(tempfile.mkdtemp(prefix="cdc-kafka-"))
        if self._port is not None and self._controller_port is not None:  # a restart: the same ports and log
            deadline = time.monotonic() + timeout
            while (port_in_use(self._port) or port_in_use(self._controller_port)) and time.monotonic() < deadline:
                time.sleep(0.2)  # the stopped JVM's sockets are still closing
        attempts = 1 if self._requested_port is not None or self._port is not None else 5
        for attempt in range(attempts):
            if self._port is None or self._controller_port is None:
                if self._requested_port is not None:
                    self._port, self._controller_port = self._requested_port, free_ports(1, (self._requested_port,))[0]
                else:
                    self._port, self._controller_port = free_ports(2)
            if port_in_use(self._port) or port_in_use(self._controller_port):
                if attempt == attempts - 1:
                    raise RuntimeError(f"port {self._port} or {self._controller_port} is already in use")
                self._port = self._controller_port = None
                continue
            argv = prepare(self._home, self._port, self._controller_port, {**self._secured(), **self._settings})
            self._log = open(self._log_path, "ab") if self._log_path else None  # noqa: SIM115
            sink: IO[bytes] | int = self._log if self._log is not None else subprocess.DEVNULL
            self._proc = subprocess.Popen(argv, stdout=sink, stderr=sink, stdin=subprocess.DEVNULL)
            proc = self._proc
            try:
                wait_until_ready(self.bootstrap, timeout, alive=lambda: proc.poll() is None)
                if self.security:
                    security_mod.add_scram_user(self.admin(), self.sasl_user, str(self.sasl_password))
                return self
            except Exception:
                self._kill()
                if attempt == attempts - 1:
                    raise
                self._port = self._controller_port = None
        return self

    def _secured(self) -> dict[str, str]:
        """The SASL_SSL listener's properties (none without ``security``); its port is kept across restarts."""
        if not self.security:
            return {}
        if self._sasl_port is None or self._sasl_port in (self._port, self._controller_port):
            self._sasl_port = free_ports(1, (self.port, int(self._controller_port or 0)))[0]
        self._tls = security_mod.make_tls(self.home)
        return security_mod.listener_settings(HOST, self.port, self._sasl_port, int(self._controller_port or 0),
                                              self._tls)

    def client_conf(self) -> dict[str, str]:
        """librdkafka properties through the SASL_SSL listener (``security="sasl_ssl"``)."""
        if self._tls is None or self._sasl_port is None:
            raise RuntimeError("broker not started with security='sasl_ssl'")
        return security_mod.client_conf(HOST, self._sasl_port, self.sasl_user, str(self.sasl_password), self._tls)

    def restart(self, down_seconds: float = 0.0, timeout: float = 60.0) -> None:
        """Stop the broker (SIGTERM: a clean shutdown) and start it again on the same ports and log."""
        self._kill()
        time.sleep(down_seconds)
        self.start(timeout)

    def _kill(self, grace: float = 30.0) -> None:
        end_process(self._proc, self._log, grace=grace)
        self._proc = self._log = None

    def stop(self, grace: float = 30.0) -> None:
        """Stop the JVM by PID (SIGTERM, then SIGKILL after ``grace`` seconds); a temporary log is removed."""
        self._kill(grace)
        self._port, self._controller_port, self._sasl_port = self._requested_port, None, None
        if self._own_home and self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 10.0,
                     config: Mapping[str, str] | None = None) -> None:
        create_topic(self.bootstrap, name, partitions, timeout, config)

    def admin(self) -> AdminClient:
        return admin_client(self.bootstrap)

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
