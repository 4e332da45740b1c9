"""Optional statsd metrics of the job and of the Airflow side: per-batch counters and phase timers, lag gauges.

Configured by the pipeline YAML's ``metrics:`` section (validated here, not by ``cdc.config``, which keeps the section
as written in ``PipelineConfig.sections``; ``${ENV}`` substitution works as everywhere else)::

    metrics: {statsd_host: 127.0.0.1, statsd_port: 8125, prefix: cdc}

Nothing is sent when ``statsd_host`` is unset. Names: ``<prefix>.<pipeline>.<namespace>.<table>.<metric>``.
Per committed batch: counters ``batches``, ``events_read``, ``events_skipped``, ``dead_letters``, ``inserted``,
``updated``, ``deleted``; timers ``phase.<phase>`` and ``batch`` (ms). The Airflow side adds gauges ``lag_events``
and ``lag_seconds`` per table. The plain statsd line protocol over UDP (what the ``statsd`` client package speaks;
it is not installed with this Airflow, so the few lines are here): fire and forget, never fails a batch.

Standard library only (the Airflow side imports it while parsing DAG files).
"""

from __future__ import annotations

import logging
import re
import socket
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cdc.common.errors import ConfigError

log = logging.getLogger("cdc.metrics")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
KEYS = ("statsd_host", "statsd_port", "prefix")
COUNTERS = ("events_read", "events_skipped", "dead_letters", "inserted", "updated", "deleted")


@dataclass(frozen=True)
class MetricsConfig:
    statsd_host: str | None = None
    statsd_port: int = 8125
    prefix: str = "cdc"

    @property
    def enabled(self) -> bool:
        return bool(self.statsd_host)


def parse_metrics(raw: Any, src: str = "<memory>") -> MetricsConfig:
    """The ``metrics:`` mapping (already ``${ENV}``-substituted) → ``MetricsConfig``; errors name file and key."""
    if raw is None:
        return MetricsConfig()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{src}: key 'metrics': must be a mapping, got {type(raw).__name__}")
    extra = sorted(set(raw) - set(KEYS))
    if extra:
        raise ConfigError(f"{src}: key 'metrics.{extra[0]}': unknown key (allowed: {', '.join(KEYS)})")
    host = raw.get("statsd_host") or None  # "" (e.g. ${STATSD_HOST:-}) = off
    if host is not None and (not isinstance(host, str) or not host.strip()):
        raise ConfigError(f"{src}: key 'metrics.statsd_host': must be a host name, got {host!r}")
    port = raw.get("statsd_port", 8125)
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"{src}: key 'metrics.statsd_port': must be a port number, got {port!r}")
    prefix = raw.get("prefix", "cdc")
    if not isinstance(prefix, str) or not prefix or _UNSAFE.search(prefix):
        raise ConfigError(f"{src}: key 'metrics.prefix': must be letters, digits, _ . -, got {prefix!r}")
    return MetricsConfig(host.strip() if host else None, port, prefix)


def metrics_config(cfg: Any) -> MetricsConfig:
    """The ``metrics:`` section of a ``PipelineConfig``."""
    return parse_metrics(cfg.sections.get("metrics"), cfg.source_path)


def metric_name(prefix: str, pipeline: str, table: str, metric: str) -> str:
    return ".".join(_UNSAFE.sub("_", p) for p in (prefix, pipeline, *table.split("."), metric))


def batch_lines(prefix: str, pipeline: str, result: Mapping[str, Any]) -> list[str]:
    """statsd lines for one committed batch (a ``TableResult`` as a dict)."""
    table = str(result["table"])
    lines = [f"{metric_name(prefix, pipeline, table, 'batches')}:1|c"]
    lines += [f"{metric_name(prefix, pipeline, table, k)}:{int(result.get(k) or 0)}|c" for k in COUNTERS]
    seconds = dict(result.get("seconds") or {})
    lines += [f"{metric_name(prefix, pipeline, table, 'phase.' + k)}:{round(float(v) * 1000)}|ms"
              for k, v in sorted(seconds.items())]
    lines.append(f"{metric_name(prefix, pipeline, table, 'batch')}:{round(sum(seconds.values()) * 1000)}|ms")
    return lines


def gauge_lines(prefix: str, pipeline: str, gauges: Mapping[tuple[str, str], float | int | None]) -> list[str]:
    """``{(table, metric): value}`` → statsd gauge lines (None values are left out)."""
    return [f"{metric_name(prefix, pipeline, t, m)}:{v:g}|g" for (t, m), v in sorted(gauges.items()) if v is not None]


class StatsdClient:
    """Fire-and-forget UDP sender of statsd lines (several lines per datagram, under 1,400 bytes)."""

    def __init__(self, host: str, port: int = 8125) -> None:
        self.addr = (host, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, lines: Iterable[str]) -> None:
        packet: list[str] = []
        for line in lines:
            if packet and sum(len(x) + 1 for x in packet) + len(line) > 1400:
                self._send(packet)
                packet = []
            packet.append(line)
        if packet:
            self._send(packet)

    def _send(self, packet: list[str]) -> None:
        try:
            self.sock.sendto("\n".join(packet).encode(), self.addr)
        except OSError as exc:  # metrics never fail a batch
            log.warning("statsd %s:%s: %s", *self.addr, exc)

    def close(self) -> None:
        self.sock.close()


def send(cfg: MetricsConfig, lines: list[str]) -> None:
    if not cfg.enabled or not lines:
        return
    client = StatsdClient(str(cfg.statsd_host), cfg.statsd_port)
    try:
        client.send(lines)
    finally:
        client.close()
