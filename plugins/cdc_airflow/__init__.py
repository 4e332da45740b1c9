"""Airflow side of the CDC ingestion product: settings, pure command builders, the Spark operator, ledger reads.

Nothing here imports pyspark or confluent_kafka at import time: the DAG files import this package while parsing.
"""
