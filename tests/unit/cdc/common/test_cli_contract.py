"""The job's command-line contract (cdc.common.cli_contract): timestamps, offsets, exit codes, result file, and how
jobs/ingest.py turns its flags into one explicit ``BackfillBounds``."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.common import cli_contract as cli
from cdc.common import errors
from cdc.common.cli_contract import ArgumentError, BackfillBounds, Bounds, ExitCode, JobResult

REPO = Path(__file__).resolve().parents[4]
_spec = importlib.util.spec_from_file_location("cdc_ingest_job", REPO / "jobs" / "ingest.py")
ingest = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(ingest)  # type: ignore[union-attr]

NOON = 1714564800000  # 2024-05-01T12:00:00Z


@pytest.mark.parametrize("text", ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00", "2024-05-01 14:00:00+02:00",
                                  "2024-05-01T12:00Z", "1714564800000", " 1714564800000 "])
def test_timestamp_forms_mean_the_same_instant(text: str) -> None:
    assert cli.parse_timestamp(text) == NOON


def test_timestamp_keeps_milliseconds_and_dates_are_midnight_utc() -> None:
    assert cli.parse_timestamp("2024-05-01T12:00:00.123Z") == NOON + 123
    assert cli.parse_timestamp("2024-05-01") == NOON - 12 * 3600 * 1000
    assert cli.iso(NOON) == "2024-05-01T12:00:00Z" and cli.timestamp_arg(NOON) == "1714564800000"


@pytest.mark.parametrize("text", ["1714564800", "17145648000", "0", "yesterday", "2024-13-01", "-1714564800000"])
def test_timestamp_rejects_seconds_and_garbage_naming_the_flag(text: str) -> None:
    with pytest.raises(ArgumentError, match="--start-timestamp"):
        cli.parse_timestamp(text, "--start-timestamp")


def test_epoch_seconds_message_says_what_to_do() -> None:
    with pytest.raises(ArgumentError, match="epoch seconds.*milliseconds"):
        cli.parse_timestamp("1714564800")


@pytest.mark.parametrize("text,ok", [("1714564800000", True), ("2024-05-01T12:00:00+02:00", True), ("", True),
                                     ("2024-05-01", True), ("1714564800", False), ("yesterday", False)])
def test_dag_param_pattern_agrees_with_the_parser(text: str, ok: bool) -> None:
    import re

    assert bool(re.search(cli.TIMESTAMP_PATTERN, text)) is ok


def test_offsets_round_trip_and_errors() -> None:
    parsed = cli.parse_offsets('{"t": {"1": 5, "0": 7}}', "--start-offsets")
    assert parsed == {"t": {0: 7, 1: 5}}
    assert cli.parse_offsets(cli.offsets_arg(parsed)) == parsed
    assert cli.offsets_arg(parsed) == '{"t": {"0": 7, "1": 5}}'
    assert cli.parse_offsets({"t": {"0": 1}}) == {"t": {0: 1}} and cli.parse_offsets(None) == {}
    for bad in ('{"t": 5}', "[1]", "{", '{"t": {"x": 1}}', '{"t": {"0": -1}}'):
        with pytest.raises(ArgumentError, match="--end-offsets"):
            cli.parse_offsets(bad, "--end-offsets")


def test_one_exit_code_table() -> None:
    assert [(c.name, int(c)) for c in ExitCode] == [("OK", 0), ("OTHER", 1), ("TERMINAL", 2), ("RETRYABLE", 75),
                                                    ("INTERRUPTED", 130)]
    assert [cli.outcome(c) for c in (0, 1, 2, 75, 130, 137)] == ["ok", "failed", "terminal", "retryable", "failed",
                                                                  "failed"]
    assert (errors.CdcError.exit_code, errors.ConfigError.exit_code, errors.KafkaUnavailable.exit_code) == (1, 2, 75)


def test_result_file_round_trip(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    assert cli.finish(2, error="ERROR [ConfigError] x", ) == 2  # no CDC_RESULT_FILE: nothing written
    cli.write_result(JobResult(75, None, "ERROR [KafkaUnavailable] down"), env={cli.RESULT_FILE_ENV: str(target)})
    assert cli.read_result(target) == JobResult(75, None, "ERROR [KafkaUnavailable] down")
    assert cli.read_result(tmp_path / "missing.json") is None
    (tmp_path / "junk.json").write_text("not json")
    assert cli.read_result(tmp_path / "junk.json") is None


def test_contract_module_is_pure() -> None:
    code = ("import sys; sys.path.insert(0, 'jobs'); import cdc.common.cli_contract; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'confluent_kafka', 'yaml')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _bounds(*argv: str) -> BackfillBounds:
    return ingest.bounds_from_args(ingest.parse_args(["--config", "c.yaml", *argv]))


def test_timestamps_alone_apply_to_every_topic() -> None:
    """Regression: timestamps without offsets were dropped (the bounds value was an empty, falsy dict)."""
    b = _bounds("--start-timestamp", "1714564800000", "--end-timestamp", "2024-05-01T13:00:00Z")
    assert b.for_topic("any.topic") == Bounds(start_ts_ms=NOON, end_ts_ms=NOON + 3_600_000)
    assert ingest.has_range(b)


def test_offsets_per_topic_and_timestamps_for_the_others() -> None:
    b = _bounds("--start-offsets", '{"a": {"0": 3}}', "--end-timestamp", "1714564800000")
    assert b.for_topic("a") == Bounds({0: 3}, {}, None, NOON)
    assert b.for_topic("b") == Bounds(end_ts_ms=NOON)


def test_no_range_is_explicitly_empty() -> None:
    b = _bounds()
    assert b == BackfillBounds(default=Bounds()) and not ingest.has_range(b)


def test_bad_flag_values_are_config_errors() -> None:
    with pytest.raises(errors.ConfigError, match="--start-timestamp: '1714564800'"):
        _bounds("--start-timestamp", "1714564800")
    with pytest.raises(errors.ConfigError, match="--end-offsets"):
        _bounds("--end-offsets", "{oops")


def test_ingest_reports_its_error_to_the_result_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cli.RESULT_FILE_ENV, str(tmp_path / "r.json"))
    code = ingest.main(["--config", str(tmp_path / "missing.yaml")])
    result = cli.read_result(tmp_path / "r.json")
    assert code == 2 and result is not None and result.exit_code == 2 and result.summary is None
    assert result.error is not None and result.error.startswith("ERROR [ConfigError]")
    assert json.loads(result.to_json())["exit_code"] == 2


def test_maintenance_flags_and_defaults_have_one_home() -> None:
    """The retention flags and their defaults are the contract's: the job parses them, the Airflow side builds them
    and offers them as DAG params, and neither writes a default of its own."""
    job = importlib.import_module("cdc.apps.maintenance")

    defaults = {r.param: r.default for r in cli.MAINTENANCE_RETENTION}
    assert vars(job.parse_args([cli.CONFIG, "p.yaml"])) == {"config": "p.yaml", "table": [], **defaults}
    args = cli.maintenance_args("p.yaml", ["n.t"], tombstone_retention_hours=1.5)
    parsed = vars(job.parse_args(args))
    assert parsed == {"config": "p.yaml", "table": ["n.t"], **defaults, "tombstone_retention_hours": 1.5}
    assert args[:3] == [cli.CONFIG, "p.yaml", "--staging-retention-hours"] and "--retain-last" in args
    with pytest.raises(TypeError, match="retain_lats"):
        cli.maintenance_args("p.yaml", retain_lats=3)
