"""The bootstrap horizon: the newest Debezium position among the topic's changes that the bootstrap snapshot already
contains.

Why not simply the snapshot's WAL position ``H``: Debezium orders PostgreSQL changes by ``source.sequence`` =
``[last commit LSN, LSN]``, where the first part is the LSN of the *previous* commit the connector streamed. The
first transaction committed after the snapshot therefore carries the commit LSN of the last transaction before it,
which is below ``H`` whenever anything else wrote WAL in between (checkpoints, other databases, ``running_xacts``
records every 15 s). A horizon of ``H`` would drop that transaction's changes. What the snapshot contains is
decided by transaction visibility, so that is what decides here: the snapshot's ``pg_current_snapshot()``
(``xmin:xmax:xip``) says which transaction ids it sees, every change event carries ``source.txId``, and

    horizon = max(position p of a change the snapshot saw, with p below every change of a transaction it did not)

Why the second half: PostgreSQL writes (and flushes, and with synchronous replication waits for a standby on) a
transaction's commit record *before* it makes the transaction visible. A transaction T2 whose commit record
precedes a visible T1's can still be running (in ``xip``) for a snapshot taken in between. Debezium streams in
commit-record order, so T2's changes sit below T1's: a horizon of "the newest seen change" would drop T2's changes
although the snapshot lacks them. So the horizon stops below the first change of any transaction the snapshot did
not see. Transactions that got their id after the snapshot (``xid >= xmax``) wrote every record after it, so they
are above every seen change and never lower it; only those running at the snapshot do, and only when their commit
raced a visible one's. Changes of seen transactions above the horizon are applied again (their after-images, in
order: the table converges to the same rows).

Changes not yet in the topic when the bootstrap runs (a lagging connector) are not counted: the horizon comes out lower, those changes are
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
    return position if sees(vis, source) else None


def sees(vis: Visibility, source: dict[str, Any]) -> bool | None:
    """Did the snapshot see the change's transaction (None: the event has no usable ``txId``)?"""
    tx = source.get("txId")
    if tx is None or isinstance(tx, bool):
        return None
    try:
        return vis.sees(int(tx))
    except (TypeError, ValueError):
        return None


class HorizonScan:
    """The horizon (module docstring) from changes seen one at a time, in any order: ``add(position, seen)``, then
    ``horizon``. Keeps the ``keep`` newest seen positions: a transaction the snapshot did not see lies below seen
    ones only when its commit raced theirs, moments before the snapshot; should it lie below all those kept, the
    horizon is None (no barrier: every change is applied again, which is always safe)."""

    def __init__(self, keep: int = 10_000):
        self.keep = keep
        self.newest: list[tuple[int, ...]] = []  # a min-heap of the newest seen positions
        self.lowest_unseen: tuple[int, ...] | None = None
        self.dropped = False  # a seen position fell out of ``newest``

    def add(self, position: tuple[int, ...], seen: bool | None) -> None:
        import heapq

        if seen is None:  # unknown transaction: not counted
            return
        if not seen:
            if self.lowest_unseen is None or position < self.lowest_unseen:
                self.lowest_unseen = position
            return
        if len(self.newest) < self.keep:
            heapq.heappush(self.newest, position)
        elif position > self.newest[0]:
            heapq.heapreplace(self.newest, position)
            self.dropped = True
        else:
            self.dropped = True

    @property
    def horizon(self) -> tuple[int, ...] | None:
        low = self.lowest_unseen
        if low is not None and self.dropped and low <= self.newest[0]:
            return None  # the seen position just below ``low`` may be one that was not kept
        return max((p for p in self.newest if low is None or p < low), default=None)


def horizon_from_topic(cfg: PipelineConfig, t: TableConfig, columns: Sequence[Column], vis: Visibility,
                       timeout: float = 30.0) -> tuple[tuple[int, ...] | None, int]:
    """(horizon, events scanned): the newest position of a change in ``t.topic`` that the snapshot saw, below every
    change of a transaction it did not see (``HorizonScan``; None: no such change). Reads every retained record of the
    topic on the driver."""
    from cdc.decode.factory import make_decoder

    decoder = make_decoder(cfg, t).bind(list(columns))
    ordering = Ordering("postgresql")
    scan = HorizonScan()
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
                        scan.add(ordering.values(ev.source, ev.ts_ms, ev.op), sees(vis, ev.source))
                    except CdcError:  # undecodable or unordered: not counted (a lower horizon is safe)
                        continue
    finally:
        consumer.close()
    return scan.horizon, scanned
