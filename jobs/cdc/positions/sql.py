"""SQL over source positions: the ordering columns compared as one tuple (NULL first, as Spark orders structs)."""

from __future__ import annotations

from typing import Sequence

from cdc.common.sql import q

MIN_BIGINT = "-9223372036854775808"


def position_value(t: str, c: str) -> str:
    """Position column ``c`` of row ``t``. The ordering epoch of a row stored before the table had that column is
    NULL and means epoch 0, the epoch of every change before ``tables[].ordering_epoch`` was used (as
    ``cdc.schema.columns.align`` pads stored positions); anything else is the column itself."""
    from cdc.schema.columns import EPOCH  # here, not at import: this module is imported while Airflow parses DAG files

    return f"coalesce({t}.{q(c)}, 0)" if c == EPOCH else f"{t}.{q(c)}"


def tuple_gt(a: str, a_cols: Sequence[str], b: str, b_cols: Sequence[str], b_nullable: bool = True) -> str:
    """``(a.c1, a.c2, ...) > (b.d1, b.d2, ...)`` lexicographically; a NULL on the b side counts as -infinity
    (a key the table does not hold), except a NULL ordering epoch, which is epoch 0 (``position_value``)."""
    assert len(a_cols) == len(b_cols), (a_cols, b_cols)
    from cdc.schema.columns import EPOCH

    def bcol(c: str) -> str:
        if c == EPOCH:
            return position_value(b, c)
        return f"coalesce({b}.{q(c)}, {MIN_BIGINT})" if b_nullable else f"{b}.{q(c)}"

    terms = []
    for i, (ac, bc) in enumerate(zip(a_cols, b_cols)):
        eq = [f"{position_value(a, x)} = {bcol(y)}" for x, y in zip(a_cols[:i], b_cols[:i])]
        terms.append("(" + " AND ".join(eq + [f"{position_value(a, ac)} > {bcol(bc)}"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def tuple_eq(a: str, a_cols: Sequence[str], b: str, b_cols: Sequence[str]) -> str:
    return "(" + " AND ".join(f"{position_value(a, x)} = {position_value(b, y)}" for x, y in zip(a_cols, b_cols)) + ")"


def tuple_cmp_literal(a: str, cols: Sequence[str], values: Sequence[int], op: str) -> str:
    """``(a.c1, ...) <op> (v1, ...)`` for op in ``>`` / ``<`` (lexicographic); a NULL ordering epoch is epoch 0
    (``position_value``)."""
    terms = []
    for i, c in enumerate(cols):
        eq = [f"{position_value(a, p)} = {int(v)}" for p, v in zip(cols[:i], values[:i])]
        terms.append("(" + " AND ".join(eq + [f"{position_value(a, c)} {op} {int(values[i])}"]) + ")")
    return "(" + " OR ".join(terms) + ")"
