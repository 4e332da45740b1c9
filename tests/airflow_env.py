"""Airflow test environment: a throw-away AIRFLOW_HOME, configured before anything imports airflow.

Imported by tests/dags/conftest.py and tests/plugins/conftest.py; the first import creates the home, later ones
reuse it (CDC_TEST_AIRFLOW_HOME), so one pytest process never mixes two Airflow configurations.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOME = os.environ.get("CDC_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="cdc-airflow-home-")
os.environ["CDC_TEST_AIRFLOW_HOME"] = HOME
os.environ["AIRFLOW_HOME"] = HOME
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
# The OpenLineage provider's listener writes every event it emits to this file (openlineage_events reads it).
OPENLINEAGE_FILE = Path(HOME) / "openlineage.jsonl"
os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps({"type": "file", "log_file_path": str(OPENLINEAGE_FILE),
                                                            "append": True})
os.environ["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "cdc-tests"


@pytest.fixture(scope="session")
def airflow_db() -> str:
    """An initialised metadata DB (SQLite in the temp AIRFLOW_HOME)."""
    from airflow.utils import db

    db.initdb()
    return HOME


def asset_events(run_id: str) -> list[tuple[str, str, dict]]:
    """(asset name, uri, extra) of the asset events a DAG run emitted, in emission order."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetModel.name, AssetModel.uri, AssetEvent.extra).join(
            AssetEvent, AssetEvent.asset_id == AssetModel.id).where(AssetEvent.source_run_id == run_id)
            .order_by(AssetEvent.id)).all()
    return [(n, u, dict(e or {})) for n, u, e in rows]


def openlineage_events(job_suffix: str = "") -> list[dict]:
    """OpenLineage run events written so far (file transport), optionally only of jobs ending in ``job_suffix``."""
    if not OPENLINEAGE_FILE.exists():
        return []
    events = [json.loads(line) for line in OPENLINEAGE_FILE.read_text().splitlines() if line.strip()]
    return [e for e in events if str(e.get("job", {}).get("name", "")).endswith(job_suffix)]
