"""The run's ledger: the metadata tables (``ledger``, ``dead_letters``) created or upgraded first, except for a dry
run, which writes nothing. Without a ledger table a dry run reads an empty one (``AbsentLedger``): it plans every
table from its topic's low watermark, as the first real run will, and leaves the warehouse as it found it."""

from __future__ import annotations

from typing import Any, Mapping

from cdc.common.errors import CdcError
from cdc.config.model import PipelineConfig
from cdc.ledger.ledger import Ledger
from cdc.ledger.state import TableState, table_state
from cdc.ledger.tables import ensure_meta_tables
from cdc.run.outcome import unwrap_task_error


class AbsentLedger(Ledger):
    """A dry run's ledger where none exists yet: every table's state is empty (no cursor, no batch)."""

    absent = True  # nothing to read table properties from (cdc.run.identity)

    def states(self, tables: Mapping[str, str | None]) -> dict[str, TableState]:
        return {t: table_state([], t, topic, None) for t, topic in tables.items()}


def open_ledger(spark: Any, cfg: PipelineConfig, dry_run: bool) -> Ledger:
    name = f"{cfg.catalog.name}.{cfg.metadata_namespace}.ledger"
    if dry_run:
        return Ledger(spark, name, cfg.pipeline) if _exists(spark, name) else AbsentLedger(spark, name, cfg.pipeline)
    try:
        ensure_meta_tables(spark, cfg)
    except CdcError:
        raise
    except Exception as exc:  # e.g. an unwritable warehouse: one clear line, not a Py4J traceback
        raise unwrap_task_error(exc, f"catalog {cfg.catalog.name}: cannot create the metadata tables in namespace "
                                     f"{cfg.metadata_namespace}") from exc
    return Ledger(spark, name, cfg.pipeline)


def _exists(spark: Any, name: str) -> bool:
    try:
        return bool(spark.catalog.tableExists(name))
    except Exception:  # noqa: BLE001 - e.g. the namespace is missing too
        return False
