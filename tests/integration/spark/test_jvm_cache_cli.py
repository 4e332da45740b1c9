"""``cdc.spark.jvm_cache`` as users meet it: the first ``python jobs/ingest.py`` of a classpath writes the JVM's class
archive when it ends, the next one starts from it; stdout still ends with the JSON summary."""

from __future__ import annotations

import pytest

from tests.conftest import unique
from tests.integration.cli import run_cli, summary_of
from tests.integration.events import pg, produce
from tests.scenarios.test_cli import write_config

pytestmark = pytest.mark.integration


def test_the_first_job_writes_the_class_archive_and_the_next_job_starts_from_it(tmp_path, broker, warehouse):
    topic, target = unique("dbserver1.public.cds_"), f"{unique('cds')}.customers"
    broker.create_topic(topic)
    produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 4)])
    config = write_config(tmp_path, broker.bootstrap, warehouse, topic, target)
    cache = tmp_path / "jvm"
    env = {"CDC_JVM_CLASS_CACHE": str(cache)}

    first = run_cli(config, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert summary_of(first)["tables"][0]["inserted"] == 3  # the JVM wrote the archive after it: stdout is intact
    [archive] = cache.glob("*.jsa")
    assert archive.stat().st_size > 10_000_000 and not list(cache.glob("*.partial"))
    assert "JVM class cache: this run writes" in first.stderr

    produce(broker.bootstrap, topic, [pg("u", 2, {"id": 2, "name": "two", "bio": None}, 10),
                                      pg("c", 4, {"id": 4, "name": "n4", "bio": None}, 11)])
    second = run_cli(config, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    t = summary_of(second)["tables"][0]
    assert (t["inserted"], t["updated"]) == (1, 1)
    assert f"JVM class cache: using {archive}" in second.stderr
    assert list(cache.iterdir()) == [archive]


def test_jvm_options_in_the_pipeline_yaml_turn_the_archive_off(tmp_path, broker, warehouse):
    topic, target = unique("dbserver1.public.cds_"), f"{unique('cds')}.customers"
    broker.create_topic(topic)
    produce(broker.bootstrap, topic, [pg("c", 1, {"id": 1, "name": "n1", "bio": None}, 1)])
    config = write_config(tmp_path, broker.bootstrap, warehouse, topic, target,
                          spark={"spark.sql.shuffle.partitions": "2", "spark.driver.extraJavaOptions": "-Xss4m"})
    cache = tmp_path / "jvm"
    res = run_cli(config, env={"CDC_JVM_CLASS_CACHE": str(cache)})
    assert res.returncode == 0, res.stderr[-3000:]
    assert summary_of(res)["tables"][0]["inserted"] == 1
    assert "JVM class cache" not in res.stderr and not list(cache.glob("*"))


def test_a_failed_first_job_writes_the_archive_too_and_keeps_its_error_line(tmp_path, broker, warehouse):
    config = write_config(tmp_path, broker.bootstrap, warehouse, unique("dbserver1.public.never_created_"),
                          f"{unique('cds')}.customers")
    cache = tmp_path / "jvm"
    res = run_cli(config, env={"CDC_JVM_CLASS_CACHE": str(cache)})
    assert res.returncode == 2, res.stderr[-3000:]  # the topic does not exist: a person must act
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")][0].startswith("ERROR [TopicNotFound]")
    assert res.stdout.strip() == ""  # nothing from the JVM after the run, which wrote its archive on the way out
    assert len(list(cache.glob("*.jsa"))) == 1 and not list(cache.glob("*.partial"))
