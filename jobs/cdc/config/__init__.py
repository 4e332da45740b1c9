"""A pipeline YAML → frozen typed objects, and the names of the tables a pipeline owns."""
