"""Read a batch's chunks from Kafka in Spark tasks into its staging table, and count what was staged."""
