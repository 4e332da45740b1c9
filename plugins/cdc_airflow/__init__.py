"""Airflow side of the CDC ingestion product, by Airflow role: ``dags`` (the DAG factories), ``operators`` (the Spark
operator, its asset events and lineage), ``monitor`` (ledger reads, lag, freshness, alerts), ``status`` (the "CDC
status" view), on ``runs`` (pure: run parameters → job arguments) and ``config`` (settings, pipeline files).

Nothing here imports pyspark or confluent_kafka at import time: the DAG files import this package while parsing.
"""
