"""Schema evolution between Arrow types (pure): which type changes are safe widenings, and a batch's column list
from the table's existing columns and the newest source schema. The rules are documented in
``docs/types-and-evolution.md``; ``cdc.evolution`` turns them into table changes."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import pyarrow as pa

from cdc.decode.model import Column
from cdc.errors import SchemaEvolutionError

_LARGE = ((pa.string(), pa.large_string()), (pa.binary(), pa.large_binary()))


def _evolution_error(column: str, old: pa.DataType, new: pa.DataType) -> SchemaEvolutionError:
    err = SchemaEvolutionError(f"column {column!r}: incompatible type change {old} → {new} (only int32→int64, "
                               "float32→float64, wider decimal precision and added fields are applied "
                               "automatically); migrate the table by hand or rename the column")
    err.column, err.old, err.new = column, old, new  # type: ignore[attr-defined]
    return err


def widen(old: pa.DataType, new: pa.DataType, column: str = "?") -> pa.DataType:
    """The type holding values of ``old`` and ``new`` when ``new`` is a safe widening; else SchemaEvolutionError."""
    if old.equals(new):
        return old
    if old == pa.int32() and new == pa.int64() or old == pa.float32() and new == pa.float64():
        return new
    for small, large in _LARGE:  # Arrow offset width only (Iceberg readers often give large_string)
        if {old, new} == {small, large}:
            return large
    if pa.types.is_decimal(old) and pa.types.is_decimal(new) and old.scale == new.scale:
        if new.precision >= old.precision:
            return new
    if pa.types.is_list(old) and pa.types.is_list(new):
        return pa.list_(widen(old.value_type, new.value_type, column))
    if pa.types.is_map(old) and pa.types.is_map(new) and old.key_type.equals(new.key_type):
        return pa.map_(old.key_type, widen(old.item_type, new.item_type, column))
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        olds = {old.field(i).name: old.field(i).type for i in range(old.num_fields)}
        news = {new.field(i).name: new.field(i).type for i in range(new.num_fields)}
        merged = {n: (widen(t, news[n], f"{column}.{n}") if n in news else t) for n, t in olds.items()}
        merged.update((n, t) for n, t in news.items() if n not in olds)
        return pa.struct([pa.field(n, t) for n, t in merged.items()])
    raise _evolution_error(column, old, new)


def accepts(bound: pa.DataType, source: pa.DataType) -> bool:
    """True if values of ``source`` type can be stored in a ``bound`` column unchanged."""
    try:
        return widen(source, bound).equals(bound)
    except SchemaEvolutionError:
        return False


def merge_columns(existing: Sequence[Column], newest: Sequence[Column]) -> list[Column]:
    """Batch schema: existing order first (widened where newest is wider), new columns appended, dropped kept."""
    by_name = {c.name: c for c in newest}
    out: list[Column] = []
    for old in existing:
        new = by_name.pop(old.name, None)
        if new is None:
            out.append(replace(old, nullable=True))
            continue
        if accepts(old.arrow_type, new.arrow_type):  # same or newest narrower: keep the existing type
            t = old.arrow_type
        else:
            t = widen(old.arrow_type, new.arrow_type, old.name)
        out.append(Column(old.name, t, old.nullable or new.nullable, new.logical or old.logical))
    out.extend(replace(c, nullable=True) if existing else c for c in newest if c.name in by_name)
    return out
