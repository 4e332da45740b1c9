"""One ingestion DAG ``cdc_<pipeline>`` per pipeline YAML in $CDC_PIPELINES_DIR (default <repo>/pipelines).

Wiring only: see plugins/cdc_airflow/dags/ingest.py. Parsing imports pyyaml and Airflow, never pyspark or Kafka.
`cdc_airflow` is the installed package (`pip install '.[airflow]'`) or Airflow's plugins folder.
"""

from __future__ import annotations

from cdc_airflow.config.pipelines import load_pipelines
from cdc_airflow.config.settings import load_settings
from cdc_airflow.dags.bootstrap import build_bootstrap_dag
from cdc_airflow.dags.ingest import build_broken_dag, build_ingest_dag

_settings = load_settings()
for _p in load_pipelines(_settings):
    if _p.config is None:
        _dag = build_broken_dag(f"cdc_{_p.path.stem}", str(_p.path), _p.error or "unknown error")
    else:
        _dag = build_ingest_dag(_settings, _p.config)
        _boot = build_bootstrap_dag(_settings, _p.config)  # manual cdc_<pipeline>_bootstrap: bootstrap tables only
        if _boot is not None:
            globals()[_boot.dag_id] = _boot
    globals()[_dag.dag_id] = _dag
