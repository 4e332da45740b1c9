"""``jobs/bootstrap.py --table`` with ``topic_pattern`` entries: names resolve as for ``jobs/ingest.py``
(``cdc.kafka.topics.resolve_pipeline``); a table of a pattern entry is refused naming the entry (no database, no broker)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config

REPO = Path(__file__).resolve().parents[4]
_spec = importlib.util.spec_from_file_location("cdc_bootstrap_job", REPO / "jobs" / "bootstrap.py")
job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(job)

BASE = {"pipeline": "inventory", "kafka": {"bootstrap.servers": "127.0.0.1:1"}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"}}
BOOT = {"jdbc_url": "jdbc:postgresql://db:5432/inventory", "source_table": "public.customers"}
PATTERN = {"topic_pattern": r"dbserver1\.public\.(.*)", "target": "inventory.$1"}
EXPLICIT = {"topic": "dbserver1.public.customers", "target": "inventory.customers", "bootstrap": BOOT}
TOPICS = ["dbserver1.public.customers", "dbserver1.public.orders"]


def cfg(*tables):
    return parse_config({**BASE, "tables": list(tables)}, "p.yaml")


def test_explicit_names_need_no_broker_and_patterns_do_not_get_in_the_way():
    c, tables = job.bootstrap_tables(cfg(PATTERN, EXPLICIT), ["inventory.customers"])  # topics=None: not asked
    assert [t.target for t in tables] == ["inventory.customers"] and tables[0].bootstrap.source_table == \
        "public.customers"
    _, tables = job.bootstrap_tables(cfg(PATTERN, EXPLICIT), [])  # every table with a bootstrap section
    assert [t.target for t in tables] == ["inventory.customers"]


def test_a_pattern_resolved_target_is_found_and_refused_naming_its_entry():
    with pytest.raises(ConfigError, match=r"p\.yaml: table inventory\.orders \(topic dbserver1\.public\.orders\) "
                                          r"comes from tables\[0\] \(topic_pattern 'dbserver1\\\.public\\\.\(\.\*\)'\), "
                                          r"which has no bootstrap section .* give the topic its own entry"):
        job.bootstrap_tables(cfg(PATTERN, EXPLICIT), ["inventory.orders"], topics=TOPICS)
    with pytest.raises(ConfigError, match=r"no table 'inventory\.nothing'"):  # resolved, still unknown
        job.bootstrap_tables(cfg(PATTERN, EXPLICIT), ["inventory.nothing"], topics=TOPICS)


def test_a_pattern_entry_with_a_bootstrap_section_is_refused():
    boot = {**PATTERN, "bootstrap": BOOT}
    with pytest.raises(ConfigError, match=r"target 'inventory\.\$1' comes from tables\[1\] .*whose bootstrap section "
                                          r"loads one source table \(public\.customers\)"):
        job.bootstrap_tables(cfg({**EXPLICIT, "topic": "other", "target": "inventory.other"}, boot), [])
    with pytest.raises(ConfigError, match=r"table inventory\.orders \(topic dbserver1\.public\.orders\) comes from "
                                          r"tables\[0\]"):
        job.bootstrap_tables(cfg(boot), ["dbserver1.public.orders"], topics=TOPICS)


def test_a_pattern_resolved_name_with_an_unreachable_broker_is_a_transient_error():
    from cdc.common.errors import KafkaUnavailable

    c = parse_config({**BASE, "batch": {"read_timeout_seconds": 1}, "tables": [PATTERN, EXPLICIT]}, "p.yaml")
    with pytest.raises(KafkaUnavailable, match="cannot list the broker's topics"):
        job.bootstrap_tables(c, ["inventory.orders"])
