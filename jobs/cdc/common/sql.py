"""Spark SQL text helpers, in one place: identifier quoting, string literals, lexicographic tuple comparisons."""

from __future__ import annotations

from typing import Sequence


def q(name: str) -> str:
    """Quote an identifier for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def lit(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def key_join(a: str, b: str, key: Sequence[str]) -> str:
    return " AND ".join(f"{a}.{q(k)} = {b}.{q(k)}" for k in key)
