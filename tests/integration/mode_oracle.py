"""Expected state of ``append`` and ``scd2`` tables, computed from the records a stream delivered (the oracle's
counterpart of ``ChangeEventGenerator.expected_rows`` for the upsert mirror), and the comparison with a table.

* ``expected_changelog``: the set of distinct changes (key + source position + op): ``after`` for c/r/u with TOAST
  placeholders resolved from the key's previous change (never a delete image), ``before`` for d, one row per
  truncate.
* ``expected_history``: per key, its distinct changes plus every truncate, in source-position order: c/r/u open a
  version (closing the open one) unless ``track_columns`` are given and an update changes none of them (then its
  values replace the open version's); d and t close the open version.

Both are built in plain Python from the records, independently of the job's SQL.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from devtools.debezium import TOAST_PLACEHOLDER


def _distinct(records: Sequence[Any]) -> list[Any]:
    """Change records (no tombstones), one per (key, position, op), first delivery kept, in position order."""
    seen, out = set(), []
    for r in records:
        if r.value is None or r.op not in ("c", "r", "u", "d", "t"):
            continue
        ident = (None if r.key is None else tuple(sorted(r.key.items())), r.position, r.op)
        if ident not in seen:
            seen.add(ident)
            out.append(r)
    return sorted(out, key=lambda r: r.position)


def _filled(records: Sequence[Any], columns: Sequence[str], pk: str) -> list[tuple[Any, dict[str, Any] | None]]:
    """(record, row image) in position order; TOAST placeholders from the key's previous c/r/u."""
    last: dict[Any, dict[str, Any]] = {}
    out = []
    for r in _distinct(records):
        if r.op == "t":
            out.append((r, None))
            continue
        if r.op == "d":
            out.append((r, {c: r.value["before"].get(c) for c in columns}))
            continue
        image = {c: r.value["after"].get(c) for c in columns}
        prev = last.get(image[pk], {})
        image = {c: (prev.get(c) if v == TOAST_PLACEHOLDER else v) for c, v in image.items()}
        last[image[pk]] = image
        out.append((r, image))
    return out


def expected_changelog(records: Sequence[Any], columns: Sequence[str], pk: str) -> Counter:
    """Counter of (op, key, position, row values) the append table must hold exactly."""
    out: Counter = Counter()
    for r, image in _filled(records, columns, pk):
        values = tuple(None if image is None else _norm(image.get(c)) for c in columns)
        out[(r.op, None if image is None else image[pk], r.position, values)] += 1
    return out


def expected_history(records: Sequence[Any], columns: Sequence[str], pk: str,
                     track: Sequence[str] = ()) -> Counter:
    """Counter of (key, row values, valid_from ms, valid_to ms, is_current, op, start position)."""
    events = _filled(records, columns, pk)
    truncates = [(r, None) for r, image in events if r.op == "t"]
    keys: dict[Any, list] = {}
    for r, image in events:
        if image is not None:
            keys.setdefault(image[pk], []).append((r, image))
    out: Counter = Counter()
    for key, own in keys.items():
        chain = sorted(own + truncates, key=lambda e: e[0].position)
        versions: list[list[Any]] = []  # [image, from_ms, to_ms, op, position]
        open_ = None
        for r, image in chain:
            ts = r.value["source"]["ts_ms"]
            if r.op in ("d", "t"):
                if open_ is not None:
                    open_[2] = ts
                open_ = None
            elif (open_ is not None and track and r.op == "u"
                  and all(_norm(image.get(c)) == _norm(open_[0].get(c)) for c in track)):
                open_[0] = image  # in place
            else:
                if open_ is not None:
                    open_[2] = ts
                open_ = [image, ts, None, r.op, r.position]
                versions.append(open_)
        for image, start, end, op, pos in versions:
            out[(key, tuple(_norm(image.get(c)) for c in columns), start, end, end is None, op, pos)] += 1
    return out


def _norm(v: Any) -> Any:
    from decimal import Decimal

    if isinstance(v, Decimal):
        return v.normalize() if v == v.to_integral_value() else v
    return v


def table_position(row: dict[str, Any], have: set[str]) -> tuple[int, ...]:
    """The generator's position (``Record.position``) of a table row: (lsn,) or (file number, pos, row)."""
    if "__binlog_file_seq" in have:
        return (row["__binlog_file_seq"], row["__binlog_pos"], row["__binlog_row"])
    return (row["__lsn"] if "__lsn" in have else row["__ord_source_lsn"],)


def compare_mode(rows: list[dict[str, Any]], have: set[str], table: str, mode: str, records: Sequence[Any],
                 columns: Sequence[str], pk: str, track: Sequence[str] = ()) -> list[str]:
    """Mismatches between an append / scd2 table's rows (read by ``harness._read``) and the oracle."""
    if mode == "append":
        expected = expected_changelog(records, columns, pk)
        got = Counter((r["__op"], r[pk], table_position(r, have), tuple(_norm(r.get(c)) for c in columns))
                      for r in rows)
    else:
        expected = expected_history(records, columns, pk, track)

        def ms(v: Any) -> Any:
            return None if v is None else v // 1000

        got = Counter((r[pk], tuple(_norm(r.get(c)) for c in columns), ms(r["__valid_from"]), ms(r["__valid_to"]),
                       r["__is_current"], r["__op"], table_position(r, have)) for r in rows)
    bad = [f"{table}: {mode}: extra row {str(k)[:300]}" for k in sorted((got - expected).keys(), key=str)[:15]]
    bad += [f"{table}: {mode}: missing row {str(k)[:300]}" for k in sorted((expected - got).keys(), key=str)[:15]]
    return bad
