"""Where a MERGE's rows go before Iceberg writes them: straight from the join's tasks, for a plain table.

Iceberg plans a merge-on-read MERGE with a shuffle before its writers (``write.merge.distribution-mode``, default
``hash``): the rows to write and the positions to delete are clustered by ``_spec_id, _partition, _file``, in
writer partitions of up to 384 MB (Iceberg's advisory size for delta writes). For an unpartitioned table that
clustering has almost nothing to cluster: every new row has the same (null) file and partition, and a batch of less
than 384 MB of rows is written by ONE task after a second shuffle of all of them. In a warm 200,000-event batch
into a 500,000-row table that task wrote 262,000 rows for 0.9 s while the other core idled (the MERGE: 1.8 s).

``merge_conf`` names the session setting that plans the MERGE without that shuffle (``distribution-mode`` none:
each join task writes its own rows and deletes) for a table where the clustering buys nothing: unpartitioned, no
sort order, merge-on-read, format v2, and no distribution mode of the user's (``write.distribution-mode``,
``write.merge.distribution-mode``: theirs is kept). The table's rows are the same either way; a batch writes one
data file (and delete file) per join task instead of one in all. Format v3 keeps Iceberg's clustering: a deletion
vector is one per data file and commit. Applied only to the MERGEs of ``cdc.apply`` (``cdc.session.scoped_conf``); like ``cdc.bloom``'s,
the setting is the session's, and tables that run at once each have their own session (``cdc.group.table_session``).
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["DISTRIBUTION_PROPERTIES", "NO_SHUFFLE", "merge_conf", "unclustered"]

# The table properties by which a user chooses how a MERGE's rows are distributed (then Iceberg decides).
DISTRIBUTION_PROPERTIES = ("write.distribution-mode", "write.merge.distribution-mode")
NO_SHUFFLE = {"spark.sql.iceberg.distribution-mode": "none"}  # Iceberg's session setting (SparkSQLProperties)


def unclustered(format_version: int, partitioned: bool, sort_fields: int, properties: Mapping[str, str]) -> bool:
    """Whether a MERGE into a table with these facts can write its rows where the join left them (pure)."""
    return (format_version == 2 and not partitioned and sort_fields == 0
            and str(properties.get("write.merge.mode", "")).lower() == "merge-on-read"
            and not any(p in properties for p in DISTRIBUTION_PROPERTIES))


def merge_conf(spark: Any, table: Any) -> dict[str, str]:
    """The Spark settings for a MERGE into the Iceberg ``table`` (Java, through Py4J; a few calls, no Spark job)."""
    from cdc.py4j_classes import iceberg_class

    props = dict(table.properties())
    version = int(iceberg_class(spark, "TableUtil").formatVersion(table))
    plain = unclustered(version, not table.spec().isUnpartitioned(), table.sortOrder().fields().size(), props)
    return dict(NO_SHUFFLE) if plain else {}
