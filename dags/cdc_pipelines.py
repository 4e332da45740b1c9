"""One ingestion DAG ``cdc_<pipeline>`` per pipeline YAML in $CDC_PIPELINES_DIR (default <repo>/pipelines), the
manual ``cdc_<pipeline>_bootstrap`` of pipelines with bootstrap tables, and for a file that does not load a DAG
that fails every interval with the file, the key and the fix (the other pipelines are unaffected).

Wiring only: see plugins/cdc_airflow/dags/pipelines.py. Parsing imports pyyaml and Airflow, never pyspark or Kafka.
`cdc_airflow` is the installed package (`pip install '.[airflow]'`) or Airflow's plugins folder.
"""

from __future__ import annotations

from cdc_airflow.config.settings import load_settings
from cdc_airflow.dags.pipelines import pipeline_dags

globals().update(pipeline_dags(load_settings()))
