"""Job-side observability: progress lines (counts and rates), the ``metrics:`` section and statsd over real UDP."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import load_config
from cdc.kafka.plan import OffsetRange
from cdc.observe import metrics, progress
from cdc.run.outcome import TableResult


def result(**kw: Any) -> TableResult:
    base = dict(table="inventory.orders", topic="t", batch_id=7, ranges=[OffsetRange("t", 0, 0, 600_000),
                                                                         OffsetRange("t", 1, 100, 400_100)],
                events_read=1_000_000, events_skipped=3, dead_letters=0, inserted=420, updated=10, deleted=3,
                snapshot_id=123, seconds={"plan": 1.0, "read_stage": 16.4, "merge": 12.0, "commit": 1.6})
    return TableResult(**(base | kw))


def test_progress_lines_have_counts_and_rates() -> None:
    r = result()
    assert progress.phase_line(r, "read_stage", None) == \
        "inventory.orders batch 7: read_stage started: 1,000,000 events from 2 partition(s)"
    assert progress.phase_line(r, "read_stage", 16.4) == \
        "inventory.orders batch 7: read_stage done in 16.4 s: 1,000,000 events, 61k ev/s"
    assert progress.phase_line(r, "merge", 12.0) == "inventory.orders batch 7: merge done in 12.0 s"
    assert progress.read_progress_line(r, 5, 12, 6.8) == \
        "inventory.orders batch 7: read ~416,666/1,000,000 events (5/12 tasks) … 61k ev/s"
    assert progress.batch_line(r) == ("inventory.orders batch 7 committed: 1,000,000 read (3 skipped, 0 dead letters),"
                                      " +420 ~10 -3, snapshot 123, 31.0 s (32k ev/s)")
    assert [progress.rate(n, 1) for n in (850, 1_500, 61_000, 1_200_000)] == \
        ["850 ev/s", "1.5k ev/s", "61k ev/s", "1.2M ev/s"]


def test_hooks_log_to_stderr_and_never_raise(capsys: pytest.CaptureFixture[str]) -> None:
    cdc_log = logging.getLogger("cdc")  # a handler an earlier test set up writes to that test's stderr: start afresh
    cdc_log.handlers = [h for h in cdc_log.handlers if not getattr(h, "_cdc", 0)]
    progress.start_run(SimpleNamespace(pipeline="p", source_path="<memory>"))
    progress.phase_started(result(), "merge")
    progress.phase_ended(result(), "merge", 2.0)
    progress.batch_committed(result())
    progress.phase_ended(None, "merge", 1.0)  # broken input: swallowed
    out, err = capsys.readouterr()
    assert out == ""  # stdout stays the job's summary
    assert "INFO cdc: inventory.orders batch 7: merge started" in err
    assert "merge done in 2.0 s" in err and "batch 7 committed: 1,000,000 read" in err
    logging.getLogger("cdc").handlers = [h for h in logging.getLogger("cdc").handlers if not getattr(h, "_cdc", 0)]


def test_metrics_section_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not metrics.parse_metrics(None).enabled
    monkeypatch.setenv("STATSD", "10.0.0.9")
    f = tmp_path / "p.yaml"
    f.write_text("pipeline: p\nkafka: {bootstrap.servers: 'b:1'}\nformat: json\ncatalog: {warehouse: /tmp/w}\n"
                 "tables: [{topic: t, target: n.t}]\n"
                 "metrics: {statsd_host: '${STATSD}', statsd_port: 9125, prefix: cdc.prod}\n")
    assert metrics.metrics_config(load_config(f)) == metrics.MetricsConfig("10.0.0.9", 9125, "cdc.prod")
    for raw, key in (({"statsd_hots": "x"}, "metrics.statsd_hots"), ({"statsd_port": 0}, "metrics.statsd_port"),
                     ({"prefix": "a b"}, "metrics.prefix"), ("x", "metrics")):
        with pytest.raises(ConfigError, match=rf"p.yaml: key '{key}'"):
            metrics.parse_metrics(raw, "p.yaml")


def test_batch_metrics_reach_a_udp_listener() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    try:
        cfg = metrics.MetricsConfig("127.0.0.1", sock.getsockname()[1], "cdc")
        progress._state.update(metrics=cfg, pipeline="demo")
        progress.batch_committed(result())
        metrics.send(cfg, metrics.gauge_lines("cdc", "demo", {("inventory.orders", "lag_events"): 12,
                                                               ("inventory.orders", "lag_seconds"): None}))
        lines: list[str] = []
        while not any("lag_events" in x for x in lines):
            lines += sock.recv(65536).decode().splitlines()
    finally:
        sock.close()
        progress._state.update(metrics=metrics.MetricsConfig())
    assert "cdc.demo.inventory.orders.batches:1|c" in lines
    assert "cdc.demo.inventory.orders.events_read:1000000|c" in lines
    assert "cdc.demo.inventory.orders.inserted:420|c" in lines and "cdc.demo.inventory.orders.deleted:3|c" in lines
    assert "cdc.demo.inventory.orders.phase.read_stage:16400|ms" in lines
    assert "cdc.demo.inventory.orders.batch:31000|ms" in lines
    assert "cdc.demo.inventory.orders.lag_events:12|g" in lines and not any("lag_seconds" in x for x in lines)
