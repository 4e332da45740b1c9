"""bench.report: result files are named by day and never overwrite an earlier run's."""

from pathlib import Path

from bench.report import result_paths


def test_a_later_run_of_the_same_day_gets_its_own_files(tmp_path: Path) -> None:
    js, md = result_paths(tmp_path, day="2026-11-27")
    assert (js.name, md.name) == ("2026-11-27.json", "2026-11-27.md")
    js.write_text("{}")
    assert [p.name for p in result_paths(tmp_path, day="2026-11-27")] == ["2026-11-27-2.json", "2026-11-27-2.md"]
    (tmp_path / "2026-11-27-2.md").write_text("")  # either file taken is enough
    assert result_paths(tmp_path, day="2026-11-27")[1].name == "2026-11-27-3.md"
    assert result_paths(tmp_path, "scale", day="2026-11-27")[0].name == "2026-11-27-scale.json"
