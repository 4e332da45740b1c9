"""The write modes other than the upsert mirror: append and scd2 (see ``spec``)."""
