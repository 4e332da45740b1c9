"""Example DAG downstream of the ``demo`` pipeline: ``cdc_demo_downstream``, scheduled on its table assets.

Wiring only: see plugins/cdc_airflow/downstream.py. ``CDC_DOWNSTREAM_PIPELINE`` names another pipeline to follow.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HOME = Path(os.environ.get("CDC_HOME") or Path(__file__).resolve().parents[1])
if str(_HOME / "plugins") not in sys.path:
    sys.path.append(str(_HOME / "plugins"))

from cdc_airflow.downstream import build_downstream_dag  # noqa: E402
from cdc_airflow.pipelines import load_pipelines  # noqa: E402
from cdc_airflow.settings import load_settings  # noqa: E402

_settings = load_settings()
_follow = os.environ.get("CDC_DOWNSTREAM_PIPELINE") or "demo"
for _p in load_pipelines(_settings):
    if _p.config is not None and _p.config.pipeline == _follow:
        _dag = build_downstream_dag(_settings, _p.config)
        globals()[_dag.dag_id] = _dag
