"""Spark SQL text helpers, in one place: identifier quoting, string literals, lexicographic tuple comparisons."""

from __future__ import annotations

from typing import Sequence

MIN_BIGINT = "-9223372036854775808"


def q(name: str) -> str:
    """Quote an identifier for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def lit(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def tuple_gt(a: str, a_cols: Sequence[str], b: str, b_cols: Sequence[str], b_nullable: bool = True) -> str:
    """``(a.c1, a.c2, ...) > (b.d1, b.d2, ...)`` lexicographically; a NULL on the b side counts as -infinity
    (a key the table does not hold, or a column older rows do not have)."""
    assert len(a_cols) == len(b_cols), (a_cols, b_cols)

    def bcol(c: str) -> str:
        return f"coalesce({b}.{q(c)}, {MIN_BIGINT})" if b_nullable else f"{b}.{q(c)}"

    terms = []
    for i, (ac, bc) in enumerate(zip(a_cols, b_cols)):
        eq = [f"{a}.{q(x)} = {bcol(y)}" for x, y in zip(a_cols[:i], b_cols[:i])]
        terms.append("(" + " AND ".join(eq + [f"{a}.{q(ac)} > {bcol(bc)}"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def tuple_eq(a: str, a_cols: Sequence[str], b: str, b_cols: Sequence[str]) -> str:
    return "(" + " AND ".join(f"{a}.{q(x)} = {b}.{q(y)}" for x, y in zip(a_cols, b_cols)) + ")"


def tuple_cmp_literal(a: str, cols: Sequence[str], values: Sequence[int], op: str) -> str:
    """``(a.c1, ...) <op> (v1, ...)`` for op in ``>`` / ``<`` (lexicographic). A NULL column (a row written before
    the column existed, e.g. the ordering epoch) counts as -infinity."""
    from cdc.layout import EPOCH  # here, not at import: this module is imported while Airflow parses DAG files

    def col(c: str) -> str:
        return f"coalesce({a}.{q(c)}, {MIN_BIGINT})" if c == EPOCH else f"{a}.{q(c)}"

    terms = []
    for i, c in enumerate(cols):
        eq = [f"{col(p)} = {int(v)}" for p, v in zip(cols[:i], values[:i])]
        terms.append("(" + " AND ".join(eq + [f"{col(c)} {op} {int(values[i])}"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def key_join(a: str, b: str, key: Sequence[str]) -> str:
    return " AND ".join(f"{a}.{q(k)} = {b}.{q(k)}" for k in key)
