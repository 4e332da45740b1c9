"""CDC ingestion library: Debezium topics in Kafka -> Apache Iceberg tables.

Shipped to Spark executors as a zip (``--py-files``); the entry point is ``jobs/ingest.py``.
"""

__version__ = "0.1.0"
