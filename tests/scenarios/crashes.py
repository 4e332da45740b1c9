"""Crashes and refusals for the randomized oracle (``tests/scenarios/harness.py``) and the scenario tests: an
exception at a named crash point, a dead owner, a refused batch."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Iterator

from tests.conftest import REPO


def _maintenance() -> Any:
    import importlib.util
    import sys

    if "cdc_maintenance_harness" not in sys.modules:
        spec = importlib.util.spec_from_file_location("cdc_maintenance_harness", REPO / "jobs" / "maintenance.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        sys.modules["cdc_maintenance_harness"] = module
    return sys.modules["cdc_maintenance_harness"]


class Refused(Exception):
    """A batch refused with a terminal error (in-process: the error itself; a subprocess: its exit 2 output)."""


class Crash(BaseException):  # not Exception: must pass through the phase() wrappers
    """Stands in for the process dying at a crash point (in-process scenarios)."""


def raise_at(point: str, fn: Callable[[], Any]) -> bool:
    """Run ``fn`` with an exception raised at crash point ``point``; True if it got there. Afterwards the batch's
    owner counts as dead (as after a real kill), so the next run takes it over."""
    import cdc.merge.apply
    import cdc.run.batch

    def checkpoint(p: str) -> None:
        if p == point:
            raise Crash(p)

    saved = cdc.run.batch.checkpoint, cdc.merge.apply.checkpoint
    cdc.run.batch.checkpoint = cdc.merge.apply.checkpoint = checkpoint
    try:
        fn()
        return False
    except Crash:
        return True
    finally:
        cdc.run.batch.checkpoint, cdc.merge.apply.checkpoint = saved
        _owner_dead_once()


def _owner_dead_once() -> None:
    """Make the next run see pending batches of this (living) process as abandoned: rewrite ``owner``."""
    import os

    import cdc.run.batch
    from cdc.ledger.lease import owner_host

    original = getattr(cdc.run.batch.owner_alive, "original", cdc.run.batch.owner_alive)
    mine = f"{owner_host()}:{os.getpid()}:"

    def dead(owner: str, claimed_at: Any, lease: float) -> bool:
        if not owner.startswith(mine):  # another process's claim (e.g. a later test's "other host"): judged as usual
            return original(owner, claimed_at, lease)
        cdc.run.batch.owner_alive = original
        return False

    dead.original = original  # type: ignore[attr-defined]
    cdc.run.batch.owner_alive = dead


@contextlib.contextmanager
def local_zone(zone: str) -> Iterator[None]:
    """This process's local time zone is ``zone`` inside the block (``TZ`` + ``time.tzset``), restored afterwards.
    It is the driver's zone only: the JVM and its Python workers are other processes and keep theirs (the job pins
    the Spark session's zone to UTC), but every Python-side conversion (PySpark turns collected TIMESTAMP values into
    local naive datetimes and naive datetimes back with the local zone) follows it, as on a host in that zone.
    Subprocesses started inside inherit it."""
    if zone == "UTC":
        yield
        return
    saved = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()
