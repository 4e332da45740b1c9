"""Expected state of ``append`` and ``scd2`` tables, computed from the records a stream delivered (the oracle's
counterpart of ``ChangeEventGenerator.expected_rows`` for the upsert mirror), and the comparison with a table.

* ``expected_changelog``: the set of distinct changes (key + source position + op + row image): ``after`` for c/r/u
  with TOAST placeholders resolved from the key's previous change (never a delete image; the create of a primary-key
  change: from the old key's), ``before`` for d, one row per truncate.
* ``expected_history``: per key, its distinct changes plus every truncate, in source-position order: c/r/u open a
  version (closing the open one) unless ``track_columns`` are given and an update changes none of them (then its
  values replace the open version's); d and t close the open version.

On a compacted topic (``compacted=True``) each Kafka tombstone also stands for a delete (``compacted_deletes``):
at the greatest position of its key's changes before it in its partition, with the key and NULLs as its row image and
that change's ``source.ts_ms`` as its time, unless a real ``d`` of the key at a newer-or-equal position exists.

Both are built in plain Python from the records, independently of the job's SQL.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from devtools.debezium import TOAST_PLACEHOLDER


@dataclass(frozen=True)
class CompactedDelete:
    """The delete a Kafka tombstone stands for on a compacted topic (its own ``d`` event may be gone)."""

    key: dict[str, Any]
    position: tuple[int, ...]
    value: dict[str, Any]  # {"op": "d", "source": {"ts_ms": ...}}: the time of the change it followed
    op: str = "d"


def compacted_deletes(records: Sequence[Any], pk: str) -> list[CompactedDelete]:
    """Per tombstone (records are in Kafka order within each partition): the greatest position among its key's
    changes before it in its partition (none: ignored); one per key and position; none where a real ``d`` of the
    key at a newer-or-equal position exists."""
    newest: dict[tuple[int, Any], Any] = {}  # (partition, key) -> the change at the greatest position so far
    found: dict[tuple[Any, tuple[int, ...]], Any] = {}
    real: dict[Any, tuple[int, ...]] = {}  # key -> greatest position of a real d
    for r in records:
        k = None if r.key is None else r.key.get(pk)
        if k is None:
            continue
        if r.value is None:
            base = newest.get((r.partition, k))
            if base is not None:
                found.setdefault((k, base.position), base)
        elif r.op in ("c", "r", "u", "d"):
            if (r.partition, k) not in newest or r.position > newest[(r.partition, k)].position:
                newest[(r.partition, k)] = r
            if r.op == "d":
                real[k] = max(real.get(k, r.position), r.position)
    return [CompactedDelete({pk: k}, pos, {"op": "d", "source": {"ts_ms": base.value["source"]["ts_ms"]}})
            for (k, pos), base in found.items() if k not in real or real[k] < pos]


def _distinct(records: Sequence[Any], pk: str = "", compacted: bool = False) -> list[Any]:
    """Change records (no tombstones), one per (key, position, op, raw row image), first delivery kept, in position
    order (ties: delivery order); with ``compacted`` the tombstones' deletes too (each after the change at its
    position). A redelivery repeats the image; two changes of a key at one position differ in it (the job compares
    a stored change's columns other than the incoming one's TOAST placeholders: the same for exact copies)."""
    seen, out = set(), []
    for r in records:
        if r.value is None or r.op not in ("c", "r", "u", "d", "t"):
            continue
        image = r.value.get("before" if r.op == "d" else "after")
        ident = (None if r.key is None else tuple(sorted(r.key.items())), r.position, r.op,
                 json.dumps(image, sort_keys=True, default=str))
        if ident not in seen:
            seen.add(ident)
            out.append(r)
    if compacted:
        out += compacted_deletes(records, pk)
    return sorted(out, key=lambda r: (r.position, isinstance(r, CompactedDelete)))


def _filled(records: Sequence[Any], columns: Sequence[str], pk: str,
            compacted: bool = False) -> list[tuple[Any, dict[str, Any] | None]]:
    """(record, row image) in position order; TOAST placeholders from the key's previous c/r/u."""
    last: dict[Any, dict[str, Any]] = {}
    out = []
    events = _distinct(records, pk, compacted)
    deleted_at = {r.position: r.key.get(pk) for r in events if r.op == "d" and r.key}
    for r in events:
        if r.op == "t":
            out.append((r, None))
            continue
        if isinstance(r, CompactedDelete):
            out.append((r, {c: r.key.get(c) for c in columns}))
            continue
        if r.op == "d":
            out.append((r, {c: r.value["before"].get(c) for c in columns}))
            continue
        image = {c: r.value["after"].get(c) for c in columns}
        prev = last.get(image[pk], {})
        if r.op == "c":  # a PK change: the old key's value (Debezium's oldkey header, else the delete at L)
            old = dict(getattr(r, "headers", ())).get("__debezium.oldkey", {}).get(pk, deleted_at.get(r.position))
            if old is not None and old != image[pk] and old in last:
                prev = last[old]
        image = {c: (prev.get(c) if v == TOAST_PLACEHOLDER else v) for c, v in image.items()}
        last[image[pk]] = image
        out.append((r, image))
    return out


def expected_changelog(records: Sequence[Any], columns: Sequence[str], pk: str, compacted: bool = False) -> Counter:
    """Counter of (op, key, position, row values) the append table must hold exactly."""
    out: Counter = Counter()
    for r, image in _filled(records, columns, pk, compacted):
        values = tuple(None if image is None else _norm(image.get(c)) for c in columns)
        out[(r.op, None if image is None else image[pk], r.position, values)] += 1
    return out


def expected_history(records: Sequence[Any], columns: Sequence[str], pk: str,
                     track: Sequence[str] = (), compacted: bool = False) -> Counter:
    """Counter of (key, row values, valid_from ms, valid_to ms, is_current, op, start position)."""
    events = _filled(records, columns, pk, compacted)
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
                 columns: Sequence[str], pk: str, track: Sequence[str] = (), compacted: bool = False) -> list[str]:
    """Mismatches between an append / scd2 table's rows (read by ``harness._read``) and the oracle."""
    if mode == "append":
        expected = expected_changelog(records, columns, pk, compacted)
        got = Counter((r["__op"], r[pk], table_position(r, have), tuple(_norm(r.get(c)) for c in columns))
                      for r in rows)
    else:
        expected = expected_history(records, columns, pk, track, compacted)

        def ms(v: Any) -> Any:
            return None if v is None else v // 1000

        got = Counter((r[pk], tuple(_norm(r.get(c)) for c in columns), ms(r["__valid_from"]), ms(r["__valid_to"]),
                       r["__is_current"], r["__op"], table_position(r, have)) for r in rows)
    bad = [f"{table}: {mode}: extra row {str(k)[:300]}" for k in sorted((got - expected).keys(), key=str)[:15]]
    bad += [f"{table}: {mode}: missing row {str(k)[:300]}" for k in sorted((expected - got).keys(), key=str)[:15]]
    return bad
