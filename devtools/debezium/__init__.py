"""Realistic Debezium change events for tests, the randomized harness, the demo and benchmarks.

Typical use::

    gen = ChangeEventGenerator(seed=7, GeneratorConfig(connector="postgresql", partitions=3))
    gen.snapshot(20)
    gen.random_ops(200)
    produce(broker.bootstrap, gen.table.topic, gen.records, JsonSerializer(), partitions=3)
    ...
    assert sink_rows == gen.expected_rows()

Modules: :mod:`.model` (table model, Record), :mod:`.generator` (operations +
oracle), :mod:`.positions` (source log positions, failovers), :mod:`.serializers` (JsonConverter / Confluent Avro), :mod:`.delivery`
(redelivery/reordering, reference replay, producers).
"""

from .delivery import compact_deletes, interleave, move_later, produce, produce_fast, redeliver, replay
from .generator import DEFAULT_WEIGHTS, ChangeEventGenerator, GeneratorConfig
from .model import (
    TOAST_PLACEHOLDER,
    Column,
    Record,
    TableSchema,
    decode_decimal,
    default_table,
    encode_decimal,
    partition_for,
    to_python,
)
from .serializers import (
    AvroSerializer,
    JsonSerializer,
    avro_key_schema,
    avro_value_schema,
    connect_key_schema,
    connect_value_schema,
    json_payload,
)

__all__ = [
    "DEFAULT_WEIGHTS",
    "TOAST_PLACEHOLDER",
    "AvroSerializer",
    "ChangeEventGenerator",
    "Column",
    "GeneratorConfig",
    "JsonSerializer",
    "Record",
    "TableSchema",
    "avro_key_schema",
    "avro_value_schema",
    "compact_deletes",
    "connect_key_schema",
    "connect_value_schema",
    "decode_decimal",
    "default_table",
    "encode_decimal",
    "interleave",
    "json_payload",
    "move_later",
    "partition_for",
    "produce",
    "produce_fast",
    "redeliver",
    "replay",
    "to_python",
]
