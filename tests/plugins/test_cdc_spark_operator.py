"""CdcSparkSubmitHook / CdcSparkSubmitOperator against a fake spark-submit: exit-code mapping, summary capture,
local-mode settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugins import fake_spark


@pytest.fixture()
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_spark.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", fake_spark.prepend_path(tmp_path / "bin"))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SPARK_LOG", str(log))
    return log


def _operator(table: str = "inventory.orders"):
    from cdc_airflow.spark import CdcSparkSubmitOperator

    return CdcSparkSubmitOperator(task_id="t", application="jobs/ingest.py", table=table, master="local[1]",
                                  application_args=["--config", "c.yaml", "--table", table],
                                  pipeline_spark_conf={"spark.sql.shuffle.partitions": "2"})


def test_success_returns_summary_and_passes_local_settings(fake: Path) -> None:
    summary = _operator().execute({})
    assert summary["tables"][0]["snapshot_id"] == 42
    call = json.loads(fake.read_text().splitlines()[-1])
    argv = call["argv"]
    assert argv[argv.index("--master") + 1] == "local[1]"
    assert "spark.driver.bindAddress=127.0.0.1" in argv and "spark.sql.shuffle.partitions=2" in argv
    assert Path(argv[argv.index("--py-files") + 1]).name.startswith("cdc-")
    assert argv[argv.index("--jars") + 1].endswith("iceberg-spark-runtime-3.5_2.12-1.10.2.jar")
    assert argv[-4:] == ["--config", "c.yaml", "--table", "inventory.orders"]
    assert call["PYSPARK_PYTHON"]


def test_exit_2_is_terminal(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("FAKE_SPARK_EXITS", '{"inventory.orders": 2}')
    with pytest.raises(AirflowFailException, match="simulated failure with exit 2"):
        _operator().execute({})


@pytest.mark.parametrize("code,label", [(75, "retryable error"), (1, "failure")])
def test_other_exits_are_retryable(fake: Path, monkeypatch: pytest.MonkeyPatch, code: int, label: str) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from cdc_airflow.spark import CdcJobError

    monkeypatch.setenv("FAKE_SPARK_EXITS", json.dumps({"inventory.orders": code}))
    with pytest.raises(CdcJobError) as info:
        _operator().execute({})
    assert not isinstance(info.value, AirflowFailException)
    assert f"{label} (exit {code})" in str(info.value) and "simulated failure" in str(info.value)
