"""The columns of the tables: what the job adds to each (one spelling), type widening, schema evolution."""
