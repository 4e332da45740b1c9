"""Helpers for the reliability tests: pipelines as YAML files, the CLI in-process (``ingest.main``) and ledger reads."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import unique


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def pipeline(broker: Any, warehouse: Path, fmt: str = "json", registry: Any = None, partitions: int = 1,
             catalog: str = "lake", **table: Any) -> dict[str, Any]:
    topic = unique("dbserver1.public.rel_")
    broker.create_topic(topic, partitions=partitions)
    raw: dict[str, Any] = {
        "pipeline": "rel", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": fmt,
        "catalog": {"name": catalog, "type": "hadoop", "warehouse": str(warehouse)},
        "metadata_namespace": unique("relmeta"),
        "spark": {"spark.sql.shuffle.partitions": "2"},
        "batch": {"read_timeout_seconds": 15},
        "tables": [{"topic": topic, "target": f"{unique('rel')}.customers", **table}],
    }
    if registry is not None:
        raw["schema_registry"] = {"url": registry if isinstance(registry, str) else registry.url}
    return raw


def write(raw: dict[str, Any], tmp: Path) -> Path:
    path = Path(tmp) / f"{unique('p')}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def cli(raw: dict[str, Any], tmp: Path, *args: str) -> CliResult:
    """``jobs/ingest.py`` main() in this process (the session SparkSession is reused)."""
    import ingest

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = ingest.main(["--config", str(write(raw, tmp)), *args])
    return CliResult(code, out.getvalue(), err.getvalue())


def topic(raw: dict[str, Any]) -> str:
    return raw["tables"][0]["topic"]


def target(raw: dict[str, Any]) -> str:
    return f"{raw['catalog']['name']}.{raw['tables'][0]['target']}"


def fresh(spark: Any, name: str) -> str:
    """``name`` after dropping this session's cached Iceberg metadata of it: the job may have written it from other
    sessions (a group's tables run in sessions of their own, ``cdc.run.group.table_session``) or processes."""
    try:
        spark.catalog.refreshTable(name)
    except Exception:  # not created: the read reports it
        pass
    return name


def ledger_rows(spark: Any, raw: dict[str, Any]) -> list[Any]:
    name = fresh(spark, f"{raw['catalog']['name']}.{raw['metadata_namespace']}.ledger")
    try:
        return spark.sql(f"SELECT * FROM {name} ORDER BY batch_id, `partition`").collect()
    except Exception:  # never created
        return []


def dead_letters(spark: Any, raw: dict[str, Any]) -> list[Any]:
    name = fresh(spark, f"{raw['catalog']['name']}.{raw['metadata_namespace']}.dead_letters")
    return spark.sql(f"SELECT * FROM {name} ORDER BY `partition`, `offset`").collect()


def table_rows(spark: Any, raw: dict[str, Any], key: str = "id") -> dict[Any, dict[str, Any]]:
    try:
        return {r[key]: r.asDict() for r in spark.table(fresh(spark, target(raw))).collect()}
    except Exception:
        return {}
