"""The vectorised Avro path (polars-avro + Arrow compute) must stage exactly what the per-record path stages.

Uses the real schema-registry test server (devtools.registry) and the Debezium generator; no broker needed: the
staging functions take (offset, timestamp, key, value) tuples as the Kafka reader hands them over.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from cdc.config.load import parse_config
from cdc.decode.avro_batch import container, stage_avro
from cdc.decode.factory import make_decoder
from cdc.positions.ordering import Ordering
from cdc.schema.columns import arrow_schema, staging_columns
from cdc.stage.reader import ReadSpec, stage_messages
from devtools.debezium import AvroSerializer, ChangeEventGenerator, GeneratorConfig
from devtools.debezium.model import Column as SourceColumn
from devtools.registry import LocalSchemaRegistry
from tests.unit.cdc.decode.avro_history import first_difference


@pytest.fixture(scope="module")
def registry():
    with LocalSchemaRegistry() as r:
        yield r


def staged(registry, connector, replica_identity, seed, mutate=None, add_column=False):
    topic = f"t{seed}.{connector}.{replica_identity}"
    gen = ChangeEventGenerator(seed, GeneratorConfig(connector=connector, partitions=1, toast_fraction=0.3,
                                                     replica_identity=replica_identity))
    records = gen.snapshot(30) + gen.random_ops(150)
    records += gen.truncate()
    if add_column:
        gen.add_column(SourceColumn("loyalty", "int64", nullable=True))
    records += gen.random_ops(60)
    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), topic=topic)
    msgs = [(i, 1_700_000_000_000 + i, *ser.serialize(r)) for i, r in enumerate(records)]
    if mutate:
        msgs = mutate(msgs)
    cfg = parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "x:1"}, "format": "avro",
                        "schema_registry": {"url": registry.url}, "catalog": {"warehouse": "/tmp/w"},
                        "tables": [{"topic": topic, "target": "a.b"}]})
    dec = make_decoder(cfg, cfg.tables[0])
    cols = dec.resolve_columns([], [])
    ordering = Ordering(connector)
    out = {}
    for fast in (True, False):
        spec = ReadSpec("a.b", {}, dec.bind(cols), ordering, ("id",), tuple(cols),
                        tuple(staging_columns(cols, ordering.columns)), 7, fast_avro=fast)
        batches = list(stage_messages(spec, topic, 0, msgs))
        out[fast] = pa.Table.from_batches(batches, arrow_schema(spec.staging_columns)).sort_by("__offset")
    return out, msgs, spec


@pytest.mark.parametrize("connector, identity, seed", [("postgresql", "full", 1), ("postgresql", "default", 2),
                                                       ("mysql", "full", 3), ("mysql", "key", 4)])
def test_fast_path_stages_exactly_like_the_per_record_path(registry, connector, identity, seed):
    out, msgs, _ = staged(registry, connector, identity, seed, add_column=(seed % 2 == 0))
    assert out[True].num_rows == len(msgs)
    assert out[True].equals(out[False]), first_difference(out[True], out[False])
    kinds = set(out[True].column("__kind").to_pylist())
    assert {"change", "tombstone"} <= kinds
    if connector == "postgresql":
        assert any(u for u in out[True].column("__unavailable").to_pylist())  # TOAST placeholders seen


def test_bad_records_fall_back_to_the_per_record_path_and_become_dead_letters(registry):
    def corrupt(msgs):
        msgs = list(msgs)
        off, ts, k, v = msgs[5]
        msgs[5] = (off, ts, k, v[:5] + b"\xff" * 3)  # truncated datum
        off, ts, k, v = msgs[6]
        msgs[6] = (off, ts, k, b"\x01" + v[1:])  # wrong magic byte
        return msgs

    out, msgs, _ = staged(registry, "postgresql", "full", 9, mutate=corrupt)
    assert out[True].equals(out[False]), first_difference(out[True], out[False])
    errors = out[True].filter(pa.compute.equal(out[True].column("__kind"), "error"))
    assert errors.column("__offset").to_pylist() == [5, 6]


def test_container_block_is_a_valid_avro_file():
    import io

    import fastavro

    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    datums = []
    for v in (1, -2, 300):
        b = io.BytesIO()
        fastavro.schemaless_writer(b, fastavro.parse_schema(schema), {"a": v})
        datums.append(b.getvalue())
    import json

    assert [r["a"] for r in fastavro.reader(io.BytesIO(container(json.dumps(schema), datums)))] == [1, -2, 300]


_ = random


def test_fast_path_takes_the_common_case(registry):
    """Guards the speed-up itself: nearly every record of a plain stream is staged without the per-record path."""
    out, msgs, spec = staged(registry, "postgresql", "full", 5)
    batches, left = stage_avro(spec.__class__(**{**spec.__dict__, "fast_avro": True}), "t", 0, msgs,
                               arrow_schema(spec.staging_columns))
    assert sum(b.num_rows for b in batches) + len(left) == len(msgs)
    assert len(left) <= len(msgs) * 0.02, f"{len(left)} of {len(msgs)} records fell back"


def test_records_without_their_connector_position_are_handed_to_the_per_record_path(registry):
    """PostgreSQL events under a SQL Server / Oracle ordering have no position (the per-record path makes them dead
    letters naming the field); MongoDB positions are never computed by the fast path. SQL Server and Oracle events
    themselves are staged by it: tests/unit/cdc/decode/test_avro_connectors.py."""
    topic = "t-per-record-kinds"
    gen = ChangeEventGenerator(3, GeneratorConfig(connector="postgresql", partitions=1))
    records = gen.snapshot(5) + gen.random_ops(10)
    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), topic=topic)
    msgs = [(i, 1_700_000_000_000 + i, *ser.serialize(r)) for i, r in enumerate(records)]
    cfg = parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "x:1"}, "format": "avro",
                        "schema_registry": {"url": registry.url}, "catalog": {"warehouse": "/tmp/w"},
                        "tables": [{"topic": topic, "target": "a.b"}]})
    dec = make_decoder(cfg, cfg.tables[0])
    cols = dec.resolve_columns([], [])
    for kind in ("sqlserver", "oracle", "mongodb", "postgresql"):
        ordering = Ordering(kind)
        spec = ReadSpec("a.b", {}, dec.bind(cols), ordering, ("id",), tuple(cols),
                        tuple(staging_columns(cols, ordering.columns)), 7, fast_avro=True)
        batches, left = stage_avro(spec, topic, 0, [m for m in msgs if m[3] is not None],
                                   arrow_schema(spec.staging_columns))
        if kind == "postgresql":
            assert sum(b.num_rows for b in batches) > 0
        else:
            assert batches == [] and len(left) == len([m for m in msgs if m[3] is not None])


@pytest.mark.parametrize("kind", ["postgresql", "postgresql_lsn"])
def test_the_vectorised_positions_of_incremental_snapshot_reads_are_the_per_record_ones(kind):
    """An incremental snapshot's reads have no ``source.lsn`` (``cdc.positions.ordering.event_lsn``): the fast path
    gives them the position the per-record path gives, not NULL (which would make them dead letters)."""
    import pyarrow as pa

    from cdc.decode.avro_batch import _source_ordering
    from cdc.positions.ordering import Ordering

    rows = [{"lsn": 100, "sequence": '[null,"100"]'}, {"lsn": None, "sequence": '["250","250"]'},
            {"lsn": 300, "sequence": '["290","300"]'}]
    ops = ["r", "r", "u"]
    source = pa.array(rows, pa.struct([("lsn", pa.int64()), ("sequence", pa.string())]))
    ordering = Ordering(kind)
    got = [c.to_pylist() for c in _source_ordering(ordering, source, pa.table({}), pa.array(ops))]
    assert list(zip(*got)) == [ordering.values(r, op=o) for r, o in zip(rows, ops)]
