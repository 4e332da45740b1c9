"""Helpers of the object-storage catalog tests (S3 on the real moto server, Apache Iceberg's REST catalog server,
Glue on moto): pipelines whose secrets come only from the environment, the Airflow side's reads, result checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import unique
from tests.integration.cli import REPO, cli_env

CREDENTIAL_ENV = "CDC_TEST_REST_CREDENTIAL"


def env_of(s3: Any, rest: Any = None) -> dict[str, str]:
    """The job's environment: S3 keys as AWS_* (the AWS default chain; never in the YAML), the REST credential."""
    return {**s3.env(), **({CREDENTIAL_ENV: rest.credential} if rest is not None else {})}


def secrets_of(s3: Any, rest: Any = None) -> list[str]:
    return [s3.secret_access_key, *((rest.credential, rest.credential.split(":", 1)[1]) if rest is not None else ())]


def s3_properties(s3: Any) -> dict[str, str]:
    return {"s3.endpoint": s3.endpoint, "s3.path-style-access": "true", "client.region": "us-east-1"}


def rest_pipeline(broker: Any, s3: Any, rest: Any, bucket: str = "lake", **catalog: Any) -> dict[str, Any]:
    topic = unique("dbserver1.public.rest_")
    broker.create_topic(topic, partitions=1)
    auth = {"credential": f"${{{CREDENTIAL_ENV}}}", "oauth2-server-uri": f"{rest.uri}/v1/oauth/tokens"}
    props = {**s3_properties(s3), **(auth if rest.auth else {}), **catalog.pop("properties", {})}
    return {
        "pipeline": unique("rest"), "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
        "catalog": {"name": "lake", "type": "rest", "uri": rest.uri, "warehouse": f"s3://{bucket}/rest",
                    "properties": props, **catalog},
        "metadata_namespace": unique("restmeta"),
        "spark": {"spark.sql.shuffle.partitions": "2"},
        "batch": {"read_timeout_seconds": 15},
        "tables": [{"topic": topic, "target": f"{unique('rest')}.customers"}],
    }


def write(raw: dict[str, Any], folder: Path) -> Path:
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{raw['pipeline']}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def config_of(path: Path, env: dict[str, str]):
    from cdc.config.load import load_config

    return load_config(path, env=env)


def target_rows(cfg: Any, env: dict[str, str], monkeypatch: Any) -> dict[int, str]:
    """The target table as the Airflow side reads it (pyiceberg, pyarrow's S3 file system), deletes applied."""
    from cdc_airflow.monitor.ledger import load_table

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    table = load_table(cfg.catalog, cfg.tables[0].target)
    assert table is not None
    return {r["id"]: r["name"] for r in table.scan(selected_fields=("id", "name")).to_arrow().to_pylist()}


def ledger(cfg: Any, env: dict[str, str] | None = None, monkeypatch: Any = None) -> list[dict[str, Any]]:
    """The ledger as the Airflow side reads it; ``env``: the S3 keys of the Airflow worker's environment."""
    from cdc.config.names import ledger_identifier
    from cdc_airflow.monitor.ledger import read_rows

    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    rows = read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)
    return sorted(rows, key=lambda r: (r["batch_id"], r["partition"]))


def error_line(res: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")]
    assert len(lines) == 1, res.stderr[-3000:]
    return lines[0]


def run_job(script: str, config: Path, env: dict[str, str], *args: str, timeout: float = 600
            ) -> subprocess.CompletedProcess:
    """``jobs/<script>.py --config ...`` (maintenance, bootstrap) on local[2], as a user runs it."""
    return subprocess.run([sys.executable, str(REPO / "jobs" / f"{script}.py"), "--config", str(config), *args],
                          capture_output=True, text=True, cwd=str(REPO), timeout=timeout,
                          env=cli_env({**env, "PYSPARK_SUBMIT_ARGS": "--master local[2] pyspark-shell"}))
