"""The write-mode oracle (tests/scenarios/mode_oracle.py) agrees with the generator's own oracle: replaying the
expected changelog gives ``expected_rows()``, and the current versions of the expected history are exactly the
final source rows; redeliveries change neither."""

from __future__ import annotations

import random

import pytest

from devtools.debezium import TOAST_PLACEHOLDER, ChangeEventGenerator, GeneratorConfig, redeliver
from tests.scenarios.mode_oracle import _norm, expected_changelog, expected_history


def stream(seed: int, connector: str):
    gen = ChangeEventGenerator(seed, GeneratorConfig(connector=connector, partitions=2, toast_fraction=0.3,
                                                     binlog_max_bytes=3_000))
    records = gen.snapshot(6)
    records += gen.random_ops(80, {"insert": 4, "update": 5, "delete": 1.5, "change_pk": 0.5, "truncate": 0.05})
    return gen, records


@pytest.mark.parametrize("seed,connector", [(1, "postgresql"), (2, "mysql"), (3, "postgresql")])
def test_mode_oracles_agree_with_the_source_state(seed, connector):
    gen, records = stream(seed, connector)
    cols = [c.name for c in gen.table.columns]
    final = {k: tuple(_norm(r[c]) for c in cols) for k, r in gen.expected_rows().items()}
    log = expected_changelog(records, cols, "id")
    assert sum(log.values()) == sum(1 for r in records if r.value is not None)  # every change once
    state: dict = {}
    for op, key, pos, values in sorted(log, key=lambda e: e[2]):
        if op == "t":
            state.clear()
        elif op == "d":
            state.pop(key, None)
        else:
            assert TOAST_PLACEHOLDER not in values
            state[key] = values
    assert state == final
    history = expected_history(records, cols, "id")
    assert {h[0]: h[1] for h in history if h[4]} == final  # current versions = the source table
    assert all((h[3] is None) == h[4] for h in history)
    tracked = expected_history(records, cols, "id", track=("name",))
    assert {h[0]: h[1] for h in tracked if h[4]} == final and sum(tracked.values()) < sum(history.values())
    noisy = redeliver(records, random.Random(seed), restarts=3, max_window=15)
    assert expected_changelog(noisy, cols, "id") == log and expected_history(noisy, cols, "id") == history


def test_compare_mode_reports_a_changed_missing_or_extra_row():
    from tests.scenarios.mode_oracle import compare_mode

    gen, records = stream(4, "postgresql")
    cols = [c.name for c in gen.table.columns]
    have = {*cols, "__op", "__lsn", "__valid_from", "__valid_to", "__is_current"}
    rows = []
    for (key, values, start, end, current, op, pos), n in expected_history(records, cols, "id").items():
        rows += [{**dict(zip(cols, values)), "__valid_from": start * 1000, "__valid_to": None if end is None else
                  end * 1000, "__is_current": current, "__op": op, "__lsn": pos[0]}] * n
    assert compare_mode(rows, have, "t", "scd2", records, cols, "id") == []
    wrong = [dict(r) for r in rows]
    wrong[0]["name"] = "changed"
    assert len(compare_mode(wrong, have, "t", "scd2", records, cols, "id")) == 2  # one extra, one missing
    assert compare_mode(rows[1:], have, "t", "scd2", records, cols, "id")[0].startswith("t: scd2: missing row")
    closed = next(i for i, r in enumerate(rows) if r["__valid_to"] is not None)
    reopened = [dict(r) for r in rows]
    reopened[closed].update(__valid_to=None, __is_current=True)
    assert compare_mode(reopened, have, "t", "scd2", records, cols, "id")


def _replayed(log):
    state: dict = {}
    for op, key, pos, values in sorted(log, key=lambda e: e[2]):
        if op == "t":
            state.clear()
        elif op == "d":
            state.pop(key, None)
        else:
            state[key] = values
    return state


@pytest.mark.parametrize("connector,kind", [("postgresql", "decimal"), ("mysql", "int32"), ("postgresql", "string")])
def test_mode_oracles_with_a_column_added_and_widened_mid_stream(connector, kind):
    """The randomized oracle's schema-evolution class (tests/scenarios/oracle_streams.py): both write modes'
    oracles end at the source state, the new column NULL in every change before it and in rows untouched since."""
    from tests.scenarios.oracle_streams import ADDED, TableSpec, build_stream

    spec = TableSpec(seed=17, connector=connector, delete_mode="hard", partitions=2, replica_identity="full",
                     snapshot=8, ops=70, truncate_weight=0.0, restarts=3, adversarial=False, write_mode="append",
                     add_column=kind, add_column_at=30, widen_at=50 if kind != "string" else None)
    gen, records = build_stream(spec)
    assert [t.version for t in gen.table_versions] == ([1, 2, 3] if kind != "string" else [1, 2])
    cols = [c.name for c in gen.table.columns]
    final = {k: tuple(_norm(r[c]) for c in cols) for k, r in gen.expected_rows().items()}
    assert any(v[-1] is None for v in final.values()) and any(v[-1] is not None for v in final.values())
    log = expected_changelog(records, cols, "id")
    assert _replayed(log) == final
    added_at = min(r.position for r in records if r.value and ADDED in (r.value["after"] or r.value["before"] or {}))
    assert all(values[-1] is None for op, _, pos, values in log if op != "t" and pos < added_at)
    history = expected_history(records, cols, "id")
    assert {h[0]: h[1] for h in history if h[4]} == final


def test_random_scenarios_draw_the_new_classes_deterministically_and_only_where_they_hold():
    from tests.scenarios.harness import Scenario, build_stream

    seen = set()
    for seed in range(1, 120):
        s = Scenario.random(seed)
        assert s == Scenario.random(seed)
        seen |= {s.fmt} | {"ties" for t in s.tables if t.ties} | {"add" for t in s.tables if t.add_column}
        for t in s.tables:
            assert not t.ties or (t.write_mode == "upsert" and not t.adversarial)
            if t.ties or t.add_column:
                build_stream(t)  # asserts the generator's oracle == a replay of the delivered records
    assert seen >= {"json", "avro", "json-schemaless", "ties", "add"}
