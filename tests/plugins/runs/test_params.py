"""Run parameters: JSON-schema validation (what the trigger form and the API enforce) and cross-field checks."""

from __future__ import annotations

from typing import Any

import pytest

from cdc_airflow.runs.params import param_specs, to_request

TABLES = {"inventory.customers": "dbserver1.public.customers", "inventory.orders": "dbserver1.public.orders"}


def validate(conf: dict[str, Any]) -> dict[str, Any]:
    from airflow.sdk import Param
    from airflow.sdk.definitions.param import ParamsDict

    params = ParamsDict({k: Param(s.pop("default"), **s) for k, s in param_specs(list(TABLES),
                                                                                 list(TABLES.values())).items()})
    for k, v in conf.items():
        params[k] = v
    return params.validate()


def test_defaults_validate() -> None:
    assert validate({}) == {"mode": "incremental", "tables": [], "max_records_per_partition": None,
                            "start_offsets": None, "end_offsets": None, "start_timestamp": None,
                            "end_timestamp": None}


def test_good_conf_validates() -> None:
    validate({"mode": "backfill", "tables": ["inventory.orders"], "max_records_per_partition": 10,
              "start_offsets": {"dbserver1.public.orders": {"0": 5, "1": 0}},
              "end_timestamp": "2024-05-01T12:00:00+02:00", "start_timestamp": "1714557600000"})


@pytest.mark.parametrize("conf", [
    {"mode": "turbo"},
    {"tables": ["inventory.nope"]},
    {"tables": "inventory.orders"},
    {"max_records_per_partition": 0},
    {"max_records_per_partition": "10"},
    {"start_offsets": {"unknown.topic": {"0": 1}}},
    {"start_offsets": {"dbserver1.public.orders": {"zero": 1}}},
    {"end_offsets": {"dbserver1.public.orders": {"0": -1}}},
    {"end_offsets": {"dbserver1.public.orders": {}}},
    {"start_timestamp": "yesterday"},
    {"end_timestamp": "2024-13"},
    {"start_timestamp": "1714557600"},  # epoch seconds: refused, epoch digits are milliseconds
])
def test_bad_conf_rejected(conf: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        validate(conf)


@pytest.mark.parametrize("params,message", [
    ({"tables": ["inventory.orders"], "start_offsets": {"dbserver1.public.customers": {"0": 1}}},
     "not a topic of the selected tables"),
    ({"start_offsets": {"dbserver1.public.orders": {"0": 10}}, "end_offsets": {"dbserver1.public.orders": {"0": 5}}},
     "before start"),
    ({"start_timestamp": "2024-05-02", "end_timestamp": "2024-05-01"}, "must be after"),
    ({"start_offsets": {"dbserver1.public.orders": {"0": 1}}, "start_timestamp": "2024-05-01"}, "not both"),
])
def test_cross_field_errors(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        to_request(params, TABLES)


def test_to_request() -> None:
    req = to_request({"mode": "dry_run", "tables": ["inventory.orders"], "max_records_per_partition": 7,
                      "end_offsets": {"dbserver1.public.orders": {"0": 9}}, "start_timestamp": ""}, TABLES)
    assert req.mode == "dry_run" and req.tables == ("inventory.orders",) and req.max_records_per_partition == 7
    assert req.end_offsets == {"dbserver1.public.orders": {0: 9}} and req.start_ts_ms is None
    assert req.explicit_range


@pytest.mark.parametrize("value", ["2024-05-01T12:00:00Z", "1714564800000", "2024-05-01 14:00:00+02:00",
                                   "2024-05-01T12:00:00"])
def test_timestamps_become_epoch_milliseconds(value: str) -> None:
    req = to_request({"mode": "backfill", "start_timestamp": value}, TABLES)
    assert req.start_ts_ms == 1714564800000


def test_epoch_seconds_are_refused_naming_the_param() -> None:
    """Regression: "1714564800" meant seconds in the DAG but milliseconds (January 1970) in the job."""
    with pytest.raises(ValueError, match="param end_timestamp: '1714564800'.*epoch seconds"):
        to_request({"mode": "backfill", "end_timestamp": "1714564800"}, TABLES)


def test_airflow_backfill_runs_reread_their_data_interval() -> None:
    from datetime import datetime, timezone

    from cdc_airflow.runs.params import backfill_interval_params

    a, b = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc), datetime(2024, 5, 1, 12, 10, tzinfo=timezone.utc)
    out = backfill_interval_params({"mode": "incremental", "tables": []}, "backfill", a, b)
    assert out == {"mode": "backfill", "tables": [], "start_timestamp": "2024-05-01T12:00:00+00:00",
                   "end_timestamp": "2024-05-01T12:10:00+00:00"}
    req = to_request(out, TABLES)
    assert req.mode == "backfill" and req.explicit_range
    assert backfill_interval_params({"mode": "incremental"}, "manual", a, b) == {"mode": "incremental"}
    explicit = {"mode": "backfill", "start_offsets": {"dbserver1.public.orders": {"0": 1}}}
    assert backfill_interval_params(explicit, "backfill", a, b) == explicit
    assert backfill_interval_params({"mode": "dry_run"}, "backfill", a, b) == {"mode": "dry_run"}


def test_backfill_run_type_enum_of_the_task_sdk() -> None:
    from datetime import datetime, timezone

    from airflow.sdk.api.datamodels._generated import DagRunType

    from cdc_airflow.runs.params import backfill_interval_params

    a, b = datetime(2024, 5, 1, tzinfo=timezone.utc), datetime(2024, 5, 2, tzinfo=timezone.utc)
    assert backfill_interval_params({}, DagRunType.BACKFILL, a, b)["mode"] == "backfill"
    assert backfill_interval_params({}, DagRunType.SCHEDULED, a, b) == {}
