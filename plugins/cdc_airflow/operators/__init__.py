"""The CDC operator: ``CdcSparkSubmitOperator`` (``spark_submit``, on the Spark provider's public API) with what it
reports after a job: Airflow asset events of the tables it changed (``assets``) and OpenLineage datasets
(``lineage``)."""
