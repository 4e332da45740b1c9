"""Lease renewal: a live run keeps its ledger claim fresh, so runs on other hosts never take its batch over.

A claimed batch records its owner (``host:pid:start``) and ``claimed_at``. A run on the same host decides whether the
owner is alive by asking the OS; a run on another host cannot, and treats the claim as abandoned once ``claimed_at`` is
older than ``batch.claim_timeout_minutes`` (the lease). While a run works on a batch, ``LeaseKeeper`` renews
``claimed_at`` from a daemon thread every third of the lease, so only a run that has stopped renewing (it died, or
its host did) loses its batch, one lease after its last renewal. A renewal that fails is retried at the next tick; a
run whose batch was taken over anyway stops before it commits (its validated ``staged``/``committed`` write fails on
the take-over, ``cdc.ledger.write``; or ``Ledger.still_owner``, asked before a row-level commit).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any, Callable

from cdc.common.errors import one_line

MIN_INTERVAL_SECONDS = 1.0


def owner_host() -> str:
    return os.environ.get("CDC_OWNER_HOST") or socket.gethostname()


def process_owner() -> str:
    """``host:pid:start`` of this process (start time makes PID reuse harmless)."""
    return f"{owner_host()}:{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def owner_alive(owner: str, claimed_at_us: int | None, lease_seconds: float, now: float | None = None) -> bool:
    """Is the run that owns a pending batch still running? Same host: ask the OS; else trust the lease.

    ``claimed_at_us`` is epoch microseconds, so the age does not depend on any process's time zone."""
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host == owner_host() and pid.isdigit() and start != "?":
        return _start_time(int(pid)) == start
    if claimed_at_us is None:
        return False
    age = (time.time() if now is None else now) - claimed_at_us / 1e6
    return age < lease_seconds


def renewal_interval(lease_seconds: float) -> float | None:
    """Seconds between renewals for a lease, or None when there is no lease to keep (``claim_timeout_minutes: 0``)."""
    if lease_seconds <= 0:
        return None
    return max(MIN_INTERVAL_SECONDS, lease_seconds / 3)


class LeaseKeeper:
    """``with LeaseKeeper(renew, interval, label):`` calls ``renew()`` every ``interval`` seconds until the block ends."""

    def __init__(self, renew: Callable[[], None], interval_seconds: float | None, label: str):
        self.renew, self.interval, self.label = renew, interval_seconds, label
        self.renewals = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LeaseKeeper:
        if self.interval is not None:
            self._thread = threading.Thread(target=self._run, name=f"cdc-lease {self.label}", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)  # a renewal in flight finishes (it holds the ledger's write lock)

    def _run(self) -> None:
        assert self.interval is not None
        while not self._stop.wait(self.interval):
            try:
                self.renew()
                self.renewals += 1
            except Exception as exc:  # keep working: the next tick retries; a lost batch fails its next ledger mark
                self.failures += 1
                print(f"WARNING {self.label}: lease renewal failed ({one_line(exc, 300)}); retrying in "
                      f"{self.interval:g} s", file=sys.stderr, flush=True)
