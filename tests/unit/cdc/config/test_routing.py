"""Topic routing (``cdc.config.routing``): pattern entries + the broker's topic names → concrete tables."""

import re

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config
from cdc.config.routing import render, resolve, sanitise
from cdc.kafka.topics import resolve_pipeline

BASE = {
    "pipeline": "inventory",
    "kafka": {"bootstrap.servers": "127.0.0.1:1"},
    "format": "json",
    "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"},
}
PATTERN = {"topic_pattern": r"dbserver1\.public\.(.*)", "target": "inventory.$1", "delete_mode": "soft"}


def cfg(*tables, **top):
    return parse_config({**BASE, **top, "tables": list(tables)}, "p.yaml")


def test_each_matching_topic_is_a_table_with_the_entry_settings():
    c = cfg(PATTERN)
    assert c.has_patterns and c.tables[0].topic == "" and c.tables[0].target == "inventory.$1"
    out = resolve(c.tables, ["dbserver1.public.orders", "dbserver1.public.customers", "dbserver1.inventory.x",
                             "other", "dbserver1.public"], c.source_path)
    assert [(t.topic, t.target) for t in out] == [("dbserver1.public.customers", "inventory.customers"),
                                                   ("dbserver1.public.orders", "inventory.orders")]
    assert {(t.delete_mode, t.topic_pattern) for t in out} == {("soft", PATTERN["topic_pattern"])}
    assert out[0].namespace == "inventory" and out[0].table == "customers"


def test_full_match_only_and_internal_topics_never_claimed():
    c = cfg({"topic_pattern": "(.*)", "target": "raw.$1"})
    out = resolve(c.tables, ["__consumer_offsets", "__debezium-heartbeat.dbserver1", "dbserver1", "a.b"])
    assert [(t.topic, t.target) for t in out] == [("a.b", "raw.a_b"), ("dbserver1", "raw.dbserver1")]
    prefix = cfg({"topic_pattern": "db", "target": "raw.db"})
    assert resolve(prefix.tables, ["db1", "xdb"]) == ()


def test_groups_dollar_zero_and_several_groups():
    c = cfg({"topic_pattern": r"(\w+)\.(\w+)\.(\w+)", "target": "$2.$3_from_$1"},
            {"topic_pattern": r"whole\..*", "target": "raw.$0"})
    out = resolve(c.tables, ["srv.sales.orders", "whole.thing"])
    assert [t.target for t in out] == ["sales.orders_from_srv", "raw.whole_thing"]


def test_explicit_entries_win_over_patterns_and_keep_config_order():
    c = cfg(PATTERN, {"topic": "dbserver1.public.orders", "target": "shop.orders", "delete_mode": "hard"})
    out = resolve(c.tables, ["dbserver1.public.orders", "dbserver1.public.customers"])
    assert [(t.topic, t.target, t.delete_mode) for t in out] == [
        ("dbserver1.public.customers", "inventory.customers", "soft"),
        ("dbserver1.public.orders", "shop.orders", "hard")]


def test_two_patterns_claiming_one_topic_is_an_error_naming_both():
    c = cfg(PATTERN, {"topic_pattern": r"dbserver1\.(.*)\.orders", "target": "other.$1"})
    with pytest.raises(ConfigError) as exc:
        resolve(c.tables, ["dbserver1.public.customers", "dbserver1.public.orders"], "p.yaml")
    msg = str(exc.value)
    assert "p.yaml" in msg and "dbserver1.public.orders" in msg
    assert "tables[0]" in msg and "tables[1]" in msg and PATTERN["topic_pattern"] in msg
    assert exc.value.exit_code == 2
    # not a conflict while no topic matches both
    assert len(resolve(c.tables, ["dbserver1.public.customers"])) == 1


def test_two_topics_resolving_to_one_target_is_an_error_naming_both():
    c = cfg(PATTERN)
    with pytest.raises(ConfigError) as exc:
        resolve(c.tables, ["dbserver1.public.order-items", "dbserver1.public.order_items"], "p.yaml")
    assert "dbserver1.public.order-items" in str(exc.value) and "dbserver1.public.order_items" in str(exc.value)
    assert "inventory.order_items" in str(exc.value)
    # an explicit table's target taken by a pattern-resolved topic, case-insensitively
    c = cfg({"topic": "legacy.customers", "target": "inventory.Customers"}, PATTERN)
    with pytest.raises(ConfigError) as exc:
        resolve(c.tables, ["legacy.customers", "dbserver1.public.customers"])
    assert "legacy.customers" in str(exc.value) and "dbserver1.public.customers" in str(exc.value)


def test_sanitising_is_deterministic():
    assert sanitise("Order-Items.v2$x") == "order_items_v2_x"
    m = re.fullmatch(r"db\.(.*)", "db.2024-Orders")
    assert render("inventory.$1", m) == "inventory._2024_orders"
    assert render("inventory.$1", m) == render("inventory.$1", re.fullmatch(r"db\.(.*)", "db.2024-Orders"))
    c = cfg({"topic_pattern": r"db\.(.*)", "target": "inv.$1"})
    assert [t.target for t in resolve(c.tables, ["db.a.b-c", "db.Straße"])] == ["inv.stra_e", "inv.a_b_c"]  # by topic


def test_java_style_group_numbers():
    m = re.fullmatch(r"(a)", "a")
    assert render("ns.t$10", m) == "ns.ta0"  # one group: $1 then a literal 0, as RegexRouter does


def test_empty_group_is_an_error_naming_topic_and_pattern():
    c = cfg({"topic_pattern": r"db\.(.*)", "target": "inv.$1"})
    with pytest.raises(ConfigError) as exc:
        resolve(c.tables, ["db."])
    assert "db." in str(exc.value) and "topic_pattern" in str(exc.value)


@pytest.mark.parametrize("entry, key", [
    ({"topic_pattern": "(", "target": "a.$1"}, "tables[0].topic_pattern"),
    ({"topic_pattern": "", "target": "a.b"}, "tables[0].topic_pattern"),
    ({"topic_pattern": "a", "topic": "a", "target": "a.b"}, "tables[0].topic_pattern"),
    ({"topic_pattern": "(a)", "target": "a.$2"}, "tables[0].target"),
    ({"topic_pattern": "(a)", "target": "no_namespace_$1"}, "tables[0].target"),
    ({"topic_pattern": "(a)", "target": "a.b-$1"}, "tables[0].target"),
    ({"target": "a.b"}, "tables[0].topic"),
])
def test_static_errors_name_the_key(entry, key):
    with pytest.raises(ConfigError) as exc:
        cfg(entry)
    assert f"'{key}'" in str(exc.value) and "p.yaml" in str(exc.value)


def test_same_target_template_in_two_pattern_entries_is_fine_until_names_collide():
    c = cfg({"topic_pattern": r"a\.(.*)", "target": "inv.$1"}, {"topic_pattern": r"b\.(.*)", "target": "inv.$1"})
    assert [t.target for t in resolve(c.tables, ["a.x", "b.y"])] == ["inv.x", "inv.y"]
    with pytest.raises(ConfigError):
        resolve(c.tables, ["a.x", "b.x"])


def test_resolve_pipeline_without_patterns_never_asks_the_broker():
    c = cfg({"topic": "t", "target": "a.b"})
    assert resolve_pipeline(c) is c  # bootstrap 127.0.0.1:1 would fail


def test_resolve_pipeline_selects_resolved_names():
    c = resolve_pipeline(cfg(PATTERN), topics=["dbserver1.public.orders", "dbserver1.public.customers"])
    assert not c.has_patterns
    assert [t.topic for t in c.select(["inventory.orders"])] == ["dbserver1.public.orders"]
    with pytest.raises(ConfigError):
        c.select(["inventory.$1"])


def test_resolve_isolated_sets_only_the_ambiguous_topics_aside():
    from cdc.config.routing import resolve_isolated

    c = cfg(PATTERN, {"topic_pattern": r"dbserver1\.(.*)\.orders", "target": "other.$1"})
    topics = ["dbserver1.public.customers", "dbserver1.public.orders", "dbserver1.public.a-b",
              "dbserver1.public.a_b", "dbserver1.public.x__y", "dbserver1.public."]
    out, aside = resolve_isolated(c.tables, topics, "p.yaml")
    assert [(t.topic, t.target) for t in out] == [("dbserver1.public.customers", "inventory.customers"),
                                                  ("dbserver1.public.x__y", "inventory.x__y")]
    assert [(u.table.topic, u.table.target) for u in aside] == [
        ("dbserver1.public.", "inventory."),  # empty group
        ("dbserver1.public.orders", "inventory.orders"), ("dbserver1.public.orders", "other.public"),  # 2 patterns
        ("dbserver1.public.a-b", "inventory.a_b"), ("dbserver1.public.a_b", "inventory.a_b")]  # one target
    assert all("not ingested" in u.error and u.error.startswith("p.yaml: ") for u in aside)
    assert "inventory.orders" in aside[1].error and "other.public" in aside[1].error
    with pytest.raises(ConfigError) as exc:  # resolve: the first, as before
        resolve(c.tables, topics, "p.yaml")
    assert str(exc.value) == aside[0].error


def test_an_explicit_entry_keeps_its_target_when_a_pattern_topic_collides_with_it():
    from cdc.config.routing import resolve_isolated

    c = cfg({"topic": "legacy.customers", "target": "inventory.Customers"}, PATTERN)
    out, aside = resolve_isolated(c.tables, ["legacy.customers", "dbserver1.public.customers",
                                             "dbserver1.public.orders"])
    assert [t.topic for t in out] == ["legacy.customers", "dbserver1.public.orders"]
    assert [u.table.topic for u in aside] == ["dbserver1.public.customers"]
    assert "legacy.customers keeps its table" in aside[0].error
    helper = cfg({"topic": "legacy.a", "target": "shop.a__b"},
                 {"topic_pattern": r"db\.(\w+)\.(\w+)", "target": "$1.$2"})
    out, aside = resolve_isolated(helper.tables, ["legacy.a", "db.shop__a.b", "db.shop.c"])
    assert [t.topic for t in out] == ["legacy.a", "db.shop.c"]  # config order
    assert [u.table.target for u in aside] == ["shop__a.b"] and "would share their helper tables" in aside[0].error


def test_routes_select_reports_set_aside_tables_it_names():
    from cdc.kafka.topics import route_pipeline

    routes = route_pipeline(cfg(PATTERN), topics=["dbserver1.public.orders", "dbserver1.public.a-b",
                                                  "dbserver1.public.a_b"])
    assert [t.target for t in routes.cfg.tables] == ["inventory.orders"]
    tables, aside = routes.select(None)
    assert [t.target for t in tables] == ["inventory.orders"] and len(aside) == 2
    tables, aside = routes.select(["inventory.a_b"])
    assert tables == () and [u.table.topic for u in aside] == ["dbserver1.public.a-b", "dbserver1.public.a_b"]
    tables, aside = routes.select(["inventory.orders", "dbserver1.public.a-b"])
    assert [t.target for t in tables] == ["inventory.orders"] and [u.table.topic for u in aside] == [
        "dbserver1.public.a-b"]
    with pytest.raises(ConfigError):
        routes.select(["inventory.nope"])
    with pytest.raises(ConfigError):  # every table needed (maintenance, bootstrap): the first conflict
        resolve_pipeline(cfg(PATTERN), topics=["dbserver1.public.a-b", "dbserver1.public.a_b"])
