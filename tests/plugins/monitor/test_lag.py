"""Consumer lag per partition (pure): high watermark minus committed offset."""

from __future__ import annotations

from cdc_airflow.monitor.lag import lag


def test_lag_never_negative_and_defaults_to_zero_committed() -> None:
    assert lag({0: 10, 1: 5, 2: 0}, {0: 4, 1: 7}) == {0: 6, 1: 0, 2: 0}
