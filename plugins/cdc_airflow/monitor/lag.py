"""Consumer lag per table and partition: high watermark (broker) minus committed offset (Iceberg ledger)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from cdc.config.names import ledger_identifier
from cdc_airflow.monitor.ledger import Row, committed_offsets, read_rows

if TYPE_CHECKING:
    from cdc.config.model import PipelineConfig, TableConfig

WatermarksFn = Callable[[Mapping[str, Any], str], Mapping[int, int]]


def lag(watermarks: Mapping[int, int], committed: Mapping[int, int]) -> dict[int, int]:
    """Per-partition consumer lag: high watermark minus committed offset (never negative)."""
    return {p: max(0, hw - committed.get(p, 0)) for p, hw in sorted(watermarks.items())}


@dataclass(frozen=True)
class TableLag:
    table: str
    topic: str
    committed: dict[int, int]
    watermarks: dict[int, int] = field(default_factory=dict)
    error: str | None = None  # the broker could not be asked

    @property
    def lag(self) -> dict[int, int]:
        return lag(self.watermarks, self.committed)

    @property
    def total(self) -> int:
        return sum(self.lag.values())


def default_watermarks(kafka_conf: Mapping[str, Any], topic: str) -> Mapping[int, int]:
    from cdc.kafka.offsets import high_watermarks  # confluent_kafka: run time only, never at DAG parse time

    return high_watermarks(dict(kafka_conf), topic, timeout=10)


def read_ledger(cfg: "PipelineConfig") -> list[Row]:
    return read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)


def table_lags(cfg: "PipelineConfig", tables: Sequence["TableConfig"], ledger_rows: Iterable[Row] | None = None,
               watermarks: WatermarksFn | None = None, raise_errors: bool = True) -> dict[str, TableLag]:
    """Lag of each table. With ``raise_errors=False`` a broker error is kept in ``TableLag.error`` instead."""
    rows = list(read_ledger(cfg) if ledger_rows is None else ledger_rows)
    fetch = watermarks or default_watermarks
    out: dict[str, TableLag] = {}
    for t in tables:
        committed = committed_offsets(rows, t.target).get(t.topic, {})
        try:
            wm = {int(p): int(o) for p, o in fetch(cfg.kafka, t.topic).items()}
        except Exception as exc:  # noqa: BLE001 - reported per table; the caller decides
            if raise_errors:
                raise
            out[t.target] = TableLag(t.target, t.topic, committed, error=f"{type(exc).__name__}: {exc}")
            continue
        out[t.target] = TableLag(t.target, t.topic, committed, wm)
    return out
