"""Data and HTML of the "CDC status" view: per pipeline and table the consumer lag per partition, the last
batches (counts, durations), dead letters and the target snapshot. Reads Iceberg with pyiceberg, never Spark.

``collect_status`` gathers plain dicts (JSON-serialisable); ``render_status_html`` / ``render_dead_letters_html``
turn them into a page, so pages can be rendered (and screenshotted) from fixed data."""

from __future__ import annotations

import time
from typing import Any, Mapping

from jinja2 import Environment

from cdc.config.names import dead_letters_identifier, ledger_identifier
from cdc_airflow.config.options import airflow_options
from cdc_airflow.config.pipelines import load_pipelines
from cdc_airflow.config.settings import CdcSettings
from cdc_airflow.monitor.alerts import human_duration, is_stale, time_lag_seconds
from cdc_airflow.monitor.lag import WatermarksFn, table_lags
from cdc_airflow.monitor.ledger import Row, batches, newest_source_ts_ms, read_rows, snapshot_id


def _watermarks_fast(kafka_conf: Mapping[str, Any], topic: str) -> Mapping[int, int]:
    from cdc.kafka.offsets import high_watermarks

    return high_watermarks(dict(kafka_conf), topic, timeout=3)


def _error(exc: BaseException) -> str:
    from cdc.common.errors import one_line

    return one_line(exc, 300)


def _newest_ts(cfg: Any, target: str) -> int | None:
    try:
        return newest_source_ts_ms(cfg.catalog, target)
    except Exception:  # noqa: BLE001 - shown as "–"
        return None


def _resolved(cfg: Any) -> tuple[Any, str | None]:
    """The pipeline with its ``topic_pattern`` tables (cdc.config.routing), or its explicit tables and the reason."""
    from dataclasses import replace

    from cdc.kafka.topics import resolve_pipeline

    try:
        return resolve_pipeline(cfg, timeout=3), None
    except Exception as exc:  # noqa: BLE001 - shown on the page
        return replace(cfg, tables=tuple(t for t in cfg.tables if t.topic)), \
            f"cannot resolve topic_pattern tables: {_error(exc)}"


def collect_status(settings: CdcSettings, watermarks: WatermarksFn | None = None,
                   batch_limit: int = 10, now_ms: int | None = None) -> list[dict[str, Any]]:
    """One dict per pipeline file; errors (bad YAML, unreachable broker or catalog) are kept as strings.
    Per table also the lag in time (now − newest committed ``__source_ts_ms``), ``stale`` (``freshness_minutes``)
    and dead letters per error class."""
    out: list[dict[str, Any]] = []
    for pf in load_pipelines(settings):
        if pf.config is None:  # listed with its error: the other pipelines are shown as usual
            out.append({"pipeline": pf.salvaged.pipeline if pf.salvaged else pf.path.stem, "file": str(pf.path),
                        "error": pf.error, "broken": True, "tables": []})
            continue
        try:
            out.append(_pipeline_status(pf.config, str(pf.path), watermarks, batch_limit, now_ms))
        except Exception as exc:  # noqa: BLE001 - one pipeline never hides the others
            out.append({"pipeline": pf.config.pipeline, "file": str(pf.path), "error": _error(exc), "tables": []})
    return out


def _pipeline_status(cfg: Any, file: str, watermarks: WatermarksFn | None, batch_limit: int,
                     now_ms: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"pipeline": cfg.pipeline, "file": file, "error": None, "broken": False, "tables": []}
    cfg, entry["error"] = _resolved(cfg)
    try:
        rows = read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)
        dead = read_rows(cfg.catalog, dead_letters_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline,
                         columns=("table_name", "error_class"))
    except Exception as exc:  # noqa: BLE001 - shown on the page
        entry["error"] = f"cannot read the ledger: {_error(exc)}"
        rows, dead = [], []
    lags = table_lags(cfg, cfg.tables, rows, watermarks or _watermarks_fast, raise_errors=False)
    try:
        freshness = airflow_options(cfg).freshness_minutes
    except Exception:  # noqa: BLE001 - the DAG shows the config error
        freshness = {}
    for t in cfg.tables:
        tl = lags[t.target]
        recent = batches(rows, t.target, batch_limit)
        try:
            snap = snapshot_id(cfg.catalog, t.target)
        except Exception:  # noqa: BLE001 - fall back to the ledger's record of the last commit
            snap = None
        if snap is None:
            snap = next((b["target_snapshot_id"] for b in recent if b["status"] == "committed"), None)
        parts = sorted(set(tl.watermarks) | set(tl.committed))
        ts = _newest_ts(cfg, t.target)
        time_lag = time_lag_seconds(ts, now_ms)
        classes: dict[str, int] = {}
        for r in dead:
            if r["table_name"] == t.target:
                classes[r.get("error_class") or "?"] = classes.get(r.get("error_class") or "?", 0) + 1
        entry["tables"].append({
            "table": t.target, "topic": t.topic, "lag_error": tl.error,
            "lag_total": None if tl.error else tl.total,
            "partitions": [{"partition": p, "high_watermark": tl.watermarks.get(p),
                            "committed": tl.committed.get(p), "lag": tl.lag.get(p)} for p in parts],
            "batches": recent, "dead_letters": sum(classes.values()), "dead_letter_classes": classes,
            "snapshot_id": snap, "newest_source_ts": _iso_ms(ts), "time_lag_seconds": time_lag,
            "time_lag": human_duration(time_lag), "freshness_minutes": freshness.get(t.target),
            "stale": is_stale(freshness.get(t.target), time_lag, None if tl.error else tl.total),
        })
    return entry


def _iso_ms(ms: int | None) -> str | None:
    from datetime import datetime, timezone

    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _preview(value: bytes | None, limit: int = 200) -> str | None:
    if value is None:
        return None
    text = value.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + "…"


def collect_dead_letters(settings: CdcSettings, pipeline: str, table: str, limit: int = 100,
                         raw: bool = True) -> list[Row]:
    """Newest dead letters of one table; key/value shown as (truncated) UTF-8 previews, or None when ``raw`` is
    false (a user without the permission to see record bytes, ``cdc_airflow.status.app.may_see_raw``; the error
    message is hidden too, as it may quote the record)."""
    cfg = next((p.config for p in load_pipelines(settings) if p.config and p.config.pipeline == pipeline), None)
    if cfg is None:
        raise KeyError(f"no pipeline {pipeline!r}")
    rows = read_rows(cfg.catalog, dead_letters_identifier(cfg.metadata_namespace), pipeline=pipeline,
                     table_name=table)
    rows.sort(key=lambda r: (r.get("created_at") is not None, r.get("created_at"), r["offset"]), reverse=True)
    return [{**{k: r.get(k) for k in ("batch_id", "topic", "partition", "offset", "error_class")},
             "error_message": r.get("error_message") if raw else None,
             "created_at": r["created_at"].isoformat(timespec="seconds") if r.get("created_at") else None,
             "key": _preview(r.get("key")) if raw else None, "value": _preview(r.get("value")) if raw else None}
            for r in rows[:limit]]


class TTLCache:
    """A tiny time-based cache: the status page is polled, the broker and object store should not be."""

    def __init__(self, seconds: float):
        self.seconds, self._at, self._value = seconds, 0.0, None

    def get(self, compute: Any) -> Any:
        if self._value is None or time.monotonic() - self._at > self.seconds:
            self._value, self._at = compute(), time.monotonic()
        return self._value


_ENV = Environment(autoescape=True)
_CSS = """
body{font-family:system-ui,sans-serif;margin:1rem 1.5rem;color:#1f2933}
h1{font-size:1.4rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d9e2ec}h3{font-size:1rem}
table{border-collapse:collapse;margin:.4rem 0 1rem}td,th{border:1px solid #d9e2ec;padding:.25rem .5rem;
text-align:right;font-size:.85rem}th{background:#f0f4f8}td.l,th.l{text-align:left}
.err{color:#b42318}.ok{color:#067647}.lag{font-weight:600}.muted{color:#7b8794}code{font-size:.8rem}
.badge{display:inline-block;padding:0 .4rem;border-radius:.6rem;font-size:.75rem;font-weight:700;color:#fff}
.stale{background:#b42318}.fresh{background:#067647}
"""

STATUS_TEMPLATE = _ENV.from_string("""<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{ refresh }}"><title>CDC status</title><style>{{ css }}</style></head><body>
<h1>CDC status</h1><p class="muted">Generated {{ generated }}; refreshes every {{ refresh }} s.</p>
{% for p in pipelines %}<h2>Pipeline {{ p.pipeline }}{% if p.broken %} <span class="badge stale" title="the file does not load: its DAG cdc_{{ p.pipeline }} fails every run until it is fixed">BROKEN CONFIG</span>{% endif %}</h2><p class="muted"><code>{{ p.file }}</code></p>
{% if p.error %}<p class="err">{{ p.error }}</p>{% endif %}
{% for t in p.tables %}<h3>{{ t.table }} <span class="muted">← {{ t.topic }}</span>
{% if t.stale %} <span class="badge stale" title="newest committed change older than freshness_minutes ({{ t.freshness_minutes }}) while the topic has newer data">STALE</span>
{% elif t.freshness_minutes %} <span class="badge fresh">fresh</span>{% endif %}</h3>
<p>Target snapshot: <code>{{ t.snapshot_id if t.snapshot_id is not none else "none yet" }}</code> ·
Dead letters: {% if t.dead_letters %}<a class="err" href="{{ base }}dead-letters/{{ p.pipeline }}/{{ t.table }}">
{{ t.dead_letters }}</a> ({% for c, n in t.dead_letter_classes|dictsort %}{{ c }}: {{ n }}{% if not loop.last %}, {% endif %}{% endfor %}){% else %}0{% endif %} ·
Lag: {% if t.lag_error %}<span class="err">broker unavailable ({{ t.lag_error }})</span>
{% else %}<span class="lag">{{ t.lag_total }}</span>{% endif %} events ·
Behind: <span class="lag">{{ t.time_lag }}</span>{% if t.newest_source_ts %} <span class="muted">(newest committed change
{{ t.newest_source_ts }})</span>{% endif %}</p>
{% if t.partitions %}<table><tr><th>partition</th><th>high watermark</th><th>committed</th><th>lag</th></tr>
{% for x in t.partitions %}<tr><td>{{ x.partition }}</td><td>{{ x.high_watermark if x.high_watermark is not none else "?" }}</td>
<td>{{ x.committed if x.committed is not none else "—" }}</td><td class="lag">{{ x.lag if x.lag is not none else "?" }}</td></tr>
{% endfor %}</table>{% endif %}
{% if t.batches %}<table><tr><th>batch</th><th class="l">status</th><th class="l">mode</th><th class="l">ranges</th>
<th>read</th><th>skipped</th><th>dead</th><th>ins</th><th>upd</th><th>del</th><th>seconds</th><th class="l">committed at</th></tr>
{% for b in t.batches %}<tr><td>{{ b.batch_id }}</td><td class="l {{ 'ok' if b.status == 'committed' else '' }}">{{ b.status }}</td>
<td class="l">{{ b.mode }}</td><td class="l">{% for r in b.ranges %}p{{ r.partition }} [{{ r.start }}, {{ r.end }}){% if not loop.last %}, {% endif %}{% endfor %}</td>
<td>{{ b.events_read }}</td><td>{{ b.events_skipped }}</td><td>{{ b.dead_letters }}</td><td>{{ b.inserted }}</td>
<td>{{ b.updated }}</td><td>{{ b.deleted }}</td>
<td title="{% for k, v in b.phase_seconds.items() %}{{ k }}={{ v }} {% endfor %}">{{ "%.1f"|format(b.phase_seconds.values()|sum) }}</td>
<td class="l">{{ b.committed_at or "" }}</td></tr>{% endfor %}</table>
{% else %}<p class="muted">No batches yet.</p>{% endif %}
{% endfor %}{% else %}<p>No pipelines found.</p>{% endfor %}</body></html>""")

DEAD_LETTERS_TEMPLATE = _ENV.from_string("""<!doctype html><html><head><meta charset="utf-8">
<title>Dead letters {{ table }}</title><style>{{ css }}</style></head><body>
<p><a href="{{ base }}">← CDC status</a></p><h1>Dead letters of {{ table }} ({{ pipeline }})</h1>
{% if not raw %}<p class="muted" id="raw-hidden">Record bytes and error messages are hidden: they need permission to
edit DAG <code>cdc_{{ pipeline }}</code> (role User or above).</p>{% endif %}
{% if rows %}<table><tr><th>batch</th><th class="l">topic</th><th>partition</th><th>offset</th><th class="l">error</th>
{% if raw %}<th class="l">message</th>{% endif %}<th class="l">created</th>{% if raw %}<th class="l">key</th><th class="l">value</th>{% endif %}</tr>
{% for r in rows %}<tr><td>{{ r.batch_id }}</td><td class="l">{{ r.topic }}</td><td>{{ r.partition }}</td><td>{{ r.offset }}</td>
<td class="l err">{{ r.error_class }}</td>{% if raw %}<td class="l">{{ r.error_message }}</td>{% endif %}<td class="l">{{ r.created_at or "" }}</td>
{% if raw %}<td class="l"><code>{{ r.key or "" }}</code></td><td class="l"><code>{{ r.value or "" }}</code></td>{% endif %}</tr>{% endfor %}</table>
{% else %}<p>No dead letters.</p>{% endif %}</body></html>""")


def render_status_html(pipelines: list[dict[str, Any]], generated: str, base: str = "./",
                       refresh: int = 30) -> str:
    return STATUS_TEMPLATE.render(pipelines=pipelines, generated=generated, base=base, refresh=refresh, css=_CSS)


def render_dead_letters_html(pipeline: str, table: str, rows: list[Row], base: str = "../../",
                             raw: bool = True) -> str:
    return DEAD_LETTERS_TEMPLATE.render(pipeline=pipeline, table=table, rows=rows, base=base, css=_CSS, raw=raw)
