"""The topics on the broker: listing them and resolving a pipeline's ``topic_pattern`` entries against them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from cdc.common.errors import ConfigError, KafkaUnavailable
from cdc.config.model import PipelineConfig, TableConfig
from cdc.config.routing import Unresolved, resolve_isolated
from cdc.kafka.offsets import new_consumer, unreachable


def list_topics(kafka_conf: Mapping[str, Any], timeout: float = 10.0) -> list[str]:
    """The broker's topic names (cluster metadata). ``KafkaUnavailable`` when the broker cannot be asked."""

    consumer = None
    try:
        consumer = new_consumer(kafka_conf)
        md = consumer.list_topics(timeout=timeout)
        return sorted(name for name, t in md.topics.items() if t.error is None or t.error.code() != 3)
    except Exception as exc:  # KafkaException: transport failure, timeout; refused credentials or TLS
        if consumer is None:
            raise KafkaUnavailable(f"topic_pattern: cannot list the broker's topics ({exc}); check "
                                   "kafka.bootstrap.servers and that the broker is up, then rerun") from None
        raise unreachable(consumer, "topic_pattern: cannot list the broker's topics", exc) from None
    finally:
        if consumer is not None:
            consumer.close()


def resolve_pipeline(cfg: PipelineConfig, topics: Iterable[str] | None = None,
                     timeout: float | None = None) -> PipelineConfig:
    """``cfg`` with its pattern entries resolved against ``topics`` (default: the broker's); an ambiguous topic is a
    ``ConfigError`` (jobs that need every table: maintenance, bootstrap). A config without patterns is returned as
    is, without asking the broker."""
    routes = route_pipeline(cfg, topics, timeout)
    if routes.unresolved:
        raise ConfigError(routes.unresolved[0].error)
    return routes.cfg


@dataclass(frozen=True)
class Routes:
    """A pipeline resolved now: ``cfg`` with the tables that run, and the topics set aside as ambiguous
    (``cdc.config.routing.Unresolved``), which the ingest job reports as failed tables while the others run."""

    cfg: PipelineConfig
    unresolved: tuple[Unresolved, ...] = ()

    def select(self, names: list[str] | None) -> tuple[tuple[TableConfig, ...], tuple[Unresolved, ...]]:
        """The tables ``names`` select (targets, topics or table names; none: all) and the set-aside ones they name;
        a name neither knows is the ``ConfigError`` of ``PipelineConfig.select``."""
        if not names:
            return self.cfg.tables, self.unresolved

        def named(t: TableConfig, n: str) -> bool:
            return n in (t.target, t.topic, t.table)

        aside = tuple(u for u in self.unresolved if any(named(u.table, n) for n in names))
        run = [n for n in names if any(named(t, n) for t in self.cfg.tables) or not any(named(u.table, n)
                                                                                        for u in aside)]
        return (self.cfg.select(run) if run else ()), aside


def route_pipeline(cfg: PipelineConfig, topics: Iterable[str] | None = None,
                   timeout: float | None = None) -> Routes:
    """``resolve_pipeline`` that sets ambiguous topics aside instead of raising (``cdc.config.routing``)."""
    if not cfg.has_patterns:
        return Routes(cfg)
    if topics is None:
        topics = list_topics(cfg.kafka, timeout if timeout is not None else cfg.batch.read_timeout_seconds)
    tables, unresolved = resolve_isolated(cfg.tables, topics, cfg.source_path, cfg.metadata_namespace)
    return Routes(replace(cfg, tables=tables), unresolved)
