"""Source positions that went far backwards: a database failover, ``RESET MASTER``, a blue-green switch or a move to a
new PostgreSQL cluster. Changes at lower positions than the table holds count as "older" and would be skipped
silently, so such a batch fails first (pure; the caller passes the positions).

A partition's newest position in an incremental batch is compared with the newest position committed from that
partition before (ledger ``max_position``). Going backwards a little is normal (a connector restart redelivers what
it had not committed); *far* backwards is not:

* MySQL/MariaDB: the binlog file number drops by three or more, to half of what it was or less (``RESET MASTER``
  starts again at ``.000001``; a replica's own, much lower, binlog numbering);
* PostgreSQL: the LSN drops by 1 GiB or more, to half of what it was or less (a new cluster starts its WAL near
  zero);
* explicit ``ordering:`` lists: not checked (their meaning is unknown).

The way on is ``tables[].ordering_epoch``: raise it, and every change of the new epoch wins over what is stored.
"""

from __future__ import annotations

from typing import Mapping

from cdc.errors import PositionRegression
from cdc.layout import align

PG_MIN_DROP = 1 << 30  # bytes of WAL; a restart's redelivery goes back far less
MYSQL_MIN_DROP = 3  # binlog files; a restart's redelivery goes back one at most (files are 1 GiB by default)


def check(table: str, topic: str, kind: str, epoch: int | None, newest: Mapping[int, tuple[int, ...] | None],
          previous: Mapping[int, tuple[int, ...]]) -> None:
    """Raise ``PositionRegression`` when a partition's newest position fell far below what it had committed."""
    if kind not in ("postgresql", "postgresql_lsn", "mysql"):
        return
    lead = 0 if epoch is None else 1  # the epoch column comes first
    for p, new in sorted(newest.items()):
        old = previous.get(p)
        if new is None or old is None:
            continue
        old = align(old, len(new)) or old
        if len(old) != len(new) or new[:lead] != old[:lead] or new >= old:
            continue  # a newer epoch, or not backwards
        src_new, src_old = new[lead:], old[lead:]
        if kind == "mysql":  # binlog file number: down by three or more, to half or less
            far = src_old[0] - src_new[0] >= MYSQL_MIN_DROP and src_new[0] <= src_old[0] // 2
        else:  # LSN: down by a GiB or more, to half or less
            far = src_old[-1] - src_new[-1] >= PG_MIN_DROP and src_new[-1] <= src_old[-1] // 2
        if far:
            raise PositionRegression(
                f"table {table}: topic {topic} partition {p}: source positions went far backwards (newest in this "
                f"batch {list(src_new)}, previously committed up to {list(src_old)}): a database failover, RESET "
                "MASTER or a move to a new server? Changes at lower positions would be ignored as older than the "
                "table. Nothing was merged. If the source really restarted its log, set tables[].ordering_epoch to "
                f"{(epoch or 0) + 1} for this table (changes of a newer epoch always win) and rerun; otherwise "
                "re-snapshot the table")
