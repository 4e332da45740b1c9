"""The DAG factories, one module per DAG of a pipeline: ``ingest`` (``cdc_<pipeline>``), ``broken`` (the placeholder
DAG of a file that does not load), ``maintenance``, ``bootstrap`` and the example ``downstream``; what they share
(``START``, ``default_args``) is in ``common``, so no factory imports another. ``pipelines`` assembles the DAGs of
``dags/cdc_pipelines.py`` from them, one file at a time. The thin files in the repository's ``dags/`` call them."""
