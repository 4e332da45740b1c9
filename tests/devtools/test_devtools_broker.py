"""LocalBroker: a real Apache Kafka broker (KRaft) from the Maven jar cache: lifecycle, topics, produce/consume,
restart, the log cleaner and retention acting within seconds, the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from devtools import maven
from devtools.broker import LocalBroker, free_port, read_topic
from devtools.broker_daemon import daemon_stop

REPO = Path(__file__).resolve().parents[2]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def send(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(10) == 0


def test_the_broker_runs_from_the_jar_cache() -> None:
    jars = maven.jars("kafka-broker")
    assert any(p.name.startswith("kafka_2.13-4.") for p in jars.glob("*.jar"))
    assert maven.jars("kafka-broker") == jars  # fetched once, then reused


def test_lifecycle_and_context_manager() -> None:
    with LocalBroker() as b:
        host, port = b.bootstrap.split(":")
        assert host == "127.0.0.1" and _port_open(int(port))
        assert b.admin().list_topics(timeout=5).brokers
        pid, home = b.pid, b.home
        assert pid is not None and (home / "log" / "meta.properties").exists()
    assert not _port_open(int(port)) and not home.exists()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_create_topic_produce_and_read_back(broker: LocalBroker, topic_name: str) -> None:
    broker.create_topic(topic_name, partitions=3)
    md = broker.admin().list_topics(topic=topic_name, timeout=5)
    assert sorted(md.topics[topic_name].partitions) == [0, 1, 2]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(30):
        producer.produce(topic_name, key=b"k%d" % i, value=None if i % 7 == 0 else b"v%d" % i, partition=i % 3)
    assert producer.flush(10) == 0
    msgs = read_topic(broker.bootstrap, topic_name, partitions=3, expected=30)
    got = sorted((m.partition(), m.offset(), m.key(), m.value()) for m in msgs)
    assert [g[2] for g in got if g[0] == 1] == [b"k%d" % i for i in range(1, 30, 3)]  # partition order kept
    assert sum(1 for g in got if g[3] is None) == 5  # tombstones survive
    assert read_topic(broker.bootstrap, topic_name, 3, idle_timeout=0.3).__len__() == 30
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 10)  # Kafka's watermarks are exact


def test_restart_keeps_the_log_and_the_address() -> None:
    with LocalBroker() as b:
        b.create_topic("kept", partitions=1)
        send(b.bootstrap, "kept", [(b"k", b"%d" % i) for i in range(5)])
        before = b.bootstrap
        b.restart()
        assert b.bootstrap == before
        assert [m.value() for m in read_topic(b.bootstrap, "kept", 1, expected=5)] == [b"%d" % i for i in range(5)]


def test_the_log_cleaner_compacts_and_retention_deletes_within_seconds(broker: LocalBroker, topic_name: str) -> None:
    """What the compacted-topic and retention scenarios rely on: the real cleaner drops superseded values and, after
    ``delete.retention.ms``, the tombstones; retention moves the log start offset."""
    compacted, short = topic_name + "_c", topic_name + "_r"
    broker.create_topic(compacted, config={"cleanup.policy": "compact", "segment.ms": "100",
                                           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100",
                                           "min.compaction.lag.ms": "0"})
    broker.create_topic(short, config={"retention.ms": "100", "segment.ms": "100"})
    send(broker.bootstrap, compacted, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None)])
    send(broker.bootstrap, short, [(b"x", b"1"), (b"y", b"2")])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.5)  # the active segment is never cleaned: a later record rolls it (segment.ms has passed)
        send(broker.bootstrap, compacted, [(b"z", b"roll")])
        send(broker.bootstrap, short, [(b"z", b"roll")])
        kept = [(m.key(), m.value()) for m in read_topic(broker.bootstrap, compacted, 1, idle_timeout=0.5)]
        head = [kv for kv in kept if kv[0] != b"z"]
        if head == [(b"a", b"2")] and watermarks(broker.bootstrap, short)[0] >= 2:
            break
    assert head == [(b"a", b"2")]  # b's value and then its tombstone are gone, a keeps its newest value
    assert watermarks(broker.bootstrap, short)[0] >= 2  # records past retention.ms: deleted, log start moved


def test_cli_start_stop(tmp_path: Path) -> None:
    port, pidfile = free_port(), tmp_path / "broker.pid"
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "devtools.broker_daemon", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)

    out = cli("start", "--port", str(port), "--pidfile", str(pidfile))
    try:
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"127.0.0.1:{port}"
        pid = int(pidfile.read_text())
        assert _port_open(port) and Path(f"/proc/{pid}").exists()
        again = cli("start", "--port", str(port), "--pidfile", str(pidfile))
        assert again.returncode != 0 and "already running" in again.stderr
        stop = cli("stop", "--pidfile", str(pidfile))
        assert stop.returncode == 0, stop.stderr
        assert not _port_open(port) and not pidfile.exists()
    finally:
        daemon_stop(str(pidfile))


def test_start_fails_fast_when_port_taken(broker: LocalBroker) -> None:
    with pytest.raises(RuntimeError, match="in use"):
        LocalBroker(port=broker.port).start(timeout=5)
