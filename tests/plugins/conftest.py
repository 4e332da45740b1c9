"""Airflow tests: the throw-away AIRFLOW_HOME and the `airflow_db` fixture live in tests/airflow_env.py."""

from tests.airflow_env import REPO, airflow_db  # noqa: F401  (fixture re-export; sets AIRFLOW_* on import)
