"""SQL Server and Oracle log positions for the vectorised Avro path (``cdc.decode.avro_batch``).

Their positions are text (hex LSNs ``0000002d:00000a40:0003``, SCN digit strings wider than 63 bits), which Arrow
compute cannot parse; each row's source fields are handed to ``cdc.positions.ordering.Ordering.values`` itself, so both Avro
paths compute the same tuple by the same code. A position that ``values`` refuses is NULL here: the fast path then
hands that record to the per-record path, which stages it as a dead letter with the exact reason.
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from cdc.common.errors import OrderingError

# ordering kind → the source fields its position reads (the fast path checks writer and reader agree on them)
SOURCE_FIELDS = {"sqlserver": ("commit_lsn", "change_lsn", "event_serial_no"), "oracle": ("scn", "commit_scn")}


def positions(ordering: Any, field: Callable[[str], pa.Array]) -> list[pa.Array]:
    """The ordering columns (without the epoch); ``field(name)`` is the array of a source field (NULLs if absent)."""
    names = SOURCE_FIELDS[ordering.kind]
    values = [field(name).to_pylist() for name in names]
    width = len(ordering.source_columns)
    out: list[list[int | None]] = [[] for _ in range(width)]
    missing = (None,) * width
    for row in zip(*values) if values else ():
        try:
            pos: tuple[int | None, ...] = ordering.values(dict(zip(names, row)))
        except OrderingError:
            pos = missing
        for column, v in zip(out, pos):
            column.append(v)
    return [pa.array(column, pa.int64()) for column in out]


__all__ = ["SOURCE_FIELDS", "positions"]
