"""Bad input never disappears silently: each bad record becomes a dead-letter row (in the metadata namespace) or the
run fails with one clear line. And infrastructure failures exit non-zero with one line, ledger untouched."""

from __future__ import annotations

import json
import struct

import pytest

from tests.integration import events
from tests.integration.events import pg
from tests.scenarios.reliability import cli, dead_letters, ledger_rows, pipeline, table_rows, topic

pytestmark = pytest.mark.integration


def good(i: int, lsn: int) -> tuple[bytes, bytes]:
    return pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, lsn)


@pytest.fixture(scope="module")
def registry():
    from devtools.registry import LocalSchemaRegistry

    with LocalSchemaRegistry() as r:
        yield r


def avro_records(registry, raw, n: int = 4) -> list[tuple[bytes | None, bytes | None]]:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from devtools.debezium import AvroSerializer, ChangeEventGenerator, GeneratorConfig

    gen = ChangeEventGenerator(7, GeneratorConfig(partitions=1, toast_fraction=0))
    ser = AvroSerializer(SchemaRegistryClient(registry.client_config), topic=topic(raw))
    return [ser.serialize(r) for r in gen.snapshot(n)]


def test_bad_avro_records_become_dead_letters(spark, broker, warehouse, tmp_path, registry):
    """Corrupt body, wrong magic byte, unknown schema id, a key without the key field: dead letters; the good
    records are merged; the batch commits (ratio allowed)."""
    raw = pipeline(broker, warehouse, "avro", registry, max_dead_letter_ratio=0.6)
    recs = avro_records(registry, raw)
    key, value = recs[0]
    bad = [
        (key, value[:5] + b"\xff\xfe\xfd\x01garbage"),  # corrupt Avro body
        (key, b"\x07" + value[1:]),  # wrong magic byte
        (key, b"\x00" + struct.pack(">I", 99999) + value[5:]),  # unknown schema id
        (key, value[:5]),  # truncated: header only
    ]
    events.produce(broker.bootstrap, topic(raw), recs[:2] + bad + recs[2:])
    res = cli(raw, tmp_path)
    assert res.code == 0, res.stderr
    summary = json.loads(res.stdout.splitlines()[-1])["tables"][0]
    assert (summary["status"], summary["dead_letters"], summary["inserted"]) == ("committed", 4, 4)
    dl = dead_letters(spark, raw)
    assert [r.offset for r in dl] == [2, 3, 4, 5]
    assert all(r.topic == topic(raw) and r.value is not None and r.error_class == "DecodeError" for r in dl)
    msgs = [r.error_message for r in dl]
    assert "corrupt Avro value" in msgs[0]
    assert "magic byte 0x07" in msgs[1]
    assert "unknown schema id 99999" in msgs[2]
    assert len(table_rows(spark, raw)) == 4


def test_bad_json_records_become_dead_letters(spark, broker, warehouse, tmp_path):
    """Not JSON, JSON that is not Debezium, an unknown op, a missing key field, a value that does not fit the column
    type: each is one dead-letter row naming the reason; good records go through."""
    raw = pipeline(broker, warehouse, max_dead_letter_ratio=0.9)
    no_key_row = pg("c", None, {"id": None, "name": "nokey", "bio": None}, 30)
    unknown_op = json.loads(pg("c", 8, {"id": 8, "name": "x", "bio": None}, 40)[1])
    unknown_op["payload"]["op"] = "x"
    wrong_type = json.loads(pg("c", 9, {"id": 9, "name": "x", "bio": None}, 50)[1])
    wrong_type["payload"]["after"]["id"] = "not-a-number"
    events.produce(broker.bootstrap, topic(raw), [
        good(1, 10),
        (None, b"\x00\x01 not json at all"),
        (None, json.dumps({"hello": "world"}).encode()),
        no_key_row,
        (None, json.dumps(unknown_op).encode()),
        (None, json.dumps(wrong_type).encode()),
        good(2, 60),
    ])
    res = cli(raw, tmp_path)
    assert res.code == 0, res.stderr
    assert table_rows(spark, raw).keys() == {1, 2}
    dl = {r.offset: r for r in dead_letters(spark, raw)}
    assert sorted(dl) == [1, 2, 3, 4, 5]
    assert "JSON" in dl[1].error_message or "json" in dl[1].error_message
    assert "not a Debezium change event" in dl[2].error_message
    assert "key field 'id'" in dl[3].error_message
    assert "unknown op 'x'" in dl[4].error_message
    assert "id" in dl[5].error_message
    assert all(r.value is not None for r in dl.values()), [(r.offset, r.error_class, r.value, r.error_message[:150])
                                                           for r in dl.values()]


def test_a_batch_holding_only_a_truncate(spark, broker, warehouse, tmp_path):
    """Regression (found by the soak): a range whose records carry no key (a truncate) took its key from the
    samples and failed with "primary key [] is empty", forever (the same range is planned again)."""
    raw = pipeline(broker, warehouse)
    events.produce(broker.bootstrap, topic(raw), [good(1, 10), good(2, 20), pg("t", None, None, 30), good(3, 40)])
    assert cli(raw, tmp_path, "--max-records", "2").code == 0
    res = cli(raw, tmp_path, "--max-records", "1")  # the range [2, 3) holds only the truncate
    assert res.code == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1])["tables"][0]["deleted"] == 2
    assert cli(raw, tmp_path).code == 0
    assert table_rows(spark, raw).keys() == {3}


def test_on_bad_record_fail_exits_2_naming_table_topic_partition_offset(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse, on_bad_record="fail")
    events.produce(broker.bootstrap, topic(raw), [good(1, 10), (None, b"{broken")])
    res = cli(raw, tmp_path)
    assert res.code == 2
    assert len(res.error_lines) == 1, res.stderr
    line = res.error_lines[0]
    assert line.startswith("ERROR [BadRecordError]")
    t = raw["tables"][0]
    for part in (t["target"], f"topic {t['topic']}", "partition 0", "offset 1"):
        assert part in line, line
    assert table_rows(spark, raw) == {}
    assert not [r for r in ledger_rows(spark, raw) if r.status == "committed"]


def test_dead_letter_ratio_exceeded_fails_before_merge(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse, max_dead_letter_ratio=0.2)
    events.produce(broker.bootstrap, topic(raw), [good(1, 10), (None, b"{x"), (None, b"{y"), good(2, 20)])
    res = cli(raw, tmp_path)
    assert res.code == 2
    assert len(res.error_lines) == 1 and res.error_lines[0].startswith("ERROR [DeadLetterRatioExceeded]"), res.stderr
    assert "2 of 4 records" in res.stderr and "nothing was merged" in res.stderr
    assert table_rows(spark, raw) == {}
    assert not [r for r in ledger_rows(spark, raw) if r.status == "committed"]
    assert len(dead_letters(spark, raw)) == 2  # kept for inspection


def test_large_messages_are_ingested(spark, broker, warehouse, tmp_path):
    """Under max_record_bytes (16 MiB by default) whatever the broker accepts is ingested."""
    raw = pipeline(broker, warehouse)
    big = "x" * 900_000
    events.produce(broker.bootstrap, topic(raw), [pg("c", 1, {"id": 1, "name": "big", "bio": big}, 10), good(2, 20)])
    res = cli(raw, tmp_path)
    assert res.code == 0, res.stderr
    rows = table_rows(spark, raw)
    assert len(rows[1]["bio"]) == 900_000 and rows.keys() == {1, 2}


def test_oversized_records_become_dead_letters_with_their_bytes(spark, broker, warehouse, tmp_path, registry):
    """A record over tables[].max_record_bytes is not decoded: it becomes a RecordTooLarge dead letter holding its
    bytes (Avro: both the vectorised and the per-record path); records under the limit go through."""
    raw = pipeline(broker, warehouse, "avro", registry, max_dead_letter_ratio=0.5)
    recs = avro_records(registry, raw, 4)
    limit = max(len(k or b"") + len(v or b"") for k, v in recs) + 10
    raw["tables"][0]["max_record_bytes"] = limit
    key, value = recs[1]
    big = (key, value + b"\x00" * 50)  # same schema id, valid header: would reach the vectorised decoder
    events.produce(broker.bootstrap, topic(raw), [recs[0], big, *recs[2:]])
    res = cli(raw, tmp_path)
    assert res.code == 0, res.stderr
    summary = json.loads(res.stdout.splitlines()[-1])["tables"][0]
    assert (summary["status"], summary["dead_letters"], summary["inserted"]) == ("committed", 1, 3)
    [dl] = dead_letters(spark, raw)
    assert (dl.offset, dl.error_class, bytes(dl.value)) == (1, "RecordTooLarge", big[1])
    assert f"exceeds max_record_bytes = {limit}" in dl.error_message
    assert len(table_rows(spark, raw)) == 3


def test_oversized_record_with_on_bad_record_fail_exits_2(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse, on_bad_record="fail", max_record_bytes=2000)
    events.produce(broker.bootstrap, topic(raw), [good(1, 10), pg("c", 2, {"id": 2, "name": "n", "bio": "y" * 5000},
                                                                  20)])
    res = cli(raw, tmp_path)
    assert res.code == 2
    assert len(res.error_lines) == 1 and "offset 1" in res.error_lines[0], res.stderr
    assert "exceeds max_record_bytes = 2000" in res.error_lines[0]
    assert table_rows(spark, raw) == {}
    assert not [r for r in ledger_rows(spark, raw) if r.status == "committed"]


def test_registry_unreachable_is_retryable_and_commits_nothing(spark, broker, warehouse, tmp_path, registry):
    raw = pipeline(broker, warehouse, "avro", registry)
    events.produce(broker.bootstrap, topic(raw), avro_records(registry, raw))
    from devtools.broker import free_port

    raw["schema_registry"]["url"] = f"http://127.0.0.1:{free_port()}"
    res = cli(raw, tmp_path)
    assert res.code == 75, res.stderr
    assert len(res.error_lines) == 1 and res.error_lines[0].startswith("ERROR [SchemaRegistryUnavailable]"), res.stderr
    assert "unreachable" in res.stderr
    assert table_rows(spark, raw) == {}
    assert not [r for r in ledger_rows(spark, raw) if r.status == "committed"]


def test_broker_unreachable_is_retryable_and_leaves_the_ledger_alone(spark, broker, warehouse, tmp_path):
    from devtools.broker import free_port

    raw = pipeline(broker, warehouse)
    raw["kafka"]["bootstrap.servers"] = f"127.0.0.1:{free_port()}"
    raw["kafka"]["socket.connection.setup.timeout.ms"] = 2000
    raw["batch"]["read_timeout_seconds"] = 3
    res = cli(raw, tmp_path)
    assert res.code == 75, res.stderr
    assert len(res.error_lines) == 1 and res.error_lines[0].startswith("ERROR [KafkaUnavailable]"), res.stderr
    assert topic(raw) in res.stderr
    assert ledger_rows(spark, raw) == []


def test_missing_topic_is_terminal_and_leaves_the_ledger_alone(spark, broker, warehouse, tmp_path):
    raw = pipeline(broker, warehouse)
    raw["tables"][0]["topic"] = "no.such.topic_" + raw["metadata_namespace"]
    res = cli(raw, tmp_path)
    assert res.code == 2, res.stderr
    assert len(res.error_lines) == 1 and res.error_lines[0].startswith("ERROR [TopicNotFound]"), res.stderr
    assert "no.such.topic_" in res.stderr
    assert ledger_rows(spark, raw) == []


def test_unwritable_catalog_is_one_clear_line(spark, broker, warehouse, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the warehouse should be")
    raw = pipeline(broker, blocker / "warehouse", catalog="badcat")
    events.produce(broker.bootstrap, topic(raw), [good(1, 10)])
    res = cli(raw, tmp_path)
    assert res.code == 2, res.stderr
    assert len(res.error_lines) == 1 and res.error_lines[0].startswith("ERROR [CatalogError]"), res.stderr
    assert "warehouse" in res.stderr.lower() or str(blocker) in res.stderr
