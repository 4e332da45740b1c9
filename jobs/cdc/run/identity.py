"""Which Kafka topic a table's cursor counts the offsets of: the topic's id (``cdc.kafka.offsets.topic_id``), kept in
a property of the ledger table per table and topic (``cdc.topic-id.<target>.<topic>``).

A topic deleted and created again under its name restarts its offsets at 0. When it holds fewer records than the
cursor, the plan refuses (the cursor is beyond the high watermark); when it already holds more, the offsets look
fine and reading on from the cursor would skip the new topic's first records. Its id tells the two topics apart: an
incremental plan whose topic id differs from the one the ledger recorded is refused (``plan_checked``) until
``--reset-cursor`` moves every partition's cursor to the new topic's low watermark and records the new id
(``cdc.run.reset``). The first plan of a table (or the first one since this check exists) records the id; a broker
that does not say (no DescribeTopics permission) leaves the check out.
"""

from __future__ import annotations

from typing import Any, Mapping

from cdc.common.errors import TerminalError
from cdc.common.sql import lit
from cdc.kafka.offsets import high_watermarks, topic_id
from cdc.kafka.plan import OffsetRange, plan_incremental


def property_key(target: str, topic: str) -> str:
    return f"cdc.topic-id.{target}.{topic}"


def stored_id(spark: Any, ledger: str, target: str, topic: str) -> str | None:
    """The topic id the ledger recorded for ``target``'s ``topic`` (None: none yet)."""
    spark.catalog.refreshTable(ledger)  # another process may have reset the cursor since this session read it
    key = property_key(target, topic)
    found = [r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {ledger}").collect() if r[0] == key]
    return found[0] if found else None


def remember(spark: Any, ledger: str, target: str, topic: str, tid: str) -> None:
    spark.sql(f"ALTER TABLE {ledger} SET TBLPROPERTIES ({lit(property_key(target, topic))} = {lit(tid)})")


def recreated_message(table: str, topic: str, stored: str, current: str, cursor: Mapping[int, int],
                      highs: Mapping[int, int]) -> str:
    where = ", ".join(f"partition {p}: cursor {c}, high watermark {highs.get(p, '?')}" for p, c in sorted(cursor.items()))
    return (f"table {table}: topic {topic} was deleted and created again since its cursor was committed (Kafka topic "
            f"id {current}, the ledger's cursor counted the offsets of topic id {stored}; {where}): the offsets now "
            "on the topic are not the ones the cursor counted, and reading on would skip changes. Check the topic, "
            "then either re-snapshot the source table, or move the cursor with `python jobs/ingest.py --config "
            f"<pipeline.yaml> --table {table} --reset-cursor` (restarts the table's incremental reads at the new "
            "topic's low watermark; replayed changes older than the table are ignored)")


def plan_checked(run: Any, cursor: Mapping[int, int], dry_run: bool) -> list[OffsetRange]:
    """``plan_incremental`` for ``run`` (a ``cdc.run.batch.TableRun``), refused when the topic is not the one the
    cursor counted (see the module doc)."""
    cfg, t, timeout = run.cfg, run.t, run.cfg.batch.read_timeout_seconds
    ranges = plan_incremental(cfg.kafka, t.target, t.topic, cursor, cfg.batch.max_records_per_partition, timeout)
    current = topic_id(cfg.kafka, t.topic, timeout)
    if current is None:
        return ranges
    stored = None if getattr(run.ledger, "absent", False) else stored_id(run.spark, run.ledger.name, t.target, t.topic)
    if stored is not None and stored != current and cursor:
        raise TerminalError(recreated_message(t.target, t.topic, stored, current, cursor,
                                              high_watermarks(cfg.kafka, t.topic, timeout)))
    if stored != current and not dry_run:
        try:
            remember(run.spark, run.ledger.name, t.target, t.topic, current)
        except Exception:  # noqa: BLE001 - e.g. commit retries exhausted by other tables' ledger writes: next plan
            pass
    return ranges
