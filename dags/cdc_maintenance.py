"""One daily maintenance DAG ``cdc_<pipeline>_maintenance`` per pipeline YAML (see cdc_pipelines.py).

Wiring only: see plugins/cdc_airflow/maintenance_dag.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HOME = Path(os.environ.get("CDC_HOME") or Path(__file__).resolve().parents[1])
if str(_HOME / "plugins") not in sys.path:
    sys.path.append(str(_HOME / "plugins"))

from cdc_airflow.maintenance_dag import build_maintenance_dag  # noqa: E402
from cdc_airflow.pipelines import load_pipelines  # noqa: E402
from cdc_airflow.settings import load_settings  # noqa: E402

_settings = load_settings()
for _p in load_pipelines(_settings):
    if _p.config is not None:  # broken files are reported by cdc_pipelines.py
        _dag = build_maintenance_dag(_settings, _p.config)
        globals()[_dag.dag_id] = _dag
