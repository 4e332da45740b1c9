"""Mistakes a person must fix exit 2 with a message that says what to fix (the real CLI in-process, the real
broker): offsets naming a topic or partition the pipeline lacks, a librdkafka property typo, and a topic whose
records are in the other format than ``format:`` says (the dead letter names the format to set)."""

from __future__ import annotations

import json
import struct

import pytest

from tests.integration import events
from tests.integration.events import pg
from tests.scenarios.reliability import cli, dead_letters, ledger_rows, pipeline, topic

pytestmark = pytest.mark.integration


def good(i: int, lsn: int) -> tuple[bytes, bytes]:
    return pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, lsn)


def test_offsets_of_a_topic_the_pipeline_lacks_exit_2(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse, "json", partitions=2)
    events.produce(broker.bootstrap, topic(raw), [good(1, 1), good(2, 2)])
    res = cli(raw, tmp_path, "--mode", "backfill", "--start-offsets", json.dumps({"dbserver1.public.typo": {"0": 0}}))
    assert res.code == 2, res.stderr
    [line] = res.error_lines
    assert "ERROR [ConfigError] --start-offsets: pipeline rel has no topic 'dbserver1.public.typo'" in line
    assert topic(raw) in line  # the pipeline's topics
    res = cli(raw, tmp_path, "--mode", "backfill", "--end-offsets", json.dumps({"dbserver1.public.typo": {"0": 1}}))
    assert res.code == 2 and "--end-offsets: pipeline rel has no topic" in res.stderr
    assert ledger_rows(spark, raw) == []  # nothing claimed: no backfill of the whole topic


def test_offsets_of_a_partition_the_topic_lacks_exit_2(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse, "json", partitions=2)
    events.produce(broker.bootstrap, topic(raw), [good(1, 1), good(2, 2)])
    res = cli(raw, tmp_path, "--mode", "backfill", "--start-offsets", json.dumps({topic(raw): {"0": 0, "7": 0}}))
    assert res.code == 2, res.stderr
    assert f"--start-offsets: topic {topic(raw)} has no partition 7 (its partitions: 0, 1)" in res.stderr
    assert ledger_rows(spark, raw) == []


def test_a_librdkafka_property_typo_exits_2_naming_the_key(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse, "json")
    raw["kafka"]["security.protocl"] = "PLAINTEXT"
    res = cli(raw, tmp_path)
    assert res.code == 2, res.stderr
    [line] = res.error_lines
    assert "ERROR [ConfigError]" in line and "key 'kafka.security.protocl': unknown librdkafka property" in line
    raw["kafka"].pop("security.protocl")
    raw["kafka"]["security.protocol"] = "PLAINTXT"
    res = cli(raw, tmp_path)
    assert res.code == 2 and "key 'kafka.security.protocol': Invalid value \"PLAINTXT\"" in res.stderr


def test_format_json_on_confluent_avro_says_set_format_avro(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse, "json", max_dead_letter_ratio=1.0)
    key, value = good(1, 1)
    avro = b"\x00" + struct.pack(">I", 42) + b"\x02\x06abc"  # Confluent wire format: magic 0, schema id 42, datum
    events.produce(broker.bootstrap, topic(raw), [(key, value), (key, avro)])
    res = cli(raw, tmp_path)
    assert res.code == 0, res.stderr
    [dl] = dead_letters(spark, raw)
    assert (dl.topic, dl.partition, dl.offset) == (topic(raw), 0, 1)
    assert "this is Confluent Avro (magic byte 0, schema id 42): set format: avro" in dl.error_message
    assert "codec can't decode" not in dl.error_message
    raw["tables"][0]["on_bad_record"] = "fail"
    raw["metadata_namespace"] += "_fail"
    res = cli(raw, tmp_path)
    assert res.code == 2 and "this is Confluent Avro (magic byte 0, schema id 42): set format: avro" in res.stderr
    assert f"{topic(raw)}" in res.stderr and "offset 1" in res.stderr


@pytest.fixture(scope="module")
def registry():
    from devtools.registry import LocalSchemaRegistry

    with LocalSchemaRegistry() as r:
        yield r


def test_format_avro_on_json_says_set_format_json(spark, broker, warehouse, tmp_path, registry):
    raw = pipeline(broker, warehouse, "avro", registry, primary_key=["id"])
    events.produce(broker.bootstrap, topic(raw), [good(1, 1)])
    res = cli(raw, tmp_path)
    assert res.code == 2, res.stderr
    assert "this is JSON, set format: json" in res.stderr and topic(raw) in res.stderr, res.stderr


def test_a_json_record_on_an_avro_topic_is_a_dead_letter_saying_set_format_json(spark, broker, warehouse, tmp_path,
                                                                                 registry):
    from tests.scenarios.test_bad_input import avro_records

    raw = pipeline(broker, warehouse, "avro", registry, max_dead_letter_ratio=0.6)
    recs = avro_records(registry, raw, 2)
    events.produce(broker.bootstrap, topic(raw), [recs[0], good(9, 9), recs[1]])
    res = cli(raw, tmp_path)
    assert res.code == 0, res.stderr
    [dl] = dead_letters(spark, raw)
    assert (dl.topic, dl.partition, dl.offset) == (topic(raw), 0, 1)
    assert "is not Confluent Avro: this is JSON" in dl.error_message and "set format: json" in dl.error_message
