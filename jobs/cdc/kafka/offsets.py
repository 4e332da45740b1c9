"""Partition metadata and watermarks, with plain confluent-kafka (no Spark): used by the planner and by Airflow.

The high watermark a batch plans to is the end a consumer reading with the job's isolation level reaches: after
ListOffsets, a fetch from there to end-of-partition confirms it (its EOF event carries the end). With
``isolation.level`` = read_committed (librdkafka's default) that end is the last stable offset, so records of an open
transaction (Kafka Connect's exactly-once source tasks write in transactions) are never planned, and the probe
costs one empty fetch per partition.

After each committed batch the ledger's offsets can also be committed to a consumer group named after the pipeline
(``commit_group``, ``batch.consumer_group_offsets``), so that Kafka's own lag tools (``kafka-consumer-groups.sh``,
Burrow, kafka-exporter) see how far the pipeline is. The ledger stays the only truth: nothing reads them back.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from cdc.common.errors import CdcError, ConfigError, KafkaUnavailable, TopicNotFound

_CONSUMER_DEFAULTS = {
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "latest",
    "fetch.wait.max.ms": 50,
    "socket.connection.setup.timeout.ms": 10_000,
}


def consumer_conf(kafka_conf: Mapping[str, Any], group: str = "cdc-iceberg") -> dict[str, Any]:
    """librdkafka consumer properties: ours first, the user's override (SASL/SSL etc. pass through)."""
    conf: dict[str, Any] = {"group.id": group, **_CONSUMER_DEFAULTS}
    conf.update(kafka_conf)
    conf["enable.auto.commit"] = False  # offsets live in the ledger, never in Kafka
    conf["enable.partition.eof"] = True
    return conf


def new_consumer(kafka_conf: Mapping[str, Any], **overrides: Any) -> Any:
    """A consumer that keeps the authentication and TLS errors librdkafka reports (``refused``)."""
    from confluent_kafka import Consumer, KafkaError

    class Watched(Consumer):
        refused: list[Any]
        about: dict[str, Any]  # the names a refusal message shows (never a secret)

    seen: list[Any] = []
    conf = consumer_conf(kafka_conf)
    conf.update(overrides)
    conf.setdefault("error_cb", lambda err: seen.append(err) if err.code() in (
        KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL) else None)
    consumer = Watched(conf)
    consumer.refused = seen
    consumer.about = {k: conf.get(k) for k in ("bootstrap.servers", "security.protocol", "sasl.mechanism",
                                               "sasl.username")}
    return consumer


def unreachable(consumer: Any, what: str, exc: BaseException) -> CdcError:
    """Why ``what`` failed: the broker refused the credentials or the TLS handshake (``ConfigError``: a person must
    fix ``kafka.*``; the message names the brokers, the protocol and the mechanism, never a secret), or it could not
    be reached (``KafkaUnavailable``: retry)."""
    from confluent_kafka import KafkaError

    try:
        consumer.poll(0)  # serves the error events librdkafka queued meanwhile
    except Exception:  # noqa: BLE001 - a closed consumer: nothing more to learn
        pass
    refused, about = getattr(consumer, "refused", []), getattr(consumer, "about", {})
    servers = about.get("bootstrap.servers") or "?"
    protocol = about.get("security.protocol") or "PLAINTEXT"
    if any(e.code() != KafkaError._SSL for e in refused):
        return ConfigError(
            f"{what}: Kafka at {servers} refused to authenticate user {about.get('sasl.username') or '?'} "
            f"(security.protocol {protocol}, sasl.mechanism {about.get('sasl.mechanism') or 'GSSAPI'}): invalid "
            "credentials or mechanism; fix kafka.sasl.username / kafka.sasl.password (the environment variable its "
            "${...} names) or kafka.sasl.mechanism, then rerun")
    if refused:
        return ConfigError(
            f"{what}: the TLS handshake with Kafka at {servers} failed (security.protocol {protocol}; "
            f"{refused[-1].str()}); check kafka.ssl.ca.location (the CA that signed the broker's certificate) and "
            "the broker's host name, then rerun")
    return KafkaUnavailable(f"{what}: cannot reach Kafka at {servers} ({exc}); check kafka.bootstrap.servers and "
                            "that the broker is up, then rerun")


def partitions(consumer: Any, topic: str, timeout: float = 10.0) -> list[int]:
    """Partition ids of ``topic``; ``TopicNotFound`` / ``KafkaUnavailable`` / ``ConfigError`` (credentials or TLS
    refused, ``unreachable``) with a clear message."""
    try:
        md = consumer.list_topics(topic, timeout=timeout)
    except Exception as exc:  # KafkaException: broker transport failure
        raise unreachable(consumer, f"topic {topic}: reading metadata", exc) from None
    t = md.topics.get(topic)
    if t is None or t.error is not None and t.error.code() in (3,):  # UNKNOWN_TOPIC_OR_PART
        raise TopicNotFound(f"topic {topic} does not exist on {md.orig_broker_name or 'the broker'}; check the "
                            "table's topic in the pipeline YAML and the Debezium connector")
    if t.error is not None:
        raise KafkaUnavailable(f"topic {topic}: metadata error {t.error}")
    return sorted(t.partitions)


def watermarks(consumer: Any, topic: str, parts: list[int], timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """``{partition: (low, high)}`` with the high watermark confirmed by a fetch (see module doc)."""
    from confluent_kafka import KafkaError, TopicPartition

    queried: dict[int, tuple[int, int]] = {}
    try:
        for p in parts:
            queried[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
    except Exception as exc:
        raise KafkaUnavailable(f"topic {topic}: cannot list offsets ({exc}); rerun when the broker is reachable") \
            from None
    if not parts:
        return {}
    consumer.assign([TopicPartition(topic, p, max(hi, lo)) for p, (lo, hi) in queried.items()])
    ends: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(ends) < len(parts):
            if time.monotonic() > deadline:
                missing = sorted(set(parts) - set(ends))
                raise KafkaUnavailable(f"topic {topic}: no end-of-partition from partitions {missing} within "
                                       f"{timeout:.0f}s; rerun when the broker is healthy")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                continue  # a record at/after the listed end: keep reading to the real end
            if err.code() == KafkaError._PARTITION_EOF:
                ends[msg.partition()] = msg.offset()
            elif err.code() in (KafkaError.OFFSET_OUT_OF_RANGE,):
                continue  # auto.offset.reset=latest repositions us
            elif not err.retriable():
                raise KafkaUnavailable(f"topic {topic} partition {msg.partition()}: {err.str()}")
    finally:
        consumer.unassign()
    return {p: (max(queried[p][0], 0), ends[p]) for p in parts}


def high_watermarks(kafka_conf: Mapping[str, Any], topic: str, timeout: float = 10.0) -> dict[int, int]:
    """``{partition: high watermark}`` for ``topic`` (the offset the next record will get)."""
    consumer = new_consumer(kafka_conf)
    try:
        wm = watermarks(consumer, topic, partitions(consumer, topic, timeout), timeout)
        return {p: hi for p, (_, hi) in wm.items()}
    finally:
        consumer.close()


def offsets_for_time(consumer: Any, topic: str, parts: list[int], ts_ms: int,
                     timeout: float = 10.0) -> dict[int, int | None]:
    """First offset with record timestamp >= ``ts_ms`` per partition (None: no such record yet)."""
    from confluent_kafka import TopicPartition

    try:
        found = consumer.offsets_for_times([TopicPartition(topic, p, ts_ms) for p in parts], timeout=timeout)
    except Exception as exc:
        raise KafkaUnavailable(f"topic {topic}: offsets_for_times failed ({exc})") from None
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in found}


def group_id(pipeline: str) -> str:
    """The consumer group the pipeline's offsets are committed to (``commit_group``)."""
    return f"cdc-iceberg.{pipeline}"


def commit_group(kafka_conf: Mapping[str, Any], group: str, topic: str, ends: Mapping[int, int],
                 timeout: float = 10.0) -> None:
    """Commit ``ends`` (partition → next offset to read) of ``topic`` for consumer group ``group``, without joining
    it (a standalone consumer's commit: no rebalance, no partitions taken from anybody). Raises on failure; the
    caller treats that as a warning."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**consumer_conf(kafka_conf, group), "socket.timeout.ms": int(timeout * 1000)})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in sorted(ends.items())], asynchronous=False)
    finally:
        consumer.close()


def is_compacted(kafka_conf: Mapping[str, Any], topic: str, timeout: float = 10.0) -> bool | None:
    """Does ``topic``'s ``cleanup.policy`` include ``compact``? None when the broker does not say (no
    DescribeConfigs permission, an old broker): the caller then treats it as not compacted and says so."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    conf = {k: v for k, v in consumer_conf(kafka_conf).items() if k not in _CONSUMER_ONLY}
    try:
        admin = AdminClient(conf)  # referenced until the future resolves (a collected client cancels it)
        found = admin.describe_configs([ConfigResource("topic", topic)], request_timeout=timeout)
        entries = next(iter(found.values())).result(timeout)
    except Exception:
        return None
    policy = entries.get("cleanup.policy")
    return policy is not None and "compact" in str(policy.value)


def topic_id(kafka_conf: Mapping[str, Any], topic: str, timeout: float = 10.0) -> str | None:
    """Kafka's id of ``topic`` (a UUID the broker gives each topic at creation: a topic deleted and created again
    under its name gets a new one). None when the broker does not say (no DescribeTopics permission, an old
    broker): the caller cannot tell the topics apart then."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    conf = {k: v for k, v in consumer_conf(kafka_conf).items() if k not in _CONSUMER_ONLY}
    try:
        admin = AdminClient(conf)  # referenced until the future resolves
        found = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)
        tid = found[topic].result(timeout).topic_id
    except Exception:
        return None
    return str(tid) if tid is not None else None


_CONSUMER_ONLY = ("group.id", "enable.auto.commit", "enable.partition.eof", "auto.offset.reset", "fetch.wait.max.ms",
                  "isolation.level", "session.timeout.ms", "max.poll.interval.ms", "fetch.min.bytes",
                  "fetch.max.bytes", "max.partition.fetch.bytes", "auto.commit.interval.ms", "group.instance.id",
                  "partition.assignment.strategy")
