"""CdcSparkSubmitOperator (the provider's SparkSubmitOperator + hook, public API only) against a fake spark-submit
that speaks the job's result-file contract: exit-code mapping, summary, local-mode settings, master override."""

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


def _operator(table: str = "inventory.orders", master: str | None = "local[1]"):
    from cdc.spark import jars
    from cdc_airflow.operators.spark_submit import CdcSparkSubmitOperator

    return CdcSparkSubmitOperator(task_id="t", application="jobs/ingest.py", table=table, master=master,
                                  application_args=["--config", "c.yaml", "--table", table],
                                  pipeline_spark_conf={"spark.sql.shuffle.partitions": "2"},
                                  cdc_jars=(jars.ICEBERG_SPARK_RUNTIME,))


def test_success_returns_summary_and_passes_local_settings(fake: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    runtime.write_bytes(b"PK")
    monkeypatch.setenv("CDC_ICEBERG_JAR", str(runtime))  # a file of the runtime: --jars, nothing to resolve
    summary = _operator().execute({})
    assert summary["tables"][0]["snapshot_id"] == 42
    call = json.loads(fake.read_text().splitlines()[-1])
    argv = call["argv"]
    assert argv[argv.index("--master") + 1] == "local[1]"
    assert "spark.driver.bindAddress=127.0.0.1" in argv and "spark.sql.shuffle.partitions=2" in argv
    assert "--py-files" not in argv  # local master: the job and its workers import cdc on this host
    assert argv[argv.index("--jars") + 1] == str(runtime) and "--packages" not in argv
    assert argv[-4:] == ["--config", "c.yaml", "--table", "inventory.orders"]
    assert call["PYSPARK_PYTHON"] and call["RESULT_FILE"]
    assert not Path(call["RESULT_FILE"]).exists()  # a per-run temporary file, removed afterwards


def test_master_override_replaces_the_connections_master_only_for_the_run(fake: Path) -> None:
    import os

    before = dict(os.environ)
    _operator(master="local[3]").execute({})
    argv = json.loads(fake.read_text().splitlines()[-1])["argv"]
    assert argv[argv.index("--master") + 1] == "local[3]"
    assert dict(os.environ) == before  # nothing of the run (result file, override connection) leaks


def test_without_override_the_connection_decides_and_local_settings_follow(fake: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "spark://h", "port": 7077}')
    with pytest.raises(AirflowFailException, match="CDC_PY_FILES"):  # a cluster needs the wheel
        _operator(master=None).execute({})
    monkeypatch.setenv("CDC_PY_FILES", "/opt/cdc/build/cdc_iceberg-0.1.0-py3-none-any.whl")
    _operator(master=None).execute({})
    argv = json.loads(fake.read_text().splitlines()[-1])["argv"]
    assert argv[argv.index("--master") + 1] == "spark://h:7077"
    assert "spark.driver.bindAddress=127.0.0.1" not in argv and "spark.sql.shuffle.partitions=2" in argv
    assert argv[argv.index("--py-files") + 1] == "/opt/cdc/build/cdc_iceberg-0.1.0-py3-none-any.whl"


def test_exit_2_is_terminal(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("FAKE_SPARK_EXITS", '{"inventory.orders": 2}')
    with pytest.raises(AirflowFailException, match="simulated failure with exit 2"):
        _operator().execute({})


@pytest.mark.parametrize("code,label", [(75, "retryable error"), (1, "failure")])
def test_other_exits_are_retryable(fake: Path, monkeypatch: pytest.MonkeyPatch, code: int, label: str) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from cdc_airflow.operators.spark_submit import CdcJobError

    monkeypatch.setenv("FAKE_SPARK_EXITS", json.dumps({"inventory.orders": code}))
    with pytest.raises(CdcJobError) as info:
        _operator().execute({})
    assert not isinstance(info.value, AirflowFailException)
    assert f"{label} (exit {code})" in str(info.value) and "simulated failure" in str(info.value)


def test_spark_submit_failing_before_the_job_reports_is_retried(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from cdc_airflow.operators.spark_submit import CdcJobError

    monkeypatch.setenv("FAKE_SPARK_EXITS", '{"inventory.orders": 2}')
    monkeypatch.setenv("FAKE_SPARK_NO_RESULT", "1")
    with pytest.raises(CdcJobError) as info:
        _operator().execute({})
    assert not isinstance(info.value, AirflowFailException)
    assert "reported no result" in str(info.value)


@pytest.mark.parametrize("base,master", [
    ({"conn_type": "spark", "host": "local[*]", "port": None}, "local[*]"),
    ({"conn_type": "spark", "host": "yarn", "port": None}, "yarn"),
    ({"conn_type": "spark", "host": "spark://h", "port": 7077}, "spark://h:7077"),
    ({"conn_type": "spark", "host": "k8s://https://h", "port": 443}, "k8s://https://h:443"),
    ({"conn_type": "spark", "host": "h", "port": 7077}, "spark://h:7077"),
])
def test_connection_master(base: dict, master: str) -> None:
    from cdc_airflow.operators.spark_submit import connection_master

    assert connection_master(**base) == master


@pytest.mark.parametrize("code,failed,raised", [
    (0, False, None), (2, True, "AirflowFailException"), (75, True, "CdcJobError"), (1, True, "CdcJobError"),
    (130, True, "CdcJobError"), (0, True, "CdcJobError"),  # the job succeeded but spark-submit did not
])
def test_job_outcome_follows_the_exit_code_table(code: int, failed: bool, raised: str | None) -> None:
    from airflow.sdk.exceptions import AirflowException

    from cdc.common.cli_contract import JobResult
    from cdc_airflow.operators.spark_submit import job_outcome

    result = JobResult(code, {"pipeline": "p"} if code == 0 else None, None if code == 0 else "ERROR [X] why")
    failure = AirflowException("Cannot execute: spark-submit ...") if failed else None
    if raised is None:
        assert job_outcome(result, failure) == {"pipeline": "p"}
        return
    with pytest.raises(AirflowException) as info:
        job_outcome(result, failure)
    assert type(info.value).__name__ == raised and f"exit {code}" in str(info.value)


def test_spark_conf_local_uses_loopback_and_pipeline_overrides() -> None:
    from cdc_airflow.operators.spark_submit import spark_conf

    conf = spark_conf("local[*]", {"spark.driver.host": "10.0.0.1", "spark.sql.shuffle.partitions": "2"}, "/v/python")
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.driver.host"] == "10.0.0.1"  # the YAML wins
    assert conf["spark.pyspark.python"] == "/v/python"
    from cdc.spark.session import LOCAL_DRIVER_JAVA_OPTIONS, LOCAL_SPARK_CONF

    assert conf["spark.driver.extraJavaOptions"] == LOCAL_DRIVER_JAVA_OPTIONS  # as cdc.spark.session does locally
    assert LOCAL_SPARK_CONF.items() <= conf.items()
    cluster = spark_conf("spark://master:7077", {}, "/v/python")
    assert "spark.driver.bindAddress" not in cluster and "spark.pyspark.python" not in cluster
    assert "spark.driver.extraJavaOptions" not in cluster and "spark.broadcast.blockSize" not in cluster


def test_spark_env_appends_interpreter_bin_once() -> None:
    from cdc_airflow.operators.spark_submit import spark_env

    env = spark_env("/venv/bin/python", "/usr/bin:/bin")
    assert env["PYSPARK_PYTHON"] == "/venv/bin/python"
    assert env["PATH"] == "/usr/bin:/bin:/venv/bin"
    assert spark_env("/venv/bin/python", "/venv/bin:/bin")["PATH"] == "/venv/bin:/bin"
