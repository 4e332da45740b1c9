"""What the Airflow side is configured by: the deployment's environment (``settings``), the pipeline YAML files it
finds and loads with the job's own loader (``pipelines``), and their ``airflow:`` section (``options``)."""
