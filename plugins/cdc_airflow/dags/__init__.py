"""The DAG factories, one module per DAG of a pipeline: ``ingest`` (``cdc_<pipeline>``, and the placeholder DAG of a
broken file), ``maintenance``, ``bootstrap`` and the example ``downstream``; what they share (``START``,
``default_args``) is in ``common``, so no factory imports another. The thin files in the repository's ``dags/`` call
them."""
