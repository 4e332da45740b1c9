"""Every job ends on an error the same way (``cdc.run.outcome.job_failed``): one ``ERROR [<Class>] <message>`` line on
stderr, that line in ``$CDC_RESULT_FILE``, the exit code of the error's class; an unclassified error (a bug, the JVM)
is exit 1 without a traceback. Spark is replaced by a function that fails: no Spark starts."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from cdc.common.cli_contract import read_result
from cdc.common.errors import KafkaUnavailable

CONFIG = """pipeline: ends
kafka: {bootstrap.servers: "127.0.0.1:1"}
format: json
catalog: {warehouse: /nonexistent/warehouse}
tables: [{topic: t, target: n.t}]
"""


@pytest.mark.parametrize("job", ["cdc.apps.ingest", "cdc.apps.maintenance"])
@pytest.mark.parametrize("error, code, shown", [
    (RuntimeError("the JVM went away"), 1, "ERROR [CdcError] "),
    (KafkaUnavailable("broker down"), 75, "ERROR [KafkaUnavailable] broker down"),
])
def test_a_job_ends_on_an_error_with_one_line_the_result_file_and_its_exit_code(
        job, error, code, shown, tmp_path: Path, monkeypatch, capsys) -> None:
    config = tmp_path / "p.yaml"
    config.write_text(CONFIG)
    result = tmp_path / "result.json"
    monkeypatch.setenv("CDC_RESULT_FILE", str(result))

    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr("cdc.spark.session.build_session", fails)
    main = importlib.import_module(job).main
    assert main(["--config", str(config)]) == code
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(shown), err  # one line, no traceback
    assert read_result(result).exit_code == code and read_result(result).error == err[0]
