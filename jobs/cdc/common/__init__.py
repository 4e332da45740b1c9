"""Facts shared by the jobs and the Airflow side, standard library only: the CLI contract, errors, the
result file, SQL quoting, crash points, logging."""
