"""The names of the tables a pipeline owns: per target its staging, tombstones, change-log and bootstrap staging
tables, per pipeline the ledger and the dead letters (all in ``metadata_namespace``).

A helper table is named ``<kind>__<target with every . as __>`` (``shop.orders`` → ``staging__shop__orders``).
That is not injective: ``shop.a__b`` and ``shop__a.b`` (or ``a_.b`` and ``a._b``, or ``Shop.A`` and ``shop.a`` on a
case-insensitive catalog) get the same helper tables, and one target's deletes would suppress the other's inserts.
Such pairs are refused instead of named differently (``helper_collision``; ``ConfigError`` naming both targets, when
the pipeline is loaded and again when ``topic_pattern`` entries are resolved): every accepted target keeps the name
it always had, so deployments keep their staging tables, which hold staged-but-not-merged batches a recovery needs.
A new escaping scheme would have renamed the helpers of every ``__`` target, even those that collide with nothing.
The check covers one pipeline; pipelines sharing a ``metadata_namespace`` must not use colliding targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from cdc.config.model import PipelineConfig, TableConfig


def helper_suffix(target: str) -> str:
    """The part of a helper table's name that comes from its target."""
    return target.replace(".", "__")


def helper_collision(targets: Iterable[str]) -> tuple[str, str] | None:
    """The first two different targets (in order) whose helper tables would be the same tables, or None."""
    seen: dict[str, str] = {}
    for t in targets:
        other = seen.setdefault(helper_suffix(t).lower(), t)
        if other != t:
            return other, t
    return None


def collision_problem(a: str, b: str, metadata_namespace: str = "") -> str:
    """Why targets ``a`` and ``b`` are refused, and what to do."""
    ns = f"{metadata_namespace}." if metadata_namespace else ""
    return (f"targets {a} and {b} would share their helper tables ({ns}staging__{helper_suffix(a)}, "
            f"tombstones__..., changes__...: every '.' of a target becomes '__' in those names), so one table's "
            "changes would be applied to the other; rename one of the two targets")


def ledger_identifier(metadata_namespace: str) -> str:
    return f"{metadata_namespace}.ledger"


def dead_letters_identifier(metadata_namespace: str) -> str:
    return f"{metadata_namespace}.dead_letters"


def staging_identifier(metadata_namespace: str, target: str) -> str:
    return f"{metadata_namespace}.staging__{helper_suffix(target)}"


def changes_identifier(metadata_namespace: str, target: str) -> str:
    """write_mode scd2: the table's change log (every distinct change, raw; cdc.merge.modes.scd2)."""
    return f"{metadata_namespace}.changes__{helper_suffix(target)}"


def tombstones_identifier(metadata_namespace: str, target: str) -> str:
    return f"{metadata_namespace}.tombstones__{helper_suffix(target)}"


def bootstrap_identifier(metadata_namespace: str, target: str) -> str:
    """The bootstrap job's staging table (the snapshot copied before its swap into the target)."""
    return f"{metadata_namespace}.bootstrap__{helper_suffix(target)}"


@dataclass(frozen=True)
class TableNames:
    target: str
    staging: str
    tombstones: str
    ledger: str
    dead_letters: str
    changes: str = ""  # write_mode scd2: the change log the versions are computed from (cdc.merge.modes)


def names(cfg: PipelineConfig, table: TableConfig) -> TableNames:
    cat, meta = cfg.catalog.name, cfg.metadata_namespace
    return TableNames(
        target=f"{cat}.{table.target}",
        staging=f"{cat}.{staging_identifier(meta, table.target)}",
        tombstones=f"{cat}.{tombstones_identifier(meta, table.target)}",
        ledger=f"{cat}.{ledger_identifier(meta)}",
        dead_letters=f"{cat}.{dead_letters_identifier(meta)}",
        changes=f"{cat}.{changes_identifier(meta, table.target)}",
    )