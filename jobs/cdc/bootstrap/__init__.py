"""A JDBC snapshot of the source → the target table and the ledger's horizon."""
