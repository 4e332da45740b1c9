"""bench.ingest_bench.targets: the rows of the results table, from a run's details (no benchmark is run)."""

from typing import Any

from bench.ingest_bench import targets


def _throughput(**extra: Any) -> dict[str, Any]:
    floor = {"records": 1000, "eps": 500, "seconds": 2.0, **extra.pop("floor", {})}
    return {"throughput": {"records": 1000, "job_eps": 250, "floor": floor, "chunk_size": 100,
                           "rss": {"jvm_mb": 900, "driver_python_mb": 100, "worker_max_mb": 200}, **extra}}


def test_target_1_reports_the_cpu_both_sides_spent(monkeypatch: Any) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    rows = targets(_throughput(job_cpu_s=12.0, job_cpu_by_kind={"jvm": 9.0, "workers": 2.5, "driver": 0.5},
                               floor={"cpu_s": 2.0}))
    one, cpu = rows[0], rows[1]
    assert (one["target"], one["ratio"], one["met"]) == ("1", 0.5, False)
    assert "(CPU 12 s)" in one["measured"] and "(CPU 2 s)" in one["baseline"]
    assert cpu["target"] == "1'" and cpu["ratio"] == 6.0 and cpu["met"] is None
    assert "driver 0, jvm 9, workers 2" in cpu["what"] and "<= 1.0" in cpu["what"]


def test_results_without_cpu_times_have_no_cpu_row() -> None:
    assert [r["target"] for r in targets(_throughput())] == ["1", "5"]
