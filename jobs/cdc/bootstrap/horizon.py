"""The bootstrap horizon: the newest Debezium position among the topic's changes that the bootstrap snapshot already
contains.

Why not simply the snapshot's WAL position ``H``: Debezium orders PostgreSQL changes by ``source.sequence`` =
``[last commit LSN, LSN]``, where the first part is the LSN of the *previous* commit the connector streamed. The
first transaction committed after the snapshot therefore carries the commit LSN of the last transaction before it,
which is below ``H`` whenever anything else wrote WAL in between (checkpoints, other databases, ``running_xacts``
records every 15 s). A horizon of ``H`` would drop that transaction's changes. What the snapshot contains is
decided by transaction visibility, so that is what decides here: the snapshot's ``pg_current_snapshot()``
(``xmin:xmax:xip``) says which transaction ids it sees, every change event carries ``source.txId``, and

    horizon = max(position of every change in the topic whose transaction the snapshot sees)

Every change of a transaction the snapshot does not see is newer: its transaction committed after all of those, so
its ``last commit LSN`` is at least their commit's, which is above each of their positions. Changes not yet in the
topic when the bootstrap runs (a lagging connector) are not counted: the horizon comes out lower, those changes are
applied again later (their after-images, in order: the table converges to the same rows; readers may see an older
version of such a key until the batch that carries its newest change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from cdc.common.errors import CdcError, TopicNotFound
from cdc.config.model import PipelineConfig, TableConfig
from cdc.kafka.consume import consume_range
from cdc.kafka.offsets import new_consumer, partitions, watermarks
from cdc.positions.ordering import Ordering
from cdc.schema.columns import Column

_XID_SPAN = 1 << 32


@dataclass(frozen=True)
class Visibility:
    """``pg_current_snapshot()`` of the bootstrap snapshot (64-bit transaction ids)."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> "Visibility":
        """``"748:752:748,750"`` → Visibility(748, 752, {748, 750})."""
        xmin, xmax, xip = (text.strip().split(":") + [""])[:3]
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x.strip()))

    def widen(self, txid: int) -> int:
        """A 32-bit transaction id (Debezium's ``txId``) → the 64-bit id nearest to ``xmax`` with those low bits."""
        if txid >= _XID_SPAN:
            return txid
        out = (self.xmax & ~(_XID_SPAN - 1)) | txid
        if out > self.xmax + _XID_SPAN // 2:
            out -= _XID_SPAN
        elif out < self.xmax - _XID_SPAN // 2:
            out += _XID_SPAN
        return out

    def sees(self, txid: int) -> bool:
        """Did the snapshot see transaction ``txid`` (committed before it was taken)?"""
        x = self.widen(txid)
        return x < self.xmin or (x < self.xmax and x not in self.xip)


def seen_position(vis: Visibility, source: dict[str, Any], position: tuple[int, ...]) -> tuple[int, ...] | None:
    """``position`` when the change's transaction is one the snapshot saw, else None (unknown ``txId``: None)."""
    tx = source.get("txId")
    if tx is None or isinstance(tx, bool):
        return None
    try:
        return position if vis.sees(int(tx)) else None
    except (TypeError, ValueError):
        return None


def horizon_from_topic(cfg: PipelineConfig, t: TableConfig, columns: Sequence[Column], vis: Visibility,
                       timeout: float = 30.0) -> tuple[tuple[int, ...] | None, int]:
    """(horizon, events scanned): the newest position of a change in ``t.topic`` that the snapshot saw (None: no such
    change). Reads every retained record of the topic on the driver."""
    from cdc.decode.factory import make_decoder

    decoder = make_decoder(cfg, t).bind(list(columns))
    ordering = Ordering("postgresql")
    best: tuple[int, ...] | None = None
    scanned = 0
    consumer = new_consumer(cfg.kafka)
    try:
        try:
            parts = partitions(consumer, t.topic, timeout)
        except TopicNotFound:
            return None, 0  # nothing streamed yet: nothing to ignore
        for p, (lo, hi) in sorted(watermarks(consumer, t.topic, parts, timeout).items()):
            where = f"bootstrap horizon of {t.target}: topic {t.topic} partition {p}"
            for msgs in consume_range(consumer, t.topic, p, lo, hi, timeout, where):
                for m in msgs:
                    scanned += 1
                    try:
                        ev = decoder.decode(m.key(), m.value())
                        if ev.kind != "change":
                            continue
                        pos = seen_position(vis, ev.source, ordering.values(ev.source, ev.ts_ms, ev.op))
                    except CdcError:  # undecodable or unordered: not counted (a lower horizon is safe)
                        continue
                    if pos is not None and (best is None or pos > best):
                        best = pos
    finally:
        consumer.close()
    return best, scanned
