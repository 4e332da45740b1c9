"""Where a target snapshot came from: ``cdc.*`` keys in the snapshot summary of every commit a batch makes.

Iceberg's Spark writes (``SparkWrite`` for copy-on-write and appends, ``SparkPositionDeltaWrite`` for merge-on-read
MERGE/UPDATE/DELETE, ``SparkTable.deleteWhere`` for metadata-only deletes) copy
``org.apache.iceberg.spark.CommitMetadata.commitProperties()`` (a thread-local map) into the snapshot summary. The
public setter, ``CommitMetadata.withCommitProperties(map, Callable, Class)``, needs a JVM ``Callable``; SQL statements
have no write options (``snapshot-property.<key>`` works only for DataFrame writes) and Iceberg 1.10 has no session
conf for it. So ``commit_properties`` sets that thread-local for the JVM thread that runs this Python thread's
statements (PySpark's pinned-thread mode, the default since 3.2: one JVM thread per Python thread) and removes it
afterwards, exactly what ``withCommitProperties`` does around its callable.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator, Mapping, Sequence

from cdc.spark.py4j_classes import java_class

BATCH_ID = "cdc.batch-id"
PIPELINE = "cdc.pipeline"
END_OFFSETS = "cdc.end-offsets"  # {"<topic>": {"<partition>": end offset (exclusive)}}, as --end-offsets takes it
BOOTSTRAP = "cdc.bootstrap"  # a JDBC bootstrap's swap commit: {"run_id", "batch_id", "horizon", ...} (cdc.bootstrap)
_CLASS = "org.apache.iceberg.spark.CommitMetadata"


def batch_summary(pipeline: str, batch_id: int, topic: str, ranges: Sequence[Any]) -> dict[str, str]:
    """The ``cdc.*`` snapshot-summary keys of one batch; ``ranges`` have ``partition`` and ``end`` (objects or
    dicts)."""
    def get(r: Any, k: str) -> Any:
        return r[k] if isinstance(r, Mapping) else getattr(r, k)

    ends = {str(get(r, "partition")): int(get(r, "end")) for r in sorted(ranges, key=lambda r: get(r, "partition"))}
    return {BATCH_ID: str(int(batch_id)), PIPELINE: pipeline, END_OFFSETS: json.dumps({topic: ends})}


@contextlib.contextmanager
def commit_properties(spark: Any, props: Mapping[str, str] | None) -> Iterator[None]:
    """Every Iceberg commit made by this thread's Spark statements inside the block carries ``props`` in its
    snapshot summary."""
    if not props:
        yield
        return
    loader = java_class(spark, "java.lang.Thread").currentThread().getContextClassLoader()
    field = java_class(spark, "java.lang.Class").forName(_CLASS, True, loader).getDeclaredField("COMMIT_PROPERTIES")
    field.setAccessible(True)
    local = field.get(None)
    values = java_class(spark, "java.util.HashMap")()
    for k, v in props.items():
        values.put(str(k), str(v))
    local.set(values)
    try:
        yield
    finally:
        local.remove()


def current_commit_properties(spark: Any) -> dict[str, str]:
    """What ``commit_properties`` set for this thread's Spark statements (empty outside it): for a commit made
    through Iceberg's API in the same block (``cdc.merge.target_write``), which Spark's writes do not see."""
    props = java_class(spark, _CLASS).commitProperties()
    if props is None or props.isEmpty():
        return {}
    keys = java_class(spark, "java.util.ArrayList")(props.keySet())  # by index: Py4J ends an iteration with an error
    return {str(keys.get(i)): str(props.get(keys.get(i))) for i in range(keys.size())}
