"""The Iceberg tables the job owns and Iceberg's Java API: creation, evolution, row commits, failures."""
