"""Source log positions: the ordering of change events, ordering epochs, failover regressions, and
the SQL that compares positions."""
