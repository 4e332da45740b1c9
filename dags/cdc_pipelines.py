"""One ingestion DAG ``cdc_<pipeline>`` per pipeline YAML in $CDC_PIPELINES_DIR (default <repo>/pipelines).

Wiring only: see plugins/cdc_airflow/ingest_dag.py. Parsing imports pyyaml and Airflow, never pyspark or Kafka.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HOME = Path(os.environ.get("CDC_HOME") or Path(__file__).resolve().parents[1])
if str(_HOME / "plugins") not in sys.path:  # Airflow puts plugins/ on sys.path; plain imports may not
    sys.path.append(str(_HOME / "plugins"))

from cdc_airflow.ingest_dag import build_broken_dag, build_ingest_dag  # noqa: E402
from cdc_airflow.pipelines import load_pipelines  # noqa: E402
from cdc_airflow.settings import load_settings  # noqa: E402

_settings = load_settings()
for _p in load_pipelines(_settings):
    if _p.config is None:
        _dag = build_broken_dag(f"cdc_{_p.path.stem}", str(_p.path), _p.error or "unknown error")
    else:
        _dag = build_ingest_dag(_settings, _p.config)
    globals()[_dag.dag_id] = _dag
