"""Named crash points for the crash-recovery tests (a testing seam; inert unless the variable is set).

``CDC_KILL_AT=after_stage`` makes the job SIGKILL itself when it reaches that point, exactly like a machine dying
there: no ``finally`` blocks, no flushes. Points, in order: ``after_claim``, ``after_stage``, ``after_staged``,
``after_truncate``, ``after_merge`` (target merged, tombstones not yet), ``before_commit`` (all merges done, ledger not
yet committed), ``after_commit``. The JDBC bootstrap (``cdc.bootstrap``) has its own: ``bootstrap_after_snapshot``
(snapshot exported, nothing read), ``bootstrap_after_stage`` (staging table written, target untouched),
``bootstrap_before_swap`` (checked that no ingest ran, target untouched) and
``bootstrap_after_swap`` (target replaced, ledger row not yet written).

``CDC_PAUSE_AT=after_claim:30`` makes the job sleep 30 s at that point instead (a live run holding its claim, for the
concurrency tests).
"""

from __future__ import annotations

import os
import signal
import time

POINTS = ("after_claim", "after_stage", "after_staged", "after_truncate", "after_merge", "before_commit",
          "after_commit")


def checkpoint(point: str) -> None:
    if os.environ.get("CDC_KILL_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
    name, _, seconds = os.environ.get("CDC_PAUSE_AT", "").partition(":")
    if name == point:
        time.sleep(float(seconds or 30))
