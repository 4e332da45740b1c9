"""``--reset-cursor``: move a table's incremental cursor when the topic's offsets no longer match the ledger.

Used after a topic was re-created, the cluster moved, an unclean leader election truncated a partition, or retention
deleted records before they were read: the planner then refuses to read (the cursor is beyond the partition's high
watermark or below its low watermark, or the partition is gone) with a terminal error pointing here. The reset writes
committed ``reset`` rows to the ledger (``cdc.ledger.model``): each partition whose cursor is beyond its high
watermark, or below its low watermark (the retention gap is accepted: re-snapshot the table to fill it), restarts at
its low watermark (or at ``--start-offsets``), and the cursor of a partition that no longer exists is forgotten. A
topic whose Kafka id is not the one the ledger recorded (deleted and created again, ``cdc.run.identity``) moves every
partition's cursor, and the new id is recorded. Nothing is read or merged; the next incremental run
reads from the new cursor, and changes it replays that are not newer than the table are ignored as usual.
"""

from __future__ import annotations

from typing import Any, Mapping

from cdc.common.errors import ConcurrentRunError
from cdc.kafka.offsets import new_consumer, partitions, topic_id, watermarks
from cdc.ledger.model import FORGOTTEN
from cdc.run.identity import remember, stored_id


def cursor_moves(committed: Mapping[int, int], wm: Mapping[int, tuple[int, int]],
                 explicit: Mapping[int, int], recreated: bool = False) -> dict[int, tuple[int, int]]:
    """Pure: ``partition → (old cursor, new cursor)`` for the partitions that need a move (``recreated``: every
    partition with a cursor: the topic is another one now)."""
    moves = {p: (old, FORGOTTEN) for p, old in committed.items() if p not in wm}
    for p, (low, high) in wm.items():
        old = committed.get(p)
        if p in explicit:
            new = explicit[p]
        elif old is not None and (recreated or old > high or old < low):  # re-created / truncated, or retention
            new = low
        else:
            continue
        if old != new:
            moves[p] = (old if old is not None else low, new)
    return moves


def reset_cursor(run: Any, explicit: Mapping[int, int]) -> dict[str, Any]:
    """Reset the cursor of ``run``'s table (a ``cdc.run.batch.TableRun``); returns the summary entry."""
    t, ledger = run.t, run.ledger
    pending = ledger.pending(t.target)
    if pending is not None:
        raise ConcurrentRunError(f"table {t.target}: batch {pending.batch_id} is still {pending.status}; let a normal "
                                 "run finish it (or wait until its owner is gone), then reset the cursor")
    consumer = new_consumer(run.cfg.kafka)
    try:
        wm = watermarks(consumer, t.topic, partitions(consumer, t.topic, run.cfg.batch.read_timeout_seconds),
                        run.cfg.batch.read_timeout_seconds)
    finally:
        consumer.close()
    committed = ledger.committed_offsets(t.target, t.topic)
    current = topic_id(run.cfg.kafka, t.topic, run.cfg.batch.read_timeout_seconds)
    stored = stored_id(run.spark, ledger.name, t.target, t.topic) if current is not None else None
    moves = cursor_moves(committed, wm, explicit, recreated=stored is not None and stored != current)
    batch_id = None
    if moves:
        batch_id = ledger.next_batch_id(t.target)
        ledger.reset_cursor(t.target, t.topic, batch_id, moves, run.run_id)
    if current is not None and stored != current:
        remember(run.spark, ledger.name, t.target, t.topic, current)
    return {"table": t.target, "topic": t.topic, "status": "reset" if moves else "unchanged", "mode": "reset",
            "batch_id": batch_id,
            "moves": [{"partition": p, "from": old, "to": new} for p, (old, new) in sorted(moves.items())]}
