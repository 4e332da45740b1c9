"""End to end on the real tansu broker and the local registry: produce, read back (assign), decode."""

from __future__ import annotations

import json

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from devtools.broker import LocalBroker, read_topic
from devtools.debezium import (
    AvroSerializer,
    ChangeEventGenerator,
    Column,
    GeneratorConfig,
    JsonSerializer,
    json_payload,
    produce,
    produce_fast,
)
from devtools.registry import LocalSchemaRegistry


def _generator(connector: str = "postgresql") -> ChangeEventGenerator:
    gen = ChangeEventGenerator(21, GeneratorConfig(connector=connector, partitions=3))  # type: ignore[arg-type]
    gen.snapshot(10)
    gen.random_ops(40, {"insert": 3, "update": 4, "delete": 1, "change_pk": 0.5})
    gen.truncate()
    gen.random_ops(10)
    return gen


def test_json_roundtrip_through_broker(broker: LocalBroker, topic_name: str) -> None:
    gen = _generator()
    broker.create_topic(topic_name, partitions=3)
    assert produce(broker.bootstrap, topic_name, gen.records, JsonSerializer(), partitions=3) == len(gen.records)
    msgs = read_topic(broker.bootstrap, topic_name, 3, expected=len(gen.records))
    for p in range(3):
        sent = [r for r in gen.records if r.partition == p]
        got = [m for m in msgs if m.partition() == p]
        assert [m.offset() for m in got] == list(range(len(sent)))
        for rec, msg in zip(sent, got):
            assert (None if msg.key() is None else json.loads(msg.key())["payload"]) == rec.key
            assert (None if msg.value() is None else json.loads(msg.value())["payload"]) == json_payload(rec)
    assert any(m.key() is None and m.partition() == 0 for m in msgs)  # truncate


def test_avro_roundtrip_with_schema_change(broker: LocalBroker, registry: LocalSchemaRegistry, topic_name: str) -> None:
    client = SchemaRegistryClient(registry.client_config)
    gen = _generator("mysql")
    gen.add_column(Column("tier", "string"))
    gen.random_ops(10, {"insert": 1, "update": 1})
    broker.create_topic(topic_name, partitions=3)
    serializer = AvroSerializer(client, topic=topic_name)
    produce(broker.bootstrap, topic_name, gen.records, serializer)
    assert client.get_versions(f"{topic_name}-value") == [1, 2]
    assert client.get_versions(f"{topic_name}-key") == [1]
    ids = {serializer.schema_ids(t) for t in gen.table_versions}
    assert len(ids) == 2 and len({k for k, _ in ids}) == 1  # key schema unchanged by ADD COLUMN

    msgs = read_topic(broker.bootstrap, topic_name, 3, expected=len(gen.records))
    fresh = SchemaRegistryClient({"url": registry.url})  # nothing cached: ids resolved over HTTP
    deser_key, deser_value = AvroDeserializer(fresh), AvroDeserializer(fresh)
    by_partition = {p: [r for r in gen.records if r.partition == p] for p in range(3)}
    for msg in msgs:
        rec = by_partition[msg.partition()][msg.offset()]
        key = deser_key(msg.key(), SerializationContext(topic_name, MessageField.KEY))
        value = deser_value(msg.value(), SerializationContext(topic_name, MessageField.VALUE))
        assert key == rec.key and value == rec.value  # Decimal, ints and nested structs survive exactly
    last = by_partition[msgs[-1].partition()][-1]
    assert "tier" in (last.value["after"] or last.value["before"])


def test_produce_fast_bulk(broker: LocalBroker, topic_name: str) -> None:
    gen = ChangeEventGenerator(5, GeneratorConfig(keep_records=False, partitions=2))
    gen.snapshot(100)
    ser = JsonSerializer(schemas_enable=False)
    items = [(*ser.serialize(r), r.partition) for r in gen.iter_random_ops(3000)]
    broker.create_topic(topic_name, partitions=2)
    count, seconds = produce_fast(broker.bootstrap, topic_name, items)
    assert count == len(items) and seconds < 10
    assert len(read_topic(broker.bootstrap, topic_name, 2, expected=count)) == count

