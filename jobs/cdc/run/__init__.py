"""One micro-batch per table (plan → stage → ledger → merge), groups of tables, and a run's outcome."""
