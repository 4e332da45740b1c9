"""A small batch's changes to the target written through Iceberg's API: one row delta, no MERGE.

``cdc.merge.sql.merge_target_sql`` applies the classified changes with a MERGE: a query plan, a scan and join of the
target, four Spark jobs; in a warm 20-table job about 0.7 s per table and batch, as much as the classification
itself. For a batch the driver read (``batch.driver_read_max_records``, at most ``cdc.stage.driver_read.MAX_BYTES``
of rows) with ``MergeSpec.locate_target`` the classification already joined every changed key with its live target
row and names where that row is (Iceberg's ``_file`` and ``_pos``). What the MERGE would do is then known without a
second join: ``insert`` adds the change's row, ``update`` replaces the located row by it, ``delete`` removes the
located row (``skip`` and ``tombstone`` leave the target alone). ``write_target`` writes the new rows (the MERGE's
INSERT values, ``cdc.merge.sql.insert_values``, computed by Spark from the classified view and written by Iceberg's own
Spark Parquet writers, ``cdc.iceberg.row_writer``) and a position delete file of the located rows, and commits both as one
row delta validated from the target snapshot the classification read (``cdc.iceberg.row_commit.commit_delta``), carrying
the batch's ``cdc.*`` summary keys. Any commit to the target since (another run, maintenance) fails the validation
and the batch goes through the MERGE after all, which re-checks every change against the table as it is (the
fencing of ``cdc.merge``): the table ends the same either way.

Only where the result is exactly the MERGE's (``ineligible`` says why not): upsert mode with hard deletes (a soft
delete keeps the row's old columns), no primary-key moves, an unpartitioned format-v2 Parquet merge-on-read target
whose columns are exactly those the MERGE's INSERT writes, with the same Spark types, and no floating-point key
column (equal under SQL's ``=`` is not equal bits); the caller also needs tombstones unchanged since the
classification (else the MERGE's late-tombstone check), and every changed key once.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cdc.common.sql import lit, q
from cdc.iceberg.failures import is_commit_conflict
from cdc.iceberg.row_commit import commit_delta
from cdc.iceberg.row_writer import write_frame, writer_class
from cdc.iceberg.snapshot_summary import current_commit_properties
from cdc.iceberg.tables import iceberg_table
from cdc.merge.sql import MergeSpec, insert_values
from cdc.schema.columns import TARGET_FILE, TARGET_POS
from cdc.spark.py4j_classes import iceberg_class

log = logging.getLogger("cdc.target_write")
WRITES = ("insert", "update")  # the classified actions that write a row
REPLACES = ("update", "delete")  # the classified actions that remove the located row
FORMAT_VERSION = 2  # v3 tables take deletion vectors, not position delete files


@dataclass(frozen=True)
class TargetFacts:
    """What decides whether a target can take a row delta: read from the Iceberg table the session's catalog holds."""

    format_version: int
    partitioned: bool
    file_format: str
    merge_mode: str
    fields: tuple[tuple[str, str, bool], ...]  # (name, Spark type's simpleString, nullable), in the table's order


def target_facts(spark: Any, table: Any) -> TargetFacts:
    """``TargetFacts`` of the Iceberg ``table`` (Java, through Py4J; a few calls, no Spark job)."""
    props = table.properties()
    struct = json.loads(iceberg_class(spark, "spark.SparkSchemaUtil").convert(table.schema()).json())
    from pyspark.sql.types import StructType

    fields = tuple((f.name, f.dataType.simpleString(), f.nullable) for f in StructType.fromJson(struct).fields)
    return TargetFacts(format_version=int(iceberg_class(spark, "TableUtil").formatVersion(table)),
                       partitioned=not table.spec().isUnpartitioned(),
                       file_format=str(props.get("write.format.default") or "parquet").lower(),
                       merge_mode=str(props.get("write.merge.mode") or "copy-on-write").lower(), fields=fields)


def ineligible(spec: MergeSpec, facts: TargetFacts) -> str | None:
    """Why the target cannot take this batch's changes as a row delta (None: it can); pure."""
    if spec.soft or not spec.tombstones:
        return "soft deletes"
    if spec.pk_moves:
        return "primary-key moves"
    if facts.format_version != FORMAT_VERSION:
        return f"format version {facts.format_version}"
    if facts.partitioned:
        return "a partitioned table"
    if facts.file_format != "parquet":
        return f"{facts.file_format} data files"
    if facts.merge_mode != "merge-on-read":
        return f"write.merge.mode {facts.merge_mode}"
    written = [c for c, _ in insert_values(spec)]
    if sorted(written) != sorted(name for name, _, _ in facts.fields):
        return "table columns other than the batch's"
    types = {name: t for name, t, _ in facts.fields}
    floating = [k for k in spec.key if types[k] in ("float", "double")]
    if floating:
        return f"floating-point key columns {floating}"
    return None


def written_sql(spec: MergeSpec, facts: TargetFacts, view: str) -> str:
    """The rows the MERGE's INSERT and UPDATE would leave of the classified ``view``, in the table's column order;
    a NULL in a NOT NULL column fails, as Spark's write would; pure."""
    values = dict(insert_values(spec))
    cols = []
    for name, _, nullable in facts.fields:
        v = values[name]
        if not nullable:
            v = (f"CASE WHEN {v} IS NULL THEN raise_error({lit(f'NULL in NOT NULL column {name} of {spec.target}')})"
                 f" ELSE {v} END")
        cols.append(f"{v} AS {q(name)}")
    actions = ", ".join(lit(a) for a in WRITES)
    return f"SELECT {', '.join(cols)} FROM {view} s WHERE s.`__action` IN ({actions})"


_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def widens(have: str, want: str) -> bool:
    """Does a value of Spark type ``have`` go into a column of type ``want`` unchanged (the same type, or a wider
    one of the widenings ``cdc.schema.evolution`` allows, which the MERGE's store assignment applies)? Types as
    ``simpleString``; pure."""
    if have == want:
        return True
    if have in _INTEGRAL and want in _INTEGRAL:
        return _INTEGRAL.index(have) < _INTEGRAL.index(want)
    if (have, want) == ("float", "double"):
        return True
    a, b = _DECIMAL.match(have), _DECIMAL.match(want)
    return bool(a and b and a.group(2) == b.group(2) and int(a.group(1)) <= int(b.group(1)))


def located_columns(spec: MergeSpec) -> tuple[str, ...]:
    """The classified columns ``write_target`` takes of each changed row (``cdc.merge.apply.read_actions``)."""
    return (*spec.key, TARGET_FILE, TARGET_POS)


def replaced_rows(spec: MergeSpec, changed: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]] | None:
    """The (file, position) of each target row the changes replace or delete, or None when a key comes twice (the
    target holds it twice: the MERGE then fails on it, as it should); pure."""
    keys = [tuple(_hashable(r[k]) for k in spec.key) for r in changed]
    if len(set(keys)) != len(keys):
        return None
    out = []
    for r in changed:
        if r["__action"] in REPLACES:
            if r[TARGET_FILE] is None:
                raise AssertionError(f"table {spec.target}: an {r['__action']} without a located target row")
            out.append((r[TARGET_FILE], int(r[TARGET_POS])))
    return out


def _hashable(value: Any) -> Any:
    """A key value as collected (``bytearray`` for binary, lists, ``Row``s, dicts) in a hashable form; pure."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def write_target(spark: Any, spec: MergeSpec, facts: TargetFacts, view: str,
                 changed: Sequence[Mapping[str, Any]], since: int | None) -> bool:
    """Commit the batch's target changes as one row delta validated from snapshot ``since`` of the target (the one
    the classification read). ``changed``: the classified rows other than ``skip`` (``located_columns`` and
    ``__action``). False when nothing was written and the caller must run ``merge_target_sql``: Iceberg refused the
    commit (a commit since), a key came twice, the rows' types are not the table's, or no row writer."""

    assert spec.locate_target, "only for a classification that located the target's rows"
    deletes = replaced_rows(spec, changed)
    if deletes is None or writer_class(spark) is None:
        return False
    df = spark.sql(written_sql(spec, facts, view))
    got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    if [n for n, _ in got] != [n for n, _, _ in facts.fields] or not all(
            widens(have, want) for (_, have), (_, want, _) in zip(got, facts.fields)):
        log.info("table %s: the batch's column types %s do not go into the table's as they are; merging by MERGE",
                 spec.target, got)
        return False
    if any(have != want for (_, have), (_, want, _) in zip(got, facts.fields)):
        from pyspark.sql import functions as F

        df = df.select(*(F.col(q(n)).cast(want).alias(n) for n, want, _ in facts.fields))
    table = iceberg_table(spark, spec.target)
    data_file = write_frame(spark, table, df) if any(r["__action"] in WRITES for r in changed) else None
    if data_file is None and not deletes:  # only tombstones: the MERGE would change no row either
        return True
    try:
        commit_delta(spark, table, data_file, deletes, since, current_commit_properties(spark))
    except Exception as exc:  # noqa: BLE001 - a refused commit is answered by the MERGE; anything else is raised
        if not is_commit_conflict(exc):
            raise
        log.info("table %s: the target changed since the classification; merging this batch by MERGE", spec.target)
        return False
    return True
