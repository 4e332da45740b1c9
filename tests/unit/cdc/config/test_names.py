"""Helper table names (``cdc.config.names``): targets whose helper names would be equal are refused, naming both."""

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config
from cdc.config.names import helper_collision, names
from cdc.config.routing import resolve

BASE = {"pipeline": "shop", "kafka": {"bootstrap.servers": "127.0.0.1:1"}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"}, "metadata_namespace": "meta"}


def cfg(*tables):
    return parse_config({**BASE, "tables": list(tables)}, "p.yaml")


def test_todays_names_stay_for_every_target():
    c = cfg({"topic": "t1", "target": "shop.a__b"}, {"topic": "t2", "target": "shop.orders"},
            {"topic": "t3", "target": "a.b.c"})
    n = [names(c, t) for t in c.tables]
    assert [(x.staging, x.tombstones, x.changes) for x in n] == [
        ("lake.meta.staging__shop__a__b", "lake.meta.tombstones__shop__a__b", "lake.meta.changes__shop__a__b"),
        ("lake.meta.staging__shop__orders", "lake.meta.tombstones__shop__orders", "lake.meta.changes__shop__orders"),
        ("lake.meta.staging__a__b__c", "lake.meta.tombstones__a__b__c", "lake.meta.changes__a__b__c")]


@pytest.mark.parametrize("a, b", [("shop.a__b", "shop__a.b"), ("a.b.c", "a__b.c"), ("a_.b", "a._b"),
                                  ("Shop.A", "shop.a")])
def test_targets_with_equal_helper_names_collide(a, b):
    assert helper_collision([a, "shop.other", b]) == (a, b)
    assert helper_collision([a, "shop.other"]) is None


def test_a_collision_between_listed_tables_is_refused_at_load_naming_both():
    with pytest.raises(ConfigError) as e:
        cfg({"topic": "t1", "target": "shop.a__b"}, {"topic": "t2", "target": "shop.x"},
            {"topic": "t3", "target": "shop__a.b"})
    msg = str(e.value)
    assert "p.yaml" in msg and "shop.a__b" in msg and "shop__a.b" in msg and "staging__shop__a__b" in msg
    assert e.value.exit_code == 2


def test_a_collision_of_resolved_pattern_targets_is_refused_naming_both_topics():
    c = cfg({"topic_pattern": r"db\.([a-z_]+)\.([a-z_]+)", "target": "$1.$2"}, {"topic": "t1", "target": "shop.x"})
    assert [t.target for t in resolve(c.tables, ["db.shop.a__b", "db.shop.y"], c.source_path)] == [
        "shop.a__b", "shop.y", "shop.x"]
    with pytest.raises(ConfigError) as e:
        resolve(c.tables, ["db.shop.a__b", "db.shop__a.b"], c.source_path)
    msg = str(e.value)
    assert "db.shop.a__b" in msg and "db.shop__a.b" in msg and "shop.a__b" in msg and "shop__a.b" in msg
    explicit = cfg({"topic_pattern": r"db\.(\w+)", "target": "shop.$1"}, {"topic": "t1", "target": "shop__a.b"})
    with pytest.raises(ConfigError, match=r"shop__a\.b.*shop\.a__b|shop\.a__b.*shop__a\.b"):
        resolve(explicit.tables, ["db.a__b"], explicit.source_path)
