"""The topics on the broker: listing them and resolving a pipeline's ``topic_pattern`` entries against them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from cdc.common.errors import KafkaUnavailable
from cdc.config.model import PipelineConfig
from cdc.config.routing import resolve
from cdc.kafka.offsets import new_consumer


def list_topics(kafka_conf: Mapping[str, Any], timeout: float = 10.0) -> list[str]:
    """The broker's topic names (cluster metadata). ``KafkaUnavailable`` when the broker cannot be asked."""

    consumer = None
    try:
        consumer = new_consumer(kafka_conf)
        md = consumer.list_topics(timeout=timeout)
        return sorted(name for name, t in md.topics.items() if t.error is None or t.error.code() != 3)
    except Exception as exc:  # KafkaException: transport failure, timeout
        raise KafkaUnavailable(f"topic_pattern: cannot list the broker's topics ({exc}); check "
                               "kafka.bootstrap.servers and that the broker is up, then rerun") from None
    finally:
        if consumer is not None:
            consumer.close()


def resolve_pipeline(cfg: PipelineConfig, topics: Iterable[str] | None = None,
                     timeout: float | None = None) -> PipelineConfig:
    """``cfg`` with its pattern entries resolved against ``topics`` (default: the broker's). A config without
    patterns is returned as is, without asking the broker."""
    if not cfg.has_patterns:
        return cfg
    if topics is None:
        topics = list_topics(cfg.kafka, timeout if timeout is not None else cfg.batch.read_timeout_seconds)
    return replace(cfg, tables=resolve(cfg.tables, topics, cfg.source_path, cfg.metadata_namespace))
