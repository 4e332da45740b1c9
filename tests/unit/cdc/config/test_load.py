import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import load_config, parse_config

BASE = {
    "pipeline": "inventory",
    "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
    "format": "json",
    "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"},
    "tables": [{"topic": "dbserver1.public.customers", "target": "inventory.customers", "delete_mode": "soft"}],
}


def test_parses_defaults_and_overrides():
    cfg = parse_config({**BASE, "defaults": {"delete_mode": "hard", "on_bad_record": "fail"}})
    t = cfg.tables[0]
    assert (t.delete_mode, t.on_bad_record, t.ordering, t.primary_key) == ("soft", "fail", "auto", ())
    assert cfg.batch.max_records_per_partition == 500_000
    assert cfg.table("inventory.customers") is t and cfg.table("dbserver1.public.customers") is t
    b = cfg.batch
    assert (b.key_filter_max_changes, b.key_filter_min_target_rows, b.bloom_filter_min_target_rows) == (1_000_000,) * 3
    merge = parse_config({**BASE, "batch": {"key_filter_max_changes": 0, "key_filter_min_target_rows": 5,
                                            "bloom_filter_min_target_rows": 0}}).batch
    assert (merge.key_filter_max_changes, merge.key_filter_min_target_rows, merge.bloom_filter_min_target_rows) == \
        (0, 5, 0)
    assert b.row_deltas is True and parse_config({**BASE, "batch": {"row_deltas": False}}).batch.row_deltas is False
    assert b.one_task_max_target_rows == 100_000
    assert parse_config({**BASE, "batch": {"one_task_max_target_rows": 0}}).batch.one_task_max_target_rows == 0


@pytest.mark.parametrize("change, key", [
    ({"format": "xml"}, "format"),
    ({"kafka": {}}, "kafka.bootstrap.servers"),
    ({"format": "avro"}, "schema_registry.url"),
    ({"tables": []}, "tables"),
    ({"tables": [{"topic": "t", "target": "no_namespace"}]}, "tables[0].target"),
    ({"tables": [{"topic": "t", "target": "a.b", "delete_mode": "maybe"}]}, "tables[0].delete_mode"),
    ({"tables": [{"topic": "t", "target": "a.b", "colour": 1}]}, "tables[0].colour"),
    ({"batch": {"max_records_per_partition": 0}}, "batch.max_records_per_partition"),
    ({"batch": {"key_filter_max_changes": -1}}, "batch.key_filter_max_changes"),
    ({"batch": {"key_filter_min_target_rows": -1}}, "batch.key_filter_min_target_rows"),
    ({"batch": {"bloom_filter_min_target_rows": "many"}}, "batch.bloom_filter_min_target_rows"),
    ({"batch": {"one_task_max_target_rows": -1}}, "batch.one_task_max_target_rows"),
    ({"batch": {"row_deltas": "yes"}}, "batch.row_deltas"),
    ({"tables": [{"topic": "t", "target": "a.b", "max_dead_letter_ratio": 2}]}, "tables[0].max_dead_letter_ratio"),
    ({"tables": [{"topic": "t", "target": "a.b", "max_record_bytes": 1.5}]}, "tables[0].max_record_bytes"),
    ({"tables": [{"topic": "t", "target": "a.b", "max_record_bytes": -1}]}, "tables[0].max_record_bytes"),
])
def test_errors_name_the_file_and_key(tmp_path, change, key):
    import yaml

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**BASE, **change}))
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(path) in str(exc.value) and f"'{key}'" in str(exc.value)


def test_env_substitution_and_redaction():
    raw = {**BASE, "kafka": {"bootstrap.servers": "${BROKER}", "sasl.password": "${PW}"}}
    cfg = parse_config(raw, env={"BROKER": "b:9092", "PW": "s3cret"})
    assert cfg.kafka["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(cfg.redacted())
    assert "s3cret" not in repr(cfg) and "b:9092" in repr(cfg)  # tracebacks/log lines that print the config
    with pytest.raises(ConfigError, match="PW is not set"):
        parse_config(raw, env={"BROKER": "b:9092"})


def test_relative_warehouse_resolves_against_the_yaml_directory(tmp_path):
    import yaml

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**BASE, "catalog": {"warehouse": "wh"}}))
    assert load_config(path).catalog.warehouse == str(tmp_path / "wh")


def test_scenario12_column_types_parsed_normalised_and_allowed_in_defaults():
    t = {"topic": "t", "target": "a.b", "column_types": {"price": " DECIMAL(10, 2) ", "n": "BigInt", "at": "timestamptz"}}
    assert parse_config({**BASE, "tables": [t]}).tables[0].column_types == {
        "price": "decimal(10,2)", "n": "bigint", "at": "timestamptz"}
    cfg = parse_config({**BASE, "defaults": {"column_types": {"amount": "decimal(12,4)"}}})
    assert cfg.tables[0].column_types == {"amount": "decimal(12,4)"}
    assert parse_config(BASE).tables[0].column_types == {}


@pytest.mark.parametrize("column_types, key", [
    ({"x": "varchar"}, "tables[0].column_types.x"),
    ({"x": "decimal(40,2)"}, "tables[0].column_types.x"),
    ({"x": "decimal(5,6)"}, "tables[0].column_types.x"),
    ({"x": 3}, "tables[0].column_types.x"),
    (["decimal(10,2)"], "tables[0].column_types"),
])
def test_scenario12_column_types_errors_name_the_file_and_key(tmp_path, column_types, key):
    import yaml

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**BASE, "tables": [{"topic": "t", "target": "a.b", "column_types": column_types}]}))
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(path) in str(exc.value) and f"'{key}'" in str(exc.value)
