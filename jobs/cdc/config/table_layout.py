"""Target table layout: ``partition_by``, ``sort_by`` and ``properties`` of ``tables[]`` / ``defaults`` (pure).

Parsing happens at config load (syntax, transforms, property conflicts); columns and their types are checked against
the batch's schema before a batch is claimed (``check_columns``); ``cdc.iceberg.tables.apply_layout`` compares what a table
has with what is wanted and issues only the missing statements, so a layout already in place costs no commit.

* ``partition_by``: Iceberg transforms ``identity(c)`` / ``c``, ``bucket(N, c)``, ``truncate(W, c)``, ``years(c)``,
  ``months(c)``, ``days(c)``, ``hours(c)`` (``year``/``month``/``day``/``hour`` accepted). Canonical form = what
  Spark's ``DESCRIBE TABLE`` prints under ``# Partitioning`` (``bucket(16, id)``, ``region``).
* ``sort_by``: the same terms, each optionally followed by ``ASC``/``DESC`` and ``NULLS FIRST``/``NULLS LAST``.
  Canonical form = Iceberg's ``sort-order`` table property (``region DESC NULLS LAST, id ASC NULLS FIRST``).
* ``properties``: any Iceberg table property, on top of the project's ``REQUIRED_PROPERTIES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from cdc.common.errors import ConfigError

# What every target gets unless the user chooses otherwise (format v2+: the merge writes row-level deletes).
REQUIRED_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}
MIN_FORMAT_VERSION, MAX_FORMAT_VERSION = 2, 3
ROW_LEVEL_MODES = ("copy-on-write", "merge-on-read")
DISTRIBUTION_MODES = ("none", "hash", "range")
# Spark/Iceberg reserve these (or the job sets them through other keys): refused in ``properties``.
RESERVED_PROPERTIES = {"provider": "", "location": "", "owner": "", "format": "", "current-snapshot-id": "",
                       "sort-order": " (use sort_by)", "identifier-fields": " (use primary_key)"}
PROJECT_PREFIX = "cdc."  # the job's own table properties (ordering epochs, GC horizon)

TRANSFORMS = {"identity": "identity", "bucket": "bucket", "truncate": "truncate",
              "year": "years", "years": "years", "month": "months", "months": "months",
              "day": "days", "days": "days", "date": "days", "hour": "hours", "hours": "hours", "date_hour": "hours"}
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_TERM = re.compile(rf"^(?:(?P<fn>{_IDENT})\s*\(\s*(?P<args>[^()]*?)\s*\)|(?P<col>{_IDENT}))$")
_SORT = re.compile(r"^(?P<term>.*?)(?:\s+(?P<dir>ASC|DESC))?(?:\s+NULLS\s+(?P<nulls>FIRST|LAST))?$", re.IGNORECASE)


class LayoutError(ValueError):
    """A layout entry that cannot be used; ``key`` is the config key relative to the table entry."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key, self.message = key, message


@dataclass(frozen=True)
class Term:
    """One transform of one column: ``identity``, ``bucket``/``truncate`` (with ``param``) or a time transform."""

    transform: str
    column: str
    param: int | None = None

    def describe(self) -> str:
        """Canonical text, as Spark's DESCRIBE TABLE and Iceberg's sort-order print it."""
        if self.transform == "identity":
            return self.column
        if self.param is not None:
            return f"{self.transform}({self.param}, {self.column})"
        return f"{self.transform}({self.column})"

    def sql(self) -> str:
        col = f"`{self.column}`"
        if self.transform == "identity":
            return col
        return f"{self.transform}({self.param}, {col})" if self.param is not None else f"{self.transform}({col})"


@dataclass(frozen=True)
class SortTerm:
    term: Term
    descending: bool = False
    nulls_first: bool | None = None  # None: Iceberg's default (ASC → NULLS FIRST, DESC → NULLS LAST)

    def _nulls(self) -> str:
        first = (not self.descending) if self.nulls_first is None else self.nulls_first
        return "NULLS FIRST" if first else "NULLS LAST"

    def describe(self) -> str:
        return f"{self.term.describe()} {'DESC' if self.descending else 'ASC'} {self._nulls()}"

    def sql(self) -> str:
        return f"{self.term.sql()} {'DESC' if self.descending else 'ASC'} {self._nulls()}"


@dataclass(frozen=True)
class TableLayout:
    """None (the key is absent from the YAML): not managed, a table keeps what it has (a new one: unpartitioned,
    unsorted); ``()``: managed and empty (partition fields dropped, ``WRITE UNORDERED``)."""

    partition_by: tuple[Term, ...] | None = None
    sort_by: tuple[SortTerm, ...] | None = None
    properties: Mapping[str, str] = field(default_factory=dict)  # the user's; see ``table_properties``

    def table_properties(self) -> dict[str, str]:
        """The properties a target must have: the required ones, then the user's (already checked not to conflict)."""
        return {**REQUIRED_PROPERTIES, **self.properties}

    def columns(self) -> set[str]:
        return {t.column for t in self.partition_by or ()} | {s.term.column for s in self.sort_by or ()}


def parse_term(text: Any, key: str) -> Term:
    if not isinstance(text, str) or not (m := _TERM.match(text.strip())):
        raise LayoutError(key, f"must be a column or a transform such as bucket(16, id), days(created_at), "
                               f"identity(region), truncate(4, name); got {text!r}")
    if m.group("col"):
        return Term("identity", m.group("col"))
    fn = m.group("fn").lower()
    if fn not in TRANSFORMS:
        raise LayoutError(key, f"unknown transform {m.group('fn')!r} (known: {', '.join(sorted(set(TRANSFORMS)))})")
    transform = TRANSFORMS[fn]
    args = [a.strip() for a in m.group("args").split(",")] if m.group("args").strip() else []
    if transform in ("bucket", "truncate"):
        if len(args) != 2 or not args[0].isdigit() or not re.fullmatch(_IDENT, args[1]):
            raise LayoutError(key, f"{transform} takes a positive whole number and a column, e.g. "
                                   f"{transform}({16 if transform == 'bucket' else 4}, id); got {text!r}")
        if int(args[0]) < 1:
            raise LayoutError(key, f"{transform} needs a number >= 1, got {text!r}")
        return Term(transform, args[1], int(args[0]))
    if len(args) != 1 or not re.fullmatch(_IDENT, args[0]):
        raise LayoutError(key, f"{transform} takes one column, e.g. {transform}(created_at); got {text!r}")
    return Term(transform, args[0])


def parse_sort_term(text: Any, key: str) -> SortTerm:
    m = _SORT.match(text.strip()) if isinstance(text, str) else None
    if m is None or not m.group("term"):
        raise LayoutError(key, f"must be a column or transform, optionally followed by ASC/DESC and "
                               f"NULLS FIRST/LAST; got {text!r}")
    nulls = m.group("nulls")
    return SortTerm(parse_term(m.group("term"), key), (m.group("dir") or "ASC").upper() == "DESC",
                    None if nulls is None else nulls.upper() == "FIRST")


def _as_list(raw: Any, key: str) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if not isinstance(raw, (list, tuple)):
        raise LayoutError(key, f"must be a list, got {type(raw).__name__}")
    return list(raw)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_properties(raw: Any, key: str = "properties") -> dict[str, str]:
    """The user's table properties as strings; refuses reserved keys and conflicts with required values."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise LayoutError(key, f"must be a mapping of Iceberg table property to value, got {type(raw).__name__}")
    out: dict[str, str] = {}
    for k, v in raw.items():
        where = f"{key}.{k}"
        if not isinstance(k, str) or not k.strip():
            raise LayoutError(key, f"property names must be non-empty strings, got {k!r}")
        if v is None or isinstance(v, (dict, list)):
            raise LayoutError(where, f"must be a single value, got {v!r}")
        if k in RESERVED_PROPERTIES:
            raise LayoutError(where, f"is reserved and cannot be set as a table property{RESERVED_PROPERTIES[k]}")
        if k.startswith(PROJECT_PREFIX):
            raise LayoutError(where, f"'{PROJECT_PREFIX}*' properties belong to the job (ordering epochs, GC "
                                     "horizon) and cannot be set")
        value = _text(v).strip()
        if k == "format-version" and not (value.isdigit() and MIN_FORMAT_VERSION <= int(value) <= MAX_FORMAT_VERSION):
            raise LayoutError(where, f"must be {MIN_FORMAT_VERSION} or {MAX_FORMAT_VERSION}, got {v!r}: the merge "
                                     "writes row-level deletes, which need format version 2 or later")
        if k in ("write.delete.mode", "write.update.mode", "write.merge.mode") and value not in ROW_LEVEL_MODES:
            raise LayoutError(where, f"must be one of {', '.join(ROW_LEVEL_MODES)}, got {v!r}")
        if k == "write.distribution-mode" and value not in DISTRIBUTION_MODES:
            raise LayoutError(where, f"must be one of {', '.join(DISTRIBUTION_MODES)}, got {v!r}")
        if k.endswith("-bytes") and not (value.isdigit() and int(value) > 0):
            raise LayoutError(where, f"must be a positive number of bytes, got {v!r}")
        out[k] = value
    return out


def parse_layout(entry: Mapping[str, Any]) -> TableLayout:
    """``partition_by`` / ``sort_by`` / ``properties`` of one (defaults-merged) table entry. Raises ``LayoutError``."""
    parts = None if entry.get("partition_by") is None else tuple(
        parse_term(t, f"partition_by[{i}]") for i, t in enumerate(_as_list(entry["partition_by"], "partition_by")))
    seen: dict[str, int] = {}
    for i, t in enumerate(parts or ()):
        if t.describe() in seen:
            raise LayoutError(f"partition_by[{i}]", f"{t.describe()} appears twice")
        seen[t.describe()] = i
    sorts = None if entry.get("sort_by") is None else tuple(
        parse_sort_term(t, f"sort_by[{i}]") for i, t in enumerate(_as_list(entry["sort_by"], "sort_by")))
    return TableLayout(parts, sorts, check_properties(entry.get("properties")))


def merge_defaults(defaults: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """A table entry over ``defaults``; ``properties`` merge key by key (the table's win), other keys replace."""
    out = {**defaults, **entry}
    if isinstance(defaults.get("properties"), dict) and isinstance(entry.get("properties"), dict):
        out["properties"] = {**defaults["properties"], **entry["properties"]}
    return out


def _fits(transform: str, arrow_type: Any) -> bool:
    import pyarrow as pa

    t = arrow_type
    nested = pa.types.is_nested(t)
    numeric = pa.types.is_integer(t) or pa.types.is_decimal(t)
    text = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
        or pa.types.is_large_binary(t)
    if transform == "identity":
        return not nested
    if transform == "bucket":
        return numeric or text or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t)
    if transform == "truncate":
        return numeric or text
    if transform == "hours":
        return pa.types.is_timestamp(t)
    return pa.types.is_date(t) or pa.types.is_timestamp(t)  # years, months, days


def check_columns(layout: TableLayout, columns: Sequence[Any], table: str, source: str = "<memory>") -> None:
    """Every layout column exists in the target's columns (``cdc.schema.columns.Column``s) and fits its transform.

    Raises ``ConfigError`` (exit 2) naming the pipeline file and the table.
    """

    types = {c.name: c.arrow_type for c in columns}
    for where, terms in (("partition_by", list(layout.partition_by or ())),
                         ("sort_by", [s.term for s in layout.sort_by or ()])):
        for term in terms:
            if term.column not in types:
                raise ConfigError(f"{source}: table {table}: {where} {term.describe()!r} names column "
                                  f"{term.column!r}, which the table does not have (columns: "
                                  f"{', '.join(sorted(types))}); fix {where} for this table in the pipeline YAML")
            if not _fits(term.transform, types[term.column]):
                raise ConfigError(f"{source}: table {table}: {where} {term.describe()!r}: {term.transform} does not "
                                  f"apply to column {term.column!r} of type {types[term.column]}; choose another "
                                  "transform in the pipeline YAML")


# --- comparing what a table has with what is wanted (pure; cdc.iceberg.tables.apply_layout runs the statements) -----------

def partition_changes(current: Sequence[str], wanted: Sequence[Term]) -> tuple[list[str], list[Term]]:
    """(fields to drop, by their DESCRIBE text; terms to add) turning ``current`` into ``wanted``."""
    want = {t.describe() for t in wanted}
    drop = [c for c in current if c not in want]
    add = [t for t in wanted if t.describe() not in set(current)]
    return drop, add


def sort_order_text(sort_by: Sequence[SortTerm]) -> str:
    return ", ".join(s.describe() for s in sort_by)


def property_changes(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    """Properties to set (only those that differ). ``format-version`` only ever goes up (Iceberg cannot downgrade)."""
    out = {k: v for k, v in wanted.items() if current.get(k) != v}
    have = current.get("format-version")
    if "format-version" in out and have and have.isdigit() and int(have) > int(out["format-version"]):
        del out["format-version"]
    return out


def partitioning_of(describe_rows: Sequence[tuple[str, str]]) -> list[str]:
    """The ``# Partitioning`` fields of ``DESCRIBE TABLE`` rows ``(col_name, data_type)``."""
    out, inside = [], False
    for name, value in describe_rows:
        if name.strip() == "# Partitioning":
            inside = True
        elif inside and name.startswith("Part "):
            out.append(value.strip())
        elif inside and (name.startswith("#") or not name.strip()):
            break
    return out
