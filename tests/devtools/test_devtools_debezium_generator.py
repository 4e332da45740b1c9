"""ChangeEventGenerator: determinism, oracle == independent replay, and Debezium semantics."""

from __future__ import annotations

import base64
import json
import random
from decimal import Decimal

import pytest

from devtools.debezium import (
    TOAST_PLACEHOLDER,
    ChangeEventGenerator,
    Column,
    GeneratorConfig,
    JsonSerializer,
    decode_decimal,
    encode_decimal,
    interleave,
    move_later,
    partition_for,
    redeliver,
    replay,
    to_python,
)

ROW = {
    "id": 1, "name": "a", "visits": 1, "active": True,
    "balance": Decimal("1.00"), "birth_date": 0, "updated_at": 0, "notes": None,
}
ALL_OPS = {"insert": 4, "update": 5, "delete": 1.5, "change_pk": 0.5, "truncate": 0.05}


def _run(seed: int, **config: object) -> ChangeEventGenerator:
    gen = ChangeEventGenerator(seed, GeneratorConfig(**config))  # type: ignore[arg-type]
    gen.snapshot(20)
    gen.random_ops(150, ALL_OPS)
    gen.add_column(Column("tier", "string"))
    gen.random_ops(100, ALL_OPS)
    return gen


def _wire(gen: ChangeEventGenerator) -> list[tuple[bytes | None, bytes | None, int]]:
    ser = JsonSerializer()
    return [(*ser.serialize(r), r.partition) for r in gen.records]


def test_deterministic_from_seed() -> None:
    assert _wire(_run(42)) == _wire(_run(42))
    assert _wire(_run(42)) != _wire(_run(43))


@pytest.mark.parametrize("connector", ["postgresql", "mysql"])
@pytest.mark.parametrize("identity", ["full", "default", "key"])
@pytest.mark.parametrize("seed", range(6))
def test_oracle_matches_replay(connector: str, identity: str, seed: int) -> None:
    gen = _run(seed, connector=connector, replica_identity=identity)
    expected = gen.expected_rows()
    assert replay(gen.records) == expected
    rng = random.Random(seed)
    # Delivery imperfections never change the outcome for a position-ordering sink.
    assert replay(redeliver(gen.records, rng, restarts=3)) == expected
    assert replay(interleave(gen.records, rng)) == expected
    assert replay(move_later(gen.records, rng, fraction=0.1)) == expected
    assert gen.deleted_keys().isdisjoint(expected)


def test_envelope_and_positions_postgres() -> None:
    gen = _run(3)
    streamed = [(r.value["source"]["lsn"], r.op) for r in gen.records if r.value and r.op != "r"]
    for (lsn_a, op_a), (lsn_b, op_b) in zip(streamed, streamed[1:]):
        # Strictly increasing, except delete+create of one primary-key change sharing an LSN.
        assert lsn_a < lsn_b or (lsn_a == lsn_b and (op_a, op_b) == ("d", "c"))
    snap = [r.value for r in gen.records if r.op == "r"]
    assert {v["source"]["snapshot"] for v in snap[:-1]} == {"true"} and snap[-1]["source"]["snapshot"] == "last"
    assert {r.value["source"]["snapshot"] for r in gen.records if r.value and r.op != "r"} == {"false"}
    for rec in gen.records:
        assert rec.partition == partition_for(rec.key, 3)
        if rec.value is None:
            continue
        assert set(rec.value) == {"before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"}
        src = rec.value["source"]
        assert json.loads(src["sequence"])[1] == str(src["lsn"])
    seq_ops = [r.op for r in gen.records]
    for i, op in enumerate(seq_ops):
        if op == "d":
            assert seq_ops[i + 1] is None and gen.records[i + 1].key == gen.records[i].key  # tombstone follows


def test_truncate_has_null_key_partition_zero_and_empties_oracle() -> None:
    gen = ChangeEventGenerator(1)
    gen.snapshot(5)
    (rec,) = gen.truncate()
    assert (rec.key, rec.partition, rec.value["before"], rec.value["after"], rec.op) == (None, 0, None, None, "t")
    assert gen.expected_rows() == {} and gen.deleted_keys() == {1, 2, 3, 4, 5}
    gen.insert()
    assert list(gen.expected_rows()) == [6] and replay(gen.records) == gen.expected_rows()


def test_primary_key_change_is_delete_tombstone_create() -> None:
    gen = ChangeEventGenerator(1, GeneratorConfig(partitions=1))
    gen.snapshot(2)
    d, tomb, c = gen.change_pk(1, 100)
    assert (d.op, d.key, d.value["before"]["id"], d.value["after"]) == ("d", {"id": 1}, 1, None)
    assert (tomb.key, tomb.value) == ({"id": 1}, None)
    assert (c.op, c.key, c.value["before"], c.value["after"]["id"]) == ("c", {"id": 100}, None, 100)
    assert d.position == c.position
    assert set(gen.expected_rows()) == {2, 100}


def test_toast_placeholder_only_for_unchanged_large_text_in_postgres() -> None:
    for connector in ("postgresql", "mysql"):
        gen = ChangeEventGenerator(5, GeneratorConfig(connector=connector))  # type: ignore[arg-type]
        big = "x" * 3000
        gen.insert({**ROW, "notes": big})
        (upd,) = gen.update(1, {"name": "b"})
        want = TOAST_PLACEHOLDER if connector == "postgresql" else big
        assert upd.value["after"]["notes"] == want and upd.value["before"]["notes"] == big
        (upd2,) = gen.update(1, {"notes": "small"})
        assert upd2.value["after"]["notes"] == "small"
        assert gen.expected_rows()[1]["notes"] == "small" and replay(gen.records)[1]["notes"] == "small"
    gen = _run(11, toast_fraction=0.5)
    assert any(r.value and r.value["after"] and r.value["after"]["notes"] == TOAST_PLACEHOLDER for r in gen.records)


def test_primary_key_change_can_carry_toast_placeholders_and_replay_resolves_them() -> None:
    gen = ChangeEventGenerator(5, GeneratorConfig(toast_on_pk_change=True))
    big = "y" * 3000
    gen.insert({**ROW, "notes": big})
    d, _, c = gen.change_pk(1, 100)
    assert c.value["after"]["notes"] == TOAST_PLACEHOLDER and d.position == c.position
    assert gen.expected_rows()[100]["notes"] == big and replay(gen.records)[100]["notes"] == big


def test_replica_identity_images() -> None:
    gen = ChangeEventGenerator(2, GeneratorConfig(replica_identity="default"))
    gen.snapshot(3)
    (upd,) = gen.update(1, {"visits": 5})
    delete, _ = gen.delete(2)
    assert upd.value["before"] is None
    before = delete.value["before"]
    assert before["id"] == 2 and before["name"] == "" and before["active"] is False and before["notes"] is None
    gen = ChangeEventGenerator(2, GeneratorConfig(replica_identity="key"))
    gen.snapshot(3)
    (upd,) = gen.update(1, {"visits": 5})
    assert upd.value["before"]["id"] == 1 and upd.value["before"]["visits"] is None


def test_mysql_binlog_rotation_orders_by_file_pos_row() -> None:
    gen = _run(4, connector="mysql", binlog_max_bytes=3000)
    streamed = [r for r in gen.records if r.value and r.op != "r"]
    files = [r.value["source"]["file"] for r in streamed]
    assert len(set(files)) > 3 and files == sorted(files)
    positions = [r.position for r in streamed]
    assert positions == sorted(positions)
    pos_only = [p[1] for p in positions]
    assert pos_only != sorted(pos_only)  # rotation resets pos: pos alone is not an order
    assert any(p[2] > 0 for p in positions)  # multi-row events share pos with increasing row
    src = streamed[0].value["source"]
    assert (src["server_id"], src["gtid"], src["query"], src["ts_ms"] % 1000) == (223344, None, None, 0)
    for r in streamed:
        source = r.value["source"]
        assert r.position == (int(source["file"][-6:]), source["pos"], source["row"])


def test_schema_change_adds_column_to_later_events() -> None:
    gen = ChangeEventGenerator(9)
    gen.snapshot(3)
    old = gen.table
    new = gen.add_column(Column("tier", "string"))
    (ins,) = gen.insert()
    assert (old.version, new.version, ins.table) == (1, 2, new)
    assert "tier" in ins.value["after"] and "tier" not in gen.records[0].value["after"]
    assert gen.expected_rows()[1]["tier"] is None


def test_decimal_encoding_matches_debezium_and_to_python() -> None:
    # From the real SQL Server sample: 200000.0000 -> "dzWUAA==", 10.0000 -> "AYag" (scale 4).
    assert base64.b64encode(encode_decimal(Decimal("200000.0000"), 4)) == b"dzWUAA=="
    assert base64.b64encode(encode_decimal(Decimal("10.0000"), 4)) == b"AYag"
    for v in ("0.00", "-0.01", "1.28", "-1.28", "-1.29", "99999999.99", "-99999999.99"):
        assert decode_decimal(encode_decimal(Decimal(v), 2), 2) == Decimal(v)
    gen = ChangeEventGenerator(1)
    gen.insert({**ROW, "birth_date": 1, "updated_at": 1_500_000})
    row = to_python(gen.table, gen.expected_rows()[1])
    assert str(row["birth_date"]) == "1970-01-02" and str(row["updated_at"]) == "1970-01-01 00:00:01.500000"


def test_streaming_mode_does_not_accumulate() -> None:
    gen = ChangeEventGenerator(1, GeneratorConfig(keep_records=False))
    n = sum(1 for _ in gen.iter_random_ops(500))
    assert n >= 500 and gen.records == []


def test_pk_change_records_carry_debeziums_key_headers():
    gen = ChangeEventGenerator(3, GeneratorConfig(toast_on_pk_change=True))
    gen.snapshot(2)
    old = next(iter(gen.rows))
    d, *_, c = gen.change_pk(old, 99)
    assert (d.op, c.op) == ("d", "c") and d.position == c.position
    assert d.headers == (("__debezium.newkey", {"id": 99}),)
    assert c.headers == (("__debezium.oldkey", {"id": old}),)


def test_tie_update_reports_two_updates_of_a_key_at_one_position() -> None:
    for connector in ("postgresql", "mysql"):
        gen = ChangeEventGenerator(5, GeneratorConfig(connector=connector, toast_fraction=1.0))
        gen.snapshot(3)
        first, second = gen.tie_update(2)
        assert (first.op, second.op, first.key, second.key) == ("u", "u", {"id": 2}, {"id": 2})
        assert first.position == second.position and first.partition == second.partition
        assert first.value["after"] != second.value["after"]
        assert TOAST_PLACEHOLDER not in second.value["after"].values()  # the full row: no predecessor needed
        assert second.value["after"] == gen.expected_rows()[2]
        (later,) = gen.update(2)
        assert later.position > second.position
        assert replay(gen.records) == gen.expected_rows()
        # a restart redelivers windows: the last delivery of a tie's records keeps their order
        for seed in range(20):
            assert replay(redeliver(gen.records, random.Random(seed), restarts=3, max_window=4)) == gen.expected_rows()


def test_widen_column_is_a_new_version_and_rejects_other_changes() -> None:
    gen = ChangeEventGenerator(9)
    gen.snapshot(2)
    gen.add_column(Column("n", "int32"))
    gen.insert()
    table = gen.widen_column(Column("n", "int64"))
    assert (table.version, table.column("n").kind, len(gen.table_versions)) == (3, "int64", 3)
    gen.widen_column(Column("balance", "decimal", precision=14, scale=2))
    assert replay(gen.records + gen.random_ops(30, ALL_OPS)) == gen.expected_rows()
    for bad in (Column("n", "int32"), Column("balance", "decimal", precision=16, scale=3), Column("name", "text")):
        with pytest.raises(ValueError, match="not a widening"):
            gen.widen_column(bad)


@pytest.mark.parametrize("behind", ["file", "pos"])
def test_failover_server_moves_slightly_back_under_the_new_server_id(behind: str) -> None:
    gen = ChangeEventGenerator(6, GeneratorConfig(connector="mysql", binlog_max_bytes=3000, mysql_server_id=7))
    (read, *_) = gen.snapshot(4)
    old = [r for r in gen.random_ops(40, ALL_OPS) if r.value]
    rows = gen.expected_rows()
    assert gen.failover_server(8, behind) and gen.server_id == 8
    assert gen.expected_rows() == rows  # the replica has the rows
    new = [r for r in gen.random_ops(40, ALL_OPS) if r.value]
    assert read.value["source"]["server_id"] == 0  # snapshot reads: no server
    assert {r.value["source"]["server_id"] for r in old} == {7} and {r.value["source"]["server_id"] for r in new} == {8}
    last, first = old[-1].position, new[0].position
    assert first < last  # behind: the new server's changes would look older
    if behind == "file":
        assert first[0] == last[0] - 1  # one file back: no far fall (three files or more)
    else:
        assert first[0] == last[0] and last[1] // 2 <= first[1] < last[1]
    assert [r.position for r in new] == sorted(r.position for r in new)  # upward from there
    assert new[-1].position > last  # ... past the old server's newest eventually (the harness runs 10+ ops)
    for r in new:
        source = r.value["source"]
        assert r.position == (int(source["file"][-6:]), source["pos"], source["row"])


def test_failover_server_refuses_what_cannot_happen() -> None:
    pg = ChangeEventGenerator(1)
    pg.insert()
    with pytest.raises(ValueError, match="MySQL only"):
        pg.failover_server(2)
    gen = ChangeEventGenerator(1, GeneratorConfig(connector="mysql"))
    gen.insert()
    with pytest.raises(ValueError, match="other than"):
        gen.failover_server(gen.server_id)
    with gen.transaction(), pytest.raises(ValueError, match="inside a transaction"):
        gen.failover_server(2)
    fresh = ChangeEventGenerator(1, GeneratorConfig(connector="mysql", binlog_first_file=1))
    fresh.insert()
    with pytest.raises(ValueError, match="no binlog file before"):
        fresh.failover_server(2, "file")


def test_the_randomized_oracle_draws_server_failovers_only_where_they_hold() -> None:
    from tests.scenarios.harness import Scenario, build_stream

    drawn = set()
    for seed in range(1, 120):
        for t in Scenario.random(seed).tables:
            if not t.server_failover:
                continue
            assert t.connector == "mysql" and t.write_mode == "upsert" and not t.failover
            drawn.add(t.server_failover)
            gen, records = build_stream(t)
            ids = [r.value["source"]["server_id"] for r in records if r.value and r.op != "r"]
            switch = ids.index(gen.server_id)  # redeliveries on either side, none across
            assert len(set(ids[:switch])) == 1 and set(ids[switch:]) == {gen.server_id} != set(ids[:switch])
    assert drawn == {"file", "pos"}
