"""`make demo`: a local CDC pipeline end to end, checked against the source's true state.

    python -m devtools.demo                 # broker + schema registry + Airflow; one DAG run per wave of changes
    python -m devtools.demo --no-airflow    # the same waves, each ingested by `python jobs/ingest.py` directly
    python -m devtools.demo stop            # stop everything a demo started (pidfiles in .demo/)

What happens:

1. A local Apache Kafka broker (``devtools.broker``, 127.0.0.1:19092) and the test schema registry (127.0.0.1:18081) start as
   daemons with pidfiles in ``.demo/``; ``pipelines/demo.yaml`` reads Avro (Confluent wire format) through them.
2. A small "inventory" database (``customers`` and ``orders``, PostgreSQL connector, 3 partitions per topic) is
   simulated by ``devtools.debezium.ChangeEventGenerator``: wave 1 is the initial snapshot (op ``r``); later waves are
   live transactions: inserts, updates (unchanged TOASTed text arrives as ``__debezium_unavailable_value``), deletes
   with tombstones, primary-key changes, and an ``ALTER TABLE ... ADD COLUMN`` on both tables (new Avro schema
   version in the registry).
3. Airflow 3 (SQLite, LocalExecutor; AIRFLOW_HOME ``.demo/airflow``): ``db migrate``, scheduler and triggerer
   (``--skip-serve-logs``), dag-processor and api-server on 127.0.0.1; the simple auth manager with user ``admin``
   and a generated password; pool ``cdc_spark`` and connection ``spark_default`` (``local[*]``) created through the
   REST API. Each wave is produced, then one run of ``cdc_demo`` is triggered through the REST API and awaited.
4. After every wave the Iceberg tables (read with pyiceberg) are compared with the generator's oracle; at the end
   each table is printed next to the expected source state: MATCH or MISMATCH (exit status 1).

The broker's log (``.demo/broker.kafka``) and the registry start empty, so every demo starts from scratch (warehouse and Airflow
home are recreated under ``.demo/``). Airflow stays up after the demo for exploring the UI; ``make demo-stop``.
"""
