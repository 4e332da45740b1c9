"""A DAG run's parameters → the jobs' arguments, and back: the ``Param`` specs and their cross-field checks
(``params``), the run request, job arguments, planning and summary folding (``commands``) and the tables of a run in
groups of ``airflow.tables_per_task`` (``grouping``). Pure: no Airflow, Spark or Kafka imports."""
