"""Comparing the Iceberg targets (read with pyiceberg) with the source database (``SELECT *``), and the ledger."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from devtools.demo.common import TARGETS, say
from devtools.pgsource import PostgresSource

# ----------------------------------------------------------------------------------------------- comparing

def _norm(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, Decimal):
        return value.normalize()
    return value


def expected_table(src: PostgresSource, table: str) -> dict[Any, dict[str, Any]]:
    """The oracle: the source table as ``SELECT *`` returns it, {id: row}."""
    return {r["id"]: {k: _norm(v) for k, v in r.items()} for r in src.rows(table)}


def actual_table(catalog: Any, table: str, columns: list[str]) -> dict[Any, dict[str, Any]] | None:
    """The Iceberg target read with pyiceberg (no Spark): {id: row} restricted to the source columns."""
    from cdc_airflow.monitor.ledger import load_table  # the installed package (make venv: pip install -e .)

    t = load_table(catalog, TARGETS[table])
    if t is None:
        return None
    if t.current_snapshot() is None:
        return {}
    have = {f.name for f in t.schema().fields}
    rows = t.scan(selected_fields=tuple(c for c in columns if c in have)).to_arrow().to_pylist()
    return {r["id"]: {c: _norm(r.get(c)) for c in columns} for r in rows}


def diff(expected: dict[Any, dict[str, Any]], actual: dict[Any, dict[str, Any]] | None) -> list[str]:
    if actual is None:
        return ["target table does not exist"]
    out = []
    for pk in sorted(set(expected) | set(actual)):
        e, a = expected.get(pk), actual.get(pk)
        if e == a:
            continue
        if a is None:
            out.append(f"id={pk}: missing in target")
        elif e is None:
            out.append(f"id={pk}: in target but deleted/absent in source")
        else:
            cols = [c for c in e if e[c] != a.get(c)]
            out.append(f"id={pk}: " + ", ".join(f"{c}: expected {_short(e[c])} got {_short(a.get(c))}" for c in cols))
    return out


def _short(v: Any, width: int = 24) -> str:
    if v is None:
        return "∅"
    if isinstance(v, dt.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
    elif isinstance(v, str) and len(v) > width:
        return f"{v[:width - 10]}…({len(v)} ch)"
    else:
        s = str(v)
    return s if len(s) <= width else s[: width - 1] + "…"


def side_by_side(table: str, columns: list[str], expected: dict[Any, dict[str, Any]],
                 actual: dict[Any, dict[str, Any]] | None, limit: int) -> str:
    """Target rows (left) next to the source's expected rows (right); ``=`` where identical."""
    actual = actual or {}
    keys = sorted(set(expected) | set(actual))
    shown = keys[:limit]
    cols = [c for c in columns if c != "id"]
    widths = {c: max(len(c), *(len(_short(r.get(c))) for src in (expected, actual) for k in shown
                               if (r := src.get(k)) is not None), 1) for c in cols}

    def fmt(row: dict[str, Any] | None) -> str:
        if row is None:
            return " ".join("-".ljust(widths[c]) for c in cols)
        return " ".join(_short(row.get(c)).ljust(widths[c]) for c in cols)

    header = " ".join(c.ljust(widths[c]) for c in cols)
    lines = [f"   {'id':>5} | {'ICEBERG ' + TARGETS[table]:<{len(header)}} |   | POSTGRESQL public.{table} (SELECT *)",
             f"   {'':>5} | {header} |   | {header}"]
    for k in shown:
        a, e = actual.get(k), expected.get(k)
        mark = "=" if a == e else "≠"
        lines.append(f"   {k:>5} | {fmt(a)} | {mark} | {fmt(e) if a != e else '(same)'}")
    if len(keys) > limit:
        same = sum(1 for k in keys[limit:] if actual.get(k) == expected.get(k))
        lines.append(f"   … {len(keys) - limit} more ids ({same} identical)")
    return "\n".join(lines)


def compare(catalog: Any, src: PostgresSource, verbose: bool, limit: int = 12) -> bool:
    ok = True
    for table in TARGETS:
        cols = src.columns(table)
        exp = expected_table(src, table)
        act = actual_table(catalog, table, cols)
        problems = diff(exp, act)
        n = "no table" if act is None else f"{len(act)} rows"
        verdict = "MATCH" if not problems else "MISMATCH"
        say(f"  {TARGETS[table]:<22} {n:>9} vs source {len(exp):>3} rows, {len(cols)} columns: {verdict}")
        if verbose:
            say(side_by_side(table, cols, exp, act, limit))
        for p in problems[:10]:
            say(f"    {p}")
        ok &= not problems
    return ok


def ledger_summary(catalog: Any, pipeline: str = "demo") -> None:
    from cdc_airflow.monitor.ledger import batches, read_rows

    rows = read_rows(catalog, "cdc_meta.ledger", pipeline=pipeline)
    for table in TARGETS.values():
        bs = sorted(batches(rows, table, 100), key=lambda b: b["batch_id"])
        say(f"  {table}: " + "; ".join(
            f"batch {b['batch_id']} {b['status']} read {b['events_read']} (+{b['inserted']} ~{b['updated']} "
            f"-{b['deleted']})" for b in bs))
