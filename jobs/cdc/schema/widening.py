"""Type evolution between Arrow types, in one place (pure): ``merge_type`` decides what a column becomes when values of
a source type arrive — the same type, a safe widening (a table change), a fit (narrower values: the column keeps
its type) or ``Incompatible``. Decoders (``accepts``, ``merge_columns``, JSON sample unions) and the target-table
evolution (``cdc.schema.evolution``) all use it; the rules are documented in ``docs/types-and-evolution.md``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import pyarrow as pa

from cdc.common.errors import SchemaEvolutionError
from cdc.schema.columns import Column

ADD, WIDEN = "add", "widen"
_OFFSET_WIDTH = ((pa.string(), pa.large_string()), (pa.binary(), pa.large_binary()))


@dataclass(frozen=True)
class Change:
    """One table change: ``add`` a (nested) column or ``widen`` its type. ``path`` uses Iceberg/Spark names
    (``element`` for list items, ``value`` for map values)."""

    kind: str
    path: tuple[str, ...]
    new: pa.DataType
    old: pa.DataType | None = None

    @property
    def column(self) -> str:
        return ".".join(self.path)


class Incompatible(Exception):
    """A source type the table column cannot take. ``column`` is the path ("c", "c.element", "s.f")."""

    def __init__(self, column: str, old: pa.DataType, new: pa.DataType):
        super().__init__(f"column {column!r}: {old} → {new}")
        self.column, self.old, self.new = column, old, new

    @property
    def top(self) -> str:
        """The top-level column."""
        return self.column.split(".", 1)[0]


def merge_type(old: pa.DataType, new: pa.DataType, path: tuple[str, ...], add_fields: bool = True
               ) -> tuple[pa.DataType, list[Change]]:
    """The column type after taking ``new`` values into an ``old`` column, and the changes that needs.

    Raises ``Incompatible`` for anything that is neither a fit nor a safe widening.
    """
    if old.equals(new):
        return old, []
    for small, large in _OFFSET_WIDTH:  # Arrow offset width only: same Iceberg type
        if {old, new} == {small, large}:
            return old, []
    if (old, new) in ((pa.int32(), pa.int64()), (pa.float32(), pa.float64())):
        return new, [Change(WIDEN, path, new, old)]
    if (old, new) in ((pa.int64(), pa.int32()), (pa.float64(), pa.float32())):
        return old, []  # values fit
    if pa.types.is_decimal(old) and pa.types.is_decimal(new) and old.scale == new.scale:
        if new.precision > old.precision:
            return new, [Change(WIDEN, path, new, old)]
        return old, []
    if pa.types.is_list(old) and pa.types.is_list(new) or pa.types.is_large_list(old) and pa.types.is_large_list(new):
        t, changes = merge_type(old.value_type, new.value_type, (*path, "element"), add_fields)
        return (old if not changes else pa.list_(t)), changes
    if pa.types.is_map(old) and pa.types.is_map(new):
        if not old.key_type.equals(new.key_type):
            raise Incompatible(".".join((*path, "key")), old.key_type, new.key_type)
        t, changes = merge_type(old.item_type, new.item_type, (*path, "value"), add_fields)
        return (old if not changes else pa.map_(old.key_type, t)), changes
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        news = {new.field(i).name: new.field(i).type for i in range(new.num_fields)}
        fields, changes = [], []
        for i in range(old.num_fields):
            f = old.field(i)
            if f.name in news:
                t, sub = merge_type(f.type, news.pop(f.name), (*path, f.name), add_fields)
                fields.append(pa.field(f.name, t))
                changes += sub
            else:
                fields.append(pa.field(f.name, f.type))
        if add_fields:
            for name, t in news.items():
                fields.append(pa.field(name, t))
                changes.append(Change(ADD, (*path, name), t))
        return (old if not changes else pa.struct(fields)), changes
    raise Incompatible(".".join(path), old, new)


def _evolution_error(column: str, old: pa.DataType, new: pa.DataType) -> SchemaEvolutionError:
    err = SchemaEvolutionError(f"column {column!r}: incompatible type change {old} → {new} (only int32→int64, "
                               "float32→float64, wider decimal precision and added fields are applied "
                               "automatically); migrate the table by hand or rename the column")
    err.column, err.old, err.new = column, old, new  # type: ignore[attr-defined]
    return err


def accepts(bound: pa.DataType, source: pa.DataType) -> bool:
    """True if values of ``source`` type can be stored in a ``bound`` column unchanged."""
    try:
        return not merge_type(bound, source, ("?",))[1]
    except Incompatible:
        return False


def widens(bound: pa.DataType, source: pa.DataType) -> bool:
    """True if a ``bound`` column holds ``source`` values only after a safe widening (e.g. int32 -> int64)."""
    try:
        return bool(merge_type(bound, source, ("?",))[1])
    except Incompatible:
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
        try:
            t = merge_type(old.arrow_type, new.arrow_type, (old.name,))[0]
        except Incompatible as exc:
            raise _evolution_error(old.name, exc.old, exc.new) from None
        out.append(Column(old.name, t, old.nullable or new.nullable, new.logical or old.logical))
    out.extend(replace(c, nullable=True) if existing else c for c in newest if c.name in by_name)
    return out
