"""Watching the pipelines without Spark: the Iceberg ledger, dead letters and targets read with pyiceberg
(``ledger``), consumer lag per table and partition (``lag``), lag in time and staleness (``freshness``) and the
failure and freshness alerts of the DAGs (``alerts``)."""
