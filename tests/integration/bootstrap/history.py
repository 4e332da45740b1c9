"""The source history every bootstrap-then-Kafka test writes before the bootstrap (PostgreSQL and MySQL alike)."""

from __future__ import annotations

from typing import Any


def history_before_bootstrap(src: Any) -> list[Any]:
    """Inserts, updates, a delete, and an insert-then-delete that must never come back; the changes' events."""
    before: list[Any] = []
    before += src.tx(*[("c", i, f"n{i}", f"b{i}") for i in range(1, 7)])
    before += src.tx(("u", 2, "n2-v2", "b2-v2"))
    before += src.tx(("d", 3))
    before += src.tx(("c", 7, "n7", "b7"))  # inserted and deleted before the bootstrap: must never appear
    before += src.tx(("d", 7))
    before += src.tx(("u", 4, "n4-v2", "b4"), ("u", 5, "n5-v2", "b5"))
    before += src.tx(("u", 4, "n4-v3", "b4-v3"))
    return before
