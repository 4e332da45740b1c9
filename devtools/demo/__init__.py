"""`make demo`: the real chain end to end (PostgreSQL → Debezium in Kafka Connect → Kafka → Airflow → Spark → Iceberg),
checked against the source database itself.

    python -m devtools.demo                 # Kafka, registry, PostgreSQL, Connect, Airflow; one DAG run per wave
    python -m devtools.demo --no-airflow    # the same waves, each ingested by `python jobs/ingest.py` directly
    python -m devtools.demo stop            # stop everything a demo started (pidfiles in .demo/)

What happens:

1. The chain users run starts on loopback, as daemons with pidfiles in ``.demo/``: Apache Kafka (``devtools.broker``,
   127.0.0.1:19092), the schema registry (127.0.0.1:18081), PostgreSQL 15 (``devtools.postgres``, 127.0.0.1:15432, data
   in ``.demo/postgres``) and a Kafka Connect worker (``devtools.connect``, 127.0.0.1:18083) with Debezium's
   PostgreSQL connector and Confluent's AvroConverter; ``pipelines/demo.yaml`` reads its topics (3 partitions each).
2. The source is a real ``inventory`` database (``customers``, ``orders``; ``devtools.demo.source``). Wave 1 inserts
   rows, then creates the connector (its initial snapshot, op ``r``); later waves are SQL transactions: inserts,
   updates that leave a large TOASTed text unchanged (``__debezium_unavailable_value``), deletes, primary-key
   changes, ``ALTER TABLE ... ADD COLUMN`` on both tables, and an incremental snapshot while rows change. After each
   wave the marker (``devtools.pgsource``) waits until its changes are in Kafka.
3. Airflow 3 (SQLite, LocalExecutor; AIRFLOW_HOME ``.demo/airflow``): ``db migrate``, scheduler and triggerer
   (``--skip-serve-logs``), dag-processor and api-server on 127.0.0.1; the simple auth manager with user ``admin``
   and a generated password; pool ``cdc_spark`` and connection ``spark_default`` (``local[*]``) created through the
   REST API. After each wave one run of ``cdc_demo`` is triggered through the REST API and awaited.
4. After every wave each Iceberg table (read with pyiceberg) is compared with ``SELECT *`` of its PostgreSQL table;
   at the end they are printed side by side: MATCH or MISMATCH (exit status 1).

The broker's log (``.demo/broker.kafka``), the registry and the database start empty, so every demo starts from scratch
(warehouse, database and Airflow home are recreated under ``.demo/``). Airflow stays up after the demo for exploring the UI; ``make demo-stop``.
"""
