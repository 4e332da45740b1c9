"""The status view with broken pipeline files next to a good one: the good pipeline renders as usual (lag, batches,
dead letters), each broken file is listed with its error and a BROKEN CONFIG badge; nothing raises (a wrong type
once raised a TypeError through the whole view)."""

from __future__ import annotations

from pathlib import Path

from tests.plugins.status.test_view import CUST, ORD, TS0, cdc_home, fake_watermarks  # noqa: F401  (fixture)

BROKEN = {
    "wrongtype.yaml": ("pipeline: wrongtype\nformat: json\nkafka: {bootstrap.servers: x:1}\n"
                       "catalog: {warehouse: ./wh}\ntables: [{topic: t, target: a.b, ordering: 5}]\n",
                       "wrongtype", "key 'tables[0].ordering'"),
    "badcron.yaml": ("pipeline: badcron\nformat: json\nschedule: every hour\nkafka: {bootstrap.servers: x:1}\n"
                     "catalog: {warehouse: ./wh}\ntables: [{topic: t, target: a.b}]\n", "badcron", "key 'schedule'"),
    "syntax.yaml": ("pipeline: [unclosed\n", "syntax", "not valid YAML"),
    "notamap.yaml": ("- a\n", "notamap", "must hold a YAML mapping"),
}


def test_good_pipeline_renders_and_broken_files_are_listed(cdc_home: Path) -> None:  # noqa: F811
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.status.view import collect_status, render_status_html

    for name, (text, _pipeline, _needle) in BROKEN.items():
        (cdc_home / name).write_text(text)
    status = {p["pipeline"]: p for p in collect_status(load_settings(), watermarks=fake_watermarks,
                                                        now_ms=TS0 + 7_500_000)}
    assert set(status) == {"demo", *(b[1] for b in BROKEN.values())}
    demo = status["demo"]
    assert demo["error"] is None and demo["broken"] is False
    assert [t["table"] for t in demo["tables"]] == [CUST, ORD]
    assert demo["tables"][0]["lag_total"] == 5 and demo["tables"][0]["dead_letters"] == 2
    for name, (_text, pipeline, needle) in BROKEN.items():
        entry = status[pipeline]
        assert entry["broken"] is True and entry["tables"] == [] and entry["file"].endswith(name)
        assert needle in entry["error"] and name in entry["error"]
    html = render_status_html(list(status.values()), generated="now")
    assert html.count("BROKEN CONFIG</span>") == len(BROKEN)
    assert "Pipeline demo</h2>" in html and CUST in html and "key &#39;tables[0].ordering&#39;" in html
