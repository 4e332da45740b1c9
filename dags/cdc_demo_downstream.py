"""Example DAG downstream of the ``demo`` pipeline: ``cdc_demo_downstream``, scheduled on its table assets.

Wiring only: see plugins/cdc_airflow/dags/downstream.py. ``CDC_DOWNSTREAM_PIPELINE`` names another pipeline to follow.
`cdc_airflow` is the installed package (`pip install '.[airflow]'`) or Airflow's plugins folder.
"""

from __future__ import annotations

import os

from cdc_airflow.config.pipelines import load_pipelines
from cdc_airflow.config.settings import load_settings
from cdc_airflow.dags.downstream import build_downstream_dag

_settings = load_settings()
_follow = os.environ.get("CDC_DOWNSTREAM_PIPELINE") or "demo"
for _p in load_pipelines(_settings):
    if _p.config is not None and _p.config.pipeline == _follow:
        _dag = build_downstream_dag(_settings, _p.config)
        globals()[_dag.dag_id] = _dag
