"""Every key of a pipeline YAML given a value of the wrong type is a ``ConfigError`` naming the file and the key
path, never a raw ``TypeError`` / ``AttributeError`` (the Airflow side turns a ConfigError into the pipeline's
failing DAG; a raw error once took every CDC DAG down with it)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config

BASE: dict[str, Any] = {
    "pipeline": "p", "format": "json", "schedule": "@hourly", "metadata_namespace": "cdc_meta",
    "kafka": {"bootstrap.servers": "127.0.0.1:1"},
    "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh", "properties": {"a": "b"}},
    "spark": {"spark.x": "1"},
    "batch": {"max_records_per_partition": 10, "row_deltas": True},
    "defaults": {"primary_key": ["id"]},
    "tables": [{"topic": "t", "target": "a.b", "primary_key": ["id"], "ordering": ["source.lsn"],
                "column_types": {"c": "int"}, "partition_by": ["c"], "sort_by": ["c"], "properties": {"x": "y"},
                "track_columns": ["c"], "write_mode": "scd2"}],
}
WRONG = (5, 2.5, True, "x", [], [1], {}, {"k": 1}, [{"a": 1}], {"k": [1]})


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


def key_name(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(path))


def test_base_is_valid() -> None:
    parse_config(copy.deepcopy(BASE), "p.yaml")


@pytest.mark.parametrize("path", paths(BASE), ids=key_name)
def test_a_wrong_type_anywhere_is_a_config_error(path: tuple[Any, ...]) -> None:
    for wrong in WRONG:
        raw = copy.deepcopy(BASE)
        node = raw
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = wrong
        try:
            parse_config(raw, "p.yaml")
        except ConfigError as exc:
            assert str(exc).startswith("p.yaml: "), exc
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"{key_name(path)} = {wrong!r}: raw {type(exc).__name__}: {exc}")


def test_ordering_five_names_the_key() -> None:
    raw = copy.deepcopy(BASE)
    raw["tables"][0]["ordering"] = 5
    with pytest.raises(ConfigError, match=r"^p.yaml: key 'tables\[0\].ordering': must be auto or a list"):
        parse_config(raw, "p.yaml")
    raw["tables"][0]["ordering"] = {"source.lsn": 1}  # a mapping's keys are no ordering either
    with pytest.raises(ConfigError, match=r"key 'tables\[0\].ordering'"):
        parse_config(raw, "p.yaml")


@pytest.mark.parametrize("where", ["top", "table", "catalog", "batch"])
def test_non_string_keys_are_a_config_error(where: str) -> None:
    raw = copy.deepcopy(BASE)
    node = {"top": raw, "table": raw["tables"][0], "catalog": raw["catalog"], "batch": raw["batch"]}[where]
    node[5], node["zz_unknown"] = "x", "y"  # sorting {5, 'zz_unknown'} must not raise a TypeError
    with pytest.raises(ConfigError, match=r"^p.yaml: key '.*5': unknown key"):
        parse_config(raw, "p.yaml")
