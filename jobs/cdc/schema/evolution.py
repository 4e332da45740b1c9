"""Target-table schema evolution: the table's columns vs. a batch's source columns (pure; no Spark, no Kafka).

``plan(existing, source, allow_field_addition)`` decides a batch's row columns and the table changes they need:

* **same type** → nothing.
* **safe widening** (what Iceberg can promote in place) → ``ALTER COLUMN ... TYPE``: ``int`` → ``bigint``,
  ``float`` → ``double``, ``decimal(p, s)`` → ``decimal(p', s)`` with ``p' > p``; inside lists, map values and
  structs too (``ALTER COLUMN c.element TYPE bigint``).
* **source narrower than the table** (``int`` values for a ``bigint`` column, ``decimal(8,2)`` for ``decimal(10,2)``)
  → accepted, the table keeps its wider type (every value fits; never narrowed). This is also what records written
  before a widening look like, e.g. a partition that lags behind the others.
* **new column** → appended (nullable: older rows read NULL), or ignored when ``allow_field_addition`` is false.
  New struct fields likewise (``ADD COLUMN c.field``).
* **column missing from the source** (dropped upstream) → kept, nullable; NULL from then on.
* **anything else** (string ↔ number, decimal scale change, date ↔ timestamp, timestamp ↔ timestamptz, ...) →
  ``Incompatible`` naming the column path and both types; the caller fails the batch before any write.

Columns are never reordered, renamed, dropped or retyped beyond the widenings above.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import pyarrow as pa

from cdc.common.errors import SchemaEvolutionError
from cdc.schema.columns import Column
from cdc.schema.widening import ADD, WIDEN, Change, Incompatible, merge_type


@dataclass(frozen=True)
class Plan:
    columns: list[Column]  # the batch's row columns: table order, widened, dropped kept, new appended
    changes: list[Change] = field(default_factory=list)  # what the table needs (empty for a new table)
    ignored: list[str] = field(default_factory=list)  # new source columns left out (allow_field_addition: false)


def plan(existing: Sequence[Column], source: Sequence[Column], allow_field_addition: bool = True) -> Plan:
    """Row columns of a batch and the table changes they need (see the module docstring for the rules).

    ``existing``: the target table's row columns (empty: no table yet, the source columns are used as they are);
    ``source``: the batch's newest source schema.
    """
    if not existing:
        return Plan(list(source))
    by_name = {c.name: c for c in source}
    columns: list[Column] = []
    changes: list[Change] = []
    for old in existing:
        new = by_name.pop(old.name, None)
        if new is None:  # dropped at the source (or absent from this batch's schema): kept, NULL from now on
            columns.append(replace(old, nullable=True))
            continue
        t, sub = merge_type(old.arrow_type, new.arrow_type, (old.name,), allow_field_addition)
        changes += sub
        columns.append(Column(old.name, t, old.nullable or new.nullable, new.logical or old.logical))
    added = [c for c in source if c.name in by_name]
    if not allow_field_addition:
        return Plan(columns, changes, [c.name for c in added])
    for c in added:
        columns.append(replace(c, nullable=True))
        changes.append(Change(ADD, (c.name,), c.arrow_type))
    return Plan(columns, changes)


def table_changes(existing: Sequence[Column], wanted: Sequence[Column]) -> list[Change]:
    """The ``ADD COLUMN`` / ``ALTER COLUMN ... TYPE`` changes that make a table hold ``wanted`` (never drops or
    narrows). Raises ``Incompatible`` when a wanted type is not a safe widening of the table's."""
    have = {c.name: c for c in existing}
    out: list[Change] = []
    for c in wanted:
        old = have.get(c.name)
        if old is None:
            out.append(Change(ADD, (c.name,), c.arrow_type))
        else:
            out += merge_type(old.arrow_type, c.arrow_type, (c.name,))[1]
    return out


def sql_type(t: pa.DataType) -> str:
    """Spark/Iceberg SQL spelling of an Arrow column type, for messages (``int``, ``decimal(10,2)``, ...)."""
    simple = {pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
              pa.float32(): "float", pa.float64(): "double", pa.bool_(): "boolean", pa.string(): "string",
              pa.large_string(): "string", pa.binary(): "binary", pa.large_binary(): "binary", pa.date32(): "date"}
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{sql_type(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{sql_type(t.key_type)},{sql_type(t.item_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{t.field(i).name}:{sql_type(t.field(i).type)}" for i in range(t.num_fields)) + ">"
    return str(t)


def evolution_error(table: str, topic: str, exc: Incompatible, where: tuple[int, int] | None,
                    scanned: str = "", bootstrap_mode: str | None = None) -> SchemaEvolutionError:
    """The batch-failing error: table, column, both types and the first offending record; for a table with a JDBC
    bootstrap (``bootstrap_mode``: its ``decimal_handling_mode``), what a decimal mode mismatch means
    (``decimal_mode_hint``)."""
    at = (f"first record with the new type: topic {topic} partition {where[0]} offset {where[1]}" if where
          else f"topic {topic}: offending record not located{scanned}")
    err = SchemaEvolutionError(
        f"table {table}: column {exc.column!r}: incompatible source type change {sql_type(exc.old)} → "
        f"{sql_type(exc.new)} ({at}). "
        "Only new nullable columns, int→bigint, float→double and decimal precision increases (same scale) are "
        "applied automatically; nothing was written. Migrate the table by hand (e.g. ALTER TABLE / rewrite, or a "
        "new column name at the source), then rerun" + decimal_mode_hint(exc, bootstrap_mode, table))
    err.table, err.column, err.old, err.new = table, exc.column, exc.old, exc.new  # type: ignore[attr-defined]
    err.partition, err.offset = where if where else (None, None)  # type: ignore[attr-defined]
    return err


_MODE_TYPES = {"double": pa.float64(), "string": pa.string()}  # decimal.handling.mode's non-precise Connect types


def _decimal_mode(t: pa.DataType) -> str | None:
    """The decimal.handling.mode that gives a numeric column this type (None: no mode does)."""
    if pa.types.is_decimal(t):
        return "precise"
    return next((m for m, mt in _MODE_TYPES.items() if t.equals(mt) or (m == "string" and pa.types.is_large_string(t))),
                None)


def bootstrap_mode(table: Any) -> str | None:
    """A ``TableConfig``'s ``bootstrap.decimal_handling_mode`` (None: the table has no bootstrap section)."""
    b = getattr(table, "bootstrap", None)
    return None if b is None else str(getattr(b, "decimal_handling_mode", "precise"))


def decimal_mode_hint(exc: Incompatible, bootstrap_mode: str | None, table: str = "the target") -> str:
    """For a table loaded by a JDBC bootstrap in ``bootstrap_mode`` (None: not bootstrapped): when the table's type
    is what that mode makes of a numeric column and the topic's is what another mode makes of it, the sentence that
    says so and what to do (else "")."""
    if bootstrap_mode is None or _decimal_mode(exc.old) != bootstrap_mode:
        return ""
    topic_mode = _decimal_mode(exc.new)
    if topic_mode is None or topic_mode == bootstrap_mode:
        return ""
    return (f". If {exc.top!r} is a numeric/decimal/money column at the source and the table was loaded by its JDBC "
            f"bootstrap (bootstrap.decimal_handling_mode: {bootstrap_mode}, the column as the connector's "
            f"decimal.handling.mode={bootstrap_mode} sends it), the topic's records say the Debezium connector runs "
            f"with decimal.handling.mode={topic_mode}: set bootstrap.decimal_handling_mode: "
            f"{topic_mode} for this table (the connector's setting), drop the table (DROP TABLE {table}: --replace "
            "cannot change a column's type) and run the bootstrap again")


def offends(exc: Incompatible, table_type: pa.DataType, columns: Sequence[Column] | None) -> bool:
    """Does a record whose own row columns are ``columns`` carry the incompatible type of ``exc``?"""
    for c in columns or ():
        if c.name == exc.top:
            try:
                merge_type(table_type, c.arrow_type, (c.name,))
            except Incompatible:
                return True
            return False
    return False


__all__ = ["ADD", "WIDEN", "Change", "Incompatible", "Plan", "bootstrap_mode", "decimal_mode_hint", "evolution_error",
           "merge_type", "offends", "plan", "sql_type", "table_changes"]
