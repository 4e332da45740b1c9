"""One daily maintenance DAG ``cdc_<pipeline>_maintenance`` per pipeline YAML (see cdc_pipelines.py).

Wiring only: see plugins/cdc_airflow/dags/maintenance.py.
`cdc_airflow` is the installed package (`pip install '.[airflow]'`) or Airflow's plugins folder.
"""

from __future__ import annotations

from cdc_airflow.config.pipelines import load_pipelines
from cdc_airflow.config.settings import load_settings
from cdc_airflow.dags.maintenance import build_maintenance_dag

_settings = load_settings()
for _p in load_pipelines(_settings):
    if _p.config is not None:  # broken files are reported by cdc_pipelines.py
        _dag = build_maintenance_dag(_settings, _p.config)
        globals()[_dag.dag_id] = _dag
