"""Topic routing end to end: a ``topic_pattern`` entry on the local broker, run as users run the job (CLI
subprocesses): two matching topics become two tables; a topic created between runs is ingested by the next run
(with its name sanitised); ``--table`` takes a resolved name; a topic whose table is ambiguous (two patterns, a
shared target or helper tables) is a failed table of the run (exit 2) while the others run their batch."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import unique
from tests.integration.cli import run_cli, summary_of
from tests.integration.events import pg, produce

pytestmark = pytest.mark.integration


def write(path, broker: str, warehouse, tables: list[dict[str, Any]]) -> Any:
    path.write_text(yaml.safe_dump({
        "pipeline": "routing", "kafka": {"bootstrap.servers": broker}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
        "metadata_namespace": unique("meta"), "batch": {"read_timeout_seconds": 15},
        "spark": {"spark.sql.shuffle.partitions": "2"}, "defaults": {"primary_key": ["id"]}, "tables": tables}))
    return path


def rows(spark: Any, target: str) -> dict[int, str]:
    spark.catalog.refreshTable(f"lake.{target}")  # written by another process: drop cached metadata
    return {r.id: r.name for r in spark.table(f"lake.{target}").collect()}


def by_table(summary: dict[str, Any]) -> dict[str, tuple[str, str, int]]:
    return {t["table"]: (t["topic"], t["status"], t["events_read"]) for t in summary["tables"]}


def test_pattern_tables_follow_the_topics_on_the_broker(tmp_path, broker, warehouse, spark):
    prefix, ns = unique("rt"), unique("routed")
    topic = {name: f"{prefix}.public.{name}" for name in ("customers", "orders", "Order-Items")}
    for name in ("customers", "orders"):
        broker.create_topic(topic[name])
    produce(broker.bootstrap, topic["customers"], [pg("c", i, {"id": i, "name": f"c{i}", "bio": None}, i)
                                                   for i in (1, 2)])
    produce(broker.bootstrap, topic["orders"], [pg("c", 7, {"id": 7, "name": "o7", "bio": None}, 3),
                                                pg("u", 7, {"id": 7, "name": "o7b", "bio": None}, 4)])
    config = write(tmp_path / "p.yaml", broker.bootstrap, warehouse, [
        {"topic_pattern": prefix + r"\.public\.(.*)", "target": ns + ".$1"}])

    first = run_cli(config)
    assert first.returncode == 0, first.stderr[-2000:]
    assert by_table(summary_of(first)) == {f"{ns}.customers": (topic["customers"], "committed", 2),
                                           f"{ns}.orders": (topic["orders"], "committed", 2)}
    assert rows(spark, f"{ns}.customers") == {1: "c1", 2: "c2"}
    assert rows(spark, f"{ns}.orders") == {7: "o7b"}

    broker.create_topic(topic["Order-Items"])  # created between runs; its name is not an identifier
    produce(broker.bootstrap, topic["Order-Items"], [pg("c", 3, {"id": 3, "name": "i3", "bio": None}, 5)])
    second = run_cli(config)
    assert second.returncode == 0, second.stderr[-2000:]
    assert by_table(summary_of(second)) == {f"{ns}.customers": (topic["customers"], "empty", 0),
                                            f"{ns}.orders": (topic["orders"], "empty", 0),
                                            f"{ns}.order_items": (topic["Order-Items"], "committed", 1)}
    assert rows(spark, f"{ns}.order_items") == {3: "i3"}

    produce(broker.bootstrap, topic["Order-Items"], [pg("u", 3, {"id": 3, "name": "i3b", "bio": None}, 6)])
    produce(broker.bootstrap, topic["customers"], [pg("d", 1, {"id": 1, "name": "c1", "bio": None}, 7)])
    only = run_cli(config, args=("--table", f"{ns}.order_items"))
    assert only.returncode == 0, only.stderr[-2000:]
    assert by_table(summary_of(only)) == {f"{ns}.order_items": (topic["Order-Items"], "committed", 1)}
    assert rows(spark, f"{ns}.order_items") == {3: "i3b"}
    assert rows(spark, f"{ns}.customers") == {1: "c1", 2: "c2"}  # not selected: its new delete waits


def test_explicit_entry_wins_and_a_topic_of_two_patterns_fails_alone(tmp_path, broker, warehouse, spark):
    prefix, ns = unique("rt"), unique("routed")
    for name in ("a", "b"):
        broker.create_topic(f"{prefix}.public.{name}")
        produce(broker.bootstrap, f"{prefix}.public.{name}", [pg("c", 1, {"id": 1, "name": name, "bio": None}, 1)])
    config = write(tmp_path / "p.yaml", broker.bootstrap, warehouse, [
        {"topic_pattern": prefix + r"\.public\.(.*)", "target": ns + ".$1"},
        {"topic": f"{prefix}.public.b", "target": f"{ns}.explicit_b"}])
    res = run_cli(config, args=("--dry-run",))
    assert res.returncode == 0, res.stderr[-2000:]
    assert {t["table"]: t["topic"] for t in summary_of(res)["tables"]} == {
        f"{ns}.a": f"{prefix}.public.a", f"{ns}.explicit_b": f"{prefix}.public.b"}

    clash = write(tmp_path / "clash.yaml", broker.bootstrap, warehouse, [
        {"topic_pattern": prefix + r"\.public\.(.*)", "target": ns + ".$1"},
        {"topic_pattern": prefix + r"\.(.*)\.b", "target": ns + ".other_$1"}])
    res = run_cli(clash)
    assert res.returncode == 2, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ERROR [ConfigError] {clash}: topic {prefix}.public.b matches two patterns"), line
    assert "tables[0]" in line and "tables[1]" in line
    # only the ambiguous topic stops: the other topic of the pattern runs its batch
    tables = {(t["table"], t["topic"]): t for t in summary_of(res)["tables"]}
    assert tables[(f"{ns}.a", f"{prefix}.public.a")]["status"] == "committed"
    assert rows(spark, f"{ns}.a") == {1: "a"}
    for target in (f"{ns}.b", f"{ns}.other_public"):  # the topic's table under either pattern
        failed = tables[(target, f"{prefix}.public.b")]
        assert (failed["status"], failed["error_class"], failed["exit_code"]) == ("failed", "ConfigError", 2)
        assert failed["error"] == line.removeprefix("ERROR [ConfigError] ")


def test_targets_that_would_share_helper_tables_stop_the_run_naming_both(tmp_path, broker, warehouse, spark):
    """``shop.a__b`` and ``shop__a.b`` would share ``staging__shop__a__b`` (and the tombstones table): one table's
    deletes would suppress the other's inserts. Resolved from a pattern, the pair stops the run with exit 2."""
    prefix, ns = unique("rt"), unique("hp")
    topics = [f"{prefix}.shop.a__b", f"{prefix}.shop__a.b"]
    for t in topics:
        broker.create_topic(t)
        produce(broker.bootstrap, t, [pg("c", 1, {"id": 1, "name": t, "bio": None}, 1)])
    config = write(tmp_path / "p.yaml", broker.bootstrap, warehouse, [
        {"topic_pattern": prefix + r"\.(\w+)\.(\w+)", "target": ns + "_$1.$2"}])
    res = run_cli(config)
    assert res.returncode == 2, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ERROR [ConfigError] {config}: topic {topics[0]}"), line
    assert f"targets {ns}_shop.a__b and {ns}_shop__a.b would share their helper tables" in line, line
    assert f"staging__{ns}_shop__a__b" in line and "rename one of the two targets" in line


def test_a_new_colliding_topic_fails_its_tables_and_the_others_run(tmp_path, broker, warehouse, spark):
    """Two topics created since the last run whose targets would share helper tables (``shop.a__b``,
    ``shop__a.b``): the run reports both tables failed, naming both topics and targets and what to do, and exits 2
    as a failed table does; the pattern's healthy table still commits its batch, and nothing is written for the
    colliding pair."""
    prefix, ns = unique("rt"), unique("iso")
    healthy = f"{prefix}.shop.orders"
    broker.create_topic(healthy)
    produce(broker.bootstrap, healthy, [pg("c", 1, {"id": 1, "name": "o1", "bio": None}, 1)])
    config = write(tmp_path / "p.yaml", broker.bootstrap, warehouse, [
        {"topic_pattern": prefix + r"\.(\w+)\.(\w+)", "target": ns + "_$1.$2"}])
    first = run_cli(config)
    assert first.returncode == 0, first.stderr[-2000:]
    assert rows(spark, f"{ns}_shop.orders") == {1: "o1"}

    topics, targets = [f"{prefix}.shop.a__b", f"{prefix}.shop__a.b"], [f"{ns}_shop.a__b", f"{ns}_shop__a.b"]
    for t in topics:
        broker.create_topic(t)
        produce(broker.bootstrap, t, [pg("c", 1, {"id": 1, "name": t, "bio": None}, 1)])
    produce(broker.bootstrap, healthy, [pg("u", 1, {"id": 1, "name": "o1b", "bio": None}, 2),
                                        pg("c", 2, {"id": 2, "name": "o2", "bio": None}, 3)])
    res = run_cli(config)
    assert res.returncode == 2, res.stderr[-2000:]
    tables = {t["topic"]: t for t in summary_of(res)["tables"]}
    assert set(tables) == {healthy, *topics}
    assert (tables[healthy]["status"], tables[healthy]["events_read"]) == ("committed", 2)
    assert rows(spark, f"{ns}_shop.orders") == {1: "o1b", 2: "o2"}
    for topic, target in zip(topics, targets):
        failed = tables[topic]
        assert (failed["table"], failed["status"], failed["error_class"], failed["exit_code"]) == (
            target, "failed", "ConfigError", 2)
        msg = failed["error"]
        assert all(name in msg for name in (*topics, *targets)), msg
        assert "rename one of the two targets" in msg and "not ingested" in msg, msg
        assert f"ERROR [ConfigError] {msg}" in res.stderr
        assert not spark.catalog.tableExists(f"lake.{target}")  # nothing was written for the pair
