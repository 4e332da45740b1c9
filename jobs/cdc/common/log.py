"""The job's log lines: the ``cdc`` loggers to stderr."""

from __future__ import annotations

import logging
import sys


def setup_logging() -> None:
    """INFO lines of the ``cdc`` loggers to stderr (once; a host application's own handlers are kept)."""
    root = logging.getLogger("cdc")
    if not any(getattr(h, "_cdc", False) for h in root.handlers):
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s cdc: %(message)s", "%Y-%m-%d %H:%M:%S"))
        h._cdc = True  # type: ignore[attr-defined]
        root.addHandler(h)
    root.setLevel(logging.INFO)
