"""The names of the tables a pipeline owns: per target its staging, tombstones and change-log tables, per pipeline
the ledger and the dead letters (all in ``metadata_namespace``)."""

from __future__ import annotations

from dataclasses import dataclass

from cdc.config.model import PipelineConfig, TableConfig


def ledger_identifier(metadata_namespace: str) -> str:
    return f"{metadata_namespace}.ledger"


def dead_letters_identifier(metadata_namespace: str) -> str:
    return f"{metadata_namespace}.dead_letters"


def staging_identifier(metadata_namespace: str, target: str) -> str:
    return f"{metadata_namespace}.staging__{target.replace('.', '__')}"


def changes_identifier(metadata_namespace: str, target: str) -> str:
    """write_mode scd2: the table's change log (every distinct change, raw; cdc.merge.modes.scd2)."""
    return f"{metadata_namespace}.changes__{target.replace('.', '__')}"


def tombstones_identifier(metadata_namespace: str, target: str) -> str:
    return f"{metadata_namespace}.tombstones__{target.replace('.', '__')}"


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