"""cdc.lease: the renewal thread (the ledger write it calls is covered with real processes in
tests/scenarios/test_concurrency_security.py)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from cdc.ledger.lease import LeaseKeeper, renewal_interval


@pytest.mark.parametrize("lease, interval", [(3600, 1200), (15, 5), (2, 1.0), (0, None)])
def test_renewal_interval_is_a_third_of_the_lease(lease, interval):
    assert renewal_interval(lease) == interval


def test_renews_until_the_block_ends():
    calls = []
    with LeaseKeeper(lambda: calls.append(time.monotonic()), 0.05, "t") as keeper:
        time.sleep(0.4)
    n = len(calls)
    assert n >= 3 and keeper.renewals == n
    time.sleep(0.2)
    assert len(calls) == n  # stopped
    assert not [t for t in threading.enumerate() if t.name.startswith("cdc-lease")]


def test_a_failed_renewal_is_reported_and_retried(capsys):
    outcomes = itertools.chain([RuntimeError("catalog down\nstack...")], itertools.repeat(None))

    def renew():
        err = next(outcomes)
        if err:
            raise err

    with LeaseKeeper(renew, 0.05, "table db.t batch 7") as keeper:
        time.sleep(0.4)
    assert keeper.failures == 1 and keeper.renewals >= 2
    err = capsys.readouterr().err
    assert "WARNING table db.t batch 7: lease renewal failed (RuntimeError: catalog down)" in err
    assert "stack" not in err and "ERROR" not in err


def test_no_lease_no_thread():
    with LeaseKeeper(lambda: pytest.fail("renewed"), None, "t"):
        assert not [t for t in threading.enumerate() if t.name.startswith("cdc-lease")]
